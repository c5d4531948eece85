#pragma once
// Umbrella and interface of layer backend: chunks for slabs, large
// allocations and the profile pool, metadata memory, and giving memory back.
//
// One global lock guards the buddy allocator.  Frontends come here only on
// slab creation and release and for large allocations, all slow paths.  Pages
// go back to the OS outside it: a decay takes its blocks off the free lists
// under the lock, returns their pages without it, and puts them back under
// it again (finish_decay), so that no thread waits on another's madvise
// (with the lock held, a decay of everything stalled perf-decay-stall's
// other thread 18-25 ms).

#include "buddy.h"
#include "quarantine.h"

namespace snmalloc
{
  class Backend
  {
    SpinLock lock_;
    bool initialised_ = false;
    bool init_failed_ = false;
    Arena arena_;
    Buddy buddy_;
    // Metadata (slab descriptors, allocators) is bump-allocated from chunks
    // that are never returned; freed descriptors are recycled by size.
    uintptr_t meta_cursor_ = 0;
    uintptr_t meta_end_ = 0;
    FreeObject* meta_recycled_[8] = {};
    int64_t last_decay_ns_ = 0;
    // Free memory that may still be resident: bytes freed, less dirty bytes
    // handed out again and bytes decommitted.  The buddy's dirty flags
    // overstate it (a freed block merged with a clean buddy is flagged
    // dirty whole), so the hard limit is judged on this instead.
    size_t free_resident_ = 0;
    // Decays between their first step and their last (finish_decay): a
    // fork waits for them, so that the child finds their blocks free.
    size_t decaying_ = 0;
    // Threads waiting for them (await_decays_locked): no decay starts
    // meanwhile, or a stream of decays, overlapping, could keep a fork
    // waiting.
    size_t awaiting_ = 0;
    // Chunks handed out (runs and metadata blocks), for the statistics.
    size_t in_use_bytes_ = 0;
    size_t meta_bytes_ = 0;
    RunQuarantine quarantine_;

    void less_free_resident(size_t bytes) noexcept
    {
      free_resident_ -= bytes < free_resident_ ? bytes : free_resident_;
    }

    // Every free block that may hold resident pages, for a decay past the
    // hard limit or a trim; their bytes are added to `bytes`.
    uint32_t take_all_decaying_locked(size_t& bytes) noexcept
    {
      uint32_t taken = buddy_.take_decaying(true, bytes);
      free_resident_ = 0;
      return decay_started(taken);
    }

    // `taken` (Buddy::take_decaying), counted as a decay in flight if any.
    uint32_t decay_started(uint32_t taken) noexcept
    {
      if (taken != Buddy::NONE)
        decaying_++;
      return taken;
    }

    // Freed memory is returned to the OS once it has stayed free for one
    // to two decay periods, or at once beyond a hard limit.  Returns the
    // blocks of a decay due (Buddy::take_decaying), which the caller hands
    // to finish_decay once it has released the lock.
    uint32_t decay_due_locked() noexcept
    {
      if (SNMALLOC_UNLIKELY(awaiting_ != 0))
        return Buddy::NONE; // a later call decays
      if (buddy_.dirty_bytes() == 0)
      {
        free_resident_ = 0;
        return Buddy::NONE;
      }
      size_t bytes = 0;
      if (free_resident_ > config::DIRTY_LIMIT_BYTES)
        return take_all_decaying_locked(bytes);
      int64_t now = Pal::monotonic_ns();
      if (now - last_decay_ns_ < config::DECAY_PERIOD_NS)
        return Buddy::NONE;
      last_decay_ns_ = now;
      uint32_t taken = buddy_.take_decaying(false, bytes);
      less_free_resident(bytes);
      return decay_started(taken);
    }

    // The rest of a decay, called without the lock.
    void finish_decay(uint32_t taken) noexcept
    {
      if (SNMALLOC_LIKELY(taken == Buddy::NONE))
        return;
      return_pages(taken);
    }

    // Run `f` under the lock, then a decay if one is due: its blocks taken
    // before the lock is released, their pages returned after, and only
    // then an overwritten mark reported (a handler that allocates could
    // wait for the blocks the decay holds).  Inlined: as a call,
    // large-churn took 0.2% more instructions (230.16 against 229.62 M).
    template<typename F>
    SNMALLOC_FAST_PATH void locked_then_decay(F&& f) noexcept
    {
      uint32_t decaying;
      void* overwritten;
      {
        LockGuard g(lock_);
        f();
        decaying = decay_due_locked();
        overwritten = buddy_.take_overwritten();
      }
      finish_decay(decaying);
      report_if_overwritten(overwritten);
    }

    // A freed run's mark the buddy found overwritten while the lock was
    // held, reported now that it is not: a SIGABRT handler that allocates
    // (a crash reporter) would otherwise spin on it.
    static void report_if_overwritten(void* at) noexcept
    {
      if (at != nullptr)
        report_fatal_at("freed memory written (write after free?) at", at);
    }

    // Run `f` under the lock with no decay after it; a freed run's mark
    // found overwritten is reported once the lock is released.
    template<typename F>
    void locked(F&& f) noexcept
    {
      void* overwritten;
      {
        LockGuard g(lock_);
        f();
        overwritten = buddy_.take_overwritten();
      }
      report_if_overwritten(overwritten);
    }

    // The checks build, with the lock held, when no free block fits: every
    // run the quarantine holds back goes free, so that a request is not
    // refused for address space that freed runs keep, or keep from merging
    // into the blocks around them (under `ulimit -v 2000000`, with nothing
    // live, objects of 64 KiB and a byte freed one at a time ran the arena
    // out in 190 rounds, 64 MiB objects shrunk to 1 MiB and freed in five).
    // Whether any did.
    SNMALLOC_SLOW_PATH bool release_quarantine_locked() noexcept
    {
      bool released = false;
      RunQuarantine::Run oldest;
      while (quarantine_.take_oldest(oldest))
      {
        buddy_.dealloc_run(oldest.index, oldest.chunks);
        released = true;
      }
      return released;
    }

    // With the lock held (and held again on return): wait until no decay
    // has blocks off the free lists.  For a fork, and for a request that
    // found no free block, which a decay may be about to put back.
    SNMALLOC_SLOW_PATH void await_decays_locked() noexcept
    {
      awaiting_++;
      while (decaying_ != 0)
      {
        lock_.unlock();
        ::sched_yield();
        lock_.lock();
      }
      awaiting_--;
    }

    SNMALLOC_SLOW_PATH void return_pages(uint32_t taken) noexcept
    {
      Buddy::decommit_taken(taken);
      locked([&] {
        buddy_.put_back_taken(taken); // merges may compare marks
        decaying_--;
      });
    }

    bool ensure_init_locked() noexcept
    {
      if (SNMALLOC_LIKELY(initialised_))
        return true;
      if (init_failed_)
        return false;
      if (!arena_.init())
      {
        init_failed_ = true;
        return false;
      }
      buddy_.init(&arena_);
      init_link_secret();
      initialised_ = true;
      return true;
    }

    // The checks build keeps every free chunk inaccessible, never-used,
    // freed or decommitted (backend/buddy.h), so that a far overflow into
    // free memory faults; chunks are made accessible as they are handed
    // out.  Freed chunks keep their pages, as in the default build.
    static bool hand_out(size_t index, size_t bytes) noexcept
    {
      return !config::checks || Pal::commit(pagemap.chunk_address(index), bytes);
    }

    static size_t meta_bucket(size_t size)
    {
      return (size + 63) / 64 - 1;
    }

  public:
    struct Chunks
    {
      void* base = nullptr;
      bool zeroed = false;
    };

  private:
    // A run placed as `fit` says, or, when it is to be placed low (a
    // growing run, or any in the checks build) and no block is free for
    // that, packed among the free chunks rather than refused: runs placed
    // low take blocks of the power of two above their length, and in an
    // arena sized by RLIMIT_AS the checks build then failed a sixth 64 MiB
    // request with five 1 MiB objects live (each left in its 128 MiB block
    // by a shrink).
    Buddy::Block take_run_locked(size_t chunks, size_t align_order, Buddy::Fit fit) noexcept
    {
      Buddy::Block b = buddy_.alloc_run(chunks, align_order, fit);
      if (!b.ok && fit == Buddy::Fit::Low)
        b = buddy_.alloc_run(chunks, align_order, Buddy::Fit::Packed);
      return b;
    }

    // A run taken from the block `fit` picks (Buddy::Fit).
    Chunks alloc_chunks_by(Buddy::Fit fit, size_t bytes, size_t align, size_t guard_before, size_t guard_after) noexcept
    {
      size_t chunks = bytes >> config::CHUNK_BITS;
      size_t align_order =
        align > config::CHUNK_SIZE ? bits::log2_floor(align) - config::CHUNK_BITS : 0;
      Chunks result;
      locked_then_decay([&] {
        if (!ensure_init_locked())
          return;
        Buddy::Block b = take_run_locked(chunks, align_order, fit);
        if (!b.ok && decaying_ != 0)
        {
          await_decays_locked();
          b = take_run_locked(chunks, align_order, fit);
        }
        if (!b.ok && release_quarantine_locked())
          b = take_run_locked(chunks, align_order, fit);
        if (!b.ok)
          return;
        if (!hand_out(b.index + (guard_before >> config::CHUNK_BITS), bytes - guard_before - guard_after))
        {
          buddy_.dealloc_run(b.index, chunks, !b.dirty);
          return;
        }
        if (b.dirty)
          less_free_resident(bytes);
        in_use_bytes_ += bytes;
        result = {pagemap.chunk_address(b.index), !b.dirty};
      });
      return result;
    }

    // A large run went into fresh memory: the free blocks still resident
    // did not hold it, and their pages go back now rather than stay beside
    // it until a decay (config::FRESH_RUN_RELEASE_BYTES), as do those of the
    // runs in quarantine, which stay there.  A lock round of its own, as it
    // is rare: such a run faults in 2,048 pages or more.
    SNMALLOC_SLOW_PATH void release_beside_fresh_run() noexcept
    {
      uint32_t taken = Buddy::NONE;
      locked_then_decay([&] {
        size_t bytes = 0;
        if (free_resident_ != 0 && awaiting_ == 0)
          taken = take_all_decaying_locked(bytes);
        quarantine_.decommit_all(); // the checks build's freed runs
      });
      finish_decay(taken);
    }

    // extend_chunks' work, with the lock held.
    bool extend_chunks_locked(void* base, size_t bytes, size_t new_bytes) noexcept
    {
      bool dirty = false;
      size_t end = pagemap.chunk_index(base) + (bytes >> config::CHUNK_BITS);
      if (!buddy_.claim(end, (new_bytes - bytes) >> config::CHUNK_BITS, dirty))
        return false;
      if (!hand_out(end, new_bytes - bytes))
      {
        buddy_.dealloc_run(end, (new_bytes - bytes) >> config::CHUNK_BITS, !dirty);
        return false;
      }
      if (dirty)
        less_free_resident(new_bytes - bytes);
      in_use_bytes_ += new_bytes - bytes;
      return true;
    }

    // alloc_meta's work, with the lock held.
    void* alloc_meta_locked(size_t size) noexcept
    {
      size_t bucket = meta_bucket(size);
      // Again after a wait for decays, which lets other threads in.
      for (;;)
      {
        if (bucket < 8 && meta_recycled_[bucket] != nullptr)
        {
          FreeObject* p = meta_recycled_[bucket];
          meta_recycled_[bucket] = p->next_relaxed();
          std::memset(static_cast<void*>(p), 0, size);
          return p;
        }
        if (meta_cursor_ + size <= meta_end_)
          break;
        if (!ensure_init_locked())
          return nullptr;
        size_t block = bits::next_pow2(size < config::CHUNK_SIZE ? config::CHUNK_SIZE : size);
        Buddy::Block b = buddy_.alloc(bits::log2_floor(block) - config::CHUNK_BITS);
        if (!b.ok && decaying_ != 0)
        {
          await_decays_locked();
          continue;
        }
        if (!b.ok && release_quarantine_locked())
          continue;
        if (!b.ok)
          return nullptr;
        if (!hand_out(b.index, block))
        {
          buddy_.dealloc(b.index, bits::log2_floor(block) - config::CHUNK_BITS, !b.dirty);
          return nullptr;
        }
        void* base = pagemap.chunk_address(b.index);
        if (b.dirty)
          std::memset(base, 0, block);
        pagemap.entries[b.index].set(make_tag(ChunkKind::Meta, 0), 0);
        meta_cursor_ = reinterpret_cast<uintptr_t>(base);
        meta_end_ = meta_cursor_ + block;
        in_use_bytes_ += block;
        meta_bytes_ += block;
        break;
      }
      void* p = reinterpret_cast<void*>(meta_cursor_);
      meta_cursor_ += size;
      return p;
    }

  public:
    // A run of `bytes` (a multiple of CHUNK_SIZE) aligned to `align` (a
    // power of two; at least CHUNK_SIZE is implied), for a slab or other
    // fixed-size use.  The caller sets its pagemap entries.
    Chunks alloc_chunks(size_t bytes, size_t align) noexcept
    {
      return alloc_chunks_by(Buddy::Fit::Warm, bytes, align, 0, 0);
    }

    // The same for a large object, packed among free chunks, or when it is
    // `growing` (realloc moves it) placed low with room after it to grow
    // into (Buddy::Fit).  The checks build leaves the first `guard_before`
    // and the last `guard_after` bytes inaccessible, and places every run
    // low, never packed: packed among slabs, a run's object lay 1 MiB past
    // a small object, where that build promises a stray write faults.
    Chunks alloc_large_chunks(
      size_t bytes, size_t align, bool growing, size_t guard_before = 0, size_t guard_after = 0) noexcept
    {
      Buddy::Fit fit = growing || config::checks ? Buddy::Fit::Low : Buddy::Fit::Packed;
      Chunks result = alloc_chunks_by(fit, bytes, align, guard_before, guard_after);
      if (SNMALLOC_UNLIKELY(result.zeroed && bytes >= config::FRESH_RUN_RELEASE_BYTES))
        release_beside_fresh_run();
      return result;
    }

    // Give back `bytes` from `base`: a run from alloc_chunks, or part of
    // one.  Its pagemap entries must already be cleared by the caller.
    // `clean`: its pages were just replaced and read as zero.  Its first
    // word takes the freed run's mark (ds/encoded_link.h), one store to a
    // line the program has likely just used; the checks build makes the
    // run inaccessible instead.  A run whose pages realloc moved out
    // (large_run::move_pages), or a clean one, takes a page for it, which
    // the range's next user would touch anyway: a loop that moves a 5 MiB
    // block and callocs as much had the same page faults and peak RSS.  A
    // clean run stays clean but for its mark, cleared when it is handed out
    // again (backend/block_marks.h).
    void dealloc_chunks(void* base, size_t bytes, bool clean = false) noexcept
    {
      constexpr bool marked = !config::checks;
      if constexpr (config::checks)
        (void)Pal::protect(base, bytes);
      else
        *static_cast<uintptr_t*>(base) = freed_run_mark(base);
      locked_then_decay([&] {
        buddy_.dealloc_run(pagemap.chunk_index(base), bytes >> config::CHUNK_BITS, clean, marked);
        if (!clean)
          free_resident_ += bytes;
        in_use_bytes_ -= bytes;
      });
    }

    // The checks build: give back the run [base, base+bytes) once it has
    // been in quarantine (backend/quarantine.h); `resident` of its bytes
    // may hold pages (the rest are guards).  Its pagemap entries must
    // already be cleared.
    void quarantine_chunks(void* base, size_t bytes, size_t resident) noexcept
    {
      (void)Pal::protect(base, bytes);
      locked_then_decay([&] {
        in_use_bytes_ -= bytes;
        free_resident_ += resident;
        quarantine_.add({pagemap.chunk_index(base), bytes >> config::CHUNK_BITS, resident});
        RunQuarantine::Run oldest;
        while (quarantine_.take_overflow(oldest))
          buddy_.dealloc_run(oldest.index, oldest.chunks);
      });
    }

    // Grow the run at `base` from `bytes` to `new_bytes` in place, if the
    // chunks after it are free.  Their contents are unspecified.
    bool extend_chunks(void* base, size_t bytes, size_t new_bytes) noexcept
    {
      bool extended = false;
      locked([&] { extended = extend_chunks_locked(base, bytes, new_bytes); });
      return extended;
    }

    // Zeroed, 64-byte aligned memory for allocator metadata.
    void* alloc_meta(size_t size) noexcept
    {
      void* meta = nullptr;
      locked([&] { meta = alloc_meta_locked(bits::align_up(size, 64)); });
      return meta;
    }

    // Recycle metadata of at most 512 bytes for a later alloc_meta of the same size.
    void dealloc_meta(void* p, size_t size) noexcept
    {
      size_t bucket = meta_bucket(bits::align_up(size, 64));
      LockGuard g(lock_);
      FreeObject* f = FreeObject::from(p);
      f->set_next(meta_recycled_[bucket]);
      meta_recycled_[bucket] = f;
    }

    struct Usage
    {
      size_t in_use_bytes; // chunks handed out, metadata blocks included
      size_t meta_bytes; // metadata blocks (slab descriptors, allocators)
      size_t dirty_free_bytes; // free chunks whose pages may be resident
    };

    // See SpinLock::free_within.
    bool lock_free_within(unsigned tries) noexcept
    {
      return lock_.free_within(tries);
    }

    // Chunks from the arena's base that may have been handed out (the
    // frontier only moves up): a walk of the pagemap (mem/chunk_walk.h)
    // stops there.
    size_t chunks_carved() noexcept
    {
      LockGuard g(lock_);
      return initialised_ ? buddy_.chunks_carved() : 0;
    }

    Usage usage() noexcept
    {
      LockGuard g(lock_);
      return {in_use_bytes_, meta_bytes_, initialised_ ? buddy_.dirty_bytes() : 0};
    }

    // Every free page that may be resident back to the OS now, not at its
    // decay (malloc_trim), the quarantined runs' too; the bytes decommitted.
    size_t release_free_pages() noexcept
    {
      size_t bytes = 0;
      uint32_t decaying;
      void* overwritten;
      {
        LockGuard g(lock_);
        if (!initialised_)
          return 0;
        decaying = Buddy::NONE;
        if (awaiting_ == 0) // else a later call returns these pages
          decaying = take_all_decaying_locked(bytes);
        bytes += quarantine_.decommit_all();
        overwritten = buddy_.take_overwritten();
      }
      finish_decay(decaying);
      report_if_overwritten(overwritten);
      // Others' decays too: their pages are back when this returns.
      LockGuard g(lock_);
      await_decays_locked();
      return bytes;
    }

    // fork(): hold the lock across the fork so the child sees consistent
    // lists, once no decay has blocks off them.
    void prefork() noexcept
    {
      lock_.lock();
      await_decays_locked();
      lock_.pass_to_fork();
    }

    void postfork() noexcept
    {
      lock_.release_after_fork();
    }

    // The child's only thread waits for nothing, though other threads of
    // the parent were waiting for decays at the fork: with their count
    // kept, the child would never decay.
    void postfork_child() noexcept
    {
      awaiting_ = 0;
      lock_.release_after_fork();
    }
  };

  inline Backend backend;

  // Point every chunk entry of [base, base+size) at (owner, meta).
  inline void set_chunk_entries(void* base, size_t size, uintptr_t owner, uintptr_t meta)
  {
    size_t first = pagemap.chunk_index(base);
    for (size_t i = 0; i < (size >> config::CHUNK_BITS); i++)
      pagemap.entries[first + i].set(owner, meta);
  }
} // namespace snmalloc
