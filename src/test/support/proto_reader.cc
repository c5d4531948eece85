#include "support/proto_reader.h"

#include <catch2/catch.hpp>

namespace snmalloc_test
{
  namespace
  {
    uint64_t read_varint(const std::string& data, size_t& at)
    {
      uint64_t value = 0;
      for (int shift = 0; shift < 64; shift += 7)
      {
        if (at >= data.size())
          FAIL("varint runs past the end of its message");
        uint8_t byte = static_cast<uint8_t>(data[at++]);
        value |= uint64_t{byte & 0x7fu} << shift;
        if (byte < 0x80)
          return value;
      }
      FAIL("varint longer than 10 bytes");
      return 0;
    }
  }

  Message decode(const std::string& data)
  {
    Message message;
    for (size_t at = 0; at < data.size();)
    {
      uint64_t tag = read_varint(data, at);
      Field field;
      switch (tag & 7)
      {
        case 0:
          field.varint = read_varint(data, at);
          break;
        case 2:
        {
          uint64_t length = read_varint(data, at);
          if (length > data.size() - at)
            FAIL("field runs past the end of its message");
          field.bytes = data.substr(at, length);
          at += length;
          break;
        }
        default:
          FAIL("unexpected wire type " << (tag & 7));
      }
      message.emplace(static_cast<uint32_t>(tag >> 3), std::move(field));
    }
    return message;
  }

  std::vector<Field> all(const Message& message, uint32_t number)
  {
    std::vector<Field> fields;
    auto [first, last] = message.equal_range(number);
    for (auto it = first; it != last; ++it)
      fields.push_back(it->second);
    return fields;
  }

  const Field& only(const Message& message, uint32_t number)
  {
    REQUIRE(message.count(number) == 1);
    return message.find(number)->second;
  }

  uint64_t varint_of(const Message& message, uint32_t number)
  {
    auto found = message.find(number);
    return found == message.end() ? 0 : found->second.varint;
  }

  std::vector<uint64_t> packed(const Message& message, uint32_t number)
  {
    std::vector<uint64_t> values;
    for (const Field& field : all(message, number))
      for (size_t at = 0; at < field.bytes.size();)
        values.push_back(read_varint(field.bytes, at));
    return values;
  }
}
