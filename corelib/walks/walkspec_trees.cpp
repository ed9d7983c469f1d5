// The tree and xarray cases of run_walk, and array counts read from the
// target: how a head's DWARF type says where a root is, and how a node type
// says where its links are.
#include <fmt/format.h>

#include "corelib/objects/containers.hpp"
#include "walkspec_internal.hpp"

namespace lr {

namespace {

struct KnownNode {
  const char* type;
  const char* mode;
  uint64_t mask;  // flag bits kept below the parent pointer
};
// rb colour in bit 0 (and 1 reserved); an AVL tree keeps the balance
// factor in bits 0-2 of an 8-aligned parent word; libtree's rbtree colour in bit 0.
constexpr KnownNode kNodes[] = {{"rb_node", "rbtree", ~uint64_t{3}},
                                {"avltree_node", "avltree", ~uint64_t{7}},
                                {"rbtree_node", "rbtree", ~uint64_t{1}}};

const Member* first_member(const Type* t, std::initializer_list<const char*> names, uint64_t* off) {
  for (const char* n : names)
    if (const Member* m = find_member(t, n, off)) return m;
  return nullptr;
}

Result<TreeShape> tree_shape(const Type* node, std::string* mode) {
  const Type* n = node ? node->strip() : nullptr;
  if (!n || !n->is_aggregate())
    return make_error(Errc::kInvalidArgument, "the tree member is not a struct");
  TreeShape sh;
  const Member* l = first_member(n, {"rb_left", "left"}, &sh.left_off);
  const Member* r = first_member(n, {"rb_right", "right"}, &sh.right_off);
  const Member* p =
      first_member(n, {"__rb_parent_color", "rb_parent_color", "parent"}, &sh.parent_off);
  auto is_ptr = [](const Member* m) {
    return m && m->type && m->type->strip()->kind == TypeKind::kPointer;
  };
  if (!is_ptr(l) || !is_ptr(r))
    return make_error(
        Errc::kInvalidArgument,
        fmt::format("{} has no left/right (rb_left/rb_right) pointers: not a tree node",
                    n->display()));
  *mode = "tree";
  sh.parent_mask = ~uint64_t{0};
  bool known = false;
  for (const auto& k : kNodes)
    if (n->name == k.type) {
      *mode = k.mode;
      sh.parent_mask = k.mask;
      known = true;
    }
  sh.has_parent = p != nullptr;
  if (p && !known && !is_ptr(p))
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{}.{} is an integer whose flag bits leakref does not know; "
                                  "known node types: rb_node, avltree_node, rbtree_node",
                                  n->display(), p->name));
  sh.node_size = n->size;
  if (!sh.node_size || sh.node_size > 4096 || sh.left_off + 8 > sh.node_size ||
      sh.right_off + 8 > sh.node_size || (p && sh.parent_off + 8 > sh.node_size))
    return make_error(Errc::kBadFormat, fmt::format("{} has an impossible layout", n->display()));
  return sh;
}

// An optional pointer-sized member of the root struct at `root`, or 0.
bool root_word(const Memory& mem, const Type* rt, uint64_t root, const char* path, uint64_t* out) {
  auto loc = resolve_path(rt, path);
  if (!loc.ok()) return false;
  auto v = mem.read_u64(root + loc->offset);
  if (!v.ok()) return false;
  *out = v.value();
  return true;
}

}  // namespace

Result<WalkResult> walk_tree_head(const Program& prog, const Variable& head, const FieldLoc& member,
                                  const WalkLimits& lim, std::string* mode) {
  LR_ASSIGN(TreeShape sh, tree_shape(member.type, mode));
  const Memory& mem = prog.mem();
  const Type* ht = head.type ? head.type->strip() : nullptr;
  const Type* node = member.type->strip();
  // Every supported root (rb_root, rb_root_cached, avltree, rbtree) keeps
  // the root pointer first; a typed head is still checked.
  uint64_t root_ptr_at = head.addr;
  if (ht && ht->kind == TypeKind::kPointer) {
    const Type* tt = ht->target ? ht->target->strip() : nullptr;
    if (tt != node)
      return make_error(Errc::kInvalidArgument,
                        fmt::format("head '{}' is {}, not a tree root or a pointer to {}",
                                    head.name, head.type->display(), node->display()));
  } else if (ht) {
    uint64_t off = 0;
    const Member* m = first_member(ht, {"rb_node", "root"}, &off);
    if (ht->name == "rb_root_cached") {
      m = find_member(ht, "rb_root", &off);
      uint64_t o2 = 0;
      if (m) m = find_member(m->type, "rb_node", &o2);
      off += o2;
    }
    if (!m || !ht->is_aggregate() || off != 0)
      return make_error(Errc::kInvalidArgument,
                        fmt::format("head '{}' is {}, not a tree root (rb_root, rb_root_cached, "
                                    "avltree, rbtree) or a pointer to {}",
                                    head.name, head.type->display(), node->display()));
  }
  LR_ASSIGN(uint64_t root, mem.read_u64(root_ptr_at));
  WalkResult r = walk_tree(mem, root, sh, member.offset, lim);
  if (!ht || ht->kind == TypeKind::kPointer || !r.ok()) return r;
  // What the root caches must agree with the tree walked.
  auto issue = [&](std::string what) {
    ++r.issue_count;
    r.issues.push_back({head.addr, std::move(what)});
  };
  uint64_t v;
  auto expect = [&](const char* path, uint64_t want, const char* what) {
    if (root_word(mem, ht, head.addr, path, &v) && v != want)
      issue(fmt::format("{}.{} is {:#x}, but the {} is {:#x}", ht->name, path, v, what, want));
  };
  uint64_t first = r.objects.empty() ? 0 : r.objects.front() + member.offset;
  uint64_t last = r.objects.empty() ? 0 : r.objects.back() + member.offset;
  if (ht->name == "rb_root_cached") expect("rb_leftmost", first, "leftmost node");
  if (ht->name == "avltree" || ht->name == "rbtree") {
    expect("first", first, "first node");
    expect("last", last, "last node");
  }
  if (ht->name == "avltree" && root_word(mem, ht, head.addr, "size", &v) && v != r.objects.size())
    issue(fmt::format("avltree.size is {}, but {} nodes were walked", v, r.objects.size()));
  return r;
}

Result<WalkResult> walk_xarray_head(Program& prog, const Variable& head, const WalkLimits& lim) {
  const Memory& mem = prog.mem();
  const Type* ht = head.type ? head.type->strip() : nullptr;
  if (ht && ht->kind == TypeKind::kPointer && ht->target) {
    LR_ASSIGN(uint64_t a, mem.read_u64(head.addr));
    Variable v = head;
    v.addr = a;
    v.type = ht->target;
    return walk_xarray_head(prog, v, lim);
  }
  uint64_t off = 0;
  if (!ht || !ht->is_aggregate() ||
      !(find_member(ht, "xa_head", &off) ||
        (ht->name == "idr" && resolve_path(ht, "idr_rt.xa_head").ok())))
    return make_error(
        Errc::kInvalidArgument,
        fmt::format("an xarray walk needs a head of type struct xarray, radix_tree_root or "
                    "idr; head '{}' is {}",
                    head.name, head.type ? head.type->display() : "an untyped address"));
  if (ht->name == "idr") off = resolve_path(ht, "idr_rt.xa_head")->offset;
  LR_ASSIGN(const Type* nt, prog.types().find("struct xa_node"));
  const Type* n = nt->strip();
  XaShape sh;
  LR_ASSIGN(FieldLoc shift, resolve_path(n, "shift"));
  LR_ASSIGN(FieldLoc offset, resolve_path(n, "offset"));
  LR_ASSIGN(FieldLoc parent, resolve_path(n, "parent"));
  LR_ASSIGN(FieldLoc slots, resolve_path(n, "slots"));
  const Type* st = slots.type ? slots.type->strip() : nullptr;
  if (!st || st->kind != TypeKind::kArray || !st->count || (st->count & (st->count - 1)))
    return make_error(Errc::kBadFormat, "struct xa_node.slots is not an array of 2^n slots");
  sh.shift_off = shift.offset;
  sh.offset_off = offset.offset;
  sh.parent_off = parent.offset;
  sh.slots_off = slots.offset;
  sh.chunk = static_cast<uint32_t>(st->count);
  sh.chunk_shift = static_cast<uint32_t>(__builtin_ctzll(st->count));
  sh.node_size = n->size;
  LR_ASSIGN(uint64_t entry, mem.read_u64(head.addr + off));
  return walk_xarray(mem, entry, sh, lim);
}

Result<uint64_t> count_from_target(const Program& prog, const std::string& what) {
  LR_ASSIGN(Variable v, prog.resolve_place(what));
  const Type* t = v.type ? v.type->strip() : nullptr;
  if (!t || !(t->kind == TypeKind::kInt || t->kind == TypeKind::kEnum) || t->size > 8 || !t->size)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("'{}' is {}, not an integer count", what,
                                  v.type ? v.type->display() : "an untyped address"));
  uint64_t raw = 0;
  LR_TRY(prog.mem().read(v.addr, &raw, t->size));
  if (t->is_signed && t->size < 8 && (raw >> (t->size * 8 - 1)) & 1)
    return make_error(Errc::kBadFormat, fmt::format("'{}' is negative: not a count", what));
  if (t->is_signed && t->size == 8 && static_cast<int64_t>(raw) < 0)
    return make_error(Errc::kBadFormat, fmt::format("'{}' is negative: not a count", what));
  // A length read from the core is not trusted to drive a walk of any size.
  if (raw > kMaxCountFrom)
    return make_error(Errc::kBadFormat,
                      fmt::format("'{}' is {}: more than {} elements, a corrupt count?", what, raw,
                                  kMaxCountFrom));
  return raw;
}

}  // namespace lr
