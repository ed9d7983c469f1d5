// CPython objects against the references found (py_reconcile.hpp).
#include "targets/cpython/py_reconcile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_map>

#include "targets/cpython/cpython.hpp"

namespace lr {

namespace {

constexpr uint32_t kNone = UINT32_MAX;

// The heap's references without the GC's links, by source block (CSR),
// each with the object it points at exactly (kNone: a C block, or inside
// an object); and the roots' references, likewise.
class Graph {
 public:
  Graph(const RefIndex& ix, const Memory& mem, const PyCensus& c)
      : ix_(ix), c_(c), by_chunk_(ix.chunks(), kNone) {
    for (size_t i = 0; i < c.objects.size(); ++i)
      by_chunk_[c.objects[i].chunk] = static_cast<uint32_t>(i);
    spare_ = python_spare_slots(ix, mem, c);
    leaf_.resize(c.types.size());
    for (size_t t = 0; t < c.types.size(); ++t) leaf_[t] = holds_no_references(c.types[t]);
    build();
  }

  // Marks `value` in `mark` on every block reached from `queue` through
  // blocks whose mark is `over` (breadth first; no recursion).
  void spread(std::vector<uint32_t> queue, std::vector<uint8_t>& mark, uint8_t over,
              uint8_t value) const {
    for (uint32_t c : queue) mark[c] = value;
    for (size_t q = 0; q < queue.size(); ++q)
      for (uint32_t k = start_[queue[q]]; k < start_[queue[q] + 1]; ++k)
        if (const uint32_t t = to_[k]; mark[t] == over) {
          mark[t] = value;
          queue.push_back(t);
        }
  }

  // f(source block, exact object or kNone) for every reference.
  template <class F>
  void each_edge(F&& f) const {
    for (uint32_t s = 0; s + 1 < start_.size(); ++s)
      for (uint32_t k = start_[s]; k < start_[s + 1]; ++k) f(s, exact_[k]);
  }
  const std::vector<uint32_t>& roots() const { return roots_; }
  const std::vector<uint32_t>& root_exact() const { return root_exact_; }

 private:
  // A word holding a GC link: it points at a tracked type's PyGC_Head (its
  // low two bits are flags).
  bool gc_link(const Ref& r) const {
    const uint32_t i = by_chunk_[r.target];
    if (i == kNone) return false;
    const PyObj& o = c_.objects[i];
    return (c_.type(o).flags & kTpHaveGc) && (r.value & ~uint64_t{3}) == o.addr - c_.layout.gc_head;
  }

  bool free_listed(uint32_t chunk) const {
    const uint32_t i = by_chunk_[chunk];
    return i != kNone && !c_.objects[i].live();
  }

  uint32_t exact(const Ref& r) const {
    const uint32_t i = by_chunk_[r.target];
    return i != kNone && r.value == c_.objects[i].addr ? i : kNone;
  }

  void build() {
    std::vector<uint32_t> all(ix_.chunks());
    std::iota(all.begin(), all.end(), 0u);
    start_.assign(1, 0);
    // Sources come in block order: the CSR is filled as they come.
    // An object on a free list (refcount 0) keeps the words of its last
    // life: none is a reference.
    ix_.each_chunk_ref_into(all, [&](const Ref& r, uint32_t src) {
      if (gc_link(r) || free_listed(src) || spare(r, src) || inside_object(r) || leaf_data(r, src))
        return;
      while (start_.size() <= src) start_.push_back(static_cast<uint32_t>(to_.size()));
      to_.push_back(r.target);
      exact_.push_back(exact(r));
    });
    while (start_.size() <= ix_.chunks()) start_.push_back(static_cast<uint32_t>(to_.size()));
    for (size_t k = 0; k < ix_.root_count(); ++k) {
      const Ref r = ix_.root_ref(k);
      if (r.stale || gc_link(r)) continue;
      if (inside_object(r)) continue;
      roots_.push_back(r.target);
      root_exact_.push_back(exact(r));
    }
  }

  // A word pointing into a Python object but not at it: no reference (C
  // code holds a PyObject* to the object itself); a word of other data
  // that happens to fall inside it would otherwise keep it reached.
  bool inside_object(const Ref& r) const {
    const uint32_t i = by_chunk_[r.target];
    return i != kNone && c_.objects[i].live() && r.value != c_.objects[i].addr;
  }

  // A word of a str's, bytes', int's or float's block past its header.
  bool leaf_data(const Ref& r, uint32_t src) const {
    const uint32_t i = by_chunk_[src];
    return i != kNone && leaf_[c_.objects[i].type] && r.from >= c_.objects[i].addr + 16;
  }

  bool spare(const Ref& r, uint32_t src) const {
    auto it = spare_.find(src);
    return it != spare_.end() && r.from >= it->second;
  }

  const RefIndex& ix_;
  const PyCensus& c_;
  std::vector<uint32_t> by_chunk_;
  std::unordered_map<uint32_t, uint64_t>
      spare_;                  // a list's items block: where its spare slots begin
  std::vector<uint8_t> leaf_;  // by type: holds_no_references
  std::vector<uint32_t> start_, to_, exact_;
  std::vector<uint32_t> roots_, root_exact_;
};

enum Mark : uint8_t { kUnreached = 0, kReached = 1, kLeaked = 2 };

// Counts each object's references by where they come from, and marks the
// blocks a root reaches (kReached) in `mark`.
void count_refs(const Graph& g, PyReport& r, std::vector<uint8_t>& mark) {
  g.spread(g.roots(), mark, kUnreached, kReached);
  for (uint32_t i : g.root_exact())
    if (i != kNone) ++r.refs[i].found;
  const auto& objs = r.census().objects;
  std::vector<uint32_t> obj_of(mark.size(), kNone);
  for (size_t i = 0; i < objs.size(); ++i) obj_of[objs[i].chunk] = static_cast<uint32_t>(i);
  g.each_edge([&](uint32_t src, uint32_t i) {
    if (i == kNone) return;
    if (mark[src] == kReached) {
      ++r.refs[i].found;
      return;
    }
    ++r.refs[i].from_dead;
    if (const uint32_t s = obj_of[src]; s != kNone && (objs[s].flags & PyObj::kTracked))
      ++r.refs[i].from_gc;
  });
  for (size_t i = 0; i < objs.size(); ++i) r.refs[i].reached = mark[objs[i].chunk] == kReached;
}

// The words of an object's own block that point at it (the index keeps no
// reference of a block to itself): a list holding itself.
uint32_t self_refs(const Memory& mem, const HeapWalk& h, const PyObj& o) {
  const HeapChunk c = h.in_use[o.chunk];
  const uint8_t* p = mem.span(c.user, c.usable());
  uint32_t n = 0;
  for (uint64_t k = 0; p && k + 8 <= c.usable(); k += 8) {
    uint64_t w;
    std::memcpy(&w, p + k, 8);
    n += w == o.addr;
  }
  return n;
}

// The unreachable objects no collection frees: those with a reference
// counted that no unreachable tracked object explains, and all they reach.
void mark_leaked(const Graph& g, const Memory& mem, const HeapWalk& h, PyReport& r,
                 std::vector<uint8_t>& mark) {
  std::vector<uint32_t> seeds;
  for (size_t i = 0; i < r.census().objects.size(); ++i) {
    const PyObj& o = r.census().objects[i];
    PyObjRefs& f = r.refs[i];
    if (!o.live()) continue;
    if (f.excess(o.refcnt) > 0) f.found += self_refs(mem, h, o);
    if (f.reached || f.immortal) continue;
    const uint32_t own = (o.flags & PyObj::kTracked) ? self_refs(mem, h, o) : 0;
    if (o.refcnt > int64_t{f.from_gc} + own) seeds.push_back(o.chunk);
  }
  g.spread(seeds, mark, kUnreached, kLeaked);
  for (size_t i = 0; i < r.census().objects.size(); ++i)
    r.refs[i].leaked = r.census().objects[i].live() && !r.refs[i].immortal &&
                       mark[r.census().objects[i].chunk] == kLeaked;
}

void tally(PyReport& r) {
  std::vector<PyTypeRow> rows(r.census().types.size());
  for (size_t t = 0; t < rows.size(); ++t) rows[t].type = static_cast<uint32_t>(t);
  for (size_t i = 0; i < r.census().objects.size(); ++i) {
    const PyObj& o = r.census().objects[i];
    PyTypeRow& row = rows[o.type];
    if (!o.live()) {
      ++row.free_listed, ++r.free_listed;
      continue;
    }
    ++row.objects, row.bytes += o.bytes, ++r.live, r.live_bytes += o.bytes;
    row.tracked += (o.flags & PyObj::kTracked) != 0;
    const PyObjRefs& f = r.refs[i];
    if (const int64_t e = f.excess(o.refcnt); e > 0) {
      ++row.excess_objects, row.excess_refs += e;
      ++r.excess_objects, r.excess_refs += e;
    }
    if (!f.reached) ++row.unreachable, ++r.unreachable;
    if (f.leaked) ++row.leaked, ++r.leaked;
    if (f.immortal) ++row.immortal, ++r.immortal;
  }
  std::erase_if(rows, [](const PyTypeRow& x) { return !x.objects && !x.free_listed; });
  std::sort(rows.begin(), rows.end(), [](const PyTypeRow& a, const PyTypeRow& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.objects > b.objects;
  });
  r.rows = std::move(rows);
}

}  // namespace

std::unordered_map<uint32_t, uint64_t> python_spare_slots(const RefIndex& ix, const Memory& mem,
                                                          const PyCensus& c) {
  std::unordered_map<uint32_t, uint64_t> out;
  for (const PyOwnedBlock& b : python_owned_blocks(ix.heap(), mem, c))
    if (b.live_end != UINT64_MAX)
      if (const size_t ch = ix.chunk_at(b.user); ch != SIZE_MAX) out[uint32_t(ch)] = b.live_end;
  return out;
}

const PyCensus* tagged_census(const IndexedCore& core) {
  for (const auto& t : core.tags)
    if (auto* h = dynamic_cast<const CensusHolder*>(t.tagger.get());
        h && t.tagger->heap() == &core.ci.index->heap())
      return &h->census();
  return nullptr;
}

Result<PyReport> python_report(const IndexedCore& core) {
  const RefIndex& ix = *core.ci.index;
  PyReport r;
  // The target's tagger's census, borrowed (a copy of 5 M objects is 120
  // MB); one of its own when no tagger made it.
  r.held = tagged_census(core);
  if (!r.held) {
    LR_ASSIGN(r.own, python_census(*core.prog, ix.heap()));
  }
  r.refs.resize(r.census().objects.size());
  for (size_t i = 0; i < r.refs.size(); ++i)
    r.refs[i].immortal = (r.census().objects[i].flags & PyObj::kImmortal) != 0;
  const Graph g(ix, core.prog->mem(), r.census());
  std::vector<uint8_t> mark(ix.chunks(), kUnreached);
  count_refs(g, r, mark);
  mark_leaked(g, core.prog->mem(), ix.heap(), r, mark);
  tally(r);
  r.partial = ix.partial();
  // The GC's links are never followed here, whole lists or not.
  std::erase_if(r.partial, [](const std::string& p) { return p.starts_with(kGcListCut); });
  // Damage the census met (a GC list that breaks or lists no object, a
  // type chain that loops) leaves objects uncounted or untracked.
  if (!r.census().warnings.empty())
    r.partial.push_back(
        fmt::format("CPython's objects were read in part: {}{}", r.census().warnings.front(),
                    r.census().warnings.size() > 1 ? " (and more, see warnings)" : ""));
  return r;
}

}  // namespace lr
