#pragma once
// Umbrella of layer profile: heap profiling.  Included by the allocator
// (global/config_profiler.h) only when SNMALLOC_PROFILE is on.  Includes
// mem, backend, ds, pal and ds_core; nothing in those includes it.
//
// Pipeline, one file per stage:
//   decide    sample_mode.h     bytes, count, sizeclass: rates and weights
//             sampler.h         where the next sample falls, free-list split
//   record    stack_capture.h   libunwind raw return addresses
//             stack_table.h     interned stacks, sites + cumulative counts
//             hash_index.h      its hash indexes
//   keep      sample_list.h     per-allocator live sample lists
//             peak_profile.h    the live samples at the heap's peak
//             dump_triggers.h   dump_every= and dump_on_growth= thresholds
//             profile_pool.h    the secondary allocator for sampled objects
//             guarded_slots.h   sampled objects against inaccessible pages
//   report    guard_report.h    what a fault in a guarded slot was, on stderr
//             signal_symbolize.h  function names without malloc, for it
//             guard_signal.h    the SIGSEGV handler, chained
//   hooks     profiler.h        what the allocator calls
//   snapshot  live_samples.h    copy under locks
//             snapshot.h        unbias, aggregate
//   encode    pprof_encoder.h, protobuf_writer.h, symbolize.h
//   write     dump_file.h       gzip, temp file + rename
//   API       control.h         start / stop / is_active / dump / dump_peak
//             leak_report.h     live sites as text, for stderr at exit
//   serve     http_server.h     the HTTP endpoint's thread (not included
//                               here: override/http_endpoint.h starts it)
//             http_request.h, http_address.h, text_view.h   parsing
//             http_routes.h     /debug/pprof/..., /metrics
//             profile_delta.h   heap?seconds=N
//             metrics_page.h, prometheus_text.h   /metrics
#include "control.h"
#include "leak_report.h"
