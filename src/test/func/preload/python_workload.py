"""Real work for python3 under LD_PRELOAD: a large dict and list, sorting,
and a JSON round trip. Prints digests of the results, which preload.sh
compares with a run without the shim.

With --check-allocator SHIM it also proves, from inside the process, that
its heap is snmalloc's (see check_allocator); failures exit non-zero.
"""
import ctypes
import hashlib
import json
import random
import sys


def digest(value):
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def workload():
    rng = random.Random(1)
    table = {f"key-{i}": (i, str(i * 7), [i] * (i % 5)) for i in range(300_000)}
    for i in range(0, 300_000, 3):
        del table[f"key-{i}"]
    print("dict", len(table), digest(sorted(table.items())[:1000]))

    numbers = [rng.randrange(1 << 40) for _ in range(1_000_000)]
    numbers.sort()
    print("sort", numbers[0], numbers[-1], digest(numbers[::997]))

    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randrange(1, 20)))
             for _ in range(200_000)]
    print("strings", digest(sorted(set(words))[:5000]))

    document = {"rows": [{"id": i, "name": words[i], "values": numbers[i:i + 8]}
                         for i in range(50_000)]}
    text = json.dumps(document, sort_keys=True)
    assert json.loads(text) == document
    print("json", len(text), digest(text))


def check_allocator(shim_path):
    """Three independent facts, each impossible if malloc were glibc's:
    1. the shim is mapped in this process (/proc/self/maps) and its
       snmalloc_identity answers "snmalloc";
    2. malloc as the process resolves it (the lookup every library gets)
       returns memory that the shim's malloc_usable_size recognises; that
       function only knows memory snmalloc handed out;
    3. so does a buffer Python itself obtained from malloc (a 1 MiB
       bytearray: such large requests go from pymalloc straight to malloc).
    """
    with open("/proc/self/maps") as maps:
        if shim_path not in maps.read():
            sys.exit("shim not mapped into python3")

    process = ctypes.CDLL(None)
    shim = ctypes.CDLL(shim_path)
    process.snmalloc_identity.restype = ctypes.c_char_p
    if process.snmalloc_identity() != b"snmalloc":
        sys.exit("snmalloc_identity did not answer")
    shim.malloc_usable_size.restype = ctypes.c_size_t
    shim.malloc_usable_size.argtypes = [ctypes.c_void_p]

    size = 1 << 20
    process.malloc.restype = ctypes.c_void_p
    process.malloc.argtypes = [ctypes.c_size_t]
    process.free.argtypes = [ctypes.c_void_p]
    block = process.malloc(size)
    usable = shim.malloc_usable_size(block)
    process.free(block)
    if usable < size:
        sys.exit(f"malloc in python3 is not the shim's (usable size {usable})")

    buffer = bytearray(size)
    address = ctypes.addressof((ctypes.c_char * size).from_buffer(buffer))
    usable = shim.malloc_usable_size(address)
    if usable < size:
        sys.exit(f"bytearray buffer not from snmalloc (usable size {usable})")
    print("python3 heap is snmalloc's", file=sys.stderr)


if __name__ == "__main__":
    workload()
    if len(sys.argv) == 3 and sys.argv[1] == "--check-allocator":
        check_allocator(sys.argv[2])
