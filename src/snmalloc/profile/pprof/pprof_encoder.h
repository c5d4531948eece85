#pragma once
// Layer profile/pprof: the encode stage. Turns the dump's buckets (one per
// distinct stack and object size) into pprof's Profile message, as laid
// down by google/pprof proto/profile.proto; field numbers are below.
//
//   samples      one per bucket: [alloc_objects, alloc_space, inuse_objects,
//                inuse_space], location ids innermost first, labels bytes=N,
//                requested=N (bytes) and, on rows of live objects, thread=N
//                (the allocating thread's OS id); and the allocation labels
//                in force at the sample (core/label_sets.h), as string labels
//   locations    one per distinct return address; address = return - 1,
//                so it points into the call instruction
//   functions    one per distinct name: name demangled, system_name as in
//                the symbol table (mangled, for C++)
//   mappings     executable segments of the loaded objects, main first
//   strings      each once; string_table[0] == ""
//
// Function names vs. file:line. pprof's symbolizer (google/pprof
// internal/symbolizer, newMapping) leaves alone every mapping that has
// has_functions, has_filenames or has_line_numbers set, unless run with
// -symbolize=force; a mapping it does symbolize has each location's lines
// *replaced* by what it finds in the binary. `go tool pprof` (Go 1.19,
// cmd/pprof objTool) finds those with Go's own DWARF reader, which takes a
// function's name from DW_AT_name of the DIE holding its code range
// ("TODO: AT_linkage_name"); for C++ functions in a namespace or class that
// DIE has only DW_AT_specification, so they come back nameless (shown as
// "[binary]"), snmalloc:: frames included, which defeats drop_frames.
// Measured in the tests: file:line appear, namespaced names vanish.
// So has_functions is set: by default pprof shows the names written here,
// and `-symbolize=force` still gets file:line from a binary with debug info
// (with Go's pprof: names of global functions only; the standalone pprof
// uses llvm-symbolizer/addr2line and keeps both). has_filenames and
// has_line_numbers stay false: this profile carries neither.
//
// Names. system_name is the symbol (mangled) and name its demangled form,
// as profile.proto describes them. pprof leaves a name that differs from
// the system name as it is; were both the demangled text, its "looks like
// C++" heuristics would strip parameters from some names only (measured:
// "f()" stays, "(anonymous namespace)::g()" becomes "::g").

#include "../base/float_math.h"
#include "protobuf_writer.h"
#include "../core/label_sets.h"
#include "../core/sample_mode.h"
#include "../symbols/allocator_frames.h"
#include "../symbols/symbolize.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace snmalloc::profile
{
  // One row of the profile: all samples with the same stack and object size.
  struct ProfileBucket
  {
    const uintptr_t* frames; // Return addresses, allocation site first.
    uint32_t depth;
    uint64_t object_size; // Bytes each object occupies (the `bytes` label).
    // Unbiased estimates; rounded to integers when encoded.
    double alloc_objects, alloc_bytes, inuse_objects, inuse_bytes;
    // Bytes each allocation asked for (the `requested` label); 0: unknown.
    uint64_t requested_size = 0;
    // OS id of the allocating thread (the `thread` label); 0: unknown.
    uint64_t thread_id = 0;
    uint32_t labels = NO_LABELS; // the allocation labels' set
  };

  struct ProfileHeader
  {
    uint64_t period; // The rate: R bytes, or N allocations.
    int64_t time_nanos; // Wall clock of the dump.
    int64_t duration_nanos; // Since profiling started (0 if unknown).
    uint64_t samples_dropped; // Out of memory; said in a comment when not 0.
    SampleMode mode = SampleMode::Bytes; // Said by the period type and a comment.
    // What pprof shows unless told otherwise (/debug/pprof/allocs: alloc_space).
    const char* default_sample_type = "inuse_space";
    // Samples taken under a label set that lost labels; said in a comment.
    uint64_t labels_truncated = 0;
  };

  namespace detail
  {
    // Field numbers of profile.proto, only those written here.
    namespace profile_field
    {
      constexpr uint32_t sample_type = 1, sample = 2, mapping = 3,
                         location = 4, function = 5, string_table = 6,
                         drop_frames = 7, time_nanos = 9, duration_nanos = 10,
                         period_type = 11, period = 12, comment = 13,
                         default_sample_type = 14;
    }
    namespace value_type_field
    {
      constexpr uint32_t type = 1, unit = 2;
    }
    namespace sample_field
    {
      constexpr uint32_t location_id = 1, value = 2, label = 3;
    }
    namespace label_field
    {
      constexpr uint32_t key = 1, str = 2, num = 3, num_unit = 4;
    }
    namespace mapping_field
    {
      constexpr uint32_t id = 1, memory_start = 2, memory_limit = 3,
                         file_offset = 4, filename = 5, build_id = 6,
                         has_functions = 7;
    }
    namespace location_field
    {
      constexpr uint32_t id = 1, mapping_id = 2, address = 3, line = 4;
    }
    namespace line_field
    {
      constexpr uint32_t function_id = 1;
    }
    namespace function_field
    {
      constexpr uint32_t id = 1, name = 2, system_name = 3;
    }

    // Every string once, indexed by position; index 0 is "".
    class StringTable
    {
      std::deque<std::string> strings; // A deque keeps elements in place.
      std::unordered_map<std::string_view, int64_t> index_of;

    public:
      StringTable()
      {
        intern("");
      }

      int64_t intern(std::string_view text)
      {
        auto found = index_of.find(text);
        if (found != index_of.end())
          return found->second;
        int64_t index = static_cast<int64_t>(strings.size());
        strings.emplace_back(text);
        index_of.emplace(strings.back(), index);
        return index;
      }

      void write(ProtobufWriter& writer) const
      {
        for (const std::string& text : strings)
          writer.bytes_field(profile_field::string_table, text.data(), text.size());
      }
    };

    // The heap profile's encoder; the parts every profile shares (strings,
    // locations, mappings, functions, the header fields) are protected,
    // for encoders of other sample types (lifetime_encoder.h).
    class PprofEncoder
    {
    protected:
      ProtobufWriter writer;
      StringTable strings;

      // Location ids are positions in return_addresses, plus one.
      std::vector<uintptr_t> return_addresses;
      std::unordered_map<uintptr_t, uint64_t> location_of_address;

      // Buckets of one stack usually share its frames array (the stack
      // table stores each stack once), so a stack's location ids are worked
      // out once and reused; a hash lookup per frame per bucket would be
      // most of the encoding time.
      struct StackLocations
      {
        size_t first; // Index into location_ids.
        uint32_t depth;
      };
      std::vector<uint64_t> location_ids;
      std::unordered_map<const uintptr_t*, StackLocations> stacks;

      const uint64_t* stack_locations(const uintptr_t* frames, uint32_t depth)
      {
        auto cached = stacks.find(frames);
        if (cached != stacks.end() && cached->second.depth == depth)
          return &location_ids[cached->second.first];

        size_t first = location_ids.size();
        for (uint32_t i = 0; i < depth; i++)
        {
          uintptr_t address = frames[i];
          auto [entry, inserted] =
            location_of_address.try_emplace(address, return_addresses.size() + 1);
          if (inserted)
            return_addresses.push_back(address);
          location_ids.push_back(entry->second);
        }
        stacks.insert_or_assign(frames, StackLocations{first, depth});
        return &location_ids[first];
      }

      void write_value_type(uint32_t field, std::string_view type, std::string_view unit)
      {
        size_t message = writer.begin_message(field);
        writer.int64_field(value_type_field::type, strings.intern(type));
        writer.int64_field(value_type_field::unit, strings.intern(unit));
        writer.end_message(message);
      }

      struct LabelKeys
      {
        int64_t bytes, requested, unit, thread;
      };

      // `unit` 0 (the empty string) leaves it to pprof, which takes a
      // label named "bytes" as bytes; others need it said.
      void write_label(int64_t key, uint64_t num, int64_t unit)
      {
        size_t label = writer.begin_message(sample_field::label);
        writer.int64_field(label_field::key, key);
        writer.int64_field(label_field::num, static_cast<int64_t>(num));
        if (unit != 0)
          writer.int64_field(label_field::num_unit, unit);
        writer.end_message(label);
      }

      void write_label(int64_t key, std::string_view text)
      {
        size_t label = writer.begin_message(sample_field::label);
        writer.int64_field(label_field::key, key);
        writer.int64_field(label_field::str, strings.intern(text));
        writer.end_message(label);
      }

      // Per label set, its labels' (key, value) string indices, worked out
      // once: label_strings[first, first + 2 * count).
      struct SetStrings
      {
        size_t first, count;
      };
      std::vector<int64_t> label_strings;
      std::unordered_map<uint32_t, SetStrings> set_strings;

      void write_allocation_labels(uint32_t set)
      {
        if (set == NO_LABELS)
          return;
        auto [found, inserted] = set_strings.try_emplace(set, SetStrings{label_strings.size(), 0});
        SetStrings& at = found->second;
        if (inserted)
        {
          label_sets.for_each_label(set, [&](std::string_view key, std::string_view value) {
            label_strings.push_back(strings.intern(key));
            label_strings.push_back(strings.intern(value));
            at.count++;
          });
        }
        for (size_t i = 0; i < at.count; i++)
        {
          size_t label = writer.begin_message(sample_field::label);
          writer.int64_field(label_field::key, label_strings[at.first + 2 * i]);
          writer.int64_field(label_field::str, label_strings[at.first + 2 * i + 1]);
          writer.end_message(label);
        }
      }

      void write_sample(const ProfileBucket& bucket, const LabelKeys& keys)
      {
        const uint64_t* locations = stack_locations(bucket.frames, bucket.depth);
        const int64_t values[] = {
          round_of(bucket.alloc_objects),
          round_of(bucket.alloc_bytes),
          round_of(bucket.inuse_objects),
          round_of(bucket.inuse_bytes)};

        size_t sample = writer.begin_message(profile_field::sample);
        writer.packed_varint_field(sample_field::location_id, locations, bucket.depth);
        writer.packed_varint_field(sample_field::value, values, 4);
        write_label(keys.bytes, bucket.object_size, 0);
        if (bucket.requested_size != 0)
          write_label(keys.requested, bucket.requested_size, keys.unit);
        if (bucket.thread_id != 0)
          write_label(keys.thread, bucket.thread_id, 0);
        write_allocation_labels(bucket.labels);
        writer.end_message(sample);
      }

      // Writes the mappings; returns them as (start, limit, id) sorted by
      // start, for finding each location's mapping.
      struct MappingRange
      {
        uint64_t start, limit, id;
      };
      std::vector<MappingRange> write_mappings(const std::vector<ProcessMapping>& mappings)
      {
        std::vector<MappingRange> ranges;
        ranges.reserve(mappings.size());
        for (size_t i = 0; i < mappings.size(); i++)
        {
          const ProcessMapping& mapping = mappings[i];
          uint64_t id = i + 1;
          size_t message = writer.begin_message(profile_field::mapping);
          writer.uint64_field(mapping_field::id, id);
          writer.uint64_field(mapping_field::memory_start, mapping.start);
          writer.uint64_field(mapping_field::memory_limit, mapping.limit);
          writer.uint64_field(mapping_field::file_offset, mapping.file_offset);
          writer.int64_field(mapping_field::filename, strings.intern(mapping.path));
          writer.int64_field(mapping_field::build_id, strings.intern(mapping.build_id));
          // See the top of this file.
          writer.bool_field(mapping_field::has_functions, true);
          writer.end_message(message);
          ranges.push_back({mapping.start, mapping.limit, id});
        }
        std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) {
          return a.start < b.start;
        });
        return ranges;
      }

      static uint64_t mapping_id(const std::vector<MappingRange>& ranges, uint64_t address)
      {
        auto after = std::upper_bound(
          ranges.begin(), ranges.end(), address, [](uint64_t a, const MappingRange& r) {
            return a < r.start;
          });
        if (after == ranges.begin() || address >= std::prev(after)->limit)
          return 0;
        return std::prev(after)->id;
      }

      // Writes a Location per distinct return address and a Function per
      // distinct name.
      void write_locations_and_functions(
        const std::vector<ProcessMapping>& mappings, const std::vector<MappingRange>& ranges)
      {
        Symbolizer symbolizer(mappings);
        // (name, system_name) string indices, one per function id - 1. The
        // name follows from the system name, which is the key.
        std::vector<std::pair<int64_t, int64_t>> functions;
        std::unordered_map<int64_t, uint64_t> function_of_system_name;
        for (size_t i = 0; i < return_addresses.size(); i++)
        {
          // Return address - 1 lies in the call instruction, so it belongs
          // to the caller's function and line even when the call is last.
          uint64_t address = return_addresses[i] == 0 ? 0 : return_addresses[i] - 1;
          size_t message = writer.begin_message(profile_field::location);
          writer.uint64_field(location_field::id, i + 1);
          writer.uint64_field(location_field::mapping_id, mapping_id(ranges, address));
          writer.uint64_field(location_field::address, address);
          const FunctionName& function = symbolizer.function_name(address);
          if (!function.name.empty())
          {
            int64_t system_name = strings.intern(function.system_name);
            auto [entry, inserted] =
              function_of_system_name.try_emplace(system_name, functions.size() + 1);
            if (inserted)
              functions.emplace_back(strings.intern(function.name), system_name);
            size_t line = writer.begin_message(location_field::line);
            writer.uint64_field(line_field::function_id, entry->second);
            writer.end_message(line);
          }
          writer.end_message(message);
        }

        for (size_t i = 0; i < functions.size(); i++)
        {
          size_t message = writer.begin_message(profile_field::function);
          writer.uint64_field(function_field::id, i + 1);
          writer.int64_field(function_field::name, functions[i].first);
          writer.int64_field(function_field::system_name, functions[i].second);
          writer.end_message(message);
        }
      }

      static std::string mode_comment(const ProfileHeader& header)
      {
        std::string n = std::to_string(header.period);
        switch (header.mode)
        {
          case SampleMode::Count:
            return "sampling mode: count, each allocation with probability 1/" + n;
          case SampleMode::SizeClass:
            return "sampling mode: sizeclass, one in every " + n +
              " allocations of each sizeclass";
          default:
            return "sampling mode: bytes, Poisson with a mean interval of " + n + " bytes";
        }
      }

    public:
      explicit PprofEncoder(std::vector<uint8_t>& out) : writer(out) {}

      void encode(const ProfileHeader& header, const ProfileBucket* buckets, size_t count)
      {
        write_value_type(profile_field::sample_type, "alloc_objects", "count");
        write_value_type(profile_field::sample_type, "alloc_space", "bytes");
        write_value_type(profile_field::sample_type, "inuse_objects", "count");
        write_value_type(profile_field::sample_type, "inuse_space", "bytes");

        // Samples are most of a profile: room for them up front spares
        // copying megabytes through repeated growth. A location id takes
        // at most 3 bytes below 2^21 locations; the rest of a sample
        // (values, three labels, lengths) at most 96.
        size_t sample_bytes = 0;
        for (size_t i = 0; i < count; i++)
          sample_bytes += size_t{buckets[i].depth} * 3 + 96;
        writer.reserve(sample_bytes);

        LabelKeys keys{
          strings.intern("bytes"),
          strings.intern("requested"),
          strings.intern("bytes"),
          strings.intern("thread")};
        for (size_t i = 0; i < count; i++)
          write_sample(buckets[i], keys);
        write_stacks_and_header(header);
      }

    protected:
      // Everything after the samples: their locations, functions and
      // mappings, the header fields, the strings.
      void write_stacks_and_header(const ProfileHeader& header)
      {
        std::vector<ProcessMapping> mappings = read_process_mappings();
        write_locations_and_functions(mappings, write_mappings(mappings));

        writer.int64_field(profile_field::drop_frames, strings.intern(allocator_frames_regex));
        writer.int64_field(profile_field::time_nanos, header.time_nanos);
        writer.int64_field(profile_field::duration_nanos, header.duration_nanos);
        // pprof shows the period with its type ("space 524288 bytes",
        // "objects 8192 count"); the comment says what it means.
        if (header.mode == SampleMode::Bytes)
          write_value_type(profile_field::period_type, "space", "bytes");
        else
          write_value_type(profile_field::period_type, "objects", "count");
        writer.uint64_field(profile_field::period, header.period);
        writer.int64_field(profile_field::comment, strings.intern(mode_comment(header)));
        if (header.samples_dropped != 0)
        {
          std::string note = "samples dropped (out of memory): " +
            std::to_string(header.samples_dropped);
          writer.int64_field(profile_field::comment, strings.intern(note));
        }
        if (header.labels_truncated != 0)
        {
          std::string note = "samples whose allocation labels were truncated (at most " +
            std::to_string(MAX_LABEL_KEYS) + " labels, keys and values of " +
            std::to_string(MAX_LABEL_TEXT) + " bytes, " + std::to_string(MAX_LABEL_SETS) +
            " label sets): " + std::to_string(header.labels_truncated);
          writer.int64_field(profile_field::comment, strings.intern(note));
        }
        writer.int64_field(profile_field::default_sample_type, strings.intern(header.default_sample_type));
        strings.write(writer);
      }
    };
  } // namespace detail

  // Appends the uncompressed pprof encoding of the buckets to `out`.
  inline void encode_pprof(
    const ProfileHeader& header,
    const ProfileBucket* buckets,
    size_t count,
    std::vector<uint8_t>& out)
  {
    detail::PprofEncoder(out).encode(header, buckets, count);
  }
} // namespace snmalloc::profile
