// libc++'s containers in the "std" family (libcxx.hpp).
#include "targets/libcxx/libcxx.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "corelib/debuginfo/cxx_names.hpp"
#include "corelib/objects/containers.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/walks/container_kinds.hpp"
#include "corelib/walks/element_walks.hpp"
#include "targets/libcxx/control_blocks.hpp"

namespace lr {

namespace {

enum class Shape {
  kVector,
  kDeque,
  kList,
  kForwardList,
  kTree,
  kHash,
  kArray,
  kUniquePtr,
  kOptional
};

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
    {"deque<", Shape::kDeque, "__map_"},
    {"optional<", Shape::kOptional, "__engaged_"},
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

// std::vector<bool>: its words of bits and their number (__size_), no
// __end_.
bool bit_vector(const Type* t) {
  return has_member(t, "__size_") && !has_member(t, "__end_");
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
      if (bit_vector(c.type))
        return make_error(Errc::kUnsupported,
                          c.name +
                              ": std::vector<bool> packs its elements as bits: there are "
                              "no element objects to walk");
      LR_ASSIGN(FieldLoc b, need(c, "__begin_"));
      const Type* p = b.type ? b.type->strip() : nullptr;
      if (p && p->kind == TypeKind::kPointer && p->target) return p->target;
      break;
    }
    case Shape::kArray: {
      LR_ASSIGN(FieldLoc e, need(c, "__elems_"));
      const Type* a = e.type ? e.type->strip() : nullptr;
      if (a && a->kind == TypeKind::kArray && a->target) return a->target;
      break;
    }
    case Shape::kOptional:
      if (!c.type->template_args.empty() && c.type->template_args[0])
        return c.type->template_args[0];
      break;
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

// A deque: a map of pointers to blocks of `per_block` elements (the map's
// [__begin_, __end_) slots in use; blocks may be spare at either end), the
// first element at position __start_ and __size_ elements from there. The
// elements a block holds are libc++'s __deque_block_size, not in the
// DWARF: 4096 bytes' worth for an element under 256 bytes, else 16
// (libcxx/include/deque, unchanged from LLVM 3 to 16).
struct DequeSpan {
  uint64_t map = 0;    // the map's block (__map_.__first_)
  uint64_t slots = 0;  // the map's slots in use, from __map_.__begin_
  uint64_t first = 0;  // __map_.__begin_: the first slot's address
  uint64_t start = 0;  // the first element's position
  uint64_t count = 0;  // elements
  uint64_t per_block = 0;
};
Result<DequeSpan> deque_span(Program& prog, const Container& c, uint64_t es) {
  DequeSpan d;
  LR_ASSIGN(d.map, read_at(prog, c, "__map_.__first_"));
  LR_ASSIGN(d.first, read_at(prog, c, "__map_.__begin_"));
  LR_ASSIGN(uint64_t end, read_at(prog, c, "__map_.__end_"));
  LR_ASSIGN(d.start, read_at(prog, c, "__start_"));
  LR_ASSIGN(d.count, read_at(prog, c, "__size_.__value_"));
  d.per_block = es && es < 256 ? 4096 / es : 16;
  d.slots = (end - d.first) / 8;
  auto bad = [&](const char* why) {
    return make_error(Errc::kBadFormat,
                      fmt::format("{} at {:#x}: {} (map slots {:#x}..{:#x}, __start_ {}, "
                                  "__size_ {}): not a deque",
                                  c.name, c.addr, why, d.first, end, d.start, d.count));
  };
  if (!es || end < d.first || (end - d.first) % 8 || d.first < d.map)
    return bad("its map's slots are no whole number of pointers");
  if (d.slots > kMaxElements / d.per_block || d.count > kMaxElements ||
      d.start > d.slots * d.per_block || d.count > d.slots * d.per_block - d.start)
    return bad("its elements lie past its blocks");
  return d;
}

// The block in map slot `k`, checked readable at both ends: a slot that was
// overwritten yields no elements.
Result<uint64_t> deque_block(Program& prog, const DequeSpan& d, uint64_t k, uint64_t es) {
  LR_ASSIGN(uint64_t b, prog.mem().read_u64(d.first + 8 * k));
  const uint64_t bytes = d.per_block * es;
  if (!b || !prog.mem().read_u64(b).ok() || !prog.mem().read_u64(b + bytes - 8).ok())
    return make_error(Errc::kFault, fmt::format("map slot {:#x} holds {:#x}, a block the core "
                                                "lacks",
                                                d.first + 8 * k, b));
  return b;
}

// The elements block by block, a block's slot read once.
Result<WalkResult> walk_deque(Program& prog, const Container& c, uint64_t es,
                              const WalkLimits& lim) {
  LR_ASSIGN(DequeSpan d, deque_span(prog, c, es));
  WalkResult r;
  if (over_limit(d.count, lim, c.name, &r)) return r;
  r.objects.reserve(d.count);
  for (uint64_t pos = d.start; pos < d.start + d.count;) {
    auto b = deque_block(prog, d, pos / d.per_block, es);
    if (!b.ok()) {
      r.stop = WalkStop::kFault, r.stop_addr = d.first + 8 * (pos / d.per_block);
      r.stop_detail = fmt::format("{}: {}", c.name, b.error().message);
      break;
    }
    const uint64_t to = std::min(d.start + d.count, (pos / d.per_block + 1) * d.per_block);
    for (; pos < to; ++pos) r.objects.push_back(b.value() + (pos % d.per_block) * es);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
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
  if (c.cls->shape == Shape::kUniquePtr) {
    LR_ASSIGN(uint64_t p, read_at(prog, c, "__ptr_.__value_"));
    if (p) r.objects.push_back(p);
  } else {  // an optional's value, inside it, while engaged
    LR_ASSIGN(FieldLoc on, need(c, "__engaged_"));
    LR_ASSIGN(FieldLoc v, need(c, "__val_"));
    uint8_t engaged = 0;
    LR_TRY(prog.mem().read(c.addr + on.offset, &engaged, 1));
    if (engaged > 1)
      return make_error(Errc::kBadFormat, fmt::format("{} at {:#x}: __engaged_ is {}, no bool",
                                                      c.name, c.addr, engaged));
    if (engaged) r.objects.push_back(c.addr + v.offset);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

Result<WalkResult> walk_elements(Program& prog, const Container& c, uint64_t es,
                                 const WalkLimits& lim) {
  if (c.cls->shape == Shape::kVector) {
    LR_ASSIGN(VectorSpan v, vector_span(prog, c, es));
    return walk_array(prog.mem(), v.start, v.count, es, lim);
  }
  if (c.cls->shape == Shape::kDeque) return walk_deque(prog, c, es, lim);
  if (c.cls->shape >= Shape::kArray) return walk_holder(prog, c, es, lim);
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

// A basic_string (LLVM 14's default layout: its __long's __cap_ first,
// whose lowest bit says the characters are a block of their own; the
// alternate layout puts __data_ first and is refused).
bool is_string(const Type* t) {
  return t && t->is_aggregate() && t->name.rfind("basic_string<", 0) == 0 && has_member(t, "__r_");
}

bool is_shared(const Type* t) {
  return t && t->is_aggregate() && t->name.rfind("shared_ptr<", 0) == 0 &&
         has_member(t, "__cntrl_");
}

// The containers whose blocks are their own (array, unique_ptr and optional
// allocate none: what a unique_ptr points at keeps its own type), a
// string's characters, and a shared_ptr's control block.
bool holds_cxx(const Type* t) {
  const CxxClass* k = cxx_class(t);
  return (k && k->shape < Shape::kArray) || is_string(t) || is_shared(t);
}

// A shared_ptr's control block and object (add_shared_blocks): an owner
// lives while __shared_owners_, one less than the owners, is 0 or more.
Result<OwnBlocks> shared_blocks(Program& prog, const Type* t, uint64_t addr, OwnBlocks out) {
  auto ptr = resolve_path(t, "__ptr_");
  auto cntrl = resolve_path(t, "__cntrl_");
  const Type* ct = cntrl.ok() && cntrl->type ? cntrl->type->strip() : nullptr;
  auto owners = ct && ct->target ? resolve_path(ct->target, "__shared_owners_")
                                 : Result<FieldLoc>(make_error(Errc::kNotFound, ""));
  if (!ptr.ok() || !owners.ok())
    return make_error(Errc::kUnsupported,
                      fmt::format("{} at {:#x}: not libc++'s shared_ptr", out.container, addr));
  LR_ASSIGN(uint64_t obj, prog.mem().read_u64(addr + ptr->offset));
  LR_ASSIGN(uint64_t cb, prog.mem().read_u64(addr + cntrl->offset));
  if (!cb) return out;
  LR_ASSIGN(uint64_t count, prog.mem().read_u64(cb + owners->offset));
  const Type* elem = t->template_args.empty() ? nullptr : t->template_args[0];
  add_shared_blocks(&out, cb, obj, elem, static_cast<int64_t>(count) >= 0);
  return out;
}

bool link_cxx(const Type* t) {
  static constexpr std::string_view kLinks[] = {
      "__list_node_base<",      "__tree_node_base<", "__tree_end_node<",       "__hash_node_base<",
      "__forward_begin_node<",  "__list_iterator<",  "__list_const_iterator<", "__tree_iterator<",
      "__tree_const_iterator<", "__hash_iterator<",  "__hash_const_iterator<", "__deque_iterator<"};
  for (std::string_view l : kLinks)
    if (t->name.rfind(l, 0) == 0) return true;
  return false;
}

// A hash table's bucket array (a unique_ptr<__next_pointer[]>).
void bucket_block(Program& prog, const Container& c, OwnBlocks* out) {
  auto b = read_at(prog, c, "__table_.__bucket_list_.__ptr_.__value_");
  if (b.ok() && b.value()) out->blocks.push_back({b.value(), "buckets", nullptr, 0, 0});
}

// A string's characters: a block of their own when the flag bit of its
// first byte is set (a long string), else inside the object.
Result<OwnBlocks> string_blocks(Program& prog, const Type* t, uint64_t addr, OwnBlocks out) {
  auto cap = resolve_path(t, "__r_.__value_.__l.__cap_");
  auto data = resolve_path(t, "__r_.__value_.__l.__data_");
  auto rep = resolve_path(t, "__r_.__value_");
  if (!cap.ok() || !data.ok() || !rep.ok() || cap->offset != rep->offset)
    return make_error(Errc::kUnsupported,
                      fmt::format("{} at {:#x}: not libc++'s string as LLVM 14 lays it out "
                                  "(the alternate layout is not read)",
                                  out.container, addr));
  uint8_t flag = 0;
  LR_TRY(prog.mem().read(addr + rep->offset, &flag, 1));
  if (!(flag & 1)) return out;
  LR_ASSIGN(uint64_t chars, prog.mem().read_u64(addr + data->offset));
  if (chars) out.blocks.push_back({chars, "characters", nullptr, 0, 0});
  return out;
}

// A deque's map and its blocks: those holding elements typed as them, the
// spare ones libc++ keeps at either end as blocks with none.
void deque_blocks(Program& prog, const Container& c, const Type* elem, const WalkLimits& lim,
                  OwnBlocks* out) {
  const uint64_t es = elem->strip()->size;
  auto span = deque_span(prog, c, es);
  if (!span.ok()) {
    out->warning = span.error().message;
    return;
  }
  const DequeSpan& d = span.value();
  if (d.slots > lim.max_nodes) {
    out->warning = fmt::format("{} at {:#x}: {} map slots, more than {}", c.name, c.addr, d.slots,
                               lim.max_nodes_name);
    return;
  }
  if (d.map) out->blocks.push_back({d.map, "map", nullptr, 0, 0});
  for (uint64_t k = 0; k < d.slots; ++k) {
    auto b = deque_block(prog, d, k, es);
    if (!b.ok()) {
      out->warning = fmt::format("{} at {:#x}: {}", c.name, c.addr, b.error().message);
      return;
    }
    const uint64_t lo = std::max(d.start, k * d.per_block);
    const uint64_t hi = std::min(d.start + d.count, (k + 1) * d.per_block);
    if (lo >= hi)
      out->blocks.push_back({b.value(), "spare block", nullptr, 0, 0});
    else
      out->blocks.push_back({b.value(), "block", elem, (lo - k * d.per_block) * es, hi - lo, true});
  }
}

Result<OwnBlocks> own_blocks_cxx(Program& prog, const Type* t, uint64_t addr,
                                 const WalkLimits& lim) {
  t = t ? t->strip() : nullptr;
  OwnBlocks out;
  out.container = cxx_type_name_kept(t);
  if (is_string(t)) return string_blocks(prog, t, addr, std::move(out));
  if (is_shared(t)) return shared_blocks(prog, t, addr, std::move(out));
  Variable v;
  v.name = std::string(out.container), v.type = t, v.addr = addr;
  LR_ASSIGN(Container c, container_at(prog, v));
  if (c.cls->shape >= Shape::kArray) return out;
  if (c.cls->shape == Shape::kVector && bit_vector(t)) {
    LR_ASSIGN(uint64_t words, read_at(prog, c, "__begin_"));
    if (words) out.blocks.push_back({words, "bits", nullptr, 0, 0});
    return out;
  }
  LR_ASSIGN(const Type* elem, element_of(c));
  const uint64_t es = elem->strip()->size;
  if (!es) return make_error(Errc::kBadFormat, c.name + ": an element of no size");
  if (c.cls->shape == Shape::kVector) {
    LR_ASSIGN(VectorSpan s, vector_span(prog, c, es));
    if (s.start) out.blocks.push_back({s.start, "elements", elem, 0, s.count, true});
    return out;
  }
  if (c.cls->shape == Shape::kDeque) {
    deque_blocks(prog, c, elem, lim, &out);
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
  k.runtime_symbol = "__gxx_personality_v0";  // libstdc++'s and libc++abi's
  TargetSpec t;
  t.name = "libcxx";
  t.containers.push_back(k);
  t.shared_layouts.push_back(libcxx_shared_layout());
  return t;
}

}  // namespace lr
