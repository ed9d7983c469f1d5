// jemalloc (5.3: Debian's libjemalloc2, or linked in statically as Redis
// and others do) as the engine's allocator "jemalloc": told from the core
// itself (its library mapped, or its symbols in the program), walked on the
// layout its DWARF gives (jemalloc_heap.hpp). Registered before glibc's
// walk: a program on jemalloc still maps libc, whose idle arena is not its
// heap.
#pragma once

#include "corelib/registry/target.hpp"

namespace lr {

TargetSpec jemalloc_target();

}  // namespace lr
