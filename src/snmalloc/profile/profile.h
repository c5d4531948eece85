#pragma once
// Umbrella of layer profile: heap profiling.  Included by the allocator
// (global/config_profiler.h) only when SNMALLOC_PROFILE is on; nothing in
// mem, backend, ds, pal or ds_core includes anything of profile/.
//
// One sub-folder per job, bottom-up; src/snmalloc/README.md says which may
// include which (a test enforces it):
//
//   base/     float_math.h (libm's few functions), text_view.h (parsing)
//   core/     decide: settings.h (start/stop state), sample_mode.h (what
//             a rate means, what a sample weighs), sampler.h (where the
//             next sample falls: the free-list split at refill),
//             label_sets.h (allocation labels: interned sets),
//             thread_labels.h (each thread's stack of them)
//   stacks/   record: stack_capture.h (the walk: own .eh_frame walker on
//             x86-64), frame_rule_cache.h (its per-address rule cache),
//             permanent_code.h (the code that is never unloaded, whose
//             cached rules need no unload check), frame_rules.h (a
//             frame's rule from its FDE), library_walkers.h (libunwind's
//             unw_backtrace where the build chose it or has no built-in
//             walker, libgcc's _Unwind_Backtrace otherwise and as the
//             fallback), stack_table.h + hash_index.h (interned stacks,
//             sites with cumulative counts)
//   samples/  keep: sample_list.h (per-allocator live samples),
//             sample_life.h (a sample taken and ended),
//             profile_pool.h (the secondary allocator), live_samples.h
//             (copy under locks), peak_profile.h, dump_triggers.h,
//             event_stream.h (the raw stream), lifetime_stats.h (per
//             site, how long freed objects lived)
//   symbols/  symbolize.h (mappings, build IDs, names for dumps),
//             signal_symbolize.h (names without malloc, for fault reports)
//   guard/    guarded_slots.h, guarded_free.h, guard_report.h,
//             guard_signal.h
//   pprof/    encode and write: protobuf_writer.h, pprof_encoder.h,
//             lifetime_encoder.h, profile_delta.h, dump_file.h (gzip,
//             or plain without zlib; temp file + rename),
//             zlib_loader.h
//   footprint/ the footprint profile: resident_pages.h (mincore),
//             arena_residency.h (the arena by what holds it),
//             smaps_rows.h (the rest of the process), footprint_encoder.h,
//             footprint_profile.h (the rows, adding up to VmRSS)
//   (root)    profiler.h (the hooks CoreAlloc calls), snapshot.h
//             (unbias, aggregate), lifetime_profile.h (its rows),
//             control.h (start / stop / dump: the C++ API),
//             leak_report.h, this umbrella
//   http/     the HTTP endpoint (not included here: override/http_endpoint.h
//             starts it): http_server.h (start, stop, fork) over
//             http_poll_loop.h (the thread), http_connection.h (reading
//             a request, writing its response) and http_dispatch.h (the
//             handler's response); http_request.h, http_address.h
//             (parsers), http_routes.h, metrics_page.h, prometheus_text.h
//   config/   env_config.h: SNMALLOC_PROFILE parsed from the environment,
//             by the table of keys in env_keys.h
#include "control.h"
#include "leak_report.h"
