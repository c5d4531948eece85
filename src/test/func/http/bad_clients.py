#!/usr/bin/env python3
"""Bad and hostile clients of the HTTP endpoint, with raw sockets.

    bad_clients.py PORT TIMEOUT

TIMEOUT is the server's http_timeout in seconds.  Prints one "ok: ..." or
"FAIL: ..." line per check; exits 1 if any failed.  Every wait is bounded
(a few times the timeout at most), so a hung server fails the test rather
than hanging it.
"""
import socket
import sys
import time

PORT = int(sys.argv[1])
TIMEOUT = float(sys.argv[2])
failures = 0


def check(ok, what):
    global failures
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures += 1


def connect(rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(TIMEOUT * 4 + 20)
    s.connect(("127.0.0.1", PORT))
    return s


def read_all(s, limit=64 << 20):
    """Everything until the server closes (or resets, or the wait ends)."""
    data = b""
    try:
        while len(data) < limit:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return data


def status_of(response):
    try:
        return int(response.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def exchange(raw):
    s = connect()
    s.sendall(raw)
    response = read_all(s)
    s.close()
    return response


def expect(raw, status, what):
    got = status_of(exchange(raw))
    check(got == status, "%s: %s (expected %d)" % (what, got, status))


# --- malformed, wrong, oversized ---------------------------------------------
expect(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 200, "a good request")
expect(b"GET /metrics HTTP/1.0\n\n", 200, "bare LF line ends, HTTP/1.0")
expect(b"GARBAGE\r\n\r\n", 400, "a request line without target and version")
expect(b"GET metrics HTTP/1.1\r\n\r\n", 400, "a target not starting with /")
expect(b"GET /metrics HTTP/1.1 extra\r\n\r\n", 400, "a request line with four parts")
expect(b"GET /metrics HTTX/1.1\r\n\r\n", 400, "a bad protocol name")
expect(b"GET /metrics HTTP/2.0\r\n\r\n", 505, "HTTP/2.0")
expect(b"GET /metrics HTTP/1.1\r\nNo colon here\r\n\r\n", 400, "a header line without a colon")
expect(b"GET /metrics HTTP/1.1\r\nName : v\r\n\r\n", 400, "a space before a header's colon")
expect(b"GET /metrics HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400, "obsolete line folding")
expect(b"GET /metrics HTTP/1.1\r\nA: b\x01c\r\n\r\n", 400, "a control byte in a header value")
expect(b"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 400, "a request with a body")
expect(b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "a chunked body")
expect(b"\x00\xff\xfe binary \r\n\r\n", 400, "binary noise")
expect(b"GET /debug/pprof/heap?seconds=abc HTTP/1.1\r\n\r\n", 400, "seconds=abc")
expect(b"GET /debug/pprof/heap?seconds=0 HTTP/1.1\r\n\r\n", 400, "seconds=0")
expect(b"GET /debug/pprof/heap?seconds=3601 HTTP/1.1\r\n\r\n", 400, "seconds=3601")
expect(b"GET /debug/pprof/peak?seconds=1 HTTP/1.1\r\n\r\n", 400, "peak with seconds")
expect(b"GET /nothing/here HTTP/1.1\r\n\r\n", 404, "an unknown path")
expect(b"GET /debug/pprof/goroutine HTTP/1.1\r\n\r\n", 404, "a pprof profile we do not have")
expect(b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405, "POST /metrics")
expect(b"DELETE /debug/pprof/heap HTTP/1.1\r\n\r\n", 405, "DELETE /debug/pprof/heap")
r = exchange(b"HEAD /metrics HTTP/1.1\r\n\r\n")
check(status_of(r) == 200 and r.endswith(b"\r\n\r\n"), "HEAD /metrics: headers only")
expect(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 414, "a 9000-byte target")
expect(b"GET /metrics HTTP/1.1\r\n" + b"X-Big: " + b"b" * 9000 + b"\r\n\r\n", 431,
       "a 9000-byte header")
expect(b"GET /metrics HTTP/1.1\r\n" + b"X-Many: 1\r\n" * 2000 + b"\r\n", 431,
       "2000 header lines")
r = exchange(b"GET /metrics HTTP/1.1\r\n\r\n" + b"junk after the request " * 500)
check(status_of(r) == 200 and b"snmalloc_live_bytes" in r,
      "junk after a request: the whole response still arrives")

# --- a client that sends nothing, and one that sends too slowly ---------------
start = time.monotonic()
s = connect()
r = read_all(s)
took = time.monotonic() - start
check(r == b"" and TIMEOUT * 0.5 <= took <= TIMEOUT * 3 + 10,
      "an idle connection is closed after %.1f s (timeout %g s)" % (took, TIMEOUT))
s.close()

start = time.monotonic()
s = connect()
closed = False
request = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"s" * 200 + b"\r\n\r\n"
try:
    for byte in request:  # one byte every 0.1 s: 20 s for the whole head
        s.send(bytes([byte]))
        time.sleep(0.1)
        if time.monotonic() - start > TIMEOUT * 3 + 10:
            break
except (BrokenPipeError, ConnectionResetError):
    closed = True
r = read_all(s)
took = time.monotonic() - start
check((closed or status_of(r) in (408, None)) and took <= TIMEOUT * 3 + 12,
      "a request trickling in is cut off after %.1f s with %s" % (took, status_of(r)))
s.close()

# --- more connections than the bound -----------------------------------------
idle = [connect() for _ in range(16)]
time.sleep(0.5)
extra = exchange(b"GET /metrics HTTP/1.1\r\n\r\n")
check(status_of(extra) == 503, "a 17th connection while 16 are open: %s" % status_of(extra))
for s in idle:
    s.close()
time.sleep(0.5)
expect(b"GET /metrics HTTP/1.1\r\n\r\n", 200, "served again once they closed")

# --- a flood: 300 connections as fast as possible ------------------------------
statuses = {}
socks = []
for i in range(300):
    try:
        s = connect()
        s.sendall(b"GET /nothing HTTP/1.1\r\n\r\n" if i % 2 else b"NOT HTTP AT ALL\r\n\r\n")
        socks.append(s)
    except OSError as e:
        statuses[type(e).__name__] = statuses.get(type(e).__name__, 0) + 1
for s in socks:
    st = status_of(read_all(s))
    statuses[st] = statuses.get(st, 0) + 1
    s.close()
served = statuses.get(404, 0) + statuses.get(400, 0)
check(served > 0 and set(statuses) <= {400, 404, 503, None},
      "a flood of 300 bad connections: answered %s" % statuses)
expect(b"GET /metrics HTTP/1.1\r\n\r\n", 200, "served after the flood")

# --- a client that does not read its response ----------------------------------
# The response (a heap profile of many rows) is larger than what the
# socket buffers hold, so the server must give up on it after the timeout.
start = time.monotonic()
s = connect(rcvbuf=4096)
s.sendall(b"GET /debug/pprof/heap HTTP/1.1\r\n\r\n")
time.sleep(TIMEOUT * 2 + 2)
head = s.recv(4096)
length = None
for line in head.split(b"\r\n"):
    if line.lower().startswith(b"content-length:"):
        length = int(line.split(b":")[1])
body = head.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in head else b""
body += read_all(s)
# Dropped before its headers (a slow build may take longer than the
# timeout to make the profile) or in the middle of the body: either way,
# not all of it.
check((not head) or (length is not None and len(body) < length),
      "a client that stops reading is dropped: %d of %s bytes arrived" % (len(body), length))
s.close()

sys.exit(1 if failures else 0)
