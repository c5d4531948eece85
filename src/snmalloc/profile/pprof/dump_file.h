#pragma once
// Layer profile/pprof: the write stage. Compresses an encoded profile with gzip
// (pprof reads gzipped and plain protobuf alike; gzip is what every pprof
// producer writes; where libz.so.1 cannot be loaded the profile goes out
// uncompressed, about 10 times larger) and writes it to a file descriptor, or to a path through
// a temporary file renamed into place, so that a reader sees either the
// previous profile or the whole new one, never part of one.
//
// Errors come back as errno values; nothing here throws, aborts or leaves a file behind when it fails.

#include "zlib_loader.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace snmalloc::profile
{
  namespace detail
  {
    // Writes all `length` bytes, resuming after partial writes and EINTR.
    inline int write_all(int fd, const uint8_t* data, size_t length)
    {
      while (length > 0)
      {
        ssize_t written = ::write(fd, data, length);
        if (written < 0)
        {
          if (errno == EINTR)
            continue;
          return errno;
        }
        data += written;
        length -= static_cast<size_t>(written);
      }
      return 0;
    }

    inline int zlib_error_to_errno(int zlib_error)
    {
      return zlib_error == Z_MEM_ERROR ? ENOMEM : EIO;
    }

    // close(2) on Linux releases the descriptor even when it reports
    // EINTR, so EINTR is not an error here.
    inline int close_returning_error(int fd)
    {
      return ::close(fd) == 0 || errno == EINTR ? 0 : errno;
    }
  } // namespace detail

  // Gzips `data`, handing the output to `sink(bytes, size)` (which returns
  // 0 or an errno value) a fixed buffer at a time; without zlib, hands it
  // `data` as it is.  Returns 0 or an errno value.
  template<typename Sink>
  int gzip_to(const uint8_t* data, size_t length, Sink&& sink)
  {
    // Level 1: profiles are highly repetitive (the same stacks of location
    // ids), so the fastest level already compresses them ~10x, and a dump
    // should not stall the program for the last few percent.
    constexpr int compression_level = 1;
    constexpr int gzip_window_bits = 15 + 16; // +16 selects the gzip wrapper.
    constexpr int memory_level = 8;

    const Zlib* z = zlib();
    if (z == nullptr)
      return sink(data, length);
    z_stream stream{};
    int status = z->deflate_init2(
      &stream,
      compression_level,
      Z_DEFLATED,
      gzip_window_bits,
      memory_level,
      Z_DEFAULT_STRATEGY,
      ZLIB_VERSION,
      int(sizeof(stream)));
    if (status != Z_OK)
      return detail::zlib_error_to_errno(status);

    uint8_t chunk[64 * 1024];
    int error = 0;
    int flush = Z_NO_FLUSH;
    do
    {
      // avail_in is 32 bits: feed inputs above 4 GiB in pieces.
      if (stream.avail_in == 0 && length > 0)
      {
        uInt piece = length > UINT32_MAX ? UINT32_MAX : static_cast<uInt>(length);
        stream.next_in = const_cast<Bytef*>(data);
        stream.avail_in = piece;
        data += piece;
        length -= piece;
      }
      flush = length == 0 ? Z_FINISH : Z_NO_FLUSH;
      stream.next_out = chunk;
      stream.avail_out = sizeof(chunk);
      status = z->deflate(&stream, flush);
      if (status == Z_STREAM_ERROR)
      {
        error = EIO;
        break;
      }
      error = sink(chunk, sizeof(chunk) - stream.avail_out);
    } while (error == 0 && status != Z_STREAM_END);

    z->deflate_end(&stream);
    return error;
  }

  // Gzips `data` and writes it to `fd`.  Returns 0 or an errno value.
  inline int write_gzip_fd(int fd, const uint8_t* data, size_t length)
  {
    return gzip_to(data, length, [fd](const uint8_t* bytes, size_t size) {
      return detail::write_all(fd, bytes, size);
    });
  }

  // Gzips `data` into `path` atomically: writes path.tmp.<pid>.<n> in the
  // same directory (rename only replaces atomically within one file
  // system), fsyncs it, then renames it over `path`. On any failure the
  // temporary file is removed and `path` is left as it was. Returns 0 or an
  // errno value.
  inline int write_gzip_file_atomic(const char* path, const uint8_t* data, size_t length)
  {
    // Distinguishes concurrent dumps of one process; the pid, of processes.
    static std::atomic<unsigned> temporary_counter{0};

    char temporary[4096];
    int printed = snprintf(
      temporary,
      sizeof(temporary),
      "%s.tmp.%ld.%u",
      path,
      static_cast<long>(getpid()),
      temporary_counter.fetch_add(1, std::memory_order_relaxed));
    if (printed < 0 || static_cast<size_t>(printed) >= sizeof(temporary))
      return ENAMETOOLONG;

    int fd = ::open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
      return errno;

    int error = write_gzip_fd(fd, data, length);
    if (error == 0 && ::fsync(fd) != 0)
      error = errno;
    int close_error = detail::close_returning_error(fd);
    if (error == 0)
      error = close_error;
    if (error == 0 && ::rename(temporary, path) != 0)
      error = errno;
    if (error != 0)
      ::unlink(temporary);
    return error;
  }
} // namespace snmalloc::profile
