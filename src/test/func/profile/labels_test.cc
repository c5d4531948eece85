// Allocation labels read back through `go tool pprof`, every allocation
// sampled (rate=1), so each count is exact: nested labels pushed and
// popped through the C API (and what it returns for bad input), labels of
// a thread that exits before the dump, of objects freed on another thread,
// in the peak and lifetime profiles, over HTTP (a window's difference kept
// apart by label), and sets cut at their limits.
#include "support/files.h"
#include "support/pprof_output.h"
#include "support/pprof_runner.h"
#include "support/profiling.h"

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <netinet/in.h>
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_profile.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace snmalloc_test;

namespace
{
  constexpr size_t SIZE = 2000;

  int64_t inuse(const std::string& profile, const std::string& function, const std::string& options = "")
  {
    return SiteTable(profile, options)[function].inuse_objects;
  }

  int64_t count_of(
    const std::string& profile,
    const std::string& function,
    const std::string& sample_index,
    const std::string& options = "")
  {
    auto values = flat_values(profile, sample_index, "", options);
    auto found = values.find(function);
    return found == values.end() ? 0 : found->second;
  }

  // GET `path` from the endpoint on 127.0.0.1:port into the file `out`,
  // the body only; `sent` is called once the request is written.
  template<typename Sent>
  void http_get_to_file(uint16_t port, const std::string& path, const std::string& out, Sent&& sent)
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
    REQUIRE(::write(fd, request.data(), request.size()) == ssize_t(request.size()));
    sent();
    std::string response;
    char buffer[65536];
    for (ssize_t got; (got = ::read(fd, buffer, sizeof(buffer))) > 0;)
      response.append(buffer, size_t(got));
    ::close(fd);
    size_t body = response.find("\r\n\r\n");
    INFO("response head: " << response.substr(0, 200));
    REQUIRE(response.rfind("HTTP/1.1 200", 0) == 0);
    REQUIRE(body != std::string::npos);
    std::ofstream(out, std::ios::binary) << response.substr(body + 4);
  }
} // namespace

__attribute__((noinline)) Node* nested_site(size_t n)
{
  return allocate_chain(SIZE, n);
}

__attribute__((noinline)) Node* exited_thread_site(size_t n)
{
  return allocate_chain(SIZE, n);
}

__attribute__((noinline)) Node* handed_site(size_t n)
{
  return allocate_chain(SIZE, n);
}

__attribute__((noinline)) Node* served_site(size_t n)
{
  return allocate_chain(SIZE, n);
}

__attribute__((noinline)) Node* truncated_site(size_t n)
{
  return allocate_chain(SIZE, n);
}

TEST_CASE("labels: nested, popped, an inner key hiding the outer one")
{
  TempDir dir;
  std::string heap = dir.file("nested.pb.gz");
  // Objects allocated under: team=red; team=red tenant=x; team=blue
  // tenant=x (blue hides red); team=red tenant=x again; nothing.
  const size_t n[] = {11, 23, 37, 41, 53};
  Node* held[5] = {};
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      CHECK(snmalloc_profile_label_push("team", "red") == 0);
      held[0] = nested_site(n[0]);
      CHECK(snmalloc_profile_label_push("tenant", "x") == 0);
      held[1] = nested_site(n[1]);
      CHECK(snmalloc_profile_label_push("team", "blue") == 0);
      held[2] = nested_site(n[2]);
      CHECK(snmalloc_profile_label_pop() == 0);
      held[3] = nested_site(n[3]);
      CHECK(snmalloc_profile_label_pop() == 0);
      CHECK(snmalloc_profile_label_pop() == 0);
      held[4] = nested_site(n[4]);
      CHECK(snmalloc_profile_label_pop() == EINVAL);
    });
    dump_or_fail(heap);
  }
  CHECK(inuse(heap, "nested_site") == int64_t(n[0] + n[1] + n[2] + n[3] + n[4]));
  CHECK(inuse(heap, "nested_site", "-tagfocus=team=red") == int64_t(n[0] + n[1] + n[3]));
  CHECK(inuse(heap, "nested_site", "-tagfocus=team=blue") == int64_t(n[2]));
  CHECK(inuse(heap, "nested_site", "-tagfocus=tenant=x") == int64_t(n[1] + n[2] + n[3]));
  CHECK(inuse(heap, "nested_site", "'-tagignore=team=^(red|blue)$'") == int64_t(n[4]));
  CHECK(count_of(heap, "nested_site", "alloc_objects", "-tagfocus=team=blue") == int64_t(n[2]));
  for (Node* h : held)
    free_chain(h);
}

TEST_CASE("labels: the C API refuses bad input and pushes nothing")
{
  CHECK(snmalloc_profile_label_push(nullptr, "v") == EINVAL);
  CHECK(snmalloc_profile_label_push("", "v") == EINVAL);
  CHECK(snmalloc_profile_label_push("k", nullptr) == EINVAL);
  CHECK(snmalloc_profile_label_pop() == EINVAL);
  CHECK(snmalloc::profile::push_label("k", "") == 0); // an empty value is a value
  CHECK(snmalloc::profile::pop_label() == 0);
  CHECK(snmalloc::profile::pop_label() == EINVAL);
}

TEST_CASE("labels: a thread's labelled objects outlive the thread")
{
  TempDir dir;
  std::string heap = dir.file("exited.pb.gz");
  Node* held[2] = {};
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      snmalloc::profile::ScopedLabel label("job", "gone");
      held[0] = exited_thread_site(77);
    });
    // The same site on a thread of no labels, after the first one left.
    on_fresh_thread([&] { held[1] = exited_thread_site(5); });
    dump_or_fail(heap);
  }
  CHECK(inuse(heap, "exited_thread_site") == 77 + 5);
  CHECK(inuse(heap, "exited_thread_site", "-tagfocus=job=gone") == 77);
  CHECK(count_of(heap, "exited_thread_site", "alloc_objects", "-tagfocus=job=gone") == 77);
  for (Node* h : held)
    free_chain(h);
}

TEST_CASE("labels: an object freed on another thread keeps its labels")
{
  TempDir dir;
  std::string heap = dir.file("handed.pb.gz"), lifetimes = dir.file("handed.lifetimes.pb.gz");
  Node* kept = nullptr;
  {
    ProfilingAt exact(1);
    Node* handed = nullptr;
    on_fresh_thread([&] {
      snmalloc::profile::ScopedLabel label("request", "r42");
      handed = handed_site(60);
      kept = handed_site(40);
    });
    on_fresh_thread([&] { free_chain(handed); });
    dump_or_fail(heap);
    REQUIRE(snmalloc::profile::dump_lifetimes(lifetimes.c_str()).ok());
  }
  CHECK(inuse(heap, "handed_site", "-tagfocus=request=r42") == 40);
  CHECK(count_of(heap, "handed_site", "alloc_objects", "-tagfocus=request=r42") == 100);
  CHECK(
    count_of(lifetimes, "handed_site", "freed_objects", "-tagfocus=request=r42") == 60);
  CHECK(
    count_of(
      lifetimes, "handed_site", "freed_objects", "-tagfocus=request=r42 -tagfocus=freed_by=other_thread") ==
    60);
  CHECK(count_of(lifetimes, "handed_site", "live_objects", "-tagfocus=request=r42") == 40);
  free_chain(kept);
}

TEST_CASE("labels: the peak profile keeps the labels of the peak")
{
  TempDir dir;
  std::string peak = dir.file("peak.pb.gz");
  {
    ProfilingAt exact(1);
    on_fresh_thread([&] {
      snmalloc::profile::ScopedLabel label("phase", "load");
      // Well past the peak copy's least step (16 samples) above anything
      // live before: the copy is taken while these are held.
      free_chain(nested_site(400));
    });
    REQUIRE(snmalloc::profile::dump_peak(peak.c_str()).ok());
  }
  int64_t at_peak = inuse(peak, "nested_site", "-tagfocus=phase=load");
  CHECK(at_peak >= 400 - 400 / 32 - 16);
  CHECK(at_peak <= 400);
}

TEST_CASE("labels: served over HTTP, a window's difference apart by label")
{
  TempDir dir;
  std::string heap = dir.file("served.pb.gz"), window = dir.file("window.pb.gz");
  Node* held[2] = {};
  ProfilingAt exact(1);
  uint16_t port = 0;
  REQUIRE(snmalloc_profile_http_start(":0", &port) == 0);
  on_fresh_thread([&] {
    snmalloc::profile::ScopedLabel label("tenant", "before");
    held[0] = served_site(31);
  });
  // Objects of another tenant allocated inside a 2-second window: the
  // difference has them and none of the first tenant's.
  http_get_to_file(port, "/debug/pprof/heap?seconds=2", window, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    on_fresh_thread([&] {
      snmalloc::profile::ScopedLabel label("tenant", "during");
      held[1] = served_site(43);
    });
  });
  http_get_to_file(port, "/debug/pprof/heap", heap, [] {});
  CHECK(snmalloc_profile_http_stop() == 0);
  CHECK(inuse(heap, "served_site", "-tagfocus=tenant=before") == 31);
  CHECK(inuse(heap, "served_site", "-tagfocus=tenant=during") == 43);
  CHECK(inuse(window, "served_site", "-tagfocus=tenant=during") == 43);
  CHECK(count_of(window, "served_site", "alloc_objects", "-tagfocus=tenant=during") == 43);
  CHECK(inuse(window, "served_site", "-tagfocus=tenant=before") == 0);
  CHECK(count_of(window, "served_site", "alloc_objects", "-tagfocus=tenant=before") == 0);
  for (Node* h : held)
    free_chain(h);
}

TEST_CASE("labels: sets past their limits are cut, and the profile says so")
{
  TempDir dir;
  std::string heap = dir.file("truncated.pb.gz");
  Node* held[2] = {};
  std::string long_value(100, 'v');
  {
    ProfilingAt exact(1);
    // Results checked after the thread: a failed check's message would
    // allocate, and be sampled, under the cut set.
    int pushed[10], popped[11];
    on_fresh_thread([&] {
      const char* keys[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"};
      for (int i = 0; i < 10; i++)
        pushed[i] = snmalloc::profile::push_label(keys[i], i < 8 ? "v" : "lost");
      held[0] = truncated_site(13);
      for (int& p : popped)
        p = snmalloc::profile::pop_label();
      snmalloc::profile::ScopedLabel cut("long", long_value.c_str());
      held[1] = truncated_site(17);
    });
    for (int i = 0; i < 10; i++)
      CHECK(pushed[i] == (i < 8 ? 0 : E2BIG));
    for (int i = 0; i < 11; i++)
      CHECK(popped[i] == (i < 10 ? 0 : EINVAL));
    dump_or_fail(heap);
  }
  CHECK(inuse(heap, "truncated_site", "-tagfocus=k7=v") == 13);
  CHECK(inuse(heap, "truncated_site", "-tagfocus=k8=lost") == 0);
  CHECK(inuse(heap, "truncated_site", "-tagfocus=long=^" + std::string(64, 'v') + "$") == 17);
  std::string comments = pprof_ok("-comments '" + heap + "'");
  INFO("pprof -comments:\n" << comments);
  CHECK(comments.find("allocation labels were truncated") != std::string::npos);
  CHECK(comments.find(": 30") != std::string::npos);
  for (Node* h : held)
    free_chain(h);
}
