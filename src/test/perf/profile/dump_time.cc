// Time to write a profile: 100,000 live samples (every allocation sampled)
// over 5,000 distinct stacks of about 64 frames, then dump() three times,
// each timed end to end (symbolization, encoding, gzip, write), then
// dump_lifetimes() three times; then the
// same profile fetched five times from the HTTP endpoint
// (/debug/pprof/heap on loopback), each timed from connect to the last
// byte.  Needs a profiling build; see docs/performance.md.
//
//   perf-dump-time [PATH [TENANTS]]
// With TENANTS > 0, sample i is allocated under the label
// tenant=t<i % TENANTS>: a site per (stack, tenant) pair that occurs, 5,000
// of them when TENANTS divides 5,000, up to 5,000 * TENANTS otherwise.
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_profile.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace
{
  std::vector<void*> keep;

  __attribute__((noinline)) void leaf()
  {
    keep.push_back(std::malloc(64));
    asm volatile("" ::: "memory");
  }

  __attribute__((noinline)) void b(int id, int depth);

  // a and b call each other along a path chosen by the bits of `id`, so
  // each id gets a stack of its own, `depth` frames deep.
  __attribute__((noinline)) void a(int id, int depth)
  {
    if (depth == 0)
      leaf();
    else if ((id >> (depth % 13)) & 1)
      b(id, depth - 1);
    else
      a(id, depth - 1);
    asm volatile("" ::: "memory");
  }

  void b(int id, int depth)
  {
    if (depth == 0)
      leaf();
    else if ((id >> (depth % 13)) & 1)
      a(id, depth - 1);
    else
      b(id, depth - 1);
    asm volatile("" ::: "memory");
  }

  // GET `path` from 127.0.0.1:port; the bytes of the whole response.
  size_t http_get(uint16_t port, const char* path)
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
      return 0;
    char request[128];
    int n = std::snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    if (::write(fd, request, size_t(n)) != n)
      return 0;
    size_t total = 0;
    char buffer[65536];
    for (ssize_t got; (got = ::read(fd, buffer, sizeof(buffer))) > 0;)
      total += size_t(got);
    ::close(fd);
    return total;
  }
  // Three dumps by `dump`, each timed and printed; false if one failed.
  template<typename Dump>
  bool timed_dumps(const char* name, Dump&& dump)
  {
    for (int rep = 0; rep < 3; rep++)
    {
      auto t0 = std::chrono::steady_clock::now();
      auto r = dump();
      auto t1 = std::chrono::steady_clock::now();
      std::printf(
        "RESULT name=%s dump=%d status=%s ms=%.1f\n",
        name,
        rep,
        r.message(),
        std::chrono::duration<double, std::milli>(t1 - t0).count());
      if (!r.ok())
        return false;
    }
    return true;
  }
} // namespace

int main(int argc, char** argv)
{
  const char* path = argc > 1 ? argv[1] : "dump-time.pb.gz";
  int tenants = argc > 2 ? std::atoi(argv[2]) : 0;
  keep.reserve(200000);
  snmalloc::profile::start(1);
  for (int i = 0; i < 100000; i++)
  {
    char tenant[16];
    std::snprintf(tenant, sizeof(tenant), "t%d", tenants > 0 ? i % tenants : 0);
    if (tenants > 0)
      snmalloc::profile::push_label("tenant", tenant);
    a(i % 5000, 70);
    if (tenants > 0)
      snmalloc::profile::pop_label();
  }
  snmalloc::profile::stop();
  if (!timed_dumps("dump-time", [&] { return snmalloc::profile::dump(path); }))
    return 1;
  // The lifetime profile of the same samples: every one live (aged), and
  // the 5,000 sites' histograms, empty until something is freed.
  if (!timed_dumps("dump-lifetimes-time", [&] { return snmalloc::profile::dump_lifetimes(path); }))
    return 1;
  uint16_t port = 0;
  if (snmalloc_profile_http_start(":0", &port) != 0)
    return 1;
  for (int rep = 0; rep < 5; rep++)
  {
    auto t0 = std::chrono::steady_clock::now();
    size_t bytes = http_get(port, "/debug/pprof/heap");
    auto t1 = std::chrono::steady_clock::now();
    std::printf(
      "RESULT name=serve-heap fetch=%d bytes=%zu ms=%.1f\n",
      rep,
      bytes,
      std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (bytes == 0)
      return 1;
  }
  return snmalloc_profile_http_stop();
}
