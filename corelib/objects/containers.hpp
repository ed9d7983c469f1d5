// Walkers over tree-shaped containers: binary search trees with parent
// links (the kernel's rb_root/rb_root_cached, AVL trees with a balance, libtree's
// rbtree) and the kernel's xarray (radix tree, idr, page cache). Bounded and
// cycle-safe like the list walkers; results are WalkResults.
#pragma once

#include <cstdint>

#include "corelib/objects/walkers.hpp"

namespace lr {

// Where a tree node keeps its links; the parent word may carry flag bits
// (rb colour, avl balance) below `parent_mask`.
struct TreeShape {
  uint64_t left_off = 0, right_off = 8;
  bool has_parent = false;
  uint64_t parent_off = 16;
  uint64_t parent_mask = ~uint64_t{0};
  uint64_t node_size = 24;  // bytes read per node
  // The root's parent link (0; a C++ std::map's root points at its header).
  uint64_t root_parent = 0;
};

// In-order walk from the node at `root` (0: empty tree). Objects are
// node - member_off. Checks every child's parent link (an issue when it
// does not point back), stops kCycle when a node is reached twice and
// kCorrupt past `max_depth` levels (no balanced tree of a bounded number of
// nodes is that deep).
WalkResult walk_tree(const Memory& mem, uint64_t root, const TreeShape& shape, uint64_t member_off,
                     const WalkLimits& lim = {}, unsigned max_depth = 128);

// Where an xa_node keeps its fields (from DWARF).
struct XaShape {
  uint64_t shift_off = 0, offset_off = 1, parent_off = 8, slots_off = 40;
  uint32_t chunk = 64;  // slots per node (XA_CHUNK_SIZE)
  uint32_t chunk_shift = 6;
  uint64_t node_size = 0;  // bytes read per node
};

// Every pointer entry of the xarray whose xa_head word holds `head`, in index
// order. Value entries (bit 0 set) are counted in `skipped`; sibling, retry
// and zero entries are skipped; a node whose shift, offset or parent does not
// fit where it is found is an issue, and the walk does not descend into it.
WalkResult walk_xarray(const Memory& mem, uint64_t head, const XaShape& shape,
                       const WalkLimits& lim = {});

}  // namespace lr
