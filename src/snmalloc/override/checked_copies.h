#pragma once
// Layer override: the checks build's memcpy, memmove, memset, mempcpy,
// strcpy, stpcpy, strncpy, strcat and strncat.  Each looks its destination
// up in the pagemap and, when it is a heap object, checks that the bytes it
// writes lie inside that object and that the object is not free; sources of
// heap objects are checked the same way for the bytes read, sampled ones
// too.  Anything else (stack, globals, other mappings, the chunks of a
// large object after its first, a sampled object once freed) passes
// through unchecked.  A violation stops the program with one line and
// abort(), as a bad free does.
//
// The copying itself is glibc's (snmalloc::glibc in pal/pal_linux.h): its
// __memcpy_chk family, which is not interposed.  Included only by
// the checks shims' translation unit (shim_checks.cc).

#include "../global/global.h"

#include <cstring>

namespace snmalloc::checked
{
  // The heap object holding an address: its start and size (0: not one
  // that can be bounded), and whether it is free.
  struct HeapObject
  {
    uintptr_t start = 0;
    size_t size = 0;
    bool free = false;
  };

  inline HeapObject object_at(const void* p)
  {
    if (!pagemap.contains(p))
      return {};
    uintptr_t owner = pagemap.entry_of(p).get_owner();
    if (!is_tag(owner))
    {
      if (owner == 0)
        return {}; // a large object's later chunk, or no object at all
      const auto* meta = reinterpret_cast<const SlabMeta*>(pagemap.entry_of(p).get_meta());
      size_t size = sizeclass_to_size(meta->sizeclass);
      size_t index = index_in_slab(reinterpret_cast<uintptr_t>(p) - meta->base, meta->sizeclass);
      if (index >= sizeclasses.capacity[meta->sizeclass])
        return {}; // the slab's slack after its last object
      uintptr_t start = meta->base + index * size;
      return {start, size, FreeObject::from(reinterpret_cast<void*>(start))->marked_free()};
    }
    if (tag_kind(owner) == ChunkKind::Large)
      return {(pagemap.offset_of(p) >> config::CHUNK_BITS << config::CHUNK_BITS) + pagemap.base,
              large_run::bytes_of_tag(owner)};
    if (tag_kind(owner) == ChunkKind::Sampled)
    {
      ObjectExtent o = Profiler::sampled_object(p);
      return {o.start, o.size};
    }
    return {};
  }

  // "<fn>(): <n> bytes <verb> at 0x<at> overflow the <size>-byte heap
  // object at 0x<start>", or "<fn>(): <verb> freed heap object at 0x<start>".
  class Line
  {
    char text_[200];
    size_t n_ = 0;

  public:
    Line& add(const char* s)
    {
      while (*s != '\0' && n_ < sizeof(text_) - 1)
        text_[n_++] = *s++;
      return *this;
    }

    Line& number(uintptr_t v, unsigned base)
    {
      char digits[24];
      size_t d = 0;
      do
      {
        digits[d++] = "0123456789abcdef"[v % base];
        v /= base;
      } while (v != 0);
      if (base == 16)
        add("0x");
      while (d > 0 && n_ < sizeof(text_) - 1)
        text_[n_++] = digits[--d];
      return *this;
    }

    const char* c_str()
    {
      text_[n_] = '\0';
      return text_;
    }
  };

  [[noreturn]] SNMALLOC_SLOW_PATH inline void
  report_access(const char* fn, const char* verb, const void* at, size_t n, HeapObject o) noexcept
  {
    Line line;
    line.add(fn).add("(): ");
    if (o.free)
      line.add(verb).add(" freed heap object at ").number(o.start, 16);
    else
      line.number(n, 10).add(" bytes ").add(verb).add(" at ").number(reinterpret_cast<uintptr_t>(at), 16)
        .add(" overflow the ").number(o.size, 10).add("-byte heap object at ").number(o.start, 16);
    report_fatal(line.c_str());
  }

  // `n` bytes at `at` are written (verb "write to"/"written") or read.
  SNMALLOC_FAST_PATH void check(const char* fn, bool write, const void* at, size_t n)
  {
    if (n == 0)
      return;
    HeapObject o = object_at(at);
    if (o.size == 0)
      return;
    if (SNMALLOC_UNLIKELY(o.free))
      report_access(fn, write ? "write to" : "read of", at, n, o);
    if (SNMALLOC_UNLIKELY(reinterpret_cast<uintptr_t>(at) + n - o.start > o.size))
      report_access(fn, write ? "written" : "read", at, n, o);
  }
} // namespace snmalloc::checked

extern "C"
{
  SNMALLOC_EXPORT void* memcpy(void* dst, const void* src, size_t n) noexcept
  {
    snmalloc::checked::check("memcpy", true, dst, n);
    snmalloc::checked::check("memcpy", false, src, n);
    return snmalloc::glibc::memcpy(dst, src, n, n);
  }

  SNMALLOC_EXPORT void* mempcpy(void* dst, const void* src, size_t n) noexcept
  {
    snmalloc::checked::check("mempcpy", true, dst, n);
    snmalloc::checked::check("mempcpy", false, src, n);
    return static_cast<char*>(snmalloc::glibc::memcpy(dst, src, n, n)) + n;
  }

  SNMALLOC_EXPORT void* memmove(void* dst, const void* src, size_t n) noexcept
  {
    snmalloc::checked::check("memmove", true, dst, n);
    snmalloc::checked::check("memmove", false, src, n);
    return snmalloc::glibc::memmove(dst, src, n, n);
  }

  SNMALLOC_EXPORT void* memset(void* dst, int c, size_t n) noexcept
  {
    snmalloc::checked::check("memset", true, dst, n);
    return snmalloc::glibc::memset(dst, c, n, n);
  }

  SNMALLOC_EXPORT char* stpcpy(char* dst, const char* src) noexcept
  {
    size_t n = std::strlen(src) + 1;
    snmalloc::checked::check("stpcpy", true, dst, n);
    snmalloc::checked::check("stpcpy", false, src, n);
    snmalloc::glibc::memcpy(dst, src, n, n);
    return dst + n - 1;
  }

  SNMALLOC_EXPORT char* strcpy(char* dst, const char* src) noexcept
  {
    size_t n = std::strlen(src) + 1;
    snmalloc::checked::check("strcpy", true, dst, n);
    snmalloc::checked::check("strcpy", false, src, n);
    snmalloc::glibc::memcpy(dst, src, n, n);
    return dst;
  }

  // Writes exactly n bytes: the string, then zeros.
  SNMALLOC_EXPORT char* strncpy(char* dst, const char* src, size_t n) noexcept
  {
    size_t len = strnlen(src, n);
    snmalloc::checked::check("strncpy", true, dst, n);
    snmalloc::checked::check("strncpy", false, src, len < n ? len + 1 : n);
    snmalloc::glibc::memcpy(dst, src, len, len);
    snmalloc::glibc::memset(dst + len, 0, n - len, n - len);
    return dst;
  }

  SNMALLOC_EXPORT char* strcat(char* dst, const char* src) noexcept
  {
    size_t at = std::strlen(dst);
    size_t n = std::strlen(src) + 1;
    snmalloc::checked::check("strcat", true, dst, at + n);
    snmalloc::checked::check("strcat", false, src, n);
    snmalloc::glibc::memcpy(dst + at, src, n, n);
    return dst;
  }

  // Appends at most n bytes of src, then a terminating zero.
  SNMALLOC_EXPORT char* strncat(char* dst, const char* src, size_t n) noexcept
  {
    size_t at = std::strlen(dst);
    size_t len = strnlen(src, n);
    snmalloc::checked::check("strncat", true, dst, at + len + 1);
    snmalloc::checked::check("strncat", false, src, len);
    snmalloc::glibc::memcpy(dst + at, src, len, len);
    dst[at + len] = '\0';
    return dst;
  }
}
