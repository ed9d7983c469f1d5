// Pieces of run_walk that live in their own files.
#pragma once

#include <string>

#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/walkers.hpp"

namespace lr {

// Walks the tree rooted at `head` (rb_root, rb_root_cached, avltree, rbtree,
// a pointer to the node type, or an untyped address holding the root
// pointer) whose nodes are `member` of each object; `mode` gets "rbtree",
// "avltree" or "tree". kInvalidArgument when the head or member does not fit.
Result<WalkResult> walk_tree_head(const Program& prog, const Variable& head, const FieldLoc& member,
                                  const WalkLimits& lim, std::string* mode);
// Walks the xarray at `head` (struct xarray, radix_tree_root, idr, or a
// pointer to one); needs struct xa_node in the target's DWARF.
Result<WalkResult> walk_xarray_head(Program& prog, const Variable& head, const WalkLimits& lim);
// The value of the integer variable `what` (SYMBOL, SYMBOL.member, ...), as
// an element count: kInvalidArgument when it is not an integer, kBadFormat
// when negative or above kMaxCountFrom.
constexpr uint64_t kMaxCountFrom = 1ull << 32;
Result<uint64_t> count_from_target(const Program& prog, const std::string& what);

}  // namespace lr
