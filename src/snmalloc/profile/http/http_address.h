#pragma once
// Layer profile/http: the address to listen on, "host:port".
//
//   ":6060", "localhost:6060"   127.0.0.1 (loopback is the default)
//   "127.0.0.1:0"               port 0: any free port, chosen at bind
//   "0.0.0.0:6060", "[::]:6060" every interface: explicit, and warned about
//   "[::1]:6060"                IPv6 in brackets
//
// Numeric hosts only (and "localhost"): a name lookup allocates, may block
// on DNS, and could resolve to a non-loopback address nobody named.
// Parsed without allocating, so SNMALLOC_PROFILE's parser can check it.

#include "../base/text_view.h"

#include <arpa/inet.h>
#include <cstdio>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>

namespace snmalloc::profile::http
{
  constexpr size_t ADDRESS_CAPACITY = 64;

  struct Address
  {
    sockaddr_storage socket{};
    socklen_t size = 0;

    int family() const
    {
      return socket.ss_family;
    }

    uint16_t port() const
    {
      if (family() == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in&>(socket).sin_port);
      return ntohs(reinterpret_cast<const sockaddr_in6&>(socket).sin6_port);
    }

    void set_port(uint16_t port)
    {
      if (family() == AF_INET)
        reinterpret_cast<sockaddr_in&>(socket).sin_port = htons(port);
      else
        reinterpret_cast<sockaddr_in6&>(socket).sin6_port = htons(port);
    }

    // 127.0.0.0/8, ::1, and IPv4 loopback mapped into IPv6.
    bool is_loopback() const
    {
      if (family() == AF_INET)
      {
        uint32_t a = ntohl(reinterpret_cast<const sockaddr_in&>(socket).sin_addr.s_addr);
        return (a >> 24) == 127;
      }
      const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(socket).sin6_addr;
      return IN6_IS_ADDR_LOOPBACK(&a) ||
        (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
    }

    // "127.0.0.1:6060" or "[::1]:6060" into out (at least ADDRESS_CAPACITY).
    void format(char* out, size_t capacity) const
    {
      char host[INET6_ADDRSTRLEN] = "?";
      if (family() == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(socket).sin_addr, host, sizeof(host));
      else
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(socket).sin6_addr, host, sizeof(host));
      const char* open = family() == AF_INET6 ? "[" : "";
      const char* close = family() == AF_INET6 ? "]" : "";
      std::snprintf(out, capacity, "%s%s%s:%u", open, host, close, unsigned(port()));
    }
  };

  // false if `text` is not "host:port" as above.
  inline bool parse_address(Text text, Address& out)
  {
    const char* colon = nullptr;
    for (size_t i = text.size; i > 0; i--)
    {
      if (text.data[i - 1] == ':')
      {
        colon = text.data + i - 1;
        break;
      }
    }
    if (colon == nullptr)
      return false;
    Text host{text.data, size_t(colon - text.data)};
    size_t port = 0;
    if (!parse_size({colon + 1, text.size - host.size - 1}, 0, 65535, port))
      return false;
    char buffer[ADDRESS_CAPACITY];
    Address a;
    if (host.size == 0 || host.is("localhost"))
    {
      auto& v4 = reinterpret_cast<sockaddr_in&>(a.socket);
      v4.sin_family = AF_INET;
      v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.size = sizeof(sockaddr_in);
    }
    else if (host.data[0] == '[')
    {
      if (host.size < 3 || host.size - 2 >= sizeof(buffer) || host.data[host.size - 1] != ']')
        return false;
      std::memcpy(buffer, host.data + 1, host.size - 2);
      buffer[host.size - 2] = '\0';
      auto& v6 = reinterpret_cast<sockaddr_in6&>(a.socket);
      v6.sin6_family = AF_INET6;
      if (::inet_pton(AF_INET6, buffer, &v6.sin6_addr) != 1)
        return false;
      a.size = sizeof(sockaddr_in6);
    }
    else
    {
      if (host.size >= sizeof(buffer))
        return false;
      std::memcpy(buffer, host.data, host.size);
      buffer[host.size] = '\0';
      auto& v4 = reinterpret_cast<sockaddr_in&>(a.socket);
      v4.sin_family = AF_INET;
      if (::inet_pton(AF_INET, buffer, &v4.sin_addr) != 1)
        return false;
      a.size = sizeof(sockaddr_in);
    }
    a.set_port(uint16_t(port));
    out = a;
    return true;
  }
} // namespace snmalloc::profile::http
