// Run with a shim preloaded: a program that replaces only the plain and
// the aligned operator new and delete, keeping a header of its own before
// each object (a magic word and the size, as allocation trackers do), and
// leaves every other form to the library.  The standard defines those
// forms by the replaced ones, so each new of any form must reach the
// program's new and each delete the program's delete, which checks the
// header: an object served or freed by the shim past them shows as a
// wrong count or a missing magic word (or an interior free stops it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace
{
  constexpr uint64_t MAGIC = 0x5ca1ab1e0ddba11ULL;
  constexpr size_t HEADER = 32; // keeps the default 16-byte alignment
  size_t news = 0, deletes = 0, aligned_news = 0, aligned_deletes = 0;

  [[noreturn]] void fail(const char* what)
  {
    std::fprintf(stderr, "FAIL: %s\n", what);
    std::_Exit(1);
  }

  void* with_header(size_t size, size_t align)
  {
    size_t front = align > HEADER ? align : HEADER;
    char* block = static_cast<char*>(std::aligned_alloc(front, front + ((size + front - 1) / front) * front));
    if (block == nullptr)
      throw std::bad_alloc();
    char* object = block + front;
    uint64_t words[3] = {MAGIC, size, front};
    std::memcpy(object - sizeof(words), words, sizeof(words));
    return object;
  }

  void without_header(void* p)
  {
    if (p == nullptr)
      return;
    char* object = static_cast<char*>(p);
    uint64_t words[3];
    std::memcpy(words, object - sizeof(words), sizeof(words));
    if (words[0] != MAGIC)
      fail("delete of an object the program's new did not make");
    words[0] = 0;
    std::memcpy(object - sizeof(words), words, sizeof(words));
    std::free(object - words[2]);
  }

  struct Tracked
  {
    char bytes[56];
    ~Tracked()
    {
      bytes[0] = 0;
    }
  };

  struct alignas(128) Wide
  {
    char bytes[200];
    ~Wide()
    {
      bytes[0] = 0;
    }
  };

  void expect(size_t got, size_t want, const char* what)
  {
    if (got != want)
    {
      std::fprintf(stderr, "FAIL: %s: %zu, expected %zu\n", what, got, want);
      std::_Exit(1);
    }
  }
} // namespace

void* operator new(size_t size)
{
  news++;
  return with_header(size, 0);
}

void operator delete(void* p) noexcept
{
  if (p != nullptr)
    deletes++;
  without_header(p);
}

void* operator new(size_t size, std::align_val_t al)
{
  aligned_news++;
  return with_header(size, size_t(al));
}

void operator delete(void* p, std::align_val_t) noexcept
{
  if (p != nullptr)
    aligned_deletes++;
  without_header(p);
}

int main()
{
  size_t n0 = news, d0 = deletes;
  // Sized delete (a class with a destructor), array new and both array
  // deletes, the nothrow forms.
  delete new Tracked;
  delete[] new Tracked[7];
  delete[] new int[33];
  Tracked* nothrow_one = new (std::nothrow) Tracked;
  delete nothrow_one;
  int* nothrow_array = new (std::nothrow) int[5];
  delete[] nothrow_array;
  operator delete(operator new(48, std::nothrow), std::nothrow);
  operator delete[](operator new[](48, std::nothrow), std::nothrow);
  operator delete(operator new(100), size_t(100));
  operator delete[](operator new[](100), size_t(100));
  expect(news - n0, 9, "the program's new reached");
  expect(deletes - d0, 9, "the program's delete reached");

  // The aligned forms, by the replaced aligned pair.
  size_t a0 = aligned_news, ad0 = aligned_deletes;
  delete new Wide;
  delete[] new Wide[3];
  Wide* nothrow_wide = new (std::nothrow) Wide;
  delete nothrow_wide;
  operator delete[](operator new[](64, std::align_val_t(256), std::nothrow), std::align_val_t(256),
    std::nothrow);
  expect(aligned_news - a0, 4, "the program's aligned new reached");
  expect(aligned_deletes - ad0, 4, "the program's aligned delete reached");

  // The library's containers, with sizes in every range.
  std::vector<std::unique_ptr<std::string>> strings;
  for (size_t i = 0; i < 2000; i++)
    strings.push_back(std::make_unique<std::string>(i * 37 % 5000, 'x'));
  std::shared_ptr<Tracked> shared = std::make_shared<Tracked>();
  std::vector<char> big(3 << 20);
  std::vector<std::unique_ptr<std::string>>().swap(strings);
  shared.reset();
  big = std::vector<char>();
  expect(news - n0 - 9, deletes - d0 - 9, "containers' news and deletes");
  std::printf("every form reached the program's new and delete\n");
  return 0;
}
