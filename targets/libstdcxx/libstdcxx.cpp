// libstdc++'s containers as the container kind "std" (libstdcxx.hpp).
#include "targets/libstdcxx/libstdcxx.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "corelib/debuginfo/cxx_names.hpp"
#include "corelib/objects/containers.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/walks/element_walks.hpp"
#include "targets/libstdcxx/control_blocks.hpp"

namespace lr {

namespace {

enum class Shape {
  kVector,
  kDeque,
  kList,
  kForwardList,
  kTree,
  kHash,
  // Holders of at most a fixed number of elements inside the object or
  // behind one pointer: no blocks of their own to type.
  kArray,
  kUniquePtr,
  kOptional,
};

// The class templates walked, by their DWARF names (in std or std::__cxx11),
// and the member only libstdc++'s layout has (libc++'s classes bear the
// same names); `pairs`: the element is std::pair<const Key, T>, not the
// first parameter.
struct StdClass {
  std::string_view prefix;
  Shape shape;
  const char* marker;
  bool pairs = false;
};
constexpr StdClass kClasses[] = {
    {"vector<", Shape::kVector, "_M_impl"},
    {"deque<", Shape::kDeque, "_M_impl"},
    {"list<", Shape::kList, "_M_impl"},
    {"forward_list<", Shape::kForwardList, "_M_impl"},
    {"map<", Shape::kTree, "_M_t", true},
    {"multimap<", Shape::kTree, "_M_t", true},
    {"set<", Shape::kTree, "_M_t"},
    {"multiset<", Shape::kTree, "_M_t"},
    {"unordered_map<", Shape::kHash, "_M_h", true},
    {"unordered_multimap<", Shape::kHash, "_M_h", true},
    {"unordered_set<", Shape::kHash, "_M_h"},
    {"unordered_multiset<", Shape::kHash, "_M_h"},
    {"array<", Shape::kArray, "_M_elems"},
    {"unique_ptr<", Shape::kUniquePtr, "_M_t"},
    {"optional<", Shape::kOptional, "_M_payload"},
};

// Whether `t` (or a base or anonymous part of it) has a member `name`: a
// layout's marker, asked of every container instance typed, so a member
// search with no path parsed.
bool has_member(const Type* t, const char* name) {
  uint64_t off = 0;
  return find_member(t, name, &off) != nullptr;
}

// A container no element count of a real process comes near.
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

struct Container {
  const Type* type = nullptr;  // the class, typedefs stripped
  uint64_t addr = 0;
  Shape shape = Shape::kVector;
  bool pairs = false;  // StdClass::pairs
  std::string name;    // the head as given, for messages
};

Result<FieldLoc> need(const Container& c, const char* path) {
  auto r = resolve_path(c.type, path);
  if (!r.ok())
    return make_error(Errc::kNotFound,
                      fmt::format("{} ({}) has no member '{}': not libstdc++'s layout", c.name,
                                  c.type->display(), path));
  return r;
}

const StdClass* std_class(const Type* t) {
  if (!t || !t->is_aggregate()) return nullptr;
  for (const auto& k : kClasses)
    if (t->name.rfind(k.prefix, 0) == 0) return has_member(t, k.marker) ? &k : nullptr;
  return nullptr;
}

// The container of type `t` (typedefs stripped) at `addr`; `name` for messages.
Result<Container> container_of(const Type* t, uint64_t addr, const std::string& name) {
  if (!t || !t->is_aggregate())
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{} is {}: not a C++ standard container", name,
                                  t ? t->display() : "of no known type"));
  const StdClass* k = std_class(t);
  if (!k)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{} is {}: not a standard container this walk knows (vector, "
                                  "deque, list, forward_list, map, set, unordered_map, "
                                  "unordered_set and their multi forms, array, unique_ptr, "
                                  "optional)",
                                  name, t->display()));
  Container c;
  c.type = t, c.addr = addr, c.name = name, c.shape = k->shape, c.pairs = k->pairs;
  return c;
}

// The container the head names: the head's type, or what a pointer head
// points at.
Result<Container> container_at(Program& prog, const Variable& head) {
  uint64_t addr = head.addr;
  const Type* t = head.type ? head.type->strip() : nullptr;
  if (t && t->kind == TypeKind::kPointer) {
    LR_ASSIGN(addr, prog.mem().read_u64(head.addr));
    t = t->target ? t->target->strip() : nullptr;
  }
  return container_of(t, addr, head.name);
}

// An object's alignment as the compiler lays it out: what the DWARF says
// when the source forced one (alignas: DW_AT_alignment), else a scalar's
// size (at most 16), an aggregate's widest member's.
uint64_t align_of(const Type* t, int depth = 0) {
  t = t ? t->strip() : nullptr;
  if (!t || depth > 32) return 1;
  if (t->align) return t->align;
  switch (t->kind) {
    case TypeKind::kArray:
      return align_of(t->target, depth + 1);
    case TypeKind::kStruct:
    case TypeKind::kUnion: {
      uint64_t a = 1;
      for (const auto& m : t->members) a = std::max(a, align_of(m.type, depth + 1));
      return a;
    }
    default:
      return std::clamp<uint64_t>(t->size, 1, 16);
  }
}

// The element type: a vector's pointer's target; else what the container's
// allocator allocates (a map's std::pair<const K, V>), else its first
// parameter.
Result<const Type*> element_of(const Container& c) {
  if (c.shape == Shape::kArray) {
    LR_ASSIGN(FieldLoc e, need(c, "_M_elems"));
    const Type* a = e.type ? e.type->strip() : nullptr;
    if (a && a->kind == TypeKind::kArray && a->target) return a->target;
    if (!c.type->template_args.empty() && c.type->template_args[0])
      return c.type->template_args[0];  // std::array<T, 0>
  }
  if (c.shape == Shape::kUniquePtr || c.shape == Shape::kOptional) {
    const Type* e = c.type->template_args.empty() ? nullptr : c.type->template_args[0];
    if (e && e->strip()->kind == TypeKind::kArray)
      return make_error(
          Errc::kUnsupported,
          fmt::format("{}: a unique_ptr to an array does not record its length", c.name));
    if (e) return e;
  }
  if (c.shape == Shape::kVector) {
    LR_ASSIGN(FieldLoc s, need(c, "_M_impl._M_start"));
    const Type* p = s.type ? s.type->strip() : nullptr;
    if (!p || p->kind != TypeKind::kPointer)
      return make_error(Errc::kUnsupported,
                        fmt::format("{}: std::vector<bool> packs its elements as bits: there "
                                    "are no element objects to walk",
                                    c.name));
    if (p->target) return p->target;
  }
  for (const Type* a : c.type->template_args) {
    const Type* s = a ? a->strip() : nullptr;
    if (s && s->name.rfind("allocator<", 0) == 0)
      if (const Type* e = first_template_parameter(s)) return e;
  }
  // A map's first parameter is its key, never its element: without the
  // allocator's parameter (clang's DWARF leaves it out) it is refused.
  if (!c.pairs && !c.type->template_args.empty() && c.type->template_args[0])
    return c.type->template_args[0];
  return make_error(Errc::kNotFound,
                    fmt::format("{} ({}): the DWARF names no element type (no parameter of its "
                                "allocator{})",
                                c.name, c.type->display(),
                                c.pairs ? "; a map's first parameter is its key" : ""));
}

// Where a node's element starts: after the node's base part (the type at
// `base_path`), at the element's alignment.
Result<uint64_t> storage_offset(const Container& c, const char* base_path, const Type* elem) {
  LR_ASSIGN(FieldLoc b, need(c, base_path));
  const Type* bt = b.type ? b.type->strip() : nullptr;
  // std::list's header adds _M_size to the node base it derives from.
  if (bt)
    for (const auto& m : bt->members)
      if (m.is_base && m.type) bt = m.type->strip();
  if (!bt || !bt->size)
    return make_error(Errc::kBadFormat, fmt::format("{}: {} has no size", c.name, base_path));
  const uint64_t a = align_of(elem);
  return (bt->size + a - 1) / a * a;
}

// The element count a container records; UINT64_MAX when it cannot be read
// (then nothing is compared with it).
uint64_t recorded_count(const Memory& mem, uint64_t addr, const FieldLoc& f) {
  uint64_t v = 0;
  const uint64_t n = f.type ? std::min<uint64_t>(f.type->strip()->size, 8) : 8;
  return n && mem.read(addr + f.offset, &v, n).ok() ? v : UINT64_MAX;
}

// A vector's element array: where it starts and how many elements it
// holds, its capacity bounding its size.
struct VectorSpan {
  uint64_t start = 0, count = 0;
};
Result<VectorSpan> vector_span(Program& prog, const Container& c, uint64_t elem_size) {
  LR_ASSIGN(FieldLoc s, need(c, "_M_impl._M_start"));
  LR_ASSIGN(FieldLoc f, need(c, "_M_impl._M_finish"));
  LR_ASSIGN(FieldLoc e, need(c, "_M_impl._M_end_of_storage"));
  const Memory& mem = prog.mem();
  LR_ASSIGN(uint64_t start, mem.read_u64(c.addr + s.offset));
  LR_ASSIGN(uint64_t finish, mem.read_u64(c.addr + f.offset));
  LR_ASSIGN(uint64_t end, mem.read_u64(c.addr + e.offset));
  // Its capacity bounds its size: a _M_finish past _M_end_of_storage is no vector.
  if (!elem_size || finish < start || finish > end || (finish - start) % elem_size ||
      (finish - start) / elem_size > kMaxElements)
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: _M_start {:#x}, _M_finish {:#x} and _M_end_of_storage "
                                  "{:#x} hold no whole number of {}-byte elements",
                                  c.name, start, finish, end, elem_size));
  return VectorSpan{start, (finish - start) / elem_size};
}

Result<WalkResult> walk_vector(Program& prog, const Container& c, uint64_t elem_size,
                               const WalkLimits& lim) {
  LR_ASSIGN(VectorSpan v, vector_span(prog, c, elem_size));
  return walk_array(prog.mem(), v.start, v.count, elem_size, lim);
}

// The member `name` of pointer type in `t` or its bases, depth first (a
// tuple's _Head_base holding the pointer, beside its deleter's of the same
// member name); false when there is none.
bool pointer_member(const Type* t, std::string_view name, uint64_t* off, int depth = 0) {
  t = t ? t->strip() : nullptr;
  if (!t || depth > 16) return false;
  for (const auto& m : t->members) {
    const Type* mt = m.type ? m.type->strip() : nullptr;
    if (m.name == name && mt && mt->kind == TypeKind::kPointer) return *off += m.offset, true;
    uint64_t inner = *off + m.offset;
    if (m.is_base && pointer_member(m.type, name, &inner, depth + 1)) return *off = inner, true;
  }
  return false;
}

// std::array's elements (its _M_elems, inside it), a unique_ptr's object
// (none when it holds null), an optional's value (none when disengaged).
Result<WalkResult> walk_holder(Program& prog, const Container& c, uint64_t es,
                               const WalkLimits& lim) {
  if (c.shape == Shape::kArray) {
    LR_ASSIGN(FieldLoc e, need(c, "_M_elems"));
    const Type* a = e.type ? e.type->strip() : nullptr;
    const uint64_t n = a && a->kind == TypeKind::kArray ? a->count : 0;
    return walk_array(prog.mem(), c.addr + e.offset, n, es, lim);
  }
  WalkResult r;
  if (c.shape == Shape::kUniquePtr) {
    LR_ASSIGN(FieldLoc t, need(c, "_M_t._M_t"));
    uint64_t off = t.offset;
    if (!pointer_member(t.type, "_M_head_impl", &off))
      return make_error(Errc::kNotFound, c.name + ": no pointer in its tuple: not libstdc++'s");
    LR_ASSIGN(uint64_t p, prog.mem().read_u64(c.addr + off));
    if (p) r.objects.push_back(p);
  } else {
    LR_ASSIGN(FieldLoc on, need(c, "_M_payload._M_engaged"));
    LR_ASSIGN(FieldLoc v, need(c, "_M_payload._M_payload._M_value"));
    uint8_t engaged = 0;
    LR_TRY(prog.mem().read(c.addr + on.offset, &engaged, 1));
    if (engaged > 1)
      return make_error(Errc::kBadFormat, fmt::format("{} at {:#x}: _M_engaged is {}, no bool",
                                                      c.name, c.addr, engaged));
    if (engaged) r.objects.push_back(c.addr + v.offset);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

// A deque: a map (an array of buffer pointers) and its buffers, each of
// the same number of elements. Its iterators _M_start and _M_finish say
// where the elements begin and end: the first element in the first
// buffer, one past the last in the last, and the map slots of both. The
// buffers' length is read from _M_start's [_M_first, _M_last), not taken
// from libstdc++'s headers (512 bytes' worth there since GCC 3).
struct DequeSpan {
  uint64_t map = 0;          // the map's block
  uint64_t first_slot = 0;   // _M_start._M_node
  uint64_t slots = 0;        // buffers in use: _M_start's to _M_finish's
  uint64_t per_buffer = 0;   // elements a buffer holds
  uint64_t first_cur = 0;    // _M_start._M_cur
  uint64_t first_first = 0;  // _M_start._M_first
  uint64_t last_cur = 0;     // _M_finish._M_cur
  uint64_t last_first = 0;   // _M_finish._M_first
  uint64_t count = 0;        // elements
};
Result<DequeSpan> deque_span(Program& prog, const Container& c, uint64_t es) {
  const Memory& mem = prog.mem();
  uint64_t v[10] = {};
  const char* paths[10] = {"_M_impl._M_map",
                           "_M_impl._M_start._M_cur",
                           "_M_impl._M_start._M_first",
                           "_M_impl._M_start._M_last",
                           "_M_impl._M_start._M_node",
                           "_M_impl._M_finish._M_cur",
                           "_M_impl._M_finish._M_first",
                           "_M_impl._M_finish._M_last",
                           "_M_impl._M_finish._M_node",
                           "_M_impl._M_map_size"};
  for (int i = 0; i < 10; ++i) {
    LR_ASSIGN(FieldLoc f, need(c, paths[i]));
    LR_ASSIGN(v[i], mem.read_u64(c.addr + f.offset));
  }
  DequeSpan d;
  d.map = v[0], d.first_cur = v[1], d.first_first = v[2], d.first_slot = v[4];
  d.last_cur = v[5], d.last_first = v[6];
  const uint64_t len = v[3] - v[2];
  auto bad = [&](const char* why) {
    return make_error(Errc::kBadFormat,
                      fmt::format("{} at {:#x}: {}: not a deque's iterators", c.name, c.addr, why));
  };
  if (!es || v[3] < v[2] || len == 0 || len % es || v[7] - v[6] != len)
    return bad("its buffers are not of one whole number of elements");
  if (v[1] < v[2] || v[1] > v[3] || v[5] < v[6] || v[5] > v[7] || (v[1] - v[2]) % es ||
      (v[5] - v[6]) % es)
    return bad("a position lies outside its buffer");
  if (v[8] < v[4] || (v[8] - v[4]) % 8 || (v[8] - v[4]) / 8 >= kMaxElements / (len / es))
    return bad("_M_finish's map slot is not at or after _M_start's");
  // The slots in use lie in the map: _M_map_size bounds them (a count
  // from the core, read as no more than it says).
  if (v[4] < v[0] || v[9] > kMaxElements || (v[4] - v[0]) / 8 + (v[8] - v[4]) / 8 >= v[9])
    return bad("its slots lie outside its map of _M_map_size slots");
  d.per_buffer = len / es;
  d.slots = (v[8] - v[4]) / 8 + 1;
  d.count = d.slots == 1 ? (v[5] - v[1]) / es
                         : (v[3] - v[1]) / es + (d.slots - 2) * d.per_buffer + (v[5] - v[6]) / es;
  if (d.slots == 1 && v[5] < v[1]) return bad("_M_finish lies before _M_start");
  return d;
}

// The elements buffer by buffer, the map's slots read as the walk goes.
Result<WalkResult> walk_deque(Program& prog, const Container& c, uint64_t es,
                              const WalkLimits& lim) {
  LR_ASSIGN(DequeSpan d, deque_span(prog, c, es));
  WalkResult r;
  if (over_limit(d.count, lim, c.name, &r)) return r;
  r.objects.reserve(std::min<uint64_t>(d.count, 1 << 16));  // grows with what is read
  for (uint64_t k = 0; k < d.slots; ++k) {
    auto buf = prog.mem().read_u64(d.first_slot + 8 * k);
    if (!buf.ok()) {
      r.stop = WalkStop::kFault, r.stop_addr = d.first_slot + 8 * k;
      r.stop_detail = fmt::format("{}: map slot {:#x} unreadable", c.name, r.stop_addr);
      break;
    }
    uint64_t from = k == 0 ? d.first_cur : buf.value();
    const uint64_t to = k + 1 == d.slots ? d.last_cur : buf.value() + d.per_buffer * es;
    if (buf.value() != (k == 0 ? d.first_first : k + 1 == d.slots ? d.last_first : buf.value())) {
      r.stop = WalkStop::kCorrupt, r.stop_addr = d.first_slot + 8 * k;
      r.stop_detail = fmt::format("{}: map slot {:#x} holds {:#x}, not its iterator's buffer",
                                  c.name, r.stop_addr, buf.value());
      break;
    }
    // A buffer the core does not hold (a slot overwritten) yields no
    // elements: its first and last words are read.
    const uint64_t end = buf.value() + d.per_buffer * es;
    if (!prog.mem().read_u64(buf.value()).ok() ||
        !prog.mem().read_u64(end - std::min<uint64_t>(8, end - buf.value())).ok()) {
      r.stop = WalkStop::kFault, r.stop_addr = d.first_slot + 8 * k;
      r.stop_detail = fmt::format("{}: map slot {:#x} holds {:#x}, a buffer the core lacks", c.name,
                                  r.stop_addr, buf.value());
      break;
    }
    for (; from < to; from += es) r.objects.push_back(from);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

// The nodes of a node-based container, from its links (no sink: the
// objects are its elements, made from the nodes after).
Result<WalkResult> walk_nodes(Program& prog, const Container& c, const WalkLimits& lim,
                              uint64_t* recorded) {
  const Memory& mem = prog.mem();
  switch (c.shape) {
    case Shape::kList: {
      LR_ASSIGN(FieldLoc h, need(c, "_M_impl._M_node"));
      if (auto sz = resolve_path(c.type, "_M_impl._M_node._M_size"); sz.ok())
        *recorded = recorded_count(mem, c.addr, sz.value());
      return walk_list(mem, c.addr + h.offset, 0, lim);
    }
    case Shape::kForwardList: {
      LR_ASSIGN(FieldLoc h, need(c, "_M_impl._M_head._M_next"));
      LR_ASSIGN(uint64_t first, mem.read_u64(c.addr + h.offset));
      return walk_chain(mem, first, 0, lim);
    }
    case Shape::kTree: {
      LR_ASSIGN(FieldLoc h, need(c, "_M_t._M_impl._M_header"));
      LR_ASSIGN(FieldLoc n, need(c, "_M_t._M_impl._M_node_count"));
      const Type* base = h.type ? h.type->strip() : nullptr;
      uint64_t p = 0, l = 0, r = 0;
      if (!base || !find_member(base, "_M_parent", &p) || !find_member(base, "_M_left", &l) ||
          !find_member(base, "_M_right", &r))
        return make_error(Errc::kNotFound, c.name + ": _Rb_tree_node_base is not libstdc++'s");
      const uint64_t header = c.addr + h.offset;
      *recorded = recorded_count(mem, c.addr, n);
      LR_ASSIGN(uint64_t root, mem.read_u64(header + p));
      TreeShape sh{l, r, true, p, ~uint64_t{0}, base->size, header};
      return walk_tree(mem, root, sh, 0, lim);
    }
    case Shape::kHash: {
      LR_ASSIGN(FieldLoc b, need(c, "_M_h._M_before_begin._M_nxt"));
      LR_ASSIGN(FieldLoc n, need(c, "_M_h._M_element_count"));
      *recorded = recorded_count(mem, c.addr, n);
      LR_ASSIGN(uint64_t first, mem.read_u64(c.addr + b.offset));
      return walk_chain(mem, first, 0, lim);
    }
    default:
      break;
  }
  return make_error(Errc::kInvalidArgument, c.name + ": not a node-based container");
}

const char* node_base(Shape s) {
  switch (s) {
    case Shape::kList:
      return "_M_impl._M_node";
    case Shape::kForwardList:
      return "_M_impl._M_head";
    case Shape::kTree:
      return "_M_t._M_impl._M_header";
    default:
      return "_M_h._M_before_begin";
  }
}

// The elements themselves, of `elem` (its size `elem_size`).
Result<WalkResult> walk_elements(Program& prog, const Container& c, const Type* elem,
                                 uint64_t elem_size, const WalkLimits& lim) {
  if (c.shape == Shape::kVector) return walk_vector(prog, c, elem_size, lim);
  if (c.shape == Shape::kDeque) return walk_deque(prog, c, elem_size, lim);
  if (c.shape >= Shape::kArray) return walk_holder(prog, c, elem_size, lim);
  LR_ASSIGN(uint64_t off, storage_offset(c, node_base(c.shape), elem));
  WalkLimits nl = lim;
  nl.sink = {};
  uint64_t recorded = UINT64_MAX;
  LR_ASSIGN(WalkResult r, walk_nodes(prog, c, nl, &recorded));
  r = node_elements(std::move(r), off, recorded, c.addr, c.name);
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

Result<WalkResult> walk_std(Program& prog, const Variable& head, const std::string& member,
                            uint64_t obj_size, const WalkLimits& lim) {
  LR_ASSIGN(Container c, container_at(prog, head));
  LR_ASSIGN(const Type* elem, element_of(c));
  LR_ASSIGN(ElementReach reach, element_reach(c.name, elem, member));
  const uint64_t es = elem->strip()->size;
  return walk_reached(prog.mem(), c.name, elem, reach, obj_size, lim,
                      [&](const WalkLimits& l) { return walk_elements(prog, c, elem, es, l); });
}

Result<const Type*> element_std(Program& prog, const Variable& head, const std::string& member) {
  LR_ASSIGN(Container c, container_at(prog, head));
  LR_ASSIGN(const Type* elem, element_of(c));
  LR_ASSIGN(ElementReach reach, element_reach(c.name, elem, member));
  return reach.objects(elem);
}

// ---- the containers' own blocks (typed by what holds them) ----

bool is_string(const Type* t) {
  return t && t->is_aggregate() && t->name.rfind("basic_string<", 0) == 0 &&
         has_member(t, "_M_dataplus");
}

bool is_shared(const Type* t) {
  return t && t->is_aggregate() && t->name.rfind("shared_ptr<", 0) == 0 &&
         has_member(t, "_M_refcount");
}

// Whether `t` is a libstdc++ container this kind reads (a libc++ one, of
// the same name, is libc++'s kind's).
bool knows_std(const Type* t) {
  return std_class(t) != nullptr;
}

// A node's base part and the iterators: what points at a container's
// node, or into its buffers, without naming the container.
bool link_std(const Type* t) {
  static constexpr std::string_view kLinks[] = {
      "_List_node_base",           "_List_node_header",     "_Rb_tree_node_base",
      "_Fwd_list_node_base",       "_Hash_node_base",       "_List_iterator<",
      "_List_const_iterator<",     "_Rb_tree_iterator<",    "_Rb_tree_const_iterator<",
      "_Node_iterator<",           "_Node_const_iterator<", "_Fwd_list_iterator<",
      "_Fwd_list_const_iterator<", "_Deque_iterator<"};
  for (std::string_view l : kLinks)
    if (t->name.rfind(l, 0) == 0) return true;
  return false;
}

// The containers whose blocks are their own (array, unique_ptr and optional
// allocate none: what a unique_ptr points at keeps its own type), and a
// shared_ptr's control block, which holds make_shared's object.
bool holds_std(const Type* t) {
  const StdClass* k = std_class(t);
  return (k && k->shape < Shape::kArray) || is_string(t) || is_shared(t);
}

// A shared_ptr's control block. One from make_shared (or allocate_shared)
// holds the object itself, just past its counts: `_M_ptr` points into it.
// That object is typed as the element only while use_count is above zero;
// once the last owner went it is destroyed and its bytes are stale.
Result<OwnBlocks> shared_blocks(Program& prog, const Type* t, uint64_t addr, OwnBlocks out) {
  auto ptr = resolve_path(t, "_M_ptr");
  auto pi = resolve_path(t, "_M_refcount._M_pi");
  if (!ptr.ok() || !pi.ok() || !pi.value().type || !pi.value().type->strip()->target)
    return make_error(Errc::kUnsupported,
                      fmt::format("{} at {:#x}: not libstdc++'s shared_ptr", out.container, addr));
  auto use = resolve_path(pi.value().type->strip()->target, "_M_use_count");
  if (!use.ok()) return use.error();
  LR_ASSIGN(uint64_t obj, prog.mem().read_u64(addr + ptr.value().offset));
  LR_ASSIGN(uint64_t cb, prog.mem().read_u64(addr + pi.value().offset));
  if (!cb) return out;
  LR_ASSIGN(uint32_t count, prog.mem().read_as<uint32_t>(cb + use.value().offset));
  const Type* elem = t->template_args.empty() ? nullptr : t->template_args[0];
  add_shared_blocks(&out, cb, obj, elem, static_cast<int32_t>(count) > 0);
  return out;
}

// A std::string of the C++11 ABI (std::__cxx11::basic_string, GCC 5 on):
// its characters are a block of their own once longer than the 15 kept in
// the object itself. The copy-on-write string of the old ABI keeps a
// header before them and is refused.
Result<OwnBlocks> string_blocks(Program& prog, const Type* t, uint64_t addr, OwnBlocks out) {
  auto p = resolve_path(t, "_M_dataplus._M_p");
  auto local = resolve_path(t, "_M_local_buf");
  if (!p.ok() || !local.ok())
    return make_error(Errc::kUnsupported,
                      fmt::format("{} at {:#x}: not the C++11 ABI's string (a copy-on-write "
                                  "string is not read)",
                                  out.container, addr));
  LR_ASSIGN(uint64_t chars, prog.mem().read_u64(addr + p.value().offset));
  if (chars && chars != addr + local.value().offset)
    out.blocks.push_back({chars, "characters", nullptr, 0, 0});
  return out;
}

// std::vector<bool>'s one array of words, its bits (no element objects).
Result<OwnBlocks> bit_vector_blocks(Program& prog, const Container& c, OwnBlocks out) {
  LR_ASSIGN(FieldLoc p, need(c, "_M_impl._M_start._M_p"));
  LR_ASSIGN(uint64_t words, prog.mem().read_u64(c.addr + p.offset));
  if (words) out.blocks.push_back({words, "bits", nullptr, 0, 0});
  return out;
}

// A vector's one element array (its capacity's worth; the elements are
// its size's).
Result<void> vector_blocks(Program& prog, const Container& c, const Type* elem, OwnBlocks* out) {
  LR_ASSIGN(VectorSpan v, vector_span(prog, c, elem->strip()->size));
  if (v.start) out->blocks.push_back({v.start, "elements", elem, 0, v.count, true});
  return {};
}

// A deque's map and its buffers in use (each a buffer's worth of elements;
// those before _M_start and after _M_finish are not elements).
Result<void> deque_blocks(Program& prog, const Container& c, const Type* elem, OwnBlocks* out) {
  const uint64_t es = elem->strip()->size;
  LR_ASSIGN(DequeSpan d, deque_span(prog, c, es));
  if (!d.map) return {};
  out->blocks.push_back({d.map, "map", nullptr, 0, 0});
  for (uint64_t k = 0; k < d.slots; ++k) {
    auto buf = prog.mem().read_u64(d.first_slot + 8 * k);
    if (!buf.ok() || (k == 0 && buf.value() != d.first_first) ||
        (k > 0 && k + 1 == d.slots && buf.value() != d.last_first)) {
      out->warning = fmt::format(
          "{} at {:#x}: map slot {:#x} is unreadable or not its "
          "iterator's buffer",
          c.name, c.addr, d.first_slot + 8 * k);
      break;
    }
    const uint64_t first = k == 0 ? (d.first_cur - buf.value()) / es : 0;
    const uint64_t last = k + 1 == d.slots ? (d.last_cur - buf.value()) / es : d.per_buffer;
    out->blocks.push_back({buf.value(), "buffer", elem, first * es, last - first, true});
  }
  return {};
}

// A hash table's bucket array, unless it is the one bucket kept inside the
// table itself.
Result<void> bucket_block(Program& prog, const Container& c, OwnBlocks* out) {
  LR_ASSIGN(FieldLoc b, need(c, "_M_h._M_buckets"));
  LR_ASSIGN(FieldLoc one, need(c, "_M_h._M_single_bucket"));
  LR_ASSIGN(uint64_t buckets, prog.mem().read_u64(c.addr + b.offset));
  if (buckets && buckets != c.addr + one.offset)
    out->blocks.push_back({buckets, "buckets", nullptr, 0, 0});
  return {};
}

Result<OwnBlocks> own_blocks_std(Program& prog, const Type* t, uint64_t addr,
                                 const WalkLimits& lim) {
  t = t ? t->strip() : nullptr;
  OwnBlocks out;
  out.container = cxx_type_name_kept(t);
  if (is_string(t)) return string_blocks(prog, t, addr, std::move(out));
  if (is_shared(t)) return shared_blocks(prog, t, addr, std::move(out));
  LR_ASSIGN(Container c, container_of(t, addr, std::string(out.container)));
  if (c.shape >= Shape::kArray) return out;
  if (c.shape == Shape::kVector && resolve_path(t, "_M_impl._M_start._M_p").ok())
    return bit_vector_blocks(prog, c, std::move(out));
  LR_ASSIGN(const Type* elem, element_of(c));
  if (!elem->strip()->size)
    return make_error(Errc::kBadFormat, fmt::format("{}: an element of no size", c.name));
  if (c.shape == Shape::kVector) {
    LR_TRY(vector_blocks(prog, c, elem, &out));
    return out;
  }
  if (c.shape == Shape::kDeque) {
    LR_TRY(deque_blocks(prog, c, elem, &out));
    return out;
  }
  LR_ASSIGN(uint64_t off, storage_offset(c, node_base(c.shape), elem));
  WalkLimits nl = lim;
  nl.sink = {};
  uint64_t recorded = UINT64_MAX;
  LR_ASSIGN(WalkResult r, walk_nodes(prog, c, nl, &recorded));
  add_node_blocks(&out, r, elem, off, recorded, addr, c.name);
  if (c.shape == Shape::kHash) LR_TRY(bucket_block(prog, c, &out));
  return out;
}

}  // namespace

TargetSpec libstdcxx_target() {
  ContainerKind k;
  k.name = "std";
  k.family = "std";
  k.knows = &knows_std;
  k.mode = "std:libstdc++";
  k.what = "a C++ standard container (libstdc++)";
  // "." the elements, "*" what pointer elements point at, a member path:
  // what that pointer member of each element points at.
  k.members = {"."};
  k.member_paths = true;
  k.walk = &walk_std;
  k.element = &element_std;
  k.holds = &holds_std;
  k.own_blocks = &own_blocks_std;
  k.link = &link_std;
  k.runtime_symbol = "__gxx_personality_v0";  // libstdc++'s and libc++abi's
  TargetSpec t;
  t.name = "libstdcxx";
  t.containers.push_back(k);
  t.shared_layouts.push_back(libstdcxx_shared_layout());
  return t;
}

}  // namespace lr
