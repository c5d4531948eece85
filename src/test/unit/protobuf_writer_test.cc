// The wire bytes of the protobuf writer, checked against the encoding
// examples of the protobuf documentation and hand-worked cases.

#include <catch2/catch.hpp>
#include <snmalloc/profile/pprof/protobuf_writer.h>

using snmalloc::profile::ProtobufWriter;
using Bytes = std::vector<uint8_t>;

TEST_CASE("varint fields use 7 bits a byte, low group first", "[protobuf]")
{
  Bytes out;
  ProtobufWriter writer(out);
  writer.uint64_field(1, 150);
  CHECK(out == Bytes{0x08, 0x96, 0x01});

  out.clear();
  writer.uint64_field(1, 127);
  writer.uint64_field(1, 128);
  CHECK(out == Bytes{0x08, 0x7f, 0x08, 0x80, 0x01});

  out.clear();
  writer.uint64_field(2, UINT64_MAX);
  CHECK(out == Bytes{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
}

TEST_CASE("negative int64 is ten bytes of two's complement", "[protobuf]")
{
  Bytes out;
  ProtobufWriter writer(out);
  writer.int64_field(1, -1);
  CHECK(out == Bytes{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
}

TEST_CASE("zero scalars are omitted, empty strings are not", "[protobuf]")
{
  Bytes out;
  ProtobufWriter writer(out);
  writer.uint64_field(1, 0);
  writer.int64_field(2, 0);
  writer.bool_field(3, false);
  CHECK(out.empty());
  writer.bool_field(3, true);
  writer.bytes_field(6, "", 0);
  CHECK(out == Bytes{0x18, 0x01, 0x32, 0x00});
}

TEST_CASE("field numbers above 15 take a two-byte tag", "[protobuf]")
{
  Bytes out;
  ProtobufWriter writer(out);
  writer.uint64_field(16, 1);
  CHECK(out == Bytes{0x80, 0x01, 0x01});
}

TEST_CASE("strings are length-delimited", "[protobuf]")
{
  Bytes out;
  ProtobufWriter writer(out);
  writer.bytes_field(2, "testing", 7);
  CHECK(out == Bytes{0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'});
}

TEST_CASE("packed repeated varints share one length", "[protobuf]")
{
  Bytes out;
  ProtobufWriter writer(out);
  const uint64_t values[] = {3, 270, 86942};
  writer.packed_varint_field(4, values, 3);
  CHECK(out == Bytes{0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05});

  out.clear();
  const int64_t signed_values[] = {0, -1};
  writer.packed_varint_field(2, signed_values, 2);
  CHECK(
    out ==
    Bytes{0x12, 0x0b, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});

  out.clear();
  writer.packed_varint_field(4, values, 0);
  CHECK(out.empty());
}

TEST_CASE("short nested messages keep the one-byte length", "[protobuf]")
{
  Bytes out;
  ProtobufWriter writer(out);
  size_t message = writer.begin_message(3);
  writer.uint64_field(1, 150);
  writer.end_message(message);
  CHECK(out == Bytes{0x1a, 0x03, 0x08, 0x96, 0x01});

  out.clear();
  message = writer.begin_message(3);
  writer.end_message(message);
  CHECK(out == Bytes{0x1a, 0x00});
}

TEST_CASE("long nested messages move their body for a longer length", "[protobuf]")
{
  Bytes out;
  ProtobufWriter writer(out);
  out.push_back(0xaa); // Bytes before the message must stay as they are.
  const std::string text(200, 'x');

  // outer { 1: 7, inner { 2: text } } with both lengths above 127.
  size_t outer = writer.begin_message(5);
  writer.uint64_field(1, 7);
  size_t inner = writer.begin_message(4);
  writer.bytes_field(2, text.data(), text.size());
  writer.end_message(inner);
  writer.end_message(outer);

  // inner body: tag, length 200 (0xc8 0x01), text = 203 bytes.
  // outer body: 0x08 0x07, inner tag 0x22, length 203 (0xcb 0x01), body:
  // 208 bytes, length 0xd0 0x01.
  Bytes expected{0xaa, 0x2a, 0xd0, 0x01, 0x08, 0x07, 0x22, 0xcb, 0x01, 0x12, 0xc8, 0x01};
  expected.resize(expected.size() + text.size(), 'x'); // The text.
  REQUIRE(out.size() == expected.size());
  CHECK(out == expected);
}

TEST_CASE("varint_size agrees with the bytes written", "[protobuf]")
{
  for (uint64_t value :
       {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{16383},
        uint64_t{16384}, uint64_t{1} << 35, UINT64_MAX})
  {
    Bytes out;
    ProtobufWriter(out).varint(value);
    CHECK(out.size() == ProtobufWriter::varint_size(value));
  }
}
