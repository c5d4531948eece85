#pragma once
// Umbrella of layer pal (platform).  Higher layers include only this file and
// use the name `Pal`.
#include "pal_linux.h"

namespace snmalloc
{
  using Pal = PalLinux;
}
