// Run with the plain shim preloaded, which links no libstdc++: a failing
// operator new must still call the new_handler until it is removed, then
// throw std::bad_alloc, and the nothrow form must return nullptr.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <new>

namespace
{
  int handler_calls = 0;
  // Where results go, so the compiler cannot elide a new/delete pair.
  char* volatile kept = nullptr;

  void fail(const char* what)
  {
    std::fprintf(stderr, "FAIL: %s\n", what);
    std::exit(1);
  }

  // Gives up on its third call.
  void give_up_on_third_call()
  {
    if (++handler_calls == 3)
      std::set_new_handler(nullptr);
  }

  bool new_throws(size_t size)
  {
    try
    {
      kept = new char[size];
      delete[] kept;
      return false;
    }
    catch (const std::bad_alloc&)
    {
      return true;
    }
  }
} // namespace

int main()
{
  Dl_info info{};
  void* new_address = reinterpret_cast<void*>(static_cast<void* (*)(size_t)>(&::operator new));
  if (dladdr(new_address, &info) == 0 || std::strstr(info.dli_fname, "snmallocshim") == nullptr)
    fail("operator new is not the shim's: run with LD_PRELOAD=libsnmallocshim.so");

  // Read at run time: clang rejects `new char[N]` of a constant N this large.
  volatile size_t too_big_at_run_time = SIZE_MAX / 4;
  size_t too_big = too_big_at_run_time;
  if (!new_throws(too_big))
    fail("new of SIZE_MAX / 4 bytes did not throw std::bad_alloc");
  std::set_new_handler(give_up_on_third_call);
  if (!new_throws(too_big) || handler_calls != 3)
    fail("new did not call the new_handler until it was removed, then throw");
  kept = new (std::nothrow) char[too_big];
  if (kept != nullptr)
    fail("nothrow new of SIZE_MAX / 4 bytes did not return nullptr");
  if (new_throws(64))
    fail("new of 64 bytes threw");
  std::puts("ok");
  return 0;
}
