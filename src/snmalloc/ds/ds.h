#pragma once
// Umbrella of layer ds: data structures (sizeclasses, pagemap, locks, lists,
// message queue).  Includes ds_core and pal only.
#include "freelist.h"
#include "message_queue.h"
#include "pagemap.h"
#include "sizeclass.h"
#include "spinlock.h"
