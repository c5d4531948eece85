// Run with a shim preloaded (the plain one links no libstdc++, the
// profiling one a hidden copy), or built with NEW_FAILURE_LINKED and the
// static shim linked in, with libstdc++ linked statically: a failing operator new must still call the
// new_handler until it is removed, then throw std::bad_alloc; the nothrow
// forms must return nullptr, also when the handler throws, whatever it
// throws, and what a handler's exception passes through must not stop the
// program.
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

  // What a handler may throw that is no std::bad_alloc.
  struct NotBadAlloc
  {
    int code;
  };

  struct OwnBadAlloc : std::bad_alloc
  {
  };

  void throw_bad_alloc()
  {
    handler_calls++;
    throw std::bad_alloc();
  }

  void throw_own_bad_alloc()
  {
    handler_calls++;
    throw OwnBadAlloc();
  }

  void throw_something_else()
  {
    handler_calls++;
    throw NotBadAlloc{7};
  }

  // Each nothrow form, asked for `size`, with the handler installed: true
  // if each returned nullptr after calling it once.
  bool nothrow_forms_return_null(size_t size, std::new_handler handler)
  {
    void* (*const forms[])(size_t) = {
      [](size_t n) { return ::operator new(n, std::nothrow); },
      [](size_t n) { return ::operator new[](n, std::nothrow); },
      [](size_t n) { return ::operator new(n, std::align_val_t(64), std::nothrow); },
      [](size_t n) { return ::operator new[](n, std::align_val_t(4096), std::nothrow); },
    };
    for (auto form : forms)
    {
      handler_calls = 0;
      std::set_new_handler(handler);
      void* p = form(size);
      std::set_new_handler(nullptr);
      if (p != nullptr || handler_calls != 1)
        return false;
    }
    return true;
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
#ifndef NEW_FAILURE_LINKED
  Dl_info info{};
  void* new_address = reinterpret_cast<void*>(static_cast<void* (*)(size_t)>(&::operator new));
  if (dladdr(new_address, &info) == 0 || std::strstr(info.dli_fname, "snmallocshim") == nullptr)
    fail("operator new is not the shim's: run with LD_PRELOAD=libsnmallocshim.so");
#endif

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
  if (!nothrow_forms_return_null(too_big, throw_bad_alloc))
    fail("a nothrow new whose new_handler threw std::bad_alloc did not return nullptr");
  if (!nothrow_forms_return_null(too_big, throw_own_bad_alloc))
    fail("a nothrow new whose new_handler threw a std::bad_alloc subclass did not return nullptr");
  if (!nothrow_forms_return_null(too_big, throw_something_else))
    fail("a nothrow new whose new_handler threw no std::bad_alloc did not return nullptr");
  // The throwing form passes the handler's exception on as it is.
  std::set_new_handler(throw_something_else);
  try
  {
    kept = static_cast<char*>(::operator new(too_big, std::align_val_t(64)));
    fail("aligned new of SIZE_MAX / 4 bytes returned");
  }
  catch (const NotBadAlloc& e)
  {
    if (e.code != 7)
      fail("the new_handler's exception changed on its way");
  }
  std::set_new_handler(nullptr);
  if (new_throws(64))
    fail("new of 64 bytes threw");
  std::puts("ok");
  return 0;
}
