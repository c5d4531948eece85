#pragma once
// Umbrella of layer ds_core: no platform needs, no allocation.
#include "bits.h"
#include "config.h"
#include "defines.h"
