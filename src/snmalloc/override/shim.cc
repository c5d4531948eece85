// Layer override: the one translation unit of the shim libraries
// (libsnmallocshim.so for LD_PRELOAD, the static library for linking in).
#include "atfork_first.h"
#include "label_api.h"
#include "malloc.h"
#include "malloc_glibc.h"
#include "new.h"
#include "profile_api.h"
#include "runtime_reserve.h"
#include "stats_api.h"
