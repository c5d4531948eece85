#pragma once
// A protobuf reader for the tests: decodes a message into its fields, so
// tests can check the encoding independently of pprof.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace snmalloc_test
{
  // One field of a decoded message: a varint, or the bytes of a
  // length-delimited field.
  struct Field
  {
    uint64_t varint = 0;
    std::string bytes;
  };
  using Message = std::multimap<uint32_t, Field>;

  // Fails the test on malformed input.
  Message decode(const std::string& data);

  // Every field `number`, in order.
  std::vector<Field> all(const Message& message, uint32_t number);
  // The one field `number`; fails the test unless there is exactly one.
  const Field& only(const Message& message, uint32_t number);
  // The varint field `number`, or 0 (proto3's default) when absent.
  uint64_t varint_of(const Message& message, uint32_t number);
  // The values of packed repeated varint field `number`.
  std::vector<uint64_t> packed(const Message& message, uint32_t number);
}
