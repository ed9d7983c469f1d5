// CPython as a target: pymalloc as a heap layer (its arenas' blocks join
// the heap walk), and the interpreter as a program target that names each
// block by the Python object it holds ("Python dict") and adds the objects
// by type to a snapshot. Debian 12's python3.11 and Debian 13's python3.13, with
// their python3.X-dbg.
#pragma once

#include "corelib/blocks/heap.hpp"
#include "corelib/registry/target.hpp"

namespace lr {

HeapLayer pymalloc_layer();
// How the partial reason begins that the data-stack layer gives every
// reachability answer when a GC generation list breaks: the links past the
// break are followed (leakref python's own answer follows none).
extern const char* const kGcListCut;
HeapLayer data_stack_layer();
TargetSpec cpython_target();

}  // namespace lr
