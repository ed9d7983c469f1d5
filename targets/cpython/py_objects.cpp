// The census of a CPython process's objects (py_objects.hpp).
#include "targets/cpython/py_objects.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/program.hpp"

namespace lr {

const PyObj* PyCensus::find(uint64_t addr) const {
  auto it = std::lower_bound(objects.begin(), objects.end(), addr,
                             [](const PyObj& o, uint64_t a) { return o.addr < a; });
  return it != objects.end() && it->addr == addr ? &*it : nullptr;
}

const PyObj* PyCensus::in_chunk(uint32_t chunk) const {
  auto it = std::lower_bound(objects.begin(), objects.end(), chunk,
                             [](const PyObj& o, uint32_t c) { return o.chunk < c; });
  return it != objects.end() && it->chunk == chunk ? &*it : nullptr;
}

namespace {

constexpr int kMaxMetaDepth = 8;
constexpr int64_t kMaxRefcnt = int64_t{1} << 40;
constexpr size_t kMaxWarnings = 8;
constexpr int32_t kInvalid = -1, kVisiting = -2;
constexpr uint64_t kHead = 96;  // bytes of a block read: its pre-header and an object's header

class Census {
 public:
  Census(const Program& prog, const HeapWalk& heap, PyCensus& out)
      : mem_(prog.mem()), heap_(heap), out_(out), L_(out.layout) {}

  void run() {
    for (const auto& r : heap_.regions)
      if (r.kind == HeapRegion::Kind::kCarved) carved_.emplace_back(r.start, r.end);
    std::sort(carved_.begin(), carved_.end());
    out_.arenas = carved_.size();
    if (L_.raw_blocks_var)
      if (auto n = mem_.read_as<int64_t>(L_.raw_blocks_var); n.ok()) out_.raw_blocks = n.value();
    for (const auto& [a, b] : carved_) {
      auto lo = std::lower_bound(heap_.in_use.begin(), heap_.in_use.end(), a,
                                 [](const HeapChunk& c, uint64_t x) { return c.user < x; });
      auto hi = std::lower_bound(lo, heap_.in_use.end(), b,
                                 [](const HeapChunk& c, uint64_t x) { return c.user < x; });
      out_.pymalloc_blocks += hi - lo;
    }
    out_.objects.reserve(heap_.in_use.size());  // most blocks of a Python process are objects
    for (uint32_t i = 0; i < heap_.in_use.size(); ++i) block(i, heap_.in_use[i]);
    drop_module_states();
    check_dicts();
    gc_lists();
    if (warned_ > kMaxWarnings)
      out_.warnings.push_back(fmt::format("{} more such warnings", warned_ - kMaxWarnings));
  }

 private:
  void warn(std::string w) {
    if (warned_++ < kMaxWarnings) out_.warnings.push_back(std::move(w));
  }

  // The index of the type at `t` in out_.types; kInvalid when `t` is none.
  int32_t type_at(uint64_t t, int depth = 0) {
    auto [it, fresh] = cache_.try_emplace(t, kVisiting);
    if (!fresh) {
      if (it->second == kVisiting) {
        warn(fmt::format("type {:#x}: its ob_type chain is a cycle", t));
        it->second = kInvalid;
      }
      return it->second;
    }
    const int32_t r = read_type(t, depth);
    cache_[t] = r;  // `it` may have moved
    return r;
  }

  int32_t read_type(uint64_t t, int depth) {
    const uint8_t* p = (t % 8 == 0) ? mem_.span(t, L_.type_size) : nullptr;
    if (!p) return kInvalid;
    uint64_t meta, name, basic, item, flags;
    std::memcpy(&meta, p + L_.ob_type, 8);
    std::memcpy(&name, p + L_.tp_name, 8);
    std::memcpy(&basic, p + L_.tp_basicsize, 8);
    std::memcpy(&item, p + L_.tp_itemsize, 8);
    std::memcpy(&flags, p + L_.tp_flags, 8);
    if (!(flags & kTpReady) || basic < 16 || basic > (1u << 20) || item > (1u << 16))
      return kInvalid;
    if (meta != L_.type_type) {
      if (depth >= kMaxMetaDepth) return kInvalid;
      const int32_t m = type_at(meta, depth + 1);
      if (m < 0 || !(out_.types[m].flags & kTpTypeSubclass)) return kInvalid;
    }
    bool whole = false;
    auto s = mem_.read_cstring(name, 256, &whole);
    if (!s.ok() || !whole || s.value().empty()) return kInvalid;
    for (char c : s.value())
      if (c < 0x20 || c > 0x7e) return kInvalid;
    out_.types.push_back({t, std::move(s.value()), basic, item, flags});
    return static_cast<int32_t>(out_.types.size() - 1);
  }

  // Whether type `T`'s objects' size is known: all but int's, whose digits
  // vary with the value (3.11 allocates at least one).
  static bool exact(const PyType& T) { return !(T.flags & kTpLongSubclass); }

  // 3.13: the inline values after an object of a type with them (at
  // tp_basicsize): a header whose first byte is their capacity, the values,
  // and a byte of order each, rounded to 8 (Objects/dictobject.c,
  // _PyObject_InitInlineValues; pycore_object.h, _PyInlineValuesSize).
  // The block may be larger: the allocation asked the class's shared keys
  // before the values recorded their capacity (seen: 29 recorded in a
  // 336-byte block sized for 31), so such an object is only checked to fit.
  // 0: none; UINT64_MAX: unreadable.
  uint64_t inline_values(const PyType& T, uint64_t obj) const {
    if (!L_.inline_values || !(T.flags & kTpInlineValues)) return 0;
    auto cap = mem_.read_as<uint8_t>(obj + T.basicsize);
    if (!cap.ok()) return UINT64_MAX;
    return L_.values_items + cap.value() * 8 + ((cap.value() + 7) & ~7u);
  }

  // A str's bytes: a compact one's header and characters with their NUL,
  // else its type's size (its characters lie elsewhere). 0: no str's state.
  uint64_t str_size(const PyType& T, const uint8_t* p) const {
    uint32_t state;
    int64_t len;
    std::memcpy(&state, p + L_.str_state, 4);
    std::memcpy(&len, p + L_.str_length, 8);
    const uint32_t kind = L_.st_kind.of(state);
    if (len < 0 || len > (int64_t{1} << 34) || (kind != 1 && kind != 2 && kind != 4)) return 0;
    if (!L_.st_compact.of(state)) return T.basicsize;
    if (L_.st_ascii.of(state)) return L_.ascii_size + uint64_t(len) + 1;
    return L_.compact_size + (uint64_t(len) + 1) * kind;
  }

  // The bytes an object of type `T` at `p` takes (_PyObject_VAR_SIZE: its
  // items', rounded to 8), or at least (not exact(T)): its fixed part. 0:
  // its header is not one of T's.
  uint64_t object_size(const PyType& T, const uint8_t* p) const {
    if (T.flags & kTpUnicodeSubclass) return str_size(T, p);
    if (!T.itemsize || !exact(T)) return T.basicsize;
    int64_t n;
    std::memcpy(&n, p + L_.ob_size, 8);
    const uint64_t items = static_cast<uint64_t>(n < 0 ? -n : n);
    if (items > (uint64_t{1} << 34)) return 0;
    return (T.basicsize + items * T.itemsize + 7) & ~uint64_t{7};
  }

  // Whether a request of `n` bytes gets block `c`: pymalloc rounds to 16,
  // the system allocator says how it rounds.
  bool fits(const HeapChunk& c, uint64_t n) const {
    auto it = std::upper_bound(
        carved_.begin(), carved_.end(), c.user,
        [](uint64_t a, const std::pair<uint64_t, uint64_t>& r) { return a < r.first; });
    if (it != carved_.begin() && c.user < (--it)->second)
      return c.usable() == ((n + 15) & ~uint64_t{15});
    return heap_.fits_request(c, n);
  }

  // The object block `c` holds, if any: the first pre-header offset at
  // which a type's object fits.
  void block(uint32_t i, const HeapChunk& c) {
    const uint64_t u = c.usable(), head = std::min<uint64_t>(u, kHead);
    const uint8_t* p = mem_.direct(win_, c.user, head);
    if (!p || u < 16) return;
    for (uint64_t off : {uint64_t{0}, L_.gc_head, L_.gc_head + 16}) {
      if (off + 16 > head) break;
      uint64_t tp;
      int64_t rc;
      std::memcpy(&rc, p + off + L_.ob_refcnt, 8);
      std::memcpy(&tp, p + off + L_.ob_type, 8);
      if (rc < 0 || rc > kMaxRefcnt || tp < 4096) continue;
      const int32_t t = type_at(tp);
      if (t < 0) continue;
      const PyType& T = out_.types[t];
      if (L_.preheader(T.flags) != off) continue;
      if (off + L_.head_read(T.flags, T.itemsize) > head) continue;
      // PyType_GenericAlloc allocates one item more than ob_size (a
      // sentinel): heap types, instances of var-sized subclasses.
      const uint64_t values = inline_values(T, c.user + off);
      const uint64_t size = object_size(T, p + off), need = off + size + values;
      if (values == UINT64_MAX) continue;
      if (size == 0 || need > u ||
          (exact(T) && !values && !fits(c, need) &&
           !(T.itemsize && fits(c, (need + T.itemsize + 7) & ~uint64_t{7}))))
        continue;
      PyObj o{c.user + off, i, static_cast<uint32_t>(t), rc, static_cast<uint32_t>(u), 0, 0};
      if (rc == 0) {
        // Dead objects kept for reuse; any other block whose first words
        // read as a count of 0 and a type is something else.
        if (!free_listed_type(T)) continue;
        o.flags |= PyObj::kFreeList;
      }
      if (L_.immortal(rc)) o.flags |= PyObj::kImmortal;
      if (T.flags & kTpUnicodeSubclass) {
        uint32_t state;
        std::memcpy(&state, p + off + L_.str_state, 4);
        if (L_.st_interned.of(state)) o.flags |= PyObj::kInterned;
      }
      out_.objects.push_back(o);
      return;
    }
  }

  // The types 3.11 keeps freed objects of on free lists (Objects/floatobject.c,
  // tupleobject.c, listobject.c, dictobject.c, sliceobject.c, genobject.c,
  // Python/context.c): their refcount is 0 there.
  static bool free_listed_type(const PyType& T) {
    static const char* const kTypes[] = {"float",
                                         "tuple",
                                         "list",
                                         "dict",
                                         "slice",
                                         "async_generator_asend",
                                         "async_generator_wrapped_value",
                                         "Context"};
    for (const char* n : kTypes)
      if (T.name == n) return true;
    return false;
  }

  // A module's state (PyModuleDef.m_size bytes, PyMem_Malloc'ed; md_state)
  // holds the module's types and objects: its first two words can read as
  // a count and a type (select's holds a str and the poll type). It is no
  // object.
  void drop_module_states() {
    std::vector<uint64_t> states;
    const std::vector<uint8_t> module = out_.modules();
    for (const PyObj& o : out_.objects)
      if (o.live() && module[o.type])
        if (auto st = mem_.read_u64(o.addr + L_.md_state); st.ok() && st.value())
          states.push_back(st.value());
    // The object read in a state's block lies at its start or past a
    // pre-header: found by address among the objects (sorted), not by a
    // search for every object.
    std::vector<uint8_t> drop(out_.objects.size(), 0);
    bool any = false;
    for (uint64_t st : states) {
      auto it = std::lower_bound(out_.objects.begin(), out_.objects.end(), st,
                                 [](const PyObj& o, uint64_t a) { return o.addr < a; });
      if (it != out_.objects.end() && heap_.in_use[it->chunk].user == st)
        drop[it - out_.objects.begin()] = 1, any = true;
    }
    if (!any) return;
    size_t i = 0;
    std::erase_if(out_.objects, [&](const PyObj&) { return drop[i++] != 0; });
  }

  // Each dict's keys table, as dictobject.c of 3.11 keeps it: a table of
  // 2^dk_log2_size slots (0: the shared empty table) whose indices take 1,
  // 2, 4 or 8 bytes each, of a known kind, with at least ma_used entries (a
  // combined table's) and no more than it has slots. A dict that breaks
  // this is named: what a path through it says is then in doubt.
  void check_dicts() {
    for (const PyObj& o : out_.objects) {
      if (!o.live() || !(out_.type(o).flags & kTpDictSubclass)) continue;
      auto used = mem_.read_as<int64_t>(o.addr + L_.dict_used);
      auto keys = mem_.read_u64(o.addr + L_.dict_keys);
      auto values = mem_.read_u64(o.addr + L_.dict_values);
      const uint8_t* k = keys.ok() ? mem_.span(keys.value(), L_.dk_indices) : nullptr;
      if (!used.ok() || !values.ok() || !k) {
        warn(fmt::format("dict {:#x}: its keys table is unreadable", o.addr));
        continue;
      }
      const uint8_t lg = k[L_.dk_log2_size], lgi = k[L_.dk_log2_index_bytes], kind = k[L_.dk_kind];
      int64_t n;
      std::memcpy(&n, k + L_.dk_nentries, 8);
      const bool shape = lg <= 40 && lgi >= lg && lgi <= lg + 3 && kind <= 2;
      const int64_t slots = shape ? int64_t{1} << lg : 0;
      if (!shape || n < 0 || n > slots || used.value() < 0 || (!values.value() && used.value() > n))
        warn(
            fmt::format("dict {:#x}: {} entries in use, but its keys table at {:#x} does not "
                        "read as one that holds them",
                        o.addr, used.value(), keys.value()));
    }
  }

  // Every interpreter's generation lists (bounded by the objects found: a
  // list longer than that is a cycle).
  void gc_lists() {
    auto interp = mem_.read_u64(L_.runtime + L_.interp_head);
    for (int n = 0; interp.ok() && interp.value() && n < 64; ++n) {
      const uint64_t is = interp.value();
      ++out_.interpreters;
      own_allocator(is);
      for (uint64_t g = 0; g <= L_.ngenerations; ++g) {
        const uint64_t head =
            g < L_.ngenerations ? is + L_.gc_generations + g * L_.gen_size : is + L_.gc_permanent;
        gc_list(head, static_cast<uint8_t>(g));
      }
      interp = mem_.read_u64(is + L_.interp_next);
    }
  }

  // 3.13: an interpreter made with its own pymalloc state (a
  // sub-interpreter with its own GIL) keeps its objects in arenas leakref
  // does not walk.
  void own_allocator(uint64_t is) {
    if (!L_.interp_obmalloc) return;
    auto ob = mem_.read_u64(is + L_.interp_obmalloc);
    if (!ob.ok() || ob.value() != L_.main_obmalloc)
      warn(
          fmt::format("interpreter {:#x} keeps its own pymalloc state: its objects are not "
                      "read",
                      is));
  }

  void gc_list(uint64_t head, uint8_t gen) {
    auto next = mem_.read_u64(head);
    uint64_t steps = 0;
    while (next.ok() && (next.value() & ~uint64_t{3}) != head) {
      const uint64_t g = next.value() & ~uint64_t{3};
      if (++steps > out_.objects.size() + 1) {
        warn(
            fmt::format("GC generation {}'s list at {:#x} is longer than the objects found: "
                        "a cycle; read no further",
                        gen, head));
        return;
      }
      ++out_.gc_listed;
      // The object follows its GC head (in 3.11 a managed dict's two
      // pointers come before the head).
      PyObj* o = const_cast<PyObj*>(out_.find(g + L_.gc_head));
      if (!o || o->flags & PyObj::kTracked) {
        warn(
            fmt::format("GC generation {} lists {:#x}, which is no live object (freed, or "
                        "listed twice)",
                        gen, g + L_.gc_head));
      } else {
        o->flags |= PyObj::kTracked;
        o->generation = gen;
        ++out_.tracked;
      }
      next = mem_.read_u64(g);
    }
    if (!next.ok()) warn(fmt::format("GC generation {}'s list at {:#x} breaks", gen, head));
  }

  const Memory& mem_;
  const HeapWalk& heap_;
  PyCensus& out_;
  const PyLayout& L_;
  Memory::Window win_;
  std::vector<std::pair<uint64_t, uint64_t>> carved_;  // pymalloc's arenas, sorted
  std::unordered_map<uint64_t, int32_t> cache_;
  size_t warned_ = 0;
};

}  // namespace

namespace {

// The usable end of the in-use block starting at `user` (0: none).
uint64_t block_end(const HeapWalk& heap, uint64_t user) {
  const auto& in = heap.in_use;
  auto it = std::lower_bound(in.begin(), in.end(), user,
                             [](const HeapChunk& k, uint64_t a) { return k.user < a; });
  return it != in.end() && (*it).user == user ? user + (*it).usable() : 0;
}

// Where list `l`'s items at `items` stop being live (ob_size), when the
// list reads as one: 0 <= ob_size <= allocated, its slots inside the block.
// A damaged one cuts nothing (UINT64_MAX): no word is taken for stale on
// its say.
uint64_t list_live_end(const HeapWalk& heap, const Memory& mem, const PyLayout& L, uint64_t l,
                       uint64_t items) {
  auto size = mem.read_as<int64_t>(l + L.ob_size);
  auto alloc = mem.read_as<int64_t>(l + L.list_allocated);
  if (!size.ok() || !alloc.ok() || size.value() < 0 || size.value() > alloc.value() ||
      alloc.value() > (int64_t{1} << 40) ||
      items + uint64_t(alloc.value()) * 8 > block_end(heap, items))
    return UINT64_MAX;
  return items + uint64_t(size.value()) * 8;
}

// Where dict `d`'s keys table at `keys` stops being live (DK_ENTRIES past
// its dk_nentries: general entries (hash, key, value) when dk_kind is 0,
// else str-keyed ones), when the table reads as dictobject.c keeps one
// (the census's check_dicts: a damaged one is named there); else
// UINT64_MAX.
uint64_t keys_live_end(const HeapWalk& heap, const Memory& mem, const PyLayout& L, uint64_t d,
                       uint64_t keys) {
  const uint8_t* k = mem.span(keys, L.dk_indices);
  auto used = mem.read_as<int64_t>(d + L.dict_used);
  auto values = mem.read_u64(d + L.dict_values);
  if (!k || !used.ok() || !values.ok()) return UINT64_MAX;
  const uint8_t lg = k[L.dk_log2_size], lgi = k[L.dk_log2_index_bytes], kind = k[L.dk_kind];
  int64_t n;
  std::memcpy(&n, k + L.dk_nentries, 8);
  if (lg > 40 || lgi < lg || lgi > lg + 3 || kind > 2 || n < 0 || n > (int64_t{1} << lg) ||
      used.value() < 0 || (!values.value() && used.value() > n))
    return UINT64_MAX;
  const uint64_t end = keys + L.dk_indices + (uint64_t{1} << lgi) +
                       uint64_t(n) * (kind == 0 ? L.entry_size : L.uentry_size);
  return end <= block_end(heap, keys) ? end : UINT64_MAX;
}

}  // namespace

std::vector<PyOwnedBlock> python_owned_blocks(const HeapWalk& heap, const Memory& mem,
                                              const PyCensus& c) {
  const PyLayout& L = c.layout;
  const auto& in = heap.in_use;
  std::vector<PyOwnedBlock> out;
  // The start of the in-use block holding `p` when no object lies in it
  // (3.11's split values lie past a prefix of order bytes: inside); 0
  // otherwise.
  auto block = [&](uint64_t p) -> uint64_t {
    auto it = std::upper_bound(in.begin(), in.end(), p,
                               [](uint64_t a, const HeapChunk& k) { return a < k.user; });
    if (p == 0 || it == in.begin()) return 0;
    const HeapChunk k = *--it;
    if (p >= k.user + k.usable()) return 0;
    auto ob = std::lower_bound(c.objects.begin(), c.objects.end(), k.user,
                               [](const PyObj& x, uint64_t a) { return x.addr < a; });
    return ob == c.objects.end() || ob->addr >= k.user + k.usable() ? k.user : 0;
  };
  for (uint32_t i = 0; i < c.objects.size(); ++i) {
    const PyObj& o = c.objects[i];
    if (!o.live()) continue;
    const uint64_t flags = c.type(o).flags;
    if (flags & kTpListSubclass) {
      auto items = mem.read_u64(o.addr + L.list_item);
      if (items.ok() && block(items.value()) == items.value())
        out.push_back({items.value(), i, PyOwnedBlock::kListItems,
                       list_live_end(heap, mem, L, o.addr, items.value())});
    } else if (flags & kTpDictSubclass) {
      auto keys = mem.read_u64(o.addr + L.dict_keys);
      if (keys.ok() && block(keys.value()) == keys.value())
        out.push_back({keys.value(), i, PyOwnedBlock::kDictKeys,
                       keys_live_end(heap, mem, L, o.addr, keys.value())});
      if (auto v = mem.read_u64(o.addr + L.dict_values); v.ok())
        if (const uint64_t b = block(v.value()))
          out.push_back({b, i, PyOwnedBlock::kDictValues, UINT64_MAX});
    }
    // 3.11 keeps a managed dict's values in a block of their own, its
    // address the object's word -4 (pycore_object.h, _PyObject_ValuesPointer).
    if (!L.inline_values && (flags & kTpManagedDict))
      if (auto v = mem.read_u64(o.addr - 32); v.ok())
        if (const uint64_t b = block(v.value()))
          out.push_back({b, i, PyOwnedBlock::kInstanceValues, UINT64_MAX});
  }
  // A block two owners name (a shared keys table) keeps the larger live
  // part of the two.
  std::sort(out.begin(), out.end(), [](const PyOwnedBlock& a, const PyOwnedBlock& b) {
    return a.user != b.user ? a.user < b.user : a.live_end > b.live_end;
  });
  out.erase(
      std::unique(out.begin(), out.end(),
                  [](const PyOwnedBlock& a, const PyOwnedBlock& b) { return a.user == b.user; }),
      out.end());
  return out;
}

std::string python_owned_name(const PyCensus& c, const PyOwnedBlock& b) {
  static constexpr const char* kWhat[] = {"items", "keys", "values", "attribute values"};
  return fmt::format("Python {} ({})", c.type(c.objects[b.owner]).name, kWhat[b.kind]);
}

Result<PyCensus> python_census(const Program& prog, const HeapWalk& heap) {
  PyCensus out;
  LR_ASSIGN(out.layout, python_layout(prog));
  if (std::find(heap.layers.begin(), heap.layers.end(), "pymalloc") == heap.layers.end()) {
    std::string why = "its arenas were not walked";
    for (const auto& w : heap.warnings)
      if (w.rfind("pymalloc", 0) == 0) why = w;
    return make_error(Errc::kBadFormat, "pymalloc: " + why);
  }
  Census(prog, heap, out).run();
  return out;
}

}  // namespace lr
