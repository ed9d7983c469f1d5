// libc++'s containers in the "std" family (libcxx.hpp).
#include "targets/libcxx/libcxx.hpp"

#include <fmt/format.h>

#include <string_view>

#include "corelib/debuginfo/cxx_names.hpp"
#include "corelib/objects/containers.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/walks/container_kinds.hpp"
#include "corelib/walks/element_walks.hpp"

namespace lr {

namespace {

enum class Shape { kVector, kList, kForwardList, kTree, kHash, kArray, kUniquePtr, kRefused };

// The class templates, by their DWARF names, and the member only libc++'s
// layout has (what tells it from libstdc++'s).
struct CxxClass {
  std::string_view prefix;
  Shape shape;
  const char* marker;
  bool pairs = false;  // the element is std::pair<const Key, T>
};
constexpr CxxClass kClasses[] = {
    {"vector<", Shape::kVector, "__begin_"},
    {"list<", Shape::kList, "__end_"},
    {"forward_list<", Shape::kForwardList, "__before_begin_"},
    {"map<", Shape::kTree, "__tree_", true},
    {"multimap<", Shape::kTree, "__tree_", true},
    {"set<", Shape::kTree, "__tree_"},
    {"multiset<", Shape::kTree, "__tree_"},
    {"unordered_map<", Shape::kHash, "__table_", true},
    {"unordered_multimap<", Shape::kHash, "__table_", true},
    {"unordered_set<", Shape::kHash, "__table_"},
    {"unordered_multiset<", Shape::kHash, "__table_"},
    {"array<", Shape::kArray, "__elems_"},
    {"unique_ptr<", Shape::kUniquePtr, "__ptr_"},
    {"deque<", Shape::kRefused, "__map_"},
    {"optional<", Shape::kRefused, "__engaged_"},
    {"basic_string<", Shape::kRefused, "__r_"},
    {"shared_ptr<", Shape::kRefused, "__cntrl_"},
};

// Whether `t` (or a base or anonymous part of it) has a member `name`: a
// layout's marker, asked of every container instance typed, so a member
// search with no path parsed.
bool has_member(const Type* t, const char* name) {
  uint64_t off = 0;
  return find_member(t, name, &off) != nullptr;
}

constexpr uint64_t kMaxElements = uint64_t{1} << 40;

const CxxClass* cxx_class(const Type* t) {
  if (!t || !t->is_aggregate()) return nullptr;
  for (const auto& k : kClasses)
    if (t->name.rfind(k.prefix, 0) == 0) return has_member(t, k.marker) ? &k : nullptr;
  return nullptr;
}

bool knows_cxx(const Type* t) {
  return cxx_class(t) != nullptr;
}

struct Container {
  const Type* type = nullptr;
  uint64_t addr = 0;
  const CxxClass* cls = nullptr;
  std::string name;
};

Result<FieldLoc> need(const Container& c, const char* path) {
  auto r = resolve_path(c.type, path);
  if (!r.ok())
    return make_error(Errc::kNotFound, fmt::format("{} ({}) has no member '{}': not libc++'s "
                                                   "layout as LLVM 14 has it",
                                                   c.name, cxx_type_name(c.type), path));
  return r;
}

Result<uint64_t> read_at(Program& prog, const Container& c, const char* path) {
  LR_ASSIGN(FieldLoc f, need(c, path));
  return prog.mem().read_u64(c.addr + f.offset);
}

Result<Container> container_at(Program& prog, const Variable& head) {
  uint64_t addr = head.addr;
  const Type* t = head.type ? head.type->strip() : nullptr;
  if (t && t->kind == TypeKind::kPointer) {
    LR_ASSIGN(addr, prog.mem().read_u64(head.addr));
    t = t->target ? t->target->strip() : nullptr;
  }
  const CxxClass* k = cxx_class(t);
  if (!k)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{} is {}: not a libc++ container", head.name,
                                  t ? cxx_type_name(t) : "of no known type"));
  if (k->shape == Shape::kRefused)
    return make_error(
        Errc::kUnsupported,
        fmt::format("{} is {}: libc++'s {} is not read (vector, list, "
                    "forward_list, map, set, unordered_map, unordered_set, array "
                    "and unique_ptr are)",
                    head.name, cxx_type_name(t), k->prefix.substr(0, k->prefix.size() - 1)));
  return Container{t, addr, k, head.name};
}

// What allocator<X> a type's parameters name: the container's own (its
// element) or a __compressed_pair's (the node type the container rebinds
// its allocator to).
const Type* allocated(const Type* t) {
  for (const Type* a : t->template_args) {
    const Type* s = a ? a->strip() : nullptr;
    if (s && s->name.rfind("allocator<", 0) == 0) return first_template_parameter(s);
  }
  return nullptr;
}

Result<const Type*> element_of(const Container& c) {
  switch (c.cls->shape) {
    case Shape::kVector: {
      LR_ASSIGN(FieldLoc b, need(c, "__begin_"));
      const Type* p = b.type ? b.type->strip() : nullptr;
      if (p && p->kind == TypeKind::kPointer && p->target) return p->target;
      return make_error(Errc::kUnsupported,
                        c.name +
                            ": std::vector<bool> packs its elements as bits: there are "
                            "no element objects to walk");
    }
    case Shape::kArray: {
      LR_ASSIGN(FieldLoc e, need(c, "__elems_"));
      const Type* a = e.type ? e.type->strip() : nullptr;
      if (a && a->kind == TypeKind::kArray && a->target) return a->target;
      break;
    }
    case Shape::kUniquePtr: {
      const Type* e = c.type->template_args.empty() ? nullptr : c.type->template_args[0];
      if (e && e->strip()->kind == TypeKind::kArray)
        return make_error(Errc::kUnsupported,
                          c.name + ": a unique_ptr to an array does not record its length");
      if (e) return e;
      break;
    }
    default:
      if (const Type* e = allocated(c.type)) return e;
      if (!c.cls->pairs && !c.type->template_args.empty() && c.type->template_args[0])
        return c.type->template_args[0];
  }
  return make_error(Errc::kNotFound, fmt::format("{} ({}): the DWARF names no element type", c.name,
                                                 cxx_type_name(c.type)));
}

// Where a node's element lies: its node type's __value_. The node type is
// what the allocator in `pair_path`'s __compressed_pair allocates.
Result<uint64_t> value_offset(const Container& c, const char* pair_path) {
  LR_ASSIGN(FieldLoc p, need(c, pair_path));
  const Type* pt = p.type ? p.type->strip() : nullptr;
  const Type* node = pt ? allocated(pt) : nullptr;
  if (node)
    if (auto v = resolve_path(node, "__value_"); v.ok()) return v.value().offset;
  return make_error(Errc::kNotFound,
                    fmt::format("{}: the DWARF names no node type with a __value_ (the "
                                "allocator of its {})",
                                c.name, pair_path));
}

uint64_t recorded_count(Program& prog, const Container& c, const char* path) {
  auto v = read_at(prog, c, path);
  return v.ok() ? v.value() : UINT64_MAX;
}

struct VectorSpan {
  uint64_t start = 0, count = 0;
};
Result<VectorSpan> vector_span(Program& prog, const Container& c, uint64_t es) {
  LR_ASSIGN(uint64_t b, read_at(prog, c, "__begin_"));
  LR_ASSIGN(uint64_t e, read_at(prog, c, "__end_"));
  LR_ASSIGN(uint64_t cap, read_at(prog, c, "__end_cap_.__value_"));
  if (!es || e < b || e > cap || (e - b) % es || (e - b) / es > kMaxElements)
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: __begin_ {:#x}, __end_ {:#x} and __end_cap_ {:#x} hold "
                                  "no whole number of {}-byte elements",
                                  c.name, b, e, cap, es));
  return VectorSpan{b, (e - b) / es};
}

// A list's ring from its end node, bounded by the size it records: a ring
// longer than that (a cycle that misses the end node) is damage, not a
// walk that runs on.
Result<WalkResult> list_nodes(Program& prog, const Container& c, const WalkLimits& lim) {
  LR_ASSIGN(FieldLoc end, need(c, "__end_"));
  uint64_t next = 0;
  if (!find_member(end.type ? end.type->strip() : nullptr, "__next_", &next))
    return make_error(Errc::kNotFound, c.name + ": its end node has no __next_");
  const uint64_t head = c.addr + end.offset;
  const uint64_t size = recorded_count(prog, c, "__size_alloc_.__value_");
  WalkResult r;
  LR_ASSIGN(uint64_t p, prog.mem().read_u64(head + next));
  while (p != head) {
    if (r.objects.size() >= lim.max_nodes || r.objects.size() >= size) {
      r.stop = r.objects.size() >= size ? WalkStop::kCorrupt : WalkStop::kLimit;
      r.stop_addr = p;
      r.stop_detail =
          fmt::format("{}: more nodes than {}", c.name,
                      r.stop == WalkStop::kLimit ? lim.max_nodes_name : "the size it records");
      return r;
    }
    r.objects.push_back(p);
    auto n = prog.mem().read_u64(p + next);
    if (!n.ok()) {
      r.stop = WalkStop::kFault, r.stop_addr = p;
      r.stop_detail = fmt::format("{}: node {:#x} unreadable", c.name, p);
      return r;
    }
    p = n.value();
  }
  return r;
}

// A map's or set's tree from the end node's __left_ (the root), whose
// parent link is the end node.
Result<WalkResult> tree_nodes(Program& prog, const Container& c, const WalkLimits& lim) {
  LR_ASSIGN(FieldLoc end, need(c, "__tree_.__pair1_.__value_"));
  LR_ASSIGN(FieldLoc left, need(c, "__tree_.__pair1_.__value_.__left_"));
  const Type* lp = left.type ? left.type->strip() : nullptr;
  const Type* base =
      lp && lp->kind == TypeKind::kPointer && lp->target ? lp->target->strip() : nullptr;
  uint64_t l = 0, r = 0, p = 0;
  if (!base || !find_member(base, "__left_", &l) || !find_member(base, "__right_", &r) ||
      !find_member(base, "__parent_", &p))
    return make_error(Errc::kNotFound, c.name + ": __tree_node_base is not libc++'s");
  LR_ASSIGN(uint64_t root, prog.mem().read_u64(c.addr + left.offset));
  TreeShape sh{l, r, true, p, ~uint64_t{0}, base->size, c.addr + end.offset};
  return walk_tree(prog.mem(), root, sh, 0, lim);
}

// The nodes of a node-based container (no sink: the objects are made from
// them after); `recorded` gets the size it records.
Result<WalkResult> walk_nodes(Program& prog, const Container& c, const WalkLimits& lim,
                              uint64_t* recorded) {
  switch (c.cls->shape) {
    case Shape::kList:
      *recorded = recorded_count(prog, c, "__size_alloc_.__value_");
      return list_nodes(prog, c, lim);
    case Shape::kForwardList: {
      LR_ASSIGN(uint64_t first, read_at(prog, c, "__before_begin_.__value_.__next_"));
      return walk_chain(prog.mem(), first, 0, lim);
    }
    case Shape::kTree:
      *recorded = recorded_count(prog, c, "__tree_.__pair3_.__value_");
      return tree_nodes(prog, c, lim);
    case Shape::kHash: {
      *recorded = recorded_count(prog, c, "__table_.__p2_.__value_");
      LR_ASSIGN(uint64_t first, read_at(prog, c, "__table_.__p1_.__value_.__next_"));
      return walk_chain(prog.mem(), first, 0, lim);
    }
    default:
      return make_error(Errc::kInvalidArgument, c.name + ": not a node-based container");
  }
}

// The __compressed_pair whose allocator names the node type.
const char* node_pair(Shape s) {
  switch (s) {
    case Shape::kList:
      return "__size_alloc_";
    case Shape::kForwardList:
      return "__before_begin_";
    case Shape::kTree:
      return "__tree_.__pair1_";
    default:
      return "__table_.__p1_";
  }
}

Result<WalkResult> walk_holder(Program& prog, const Container& c, uint64_t es,
                               const WalkLimits& lim) {
  if (c.cls->shape == Shape::kArray) {
    LR_ASSIGN(FieldLoc e, need(c, "__elems_"));
    const Type* a = e.type ? e.type->strip() : nullptr;
    return walk_array(prog.mem(), c.addr + e.offset, a ? a->count : 0, es, lim);
  }
  WalkResult r;
  LR_ASSIGN(uint64_t p, read_at(prog, c, "__ptr_.__value_"));
  if (p) r.objects.push_back(p);
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

Result<WalkResult> walk_elements(Program& prog, const Container& c, uint64_t es,
                                 const WalkLimits& lim) {
  if (c.cls->shape == Shape::kVector) {
    LR_ASSIGN(VectorSpan v, vector_span(prog, c, es));
    return walk_array(prog.mem(), v.start, v.count, es, lim);
  }
  if (c.cls->shape == Shape::kArray || c.cls->shape == Shape::kUniquePtr)
    return walk_holder(prog, c, es, lim);
  LR_ASSIGN(uint64_t off, value_offset(c, node_pair(c.cls->shape)));
  WalkLimits nl = lim;
  nl.sink = {};
  uint64_t recorded = UINT64_MAX;
  LR_ASSIGN(WalkResult r, walk_nodes(prog, c, nl, &recorded));
  r = node_elements(std::move(r), off, recorded, c.addr, c.name);
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

Result<WalkResult> walk_cxx(Program& prog, const Variable& head, const std::string& member,
                            uint64_t obj_size, const WalkLimits& lim) {
  LR_ASSIGN(Container c, container_at(prog, head));
  LR_ASSIGN(const Type* elem, element_of(c));
  LR_ASSIGN(ElementReach reach, element_reach(c.name, elem, member));
  const uint64_t es = elem->strip()->size;
  return walk_reached(prog.mem(), c.name, elem, reach, obj_size, lim,
                      [&](const WalkLimits& l) { return walk_elements(prog, c, es, l); });
}

Result<const Type*> element_cxx(Program& prog, const Variable& head, const std::string& member) {
  LR_ASSIGN(Container c, container_at(prog, head));
  LR_ASSIGN(const Type* elem, element_of(c));
  LR_ASSIGN(ElementReach reach, element_reach(c.name, elem, member));
  return reach.objects(elem);
}

// ---- the containers' own blocks ----

bool holds_cxx(const Type* t) {
  const CxxClass* k = cxx_class(t);
  return k && k->shape < Shape::kArray;
}

bool link_cxx(const Type* t) {
  static constexpr std::string_view kLinks[] = {
      "__list_node_base<",      "__tree_node_base<", "__tree_end_node<",       "__hash_node_base<",
      "__forward_begin_node<",  "__list_iterator<",  "__list_const_iterator<", "__tree_iterator<",
      "__tree_const_iterator<", "__hash_iterator<",  "__hash_const_iterator<"};
  for (std::string_view l : kLinks)
    if (t->name.rfind(l, 0) == 0) return true;
  return false;
}

// A hash table's bucket array (a unique_ptr<__next_pointer[]>).
void bucket_block(Program& prog, const Container& c, OwnBlocks* out) {
  auto b = read_at(prog, c, "__table_.__bucket_list_.__ptr_.__value_");
  if (b.ok() && b.value()) out->blocks.push_back({b.value(), "buckets", nullptr, 0, 0});
}

Result<OwnBlocks> own_blocks_cxx(Program& prog, const Type* t, uint64_t addr,
                                 const WalkLimits& lim) {
  t = t ? t->strip() : nullptr;
  OwnBlocks out;
  out.container = cxx_type_name(t);
  Variable v;
  v.name = out.container, v.type = t, v.addr = addr;
  LR_ASSIGN(Container c, container_at(prog, v));
  LR_ASSIGN(const Type* elem, element_of(c));
  const uint64_t es = elem->strip()->size;
  if (!es) return make_error(Errc::kBadFormat, c.name + ": an element of no size");
  if (c.cls->shape == Shape::kVector) {
    LR_ASSIGN(VectorSpan s, vector_span(prog, c, es));
    if (s.start) out.blocks.push_back({s.start, "elements", elem, 0, s.count, true});
    return out;
  }
  LR_ASSIGN(uint64_t off, value_offset(c, node_pair(c.cls->shape)));
  WalkLimits nl = lim;
  nl.sink = {};
  uint64_t recorded = UINT64_MAX;
  LR_ASSIGN(WalkResult r, walk_nodes(prog, c, nl, &recorded));
  add_node_blocks(&out, r, elem, off, recorded, addr, c.name);
  if (c.cls->shape == Shape::kHash) bucket_block(prog, c, &out);
  return out;
}

}  // namespace

TargetSpec libcxx_target() {
  ContainerKind k;
  k.name = "std:libc++";
  k.family = "std";
  k.knows = &knows_cxx;
  k.mode = "std:libc++";
  k.what = "a C++ standard container (libc++)";
  k.members = {"."};
  k.member_paths = true;
  k.walk = &walk_cxx;
  k.element = &element_cxx;
  k.holds = &holds_cxx;
  k.own_blocks = &own_blocks_cxx;
  k.link = &link_cxx;
  TargetSpec t;
  t.name = "libcxx";
  t.containers.push_back(k);
  return t;
}

}  // namespace lr
