// LLVM's libc++ standard containers (clang++ -stdlib=libc++, namespace
// std::__1) as a member of the "std" container family: walk --std, a
// profile's link = "std", and the account's typing read a libc++ container
// through this kind and a libstdc++ one through libstdcxx's, told apart by
// their members. Every layout comes from the program's DWARF and libc++'s
// member names (__begin_, __end_, __tree_.__pair1_, __table_.__p1_, ...);
// a node's element is its node type's __value_, the node type read off the
// allocator the container rebinds (its __compressed_pair's parameter). Read:
// vector, list, forward_list, map, set, unordered_map, unordered_set (and
// the multi forms), array, unique_ptr. A libc++ deque, optional, string or
// shared_ptr is refused by name (LLVM 14, Debian 12's, as read here).
#pragma once

#include "corelib/registry/target.hpp"

namespace lr {

TargetSpec libcxx_target();

}  // namespace lr
