// tcmalloc (gperftools 2.x: Debian's libgoogle-perftools4 and
// libtcmalloc-minimal4) as the engine's allocator "tcmalloc": told from the
// core itself (its library mapped, or its symbols in the program), walked
// on the layout its DWARF gives (tcmalloc_heap.hpp). Registered before
// glibc's walk, as jemalloc's is.
#pragma once

#include "corelib/registry/target.hpp"

namespace lr {

TargetSpec tcmalloc_target();

}  // namespace lr
