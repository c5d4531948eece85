#pragma once
// Layer profile/guard: what a fault in a guarded slot means, and the report of
// it on stderr (guarded_slots.h places the objects).
//
//   a fault at an address of a guarded slot
//     inside a freed object               use after free
//     past the end of the nearest object  heap buffer overflow
//     before the start of it              heap buffer underflow
//   a free of a guarded slot's address
//     of an object already freed          double free
//     not an object's start               invalid free
//
// An address between two objects (a guard page, or pages of a slot its
// object does not use) is put down to the nearer of the object before it
// and the object after it.  The report names the kind, the access (read
// or write, from the fault's error code on x86-64), the address and its
// offset from the object's start, the object's size, the stack of the
// faulting access or bad free, and the allocating and (for freed objects)
// freeing stacks, symbolized without allocating
// (signal_symbolize.h).  Everything here runs in a signal handler or just
// before abort(): no malloc, no locks, write(2) only.

#include "guarded_slots.h"
#include "../symbols/signal_symbolize.h"

namespace snmalloc::profile
{
  enum class GuardFault
  {
    Overflow,
    Underflow,
    UseAfterFree,
    DoubleFree,
    InvalidFree,
  };

  struct GuardDiagnosis
  {
    GuardFault kind;
    const GuardedSlot* slot; // whose object it concerns
    uintptr_t address;
  };

  namespace guard_report_detail
  {
    // Collects a report in a fixed buffer and writes it out in one go (or
    // in pieces, if it is longer), to fd 2.
    class Writer
    {
      char buffer_[512];
      size_t used_ = 0;

    public:
      void flush()
      {
        size_t done = 0;
        while (done < used_)
        {
          ssize_t n = ::write(2, buffer_ + done, used_ - done);
          if (n <= 0)
            break;
          done += size_t(n);
        }
        used_ = 0;
      }

      Writer& text(const char* s)
      {
        for (; *s != '\0'; s++)
        {
          if (used_ == sizeof(buffer_))
            flush();
          buffer_[used_++] = *s;
        }
        return *this;
      }

      Writer& number(uint64_t v, unsigned base = 10)
      {
        char digits[24];
        size_t n = 0;
        do
        {
          digits[n++] = "0123456789abcdef"[v % base];
          v /= base;
        } while (v != 0);
        char out[28];
        size_t o = 0;
        if (base == 16)
        {
          out[o++] = '0';
          out[o++] = 'x';
        }
        while (n > 0)
          out[o++] = digits[--n];
        out[o] = '\0';
        return text(out);
      }

      Writer& signed_number(int64_t v)
      {
        if (v < 0)
          return text("-").number(uint64_t(-v));
        return number(uint64_t(v));
      }

      ~Writer()
      {
        flush();
      }
    };

    // Frames of the allocator itself (the unwinder's view of free() and
    // the slow paths under it) are left out of the top of a stack.
    inline bool allocator_frame(const char* symbol)
    {
      static const char* const prefixes[] = {
        "_ZN8snmalloc", "_ZNK8snmalloc", "_ZZN8snmalloc", "_ZL", "_ZdlPv", "_ZdaPv"};
      for (const char* p : prefixes)
      {
        if (__builtin_strncmp(symbol, p, __builtin_strlen(p)) == 0)
          return __builtin_strcmp(p, "_ZL") != 0 || __builtin_strstr(symbol, "snmalloc") != nullptr;
      }
      static const char* const entries[] = {"free", "cfree", "realloc", "malloc", "calloc"};
      for (const char* e : entries)
      {
        if (__builtin_strcmp(symbol, e) == 0)
          return true;
      }
      return false;
    }

    inline void write_stack(
      Writer& w, SignalSafeSymbolizer& names, const uintptr_t* frames, size_t depth)
    {
      bool top = true;
      size_t shown = 0;
      for (size_t i = 0; i < depth; i++)
      {
        // A return address: look up the call instruction before it.
        SignalSafeSymbolizer::Found f = names.find(frames[i] - 1);
        if (top && f.symbol != nullptr && allocator_frame(f.symbol))
          continue;
        top = false;
        w.text("    #").number(shown++).text(" ").number(frames[i], 16);
        if (f.symbol != nullptr)
        {
          char name[256];
          SignalSafeSymbolizer::readable_name(f.symbol, name, sizeof(name));
          w.text(" in ").text(name).text("+").number(f.offset + 1, 16);
        }
        if (f.path != nullptr && f.path[0] != '\0')
          w.text(" (").text(f.path).text(")");
        w.text("\n");
      }
      if (shown == 0)
        w.text("    (no frames)\n");
    }

    inline const char* kind_name(GuardFault kind)
    {
      switch (kind)
      {
        case GuardFault::Overflow:
          return "heap buffer overflow";
        case GuardFault::Underflow:
          return "heap buffer underflow";
        case GuardFault::UseAfterFree:
          return "use after free";
        case GuardFault::DoubleFree:
          return "double free";
        default:
          return "invalid free";
      }
    }
  } // namespace guard_report_detail

  // What a fault at `address` was, if it lies in a guarded slot.
  inline bool diagnose_fault(uintptr_t address, GuardDiagnosis& out)
  {
    const GuardedSlot* here = guarded_slots.slot_of(address);
    if (here == nullptr)
      return false;
    auto used = [](const GuardedSlot* s) {
      return s != nullptr && s->state.load(std::memory_order_acquire) != SlotState::Free;
    };
    if (used(here) && address - here->object < here->size)
    {
      // Inside a live object the access cannot have faulted for us.
      if (here->state.load(std::memory_order_acquire) != SlotState::Freed)
        return false;
      out = {GuardFault::UseAfterFree, here, address};
      return true;
    }
    // Between objects: the nearer of the one before and the one after.
    const GuardedSlot* before =
      used(here) && here->object + here->size <= address ? here : guarded_slots.slot_before(here);
    const GuardedSlot* after = used(here) && address < here->object ? here : nullptr;
    if (!used(before))
      before = nullptr;
    if (before == nullptr && after == nullptr)
    {
      // An unused slot far from any object: still ours, nothing to say
      // but where.
      out = {GuardFault::Overflow, nullptr, address};
      return true;
    }
    bool overflow =
      after == nullptr ||
      (before != nullptr && address - (before->object + before->size) < after->object - address);
    out = {overflow ? GuardFault::Overflow : GuardFault::Underflow, overflow ? before : after, address};
    return true;
  }

  // One report on stderr.  `access`: "read", "write" or "" (unknown);
  // `this_stack`: the stack of the faulting access or the bad free, shown
  // first (nullptr: none).
  inline void write_guard_report(
    const GuardDiagnosis& d,
    const char* access,
    const uintptr_t* this_stack = nullptr,
    size_t this_depth = 0)
  {
    using namespace guard_report_detail;
    static SignalSafeSymbolizer names;
    Writer w;
    w.text("snmalloc: guarded sampling caught a ").text(kind_name(d.kind));
    if (access[0] != '\0')
      w.text(" (").text(access).text(")");
    w.text(" at ").number(d.address, 16);
    const GuardedSlot* s = d.slot;
    if (s == nullptr)
    {
      w.text(", in a guarded slot no object has used\n");
      return;
    }
    w.text(": offset ")
      .signed_number(int64_t(d.address - s->object))
      .text(" in a ")
      .number(s->size)
      .text("-byte object at ")
      .number(s->object, 16);
    if (d.kind == GuardFault::Overflow)
      w.text(", ").number(d.address - (s->object + s->size)).text(" bytes past its end");
    else if (d.kind == GuardFault::Underflow)
      w.text(", ").number(s->object - d.address).text(" bytes before its start");
    bool freed = s->state.load(std::memory_order_acquire) == SlotState::Freed;
    w.text(freed ? " (freed)\n" : "\n");
    if (this_stack != nullptr)
    {
      w.text(
        d.kind == GuardFault::DoubleFree ? "  freed again here:\n" :
          d.kind == GuardFault::InvalidFree ? "  the free:\n" :
                                              "  the faulting access:\n");
      write_stack(w, names, this_stack, this_depth);
    }
    w.text("  allocated by thread ").number(s->record.thread_id).text(":\n");
    const StackEntry* alloc = stack_table.stack_of(s->record.site_id);
    if (alloc != nullptr)
      write_stack(w, names, alloc->frames, alloc->depth);
    else
      w.text("    (no stack)\n");
    if (freed)
    {
      w.text("  freed by thread ").number(s->free_thread).text(":\n");
      write_stack(w, names, s->free_frames, s->free_depth);
    }
  }
} // namespace snmalloc::profile
