// Pieces of run_walk that live in their own files.
#pragma once

#include <string>

#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/walks/walkspec.hpp"

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

// The mode's contract (walkspec_contract.cpp): the head's type fits the
// mode, the amounts given are ones the mode takes, and none runs past the
// head's array type. kInvalidArgument naming both types otherwise.
Result<void> check_walk_contract(const WalkSpec& spec, const Type* obj, const Variable& head);
// Elements in the head's array type (0: not an array, no bound).
uint64_t head_bound(const Variable& head);
// `n` (a count or bucket count, `what`) against head_bound: kBadFormat when
// it was read from the dump (damage), kInvalidArgument when given.
Result<void> check_amount_bound(const WalkSpec& spec, const Variable& head, uint64_t n,
                                const char* what, bool from_memory);

}  // namespace lr
