#pragma once
// Layer profile/footprint: the footprint profile's encoding.  Same stacks,
// mappings and header as the heap profile (pprof/pprof_encoder.h); its
// sample types:
//
//   resident_space/bytes    resident bytes: a site's sampled objects by
//                           their resident pages, or a named row's
//   slab_waste_space/bytes  free bytes of the slabs a site's objects sit
//                           in, its share of its sizeclass's (0 on named
//                           rows)
//
// A named row (the allocator's own memory, a kind of mapping) is a sample
// of one location whose function is the name: pprof shows it as a frame.
// Its location and function ids start at NAMED_ID_BASE, clear of the
// stacks' ids, which count up from 1; it has no mapping and no address.

#include "../pprof/pprof_encoder.h"

#include <string>

namespace snmalloc::profile
{
  struct FootprintRow
  {
    // A site's stack (allocation site first), or none and a name.
    const uintptr_t* frames = nullptr;
    uint32_t depth = 0;
    std::string name;
    uint64_t object_size = 0; // the `bytes` label of a site's row
    double resident_bytes = 0; // rounded when encoded
    double slab_waste_bytes = 0;
  };

  namespace detail
  {
    class FootprintEncoder : PprofEncoder
    {
      static constexpr uint64_t NAMED_ID_BASE = uint64_t(1) << 32;
      uint64_t named_rows_ = 0;

      void write_named_location(uint64_t id, const std::string& name)
      {
        int64_t text = strings.intern(name);
        size_t function = writer.begin_message(profile_field::function);
        writer.uint64_field(function_field::id, id);
        writer.int64_field(function_field::name, text);
        writer.int64_field(function_field::system_name, text);
        writer.end_message(function);
        size_t location = writer.begin_message(profile_field::location);
        writer.uint64_field(location_field::id, id);
        size_t line = writer.begin_message(location_field::line);
        writer.uint64_field(line_field::function_id, id);
        writer.end_message(line);
        writer.end_message(location);
      }

      void write_row(const FootprintRow& row, int64_t bytes_key)
      {
        const int64_t values[] = {round_of(row.resident_bytes), round_of(row.slab_waste_bytes)};
        uint64_t named_id = 0;
        if (row.depth == 0)
        {
          named_id = NAMED_ID_BASE + named_rows_++;
          write_named_location(named_id, row.name);
        }
        size_t sample = writer.begin_message(profile_field::sample);
        if (row.depth == 0)
          writer.packed_varint_field(sample_field::location_id, &named_id, 1);
        else
          writer.packed_varint_field(
            sample_field::location_id, stack_locations(row.frames, row.depth), row.depth);
        writer.packed_varint_field(sample_field::value, values, 2);
        if (row.depth != 0)
          write_label(bytes_key, row.object_size, 0);
        writer.end_message(sample);
      }

    public:
      explicit FootprintEncoder(std::vector<uint8_t>& out) : PprofEncoder(out) {}

      void encode(
        const ProfileHeader& header, const FootprintRow* rows, size_t count, const std::string& note)
      {
        writer.int64_field(profile_field::comment, strings.intern(note));
        write_value_type(profile_field::sample_type, "resident_space", "bytes");
        write_value_type(profile_field::sample_type, "slab_waste_space", "bytes");
        int64_t bytes_key = strings.intern("bytes");
        for (size_t i = 0; i < count; i++)
          write_row(rows[i], bytes_key);
        write_stacks_and_header(header);
      }
    };
  } // namespace detail

  // Appends the uncompressed pprof encoding of the rows to `out`; `note`
  // is a comment (pprof -comments) before the header's.
  inline void encode_footprint_pprof(
    const ProfileHeader& header,
    const FootprintRow* rows,
    size_t count,
    const std::string& note,
    std::vector<uint8_t>& out)
  {
    detail::FootprintEncoder(out).encode(header, rows, count, note);
  }
} // namespace snmalloc::profile
