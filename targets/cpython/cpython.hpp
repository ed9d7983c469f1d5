// CPython as a target: pymalloc as a heap layer (its arenas' blocks join
// the heap walk), and the interpreter as a program target that names each
// block by the Python object it holds ("Python dict") and adds the objects
// by type to a snapshot. Debian 12's python3.11 with python3.11-dbg.
#pragma once

#include "corelib/blocks/heap.hpp"
#include "corelib/registry/target.hpp"

namespace lr {

HeapLayer pymalloc_layer();
// The partial reason pymalloc's layer gives every reachability answer:
// the GC's links (leakref python's own answer does not follow them).
extern const char* const kGcLinksFollowed;
HeapLayer data_stack_layer();
TargetSpec cpython_target();

}  // namespace lr
