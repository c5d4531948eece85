// Run with a shim preloaded: a program that replaces operator new and
// new[] (over-allocating for a header of its own, as allocation counters
// do) but keeps the shim's sized delete.  That delete then gets the sizes
// the program's new was asked for, of other classes than the objects
// malloc gave it: no error, the objects must simply be freed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <malloc.h>
#include <new>

namespace
{
  constexpr size_t HEADER = 256;
  size_t news = 0;

  void fail(const char* what)
  {
    std::fprintf(stderr, "FAIL: %s\n", what);
    std::exit(1);
  }

  void* allocate_with_header(size_t size)
  {
    news++;
    void* p = std::malloc(size + HEADER);
    if (p == nullptr)
      throw std::bad_alloc();
    return p;
  }

  // A destructor, so that delete[] passes the array's size too.
  struct Object
  {
    char bytes[40];
    ~Object()
    {
      bytes[0] = 0;
    }
  };

  bool in_shim(const char* symbol)
  {
    Dl_info info;
    void* address = dlsym(RTLD_DEFAULT, symbol);
    return address != nullptr && dladdr(address, &info) != 0 &&
      std::strstr(info.dli_fname, "snmallocshim") != nullptr;
  }
} // namespace

void* operator new(size_t size)
{
  return allocate_with_header(size);
}

void* operator new[](size_t size)
{
  return allocate_with_header(size);
}

int main()
{
  if (!in_shim("free") || !in_shim("_ZdlPvm") || !in_shim("_ZdaPvm"))
    fail("free and sized delete are not the shim's: run with LD_PRELOAD=libsnmallocshim*.so");
  if (in_shim("_Znwm") || in_shim("_Znam"))
    fail("operator new is the shim's, not this program's");
  for (int i = 0; i < 10000; i++)
  {
    Object* one = new Object;
    // The object is larger than the size delete will be told.
    if (malloc_usable_size(one) < sizeof(Object) + HEADER)
      fail("operator new did not over-allocate");
    delete one; // operator delete(one, sizeof(Object))
    Object* three = new Object[3];
    delete[] three; // operator delete[](three, 3 * sizeof(Object) + cookie)
  }
  if (news != 20000)
    fail("the program's operator new was not called");
  std::puts("replaced operator new: 20000 objects freed through sized delete");
  return 0;
}
