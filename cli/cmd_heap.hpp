// What `leakref heap` offers correlate.
#pragma once

#include "common.hpp"
#include "leakref/heap.hpp"

namespace lrcli {

// The core's glibc heap, with a progress line while it is read (on a
// terminal); the engine's error when no arena is found.
lr::Result<lr::HeapWalk> read_heap(lr::Program& prog);

}  // namespace lrcli
