// libc++'s shared_ptr control blocks for the engine's census
// (walks/shared_layouts.hpp): std::__shared_ptr_emplace (make_shared and
// allocate_shared) and std::__shared_ptr_pointer (shared_ptr<T>(new T), a
// custom deleter), both derived from std::__shared_weak_count. Its
// __shared_owners_ and __shared_weak_owners_ are longs holding one less
// than the counts: 0 is one owner, -1 none (LLVM 14's <memory>,
// __shared_count since LLVM 3).
#pragma once

#include "corelib/walks/shared_layouts.hpp"

namespace lr {

SharedLayout libcxx_shared_layout();

}  // namespace lr
