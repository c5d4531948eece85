#include <snmalloc/snmalloc.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
extern "C" const char* snmalloc_identity(void);
int main()
{
  void* a = snmalloc::alloc(100);
  void* b = std::malloc(100);
  bool ok = std::strcmp(snmalloc_identity(), "snmalloc") == 0 && snmalloc::alloc_size(a) >= 100 &&
    snmalloc::alloc_size(b) >= 100;
  snmalloc::dealloc(a);
  std::free(b);
  std::puts(ok ? "consumer ok" : "consumer FAILED");
  return ok ? 0 : 1;
}
