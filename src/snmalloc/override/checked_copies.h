#pragma once
// Layer override: the checks build's memcpy, memmove, memset, mempcpy,
// strcpy, stpcpy, strncpy, strcat and strncat.  The bytes each writes (and
// the bytes of heap objects it reads) must lie inside one live heap object
// or in none: the object of the range's first byte is looked up in the
// pagemap and bounds the range; where the first byte is in no object that
// can be bounded, the last byte must not be in one either (a copy to
// p - 1 that ends inside p's object starts in the previous object or
// before the slab or run).  Memory no object bounds (stack, globals, other
// mappings, the chunks of a large object after its first, a sampled object
// once freed) passes unchecked at both ends.  A violation stops the program
// with one line and abort(), as a bad free does.
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
    const PagemapEntry& entry = pagemap.entry_of(p);
    uintptr_t owner = entry.get_owner();
    if (!is_tag(owner))
    {
      if (owner == 0)
        return {}; // a large object's later chunk, or no object at all
      const auto* meta = reinterpret_cast<const SlabMeta*>(entry.get_meta());
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
  // object at 0x<start>" (or "start before the", for a range that ends in
  // the object), or "<fn>(): <verb> freed heap object at 0x<start>".
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
  report_access(const char* fn, bool write, const void* at, size_t n, HeapObject o) noexcept
  {
    Line line;
    line.add(fn).add("(): ");
    if (o.free)
      line.add(write ? "write to" : "read of").add(" freed heap object at ").number(o.start, 16);
    else
      line.number(n, 10).add(" bytes ").add(write ? "written" : "read").add(" at ")
        .number(reinterpret_cast<uintptr_t>(at), 16)
        .add(reinterpret_cast<uintptr_t>(at) < o.start ? " start before the " : " overflow the ")
        .number(o.size, 10).add("-byte heap object at ").number(o.start, 16);
    report_fatal(line.c_str());
  }

  // A heap object holding a byte of (first, last] when `first` is in none
  // that can be bounded: the object of `last`, or one that begins at a
  // chunk start in between (a large run, whose later chunks bound
  // nothing, so that its last byte alone would not say it was entered).
  // One pagemap entry per 16 KiB of the range.
  inline HeapObject object_entered(uintptr_t first, uintptr_t last)
  {
    HeapObject o = object_at(reinterpret_cast<const void*>(last));
    if (o.size != 0 || last < first)
      return o;
    uintptr_t arena_end = pagemap.base + pagemap.size;
    uintptr_t from = first < pagemap.base ? pagemap.base : bits::align_up(first + 1, config::CHUNK_SIZE);
    for (uintptr_t c = from; c <= last && c < arena_end; c += config::CHUNK_SIZE)
    {
      o = object_at(reinterpret_cast<const void*>(c));
      if (o.size != 0)
        return o;
    }
    return {};
  }

  // Is the check of `n` bytes at `at`, written (`write`) or read, done
  // with one lookup?  Stops the program where it finds a violation: the
  // range's first byte is in a heap object it leaves, or a freed one.
  // False when the first byte is in no object that can be bounded but the
  // range reaches into the arena: check_entered must look further.
  SNMALLOC_FAST_PATH bool settled(const char* fn, bool write, const void* at, size_t n)
  {
    if (n == 0)
      return true;
    if (!pagemap.contains(at))
      return !pagemap.contains(static_cast<const char*>(at) + n - 1);
    HeapObject o = object_at(at);
    if (o.size == 0)
      return false;
    if (SNMALLOC_UNLIKELY(o.free || reinterpret_cast<uintptr_t>(at) + n - o.start > o.size))
      report_access(fn, write, at, n, o);
    return true;
  }

  // The rest of the check where it is not settled: the range must enter
  // no object (it would start before it).
  SNMALLOC_SLOW_PATH inline void check_entered(const char* fn, bool write, const void* at, size_t n)
  {
    uintptr_t first = reinterpret_cast<uintptr_t>(at);
    HeapObject o = object_entered(first, first + n - 1);
    if (o.size != 0)
      report_access(fn, write, at, n, o);
  }

  SNMALLOC_FAST_PATH void check(const char* fn, bool write, const void* at, size_t n)
  {
    if (SNMALLOC_UNLIKELY(!settled(fn, write, at, n)))
      check_entered(fn, write, at, n);
  }

  // memcpy, mempcpy and memmove where a range is not settled: checked in
  // full and copied out of line, so that the callers tail-call and save no
  // register (a call that returned to them cost memset 13 instructions a
  // call, callgrind on perf-copy-mix).
  // glibc's memcpy or memmove, the variable itself: read where it is
  // called, not held in a register across the checks.
  using Copy = void* (*volatile&)(void*, const void*, size_t, size_t) noexcept;

  SNMALLOC_SLOW_PATH inline void* copy_unsettled(const char* fn, Copy copy, void* dst, const void* src, size_t n)
  {
    check(fn, true, dst, n);
    check(fn, false, src, n);
    return copy(dst, src, n, n);
  }

  SNMALLOC_SLOW_PATH inline void* set_unsettled(void* dst, int c, size_t n)
  {
    check_entered("memset", true, dst, n);
    return glibc::memset(dst, c, n, n);
  }

  // Both ranges of a copy: its check and the copy, in the common case with
  // two lookups and a tail call.
  SNMALLOC_FAST_PATH void* checked_copy(const char* fn, Copy copy, void* dst, const void* src, size_t n)
  {
    if (SNMALLOC_LIKELY(settled(fn, true, dst, n) && settled(fn, false, src, n)))
      return copy(dst, src, n, n);
    return copy_unsettled(fn, copy, dst, src, n);
  }
} // namespace snmalloc::checked

extern "C"
{
  SNMALLOC_EXPORT void* memcpy(void* dst, const void* src, size_t n) noexcept
  {
    return snmalloc::checked::checked_copy("memcpy", snmalloc::glibc::memcpy, dst, src, n);
  }

  SNMALLOC_EXPORT void* mempcpy(void* dst, const void* src, size_t n) noexcept
  {
    return static_cast<char*>(snmalloc::checked::checked_copy("mempcpy", snmalloc::glibc::memcpy, dst, src, n)) + n;
  }

  SNMALLOC_EXPORT void* memmove(void* dst, const void* src, size_t n) noexcept
  {
    return snmalloc::checked::checked_copy("memmove", snmalloc::glibc::memmove, dst, src, n);
  }

  SNMALLOC_EXPORT void* memset(void* dst, int c, size_t n) noexcept
  {
    if (SNMALLOC_LIKELY(snmalloc::checked::settled("memset", true, dst, n)))
      return snmalloc::glibc::memset(dst, c, n, n);
    return snmalloc::checked::set_unsettled(dst, c, n);
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
