// The library func-profile-unload loads, unloads and loads again: built
// twice from this file, as two modules whose code differs only in the size
// of this function's frame (UNLOAD_LIB_FRAME), so that the second, loaded
// where the first was, has the same return address in a frame of another
// size.  Built without frame pointers: the walk must take the frame's size
// from the unwind tables, and may keep it in its rule cache.
#include <cstddef>
#include <cstdlib>

extern "C" __attribute__((noinline, visibility("default"))) void*
unload_lib_allocate(size_t size)
{
  volatile char frame[UNLOAD_LIB_FRAME];
  frame[0] = 1;
  void* object = std::malloc(size);
  frame[UNLOAD_LIB_FRAME - 1] = frame[0];
  return object;
}
