#pragma once
// Layer profile/pprof: a minimal protocol-buffer writer, exactly what the pprof
// encoder needs.
//
// pprof's profile.proto uses only two wire types: varint (integers and
// bools) and length-delimited (strings, nested messages and packed repeated
// integers). Negative int64 values are written as their two's complement
// (10-byte varints), as protobuf does for `int64`; zigzag is never needed.
//
// Nested messages are written in place: begin_message() reserves one byte
// for the length, end_message() fills it in and, when the body turned out
// to be 128 bytes or longer, moves the body up to make room for the longer
// length varint. Only samples of deep stacks are that long, and moving a
// few hundred bytes once each costs less than sizing them beforehand.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace snmalloc::profile
{
  enum class WireType : uint8_t
  {
    Varint = 0,
    LengthDelimited = 2,
  };

  class ProtobufWriter
  {
    std::vector<uint8_t>& out;

    // Writes the varint of `value` at `at`; returns the bytes used.
    static size_t put_varint(uint8_t* at, uint64_t value)
    {
      size_t used = 0;
      while (value >= 0x80)
      {
        at[used++] = static_cast<uint8_t>(value | 0x80);
        value >>= 7;
      }
      at[used++] = static_cast<uint8_t>(value);
      return used;
    }

  public:
    explicit ProtobufWriter(std::vector<uint8_t>& destination)
    : out(destination)
    {}

    // Makes room for `additional` more bytes at once.
    void reserve(size_t additional)
    {
      out.reserve(out.size() + additional);
    }

    static size_t varint_size(uint64_t value)
    {
      size_t size = 1;
      while (value >= 0x80)
      {
        value >>= 7;
        size++;
      }
      return size;
    }

    void varint(uint64_t value)
    {
      while (value >= 0x80)
      {
        out.push_back(static_cast<uint8_t>(value | 0x80));
        value >>= 7;
      }
      out.push_back(static_cast<uint8_t>(value));
    }

    void tag(uint32_t field, WireType type)
    {
      varint((uint64_t{field} << 3) | static_cast<uint8_t>(type));
    }

    // Scalar fields are omitted when zero: zero is proto3's default value,
    // so a reader sees the same message either way.
    void uint64_field(uint32_t field, uint64_t value)
    {
      if (value == 0)
        return;
      tag(field, WireType::Varint);
      varint(value);
    }

    void int64_field(uint32_t field, int64_t value)
    {
      uint64_field(field, static_cast<uint64_t>(value));
    }

    void bool_field(uint32_t field, bool value)
    {
      uint64_field(field, value ? 1 : 0);
    }

    // Strings and bytes; always written, because an empty string may be a
    // meaningful element of a repeated field (pprof's string_table[0]).
    void bytes_field(uint32_t field, const void* data, size_t length)
    {
      tag(field, WireType::LengthDelimited);
      varint(length);
      const auto* bytes = static_cast<const uint8_t*>(data);
      out.insert(out.end(), bytes, bytes + length);
    }

    // Packed repeated integers: one length-delimited field holding the
    // varints back to back. Written only when there is at least one value.
    template<typename Integer>
    void packed_varint_field(uint32_t field, const Integer* values, size_t count)
    {
      static_assert(sizeof(Integer) == sizeof(uint64_t), "64-bit values only");
      if (count == 0)
        return;
      size_t body = 0;
      for (size_t i = 0; i < count; i++)
        body += varint_size(static_cast<uint64_t>(values[i]));
      tag(field, WireType::LengthDelimited);
      varint(body);

      size_t at = out.size();
      out.resize(at + body);
      for (size_t i = 0; i < count; i++)
        at += put_varint(&out[at], static_cast<uint64_t>(values[i]));
    }

    // Starts a nested message; pass the result to end_message().
    [[nodiscard]] size_t begin_message(uint32_t field)
    {
      tag(field, WireType::LengthDelimited);
      out.push_back(0); // Length placeholder, one byte.
      return out.size();
    }

    void end_message(size_t body_start)
    {
      uint64_t body = out.size() - body_start;
      size_t length_size = varint_size(body);
      if (length_size > 1)
        out.insert(out.begin() + static_cast<ptrdiff_t>(body_start), length_size - 1, 0);
      put_varint(&out[body_start - 1], body);
    }
  };
} // namespace snmalloc::profile
