#pragma once
// Layer mem: the profiler contract as code.  A profiler policy P (NoProfiler,
// profile::Profiler) must provide every hook that CoreAlloc<P> and the
// global front call, with the argument types they call it with;
// profiler_contract_holds<P>() fails to compile naming the first hook P
// lacks.  What each hook is for, and when it is called, is listed in
// no_profiler.h.

#include "core_alloc.h"

#include <type_traits>

namespace snmalloc
{
  namespace contract_detail
  {
    template<typename T>
    T& ref();

    template<typename P>
    typename P::CoreState& state();

    inline void* const no_object = nullptr;

    // Well-formed when the call's type T is R.
    template<typename R, typename T>
    using Returns = std::enable_if_t<std::is_same_v<R, T>>;

    // One detector per hook: Hook<P, Core> names the call's type, and
    // has<Hook, P> is true when that call is well-formed.
    template<template<typename, typename> class Hook, typename P, typename = void>
    struct has : std::false_type
    {};

    template<template<typename, typename> class Hook, typename P>
    struct has<Hook, P, std::void_t<Hook<P, CoreAlloc<P>>>> : std::true_type
    {};

    template<typename P, typename Core>
    using Enabled = decltype(bool{P::enabled});

    // CoreState: per allocator, called from refill and the large path.
    template<typename P, typename Core>
    using SampleDue =
      Returns<bool, decltype(state<P>().sample_due(ref<Core>(), sizeclass_t{}))>;
    template<typename P, typename>
    using CountedBeforePoint =
      Returns<bool, decltype(state<P>().counted_before_point(sizeclass_t{}, size_t{}))>;
    template<typename P, typename Core>
    using Split =
      Returns<Batch, decltype(state<P>().split(ref<Core>(), sizeclass_t{}, Batch{}))>;
    template<typename P, typename Core>
    using AllocAtSamplePoint = Returns<
      void*,
      decltype(state<P>().alloc_at_sample_point(
        ref<Core>(), ref<FreeObject*>(), sizeclass_t{}, size_t{}, size_t{}))>;
    template<typename P, typename Core>
    using AllocLarge = Returns<
      void*,
      decltype(state<P>().alloc_large(ref<Core>(), size_t{}, size_t{}, bool{}))>;
    template<typename P, typename Core>
    using GrewInPlace = decltype(state<P>().grew_in_place(
      no_object, size_t{}, size_t{}, size_t{}, bool{}));
    template<typename P, typename Core>
    using Flush = decltype(state<P>().flush(ref<Core>()));
    template<typename P, typename Core>
    using HeldObjects =
      Returns<const FreeObject*, decltype(state<P>().held_objects(sizeclass_t{}))>;

    // Static hooks: the front's slow paths, fork, statistics.
    template<typename P, typename Core>
    using EnteredSlowPath = decltype(P::entered_slow_path(no_object));
    template<typename P, typename Core>
    using EnteredSamplePath = decltype(P::entered_sample_path(no_object, no_object));
    template<typename P, typename Core>
    using DeallocSampled = decltype(P::dealloc_sampled(no_object));
    template<typename P, typename Core>
    using SampledObject = Returns<ObjectExtent, decltype(P::sampled_object(no_object))>;
    template<typename P, typename Core>
    using StartsSample = Returns<bool, decltype(P::starts_sample(no_object))>;
    template<typename P, typename Core>
    using OwnBytes = Returns<size_t, decltype(P::own_bytes())>;
    template<typename P, typename Core>
    using SamplesDropped = Returns<uint64_t, decltype(P::samples_dropped())>;
    template<typename P, typename Core>
    using GuardedBytesOf = Returns<GuardedBytes, decltype(P::guarded_bytes())>;
    template<typename P, typename Core>
    using RecountPoolSlabs = decltype(P::recount_pool_slabs());
    template<typename P, typename Core>
    using VisitSamples = decltype(P::visit_samples(HeapVisitor{}));
    template<typename P, typename Core>
    using PushLabel = Returns<int, decltype(P::push_label(ref<const char*>(), ref<const char*>()))>;
    template<typename P, typename Core>
    using PopLabel = Returns<int, decltype(P::pop_label())>;
    template<typename P, typename Core>
    using Prefork = decltype(P::prefork());
    template<typename P, typename Core>
    using Postfork = decltype(P::postfork());
    template<typename P, typename Core>
    using PostforkChild = decltype(P::postfork_child());
  } // namespace contract_detail

  template<typename P>
  constexpr bool profiler_contract_holds()
  {
    using namespace contract_detail;
    static_assert(has<Enabled, P>::value, "profiler: static constexpr bool enabled");
    static_assert(has<SampleDue, P>::value, "profiler: CoreState::sample_due(Core&, sizeclass_t) -> bool");
    static_assert(
      has<CountedBeforePoint, P>::value,
      "profiler: CoreState::counted_before_point(sizeclass_t, size_t) -> bool");
    static_assert(has<Split, P>::value, "profiler: CoreState::split(Core&, sizeclass_t, Batch) -> Batch");
    static_assert(
      has<AllocAtSamplePoint, P>::value,
      "profiler: CoreState::alloc_at_sample_point(Core&, FreeObject*&, sizeclass_t, size_t, size_t) -> void*");
    static_assert(
      has<AllocLarge, P>::value, "profiler: CoreState::alloc_large(Core&, size_t, size_t, bool) -> void*");
    static_assert(
      has<GrewInPlace, P>::value,
      "profiler: CoreState::grew_in_place(void*, size_t, size_t, size_t, bool)");
    static_assert(has<Flush, P>::value, "profiler: CoreState::flush(Core&)");
    static_assert(
      has<HeldObjects, P>::value, "profiler: CoreState::held_objects(sizeclass_t) -> const FreeObject*");
    static_assert(
      std::is_constructible_v<typename P::AskedFor, size_t, size_t>,
      "profiler: AskedFor(size_t rounded, size_t asked)");
    static_assert(has<EnteredSlowPath, P>::value, "profiler: static entered_slow_path(void*)");
    static_assert(
      has<EnteredSamplePath, P>::value, "profiler: static entered_sample_path(void*, void*)");
    static_assert(has<DeallocSampled, P>::value, "profiler: static dealloc_sampled(void*)");
    static_assert(
      has<SampledObject, P>::value, "profiler: static sampled_object(const void*) -> ObjectExtent");
    static_assert(has<StartsSample, P>::value, "profiler: static starts_sample(const void*) -> bool");
    static_assert(has<OwnBytes, P>::value, "profiler: static own_bytes() -> size_t");
    static_assert(has<SamplesDropped, P>::value, "profiler: static samples_dropped() -> uint64_t");
    static_assert(has<GuardedBytesOf, P>::value, "profiler: static guarded_bytes() -> GuardedBytes");
    static_assert(has<RecountPoolSlabs, P>::value, "profiler: static recount_pool_slabs()");
    static_assert(has<VisitSamples, P>::value, "profiler: static visit_samples(HeapVisitor)");
    static_assert(
      has<PushLabel, P>::value, "profiler: static push_label(const char*, const char*) -> int");
    static_assert(has<PopLabel, P>::value, "profiler: static pop_label() -> int");
    static_assert(has<Prefork, P>::value, "profiler: static prefork()");
    static_assert(has<Postfork, P>::value, "profiler: static postfork()");
    static_assert(has<PostforkChild, P>::value, "profiler: static postfork_child()");
    return true;
  }

  static_assert(profiler_contract_holds<NoProfiler>());
} // namespace snmalloc
