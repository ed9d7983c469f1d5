#include "corelib/objects/containers.hpp"

#include <fmt/format.h>

#include <cstring>
#include <unordered_set>

namespace lr {

namespace {

void add_issue(WalkResult& r, uint64_t addr, std::string what) {
  ++r.issue_count;
  if (r.issues.size() < 100) r.issues.push_back({addr, std::move(what)});
}

bool interrupted(const WalkLimits& lim, uint64_t n) {
  return (n & 0xffff) == 0xffff && lim.interrupted && lim.interrupted->load();
}

struct TreeNode {
  uint64_t left = 0, right = 0, parent = 0;
};

}  // namespace

WalkResult walk_tree(const Memory& mem, uint64_t root, const TreeShape& sh, uint64_t member_off,
                     const WalkLimits& lim, unsigned max_depth) {
  WalkResult r;
  std::unordered_set<uint64_t> seen;
  std::vector<uint8_t> buf(sh.node_size);
  auto read_node = [&](uint64_t a, TreeNode* n) -> bool {
    if (!mem.read(a, buf.data(), buf.size()).ok()) {
      r.stop = WalkStop::kFault;
      r.stop_addr = a - member_off;
      r.stop_detail = fmt::format("tree node {:#x} is not readable: {}", a, mem.why_unreadable(a));
      return false;
    }
    n->left = load_uint(buf.data() + sh.left_off, 8);
    n->right = load_uint(buf.data() + sh.right_off, 8);
    n->parent = sh.has_parent ? load_uint(buf.data() + sh.parent_off, 8) & sh.parent_mask : 0;
    return true;
  };
  // Iterative in-order: a stack of (node, its links) down the left spine.
  struct Frame {
    uint64_t addr;
    TreeNode n;
  };
  std::vector<Frame> stack;
  auto push_spine = [&](uint64_t a, uint64_t parent) -> bool {
    while (a) {
      if (stack.size() >= max_depth) {
        r.stop = WalkStop::kCorrupt;
        r.stop_addr = a - member_off;
        r.stop_detail = fmt::format("tree deeper than {} levels at node {:#x}", max_depth, a);
        return false;
      }
      if ((a & 7) != 0) {
        r.stop = WalkStop::kCorrupt;
        r.stop_addr = parent ? parent - member_off : 0;
        r.stop_detail = fmt::format("misaligned tree link {:#x} in node {:#x}", a, parent);
        return false;
      }
      if (!seen.insert(a).second) {
        r.stop = WalkStop::kCycle;
        r.stop_addr = parent ? parent - member_off : 0;
        r.cycle_start = a - member_off;
        r.stop_detail =
            fmt::format("node {:#x} links back to {:#x}, already in the tree", parent, a);
        return false;
      }
      Frame f{a, {}};
      if (!read_node(a, &f.n)) return false;
      if (sh.has_parent && f.n.parent != parent)
        add_issue(r, a - member_off,
                  fmt::format("parent link {:#x}, but reached from {:#x}", f.n.parent, parent));
      stack.push_back(f);
      parent = a;
      a = f.n.left;
    }
    return true;
  };
  if (!push_spine(root, sh.root_parent)) {
    lim.sink(r.objects.data(), r.objects.size());
    return r;
  }
  while (!stack.empty()) {
    Frame f = stack.back();
    stack.pop_back();
    if (r.objects.size() >= lim.max_nodes) {
      r.stop = WalkStop::kLimit;
      r.stop_detail =
          fmt::format("stopped after {} objects ({})", lim.max_nodes, lim.max_nodes_name);
      break;
    }
    if (interrupted(lim, r.objects.size())) {
      r.stop = WalkStop::kInterrupted;
      r.stop_addr = f.addr - member_off;
      break;
    }
    r.objects.push_back(f.addr - member_off);
    if (!push_spine(f.n.right, f.addr)) break;
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

namespace {

// XArray entry encoding (the kernel's include/.../xarray.h): bit 0 set = value entry;
// low bits 10 = internal entry: a node pointer (| 2) when above 4096, else
// sibling (< chunk - 1), retry (256) or zero (257) entries.
constexpr uint64_t kInternal = 2;
bool xa_value(uint64_t e) {
  return e & 1;
}
bool xa_internal(uint64_t e) {
  return (e & 3) == kInternal;
}
bool xa_node(uint64_t e) {
  return xa_internal(e) && e > 4096;
}

struct XaWalk {
  const Memory& mem;
  const XaShape& sh;
  const WalkLimits& lim;
  WalkResult& r;
  std::vector<uint8_t> buf;
  std::unordered_set<uint64_t> seen;

  // Adds the pointer entry `e`; false when the walk must stop.
  bool entry(uint64_t e) {
    if (r.objects.size() >= lim.max_nodes) {
      r.stop = WalkStop::kLimit;
      r.stop_detail =
          fmt::format("stopped after {} objects ({})", lim.max_nodes, lim.max_nodes_name);
      return false;
    }
    if (interrupted(lim, r.objects.size())) {
      r.stop = WalkStop::kInterrupted;
      return false;
    }
    r.objects.push_back(e);
    return true;
  }

  // The node `node` found in slot `offset` of `parent` at `shift` levels.
  bool node(uint64_t node, uint64_t parent, unsigned offset, int shift, int depth) {
    if (depth > 12 || !seen.insert(node).second) {
      r.stop = depth > 12 ? WalkStop::kCorrupt : WalkStop::kCycle;
      r.stop_addr = node;
      r.stop_detail = fmt::format("xa_node {:#x} {}", node,
                                  depth > 12 ? "nests deeper than any xarray" : "reached twice");
      return false;
    }
    std::vector<uint8_t>& b = buf;
    if (!mem.read(node, b.data(), b.size()).ok()) {
      r.stop = WalkStop::kFault;
      r.stop_addr = node;
      r.stop_detail =
          fmt::format("xa_node {:#x} is not readable: {}", node, mem.why_unreadable(node));
      return false;
    }
    int nshift = b[sh.shift_off];
    unsigned noff = b[sh.offset_off];
    uint64_t npar = load_uint(b.data() + sh.parent_off, 8);
    if ((shift >= 0 && nshift != shift) || nshift % sh.chunk_shift || nshift > 63 ||
        npar != parent || (parent && noff != offset)) {
      add_issue(r, node,
                fmt::format("xa_node shift {} offset {} parent {:#x} does not fit slot {} "
                            "of {:#x}; not descended",
                            nshift, noff, npar, offset, parent));
      return true;
    }
    // Copy the slots: recursion reuses the buffer.
    std::vector<uint64_t> slots(sh.chunk);
    std::memcpy(slots.data(), b.data() + sh.slots_off, sh.chunk * 8);
    for (unsigned i = 0; i < sh.chunk; ++i) {
      uint64_t e = slots[i];
      if (!e) continue;
      if (xa_value(e)) {
        ++r.skipped;
      } else if (xa_node(e)) {
        if (nshift == 0) {
          add_issue(r, node, fmt::format("leaf xa_node slot {} holds a node entry {:#x}", i, e));
          continue;
        }
        if (!this->node(e - kInternal, node, i, nshift - static_cast<int>(sh.chunk_shift),
                        depth + 1))
          return false;
      } else if (!xa_internal(e)) {
        if (!entry(e)) return false;
      }  // sibling/retry/zero entries name no object
    }
    return true;
  }
};

}  // namespace

WalkResult walk_xarray(const Memory& mem, uint64_t head, const XaShape& sh, const WalkLimits& lim) {
  WalkResult r;
  if (sh.chunk == 0 || sh.chunk > 4096 || sh.node_size < sh.slots_off + sh.chunk * 8ull ||
      sh.node_size > (1u << 20)) {
    r.stop = WalkStop::kCorrupt;
    r.stop_detail = "xa_node layout does not hold its slots (corrupt DWARF?)";
    return r;
  }
  XaWalk w{mem, sh, lim, r, std::vector<uint8_t>(sh.node_size), {}};
  if (!head) {
  } else if (xa_value(head)) {
    ++r.skipped;
  } else if (xa_node(head)) {
    w.node(head - kInternal, 0, 0, -1, 0);
  } else if (!xa_internal(head)) {
    w.entry(head);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

}  // namespace lr
