#pragma once
// Layer profile/pprof: the lifetime profile's encoding.  Same stacks,
// mappings and header as the heap profile (pprof_encoder.h); other sample
// types and labels:
//
//   freed_objects/count       objects freed (weighted: the program's)
//   lifetime/nanoseconds      their summed lifetimes, so `-mean` with this
//                             type gives the mean lifetime per site
//   live_objects/count        objects alive at the dump (censored: their
//                             lifetime is not known yet)
//   live_age/nanoseconds      their summed ages
//
// A row of freed objects has labels lifetime=<bucket> ("<1us" .. ">=1h")
// and freed_by=same_thread or freed_by=other_thread; a row of live ones,
// age=<bucket>.  Both have bytes=N, the site's object size, and the site's
// allocation labels.

#include "pprof_encoder.h"

namespace snmalloc::profile
{
  // One row: a site's freed objects in one (bucket, freeing thread) cell,
  // or its live objects of one age bucket.
  struct LifetimeRow
  {
    const uintptr_t* frames; // Return addresses, allocation site first.
    uint32_t depth;
    uint64_t object_size;
    uint32_t bucket; // index into LIFETIME_BUCKET_NAMES
    bool live; // live objects (age) rather than freed ones (lifetime)
    bool freed_by_other_thread;
    double objects; // weighted, rounded when encoded
    double total_ns; // summed lifetimes or ages, weighted
    uint32_t labels = NO_LABELS; // the allocation labels' set
  };

  namespace detail
  {
    class LifetimeEncoder : PprofEncoder
    {
      struct Keys
      {
        int64_t bytes, lifetime, age, freed_by;
      };

      void write_row(const LifetimeRow& row, const char* const* bucket_names, const Keys& keys)
      {
        const uint64_t* locations = stack_locations(row.frames, row.depth);
        int64_t objects = round_of(row.objects), total = round_of(row.total_ns);
        const int64_t values[] = {
          row.live ? 0 : objects, row.live ? 0 : total, row.live ? objects : 0, row.live ? total : 0};
        size_t sample = writer.begin_message(profile_field::sample);
        writer.packed_varint_field(sample_field::location_id, locations, row.depth);
        writer.packed_varint_field(sample_field::value, values, 4);
        write_label(keys.bytes, row.object_size, 0);
        if (row.live)
        {
          write_label(keys.age, bucket_names[row.bucket]);
        }
        else
        {
          write_label(keys.lifetime, bucket_names[row.bucket]);
          write_label(keys.freed_by, row.freed_by_other_thread ? "other_thread" : "same_thread");
        }
        write_allocation_labels(row.labels);
        writer.end_message(sample);
      }

    public:
      explicit LifetimeEncoder(std::vector<uint8_t>& out) : PprofEncoder(out) {}

      void encode(
        const ProfileHeader& header,
        const LifetimeRow* rows,
        size_t count,
        const char* const* bucket_names)
      {
        write_value_type(profile_field::sample_type, "freed_objects", "count");
        write_value_type(profile_field::sample_type, "lifetime", "nanoseconds");
        write_value_type(profile_field::sample_type, "live_objects", "count");
        write_value_type(profile_field::sample_type, "live_age", "nanoseconds");
        Keys keys{
          strings.intern("bytes"),
          strings.intern("lifetime"),
          strings.intern("age"),
          strings.intern("freed_by")};
        for (size_t i = 0; i < count; i++)
          write_row(rows[i], bucket_names, keys);
        write_stacks_and_header(header);
      }
    };
  } // namespace detail

  // Appends the uncompressed pprof encoding of the rows to `out`; a row's
  // bucket names its label through `bucket_names`.
  inline void encode_lifetime_pprof(
    const ProfileHeader& header,
    const LifetimeRow* rows,
    size_t count,
    const char* const* bucket_names,
    std::vector<uint8_t>& out)
  {
    detail::LifetimeEncoder(out).encode(header, rows, count, bucket_names);
  }
} // namespace snmalloc::profile
