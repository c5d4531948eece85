// libFuzzer target: the HTTP request parser (profile/http/http_request.h) fed
// any bytes, as a client may send them.  It must answer Complete,
// Incomplete or an error status, never read outside the buffer (the input
// is copied into a buffer of exactly its size, so ASan sees any overread),
// and on Complete give a path and query inside the head it measured.
#include <snmalloc/profile/http/http_request.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>

using namespace snmalloc::profile;

static bool inside(const Text& t, const char* begin, size_t size)
{
  return t.data >= begin && t.data + t.size <= begin + size;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  auto buffer = std::make_unique<char[]>(size == 0 ? 1 : size);
  std::memcpy(buffer.get(), data, size);
  // The server's buffer is larger; a small capacity here also exercises the
  // "full" answers (414, 431) at every length.
  for (size_t capacity : {size, size + 1})
  {
    http::Request r;
    size_t head = 0;
    http::ParseResult result = http::parse_request(buffer.get(), size, capacity, r, head);
    if (result != http::ParseResult::Complete)
      continue;
    if (
      head == 0 || head > size || !inside(r.method, buffer.get(), head) ||
      !inside(r.path, buffer.get(), head) || !inside(r.query, buffer.get(), head) ||
      r.path.size == 0 || r.path.data[0] != '/')
      __builtin_trap();
    Text value;
    size_t seconds = 0;
    if (http::query_value(r.query, "seconds", value))
    {
      if (!inside(value, r.query.data, r.query.size))
        __builtin_trap();
      (void)parse_size(value, 1, 3600, seconds);
    }
  }
  return 0;
}
