#pragma once
// Umbrella of layer ds: data structures (sizeclasses, pagemap, locks, lists,
// message queue, the locks held across fork).  Includes ds_core and pal only.
#include "fork_locks.h"
#include "freelist.h"
#include "message_queue.h"
#include "pagemap.h"
#include "sizeclass.h"
#include "spinlock.h"
