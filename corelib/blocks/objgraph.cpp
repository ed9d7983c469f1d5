// The object graph (objgraph.hpp). Objects are looked up through spans of
// the address space (a kernel's direct map, its vmalloc area and its module
// area are far apart): per span, a table gives for each line (about one
// object's worth of bytes) the first object ending past its start, and a
// short binary search between two entries finds the object. References
// from objects are compressed rows (a 4-byte row start per object, a 4-byte
// target per reference); the referring word's address is found again when
// asked, by rescanning the one object. Roots are kept whole (16 bytes).
#include "corelib/blocks/objgraph.hpp"

#include "corelib/blocks/reach.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace lr {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kSpanGap = 64ull << 20;  // objects further apart start a new span
constexpr size_t kNone = SIZE_MAX;

struct Span {
  uint64_t start = 0, end = 0;
  unsigned shift = 12;
  std::vector<uint32_t> first;  // per line, and one past the last: first object ending past it
};

struct RootRef {
  uint64_t from;    // the word's address (a value root: its index)
  uint32_t target;  // the object
  uint32_t root;    // root range index, or kValueBit | value index
};
constexpr uint32_t kValueBit = 0x80000000u;

}  // namespace

struct ObjectGraph::Impl {
  const Memory& mem;
  std::vector<GraphObject> objs;
  std::vector<GraphRoot> roots;  // as scanned: sorted, disjoint, outside objects
  std::vector<GraphValue> values;
  std::vector<Span> spans;
  uint64_t lo = 0, hi = 0;
  std::vector<uint32_t> row;  // objects + 1 row starts into `target`
  PodArray<uint32_t> target;
  PodArray<RootRef> root_refs;  // by target
  ObjectGraphStats stats;
  std::vector<GraphUnread> unread;
  mutable std::once_flag in_once;
  mutable std::vector<uint32_t> in_off;
  mutable PodArray<uint32_t> in_src;

  explicit Impl(const Memory& m) : mem(m) {}

  void build_spans();
  size_t find(uint64_t v) const;
  // `st` (null for a question's rescan) counts what the build scanned;
  // `gap(a, b)` is called for each page it could not read.
  template <class F, class G = void (*)(uint64_t, uint64_t)>
  void scan(
      uint64_t a, uint64_t b, ObjectGraphStats* st, F&& fn,
      G&& gap = [](uint64_t, uint64_t) {}) const;
  // Keeps [a, b) of object `o` or root range `r` as not read.
  void note_unread(uint64_t a, uint64_t b, uint32_t o, uint32_t r);
  void reverse() const;
  std::pair<const RootRef*, const RootRef*> roots_of(size_t i) const {
    auto a = std::lower_bound(root_refs.begin(), root_refs.end(), uint32_t(i),
                              [](const RootRef& r, uint32_t t) { return r.target < t; });
    auto b = a;
    while (b != root_refs.end() && b->target == i) ++b;
    return {a, b};
  }
  GraphRef root_ref(const RootRef& r) const;
  std::vector<uint64_t> words_into(size_t src, size_t dst) const;
};

// One span per run of objects with gaps under kSpanGap; its line is a power
// of two about the run's mean object size (64 bytes to 64 KiB), so the table
// costs about 4 bytes an object and a lookup searches a handful.
void ObjectGraph::Impl::build_spans() {
  size_t i = 0;
  while (i < objs.size()) {
    size_t j = i + 1;
    uint64_t end = objs[i].start + objs[i].size;
    while (j < objs.size() && objs[j].start < end + kSpanGap) {
      end = std::max(end, objs[j].start + objs[j].size);
      ++j;
    }
    Span sp;
    sp.start = objs[i].start & ~(kPage - 1);
    sp.end = end;
    const uint64_t per = std::max<uint64_t>((end - sp.start) / (j - i), 1);
    sp.shift = 6;
    while (sp.shift < 16 && (uint64_t{1} << (sp.shift + 1)) <= per) ++sp.shift;
    const uint64_t lines = ((end - sp.start) >> sp.shift) + 1;
    sp.first.resize(lines + 1);
    size_t k = i;
    for (uint64_t l = 0; l <= lines; ++l) {
      const uint64_t at = sp.start + (l << sp.shift);
      while (k < j && objs[k].start + objs[k].size <= at) ++k;
      sp.first[l] = static_cast<uint32_t>(k);
    }
    spans.push_back(std::move(sp));
    i = j;
  }
  if (!objs.empty()) {
    lo = spans.front().start;
    hi = spans.back().end;
  }
}

size_t ObjectGraph::Impl::find(uint64_t v) const {
  if (v - lo >= hi - lo) return kNone;
  auto it = std::upper_bound(spans.begin(), spans.end(), v,
                             [](uint64_t x, const Span& s) { return x < s.start; });
  if (it == spans.begin()) return kNone;
  const Span& sp = *--it;
  if (v >= sp.end) return kNone;
  const uint64_t l = (v - sp.start) >> sp.shift;
  size_t a = sp.first[l], b = std::min<size_t>(sp.first[l + 1] + 1, objs.size());
  // The last object in [a, b) starting at or before v.
  while (b - a > 1) {
    const size_t m = a + (b - a) / 2;
    (objs[m].start <= v ? a : b) = m;
  }
  return a < objs.size() && objs[a].start <= v && v - objs[a].start < objs[a].size ? a : kNone;
}

// Calls fn(address, word, object) for each 8-aligned word of [a, b) that
// points into an object; unreadable pages are skipped and counted.
template <class F, class G>
void ObjectGraph::Impl::scan(uint64_t a, uint64_t b, ObjectGraphStats* st, F&& fn, G&& gap) const {
  a = (a + 7) & ~uint64_t{7};
  Memory::Window w;
  uint8_t page[kPage];
  while (a + 8 <= b) {
    const uint64_t pe = std::min(b, (a | (kPage - 1)) + 1);
    const uint8_t* p = mem.direct(w, a, pe - a);
    if (!p && mem.read(a, page, pe - a).ok()) p = page;
    if (!p) {
      if (st) st->unreadable_bytes += pe - a;
      gap(a, pe);
      a = pe;
      continue;
    }
    const uint64_t n = (pe - a) / 8;
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t v;
      std::memcpy(&v, p + k * 8, 8);
      if (v - lo >= hi - lo) continue;
      const size_t t = find(v);
      if (t != kNone) fn(a + k * 8, v, t);
    }
    if (st) st->words += n, st->bytes_scanned += pe - a;
    a = pe;
  }
}

void ObjectGraph::Impl::note_unread(uint64_t a, uint64_t b, uint32_t o, uint32_t r) {
  if (o != GraphUnread::kNone)
    stats.unreadable_object_bytes += b - a;
  else
    stats.unreadable_root_bytes += b - a;
  if (!unread.empty()) {
    GraphUnread& last = unread.back();
    if (last.end == a && last.object == o && last.root == r) {
      last.end = b;
      return;
    }
  }
  if (unread.size() < kMaxUnread) unread.push_back({a, b, o, r});
}

namespace {

Result<void> check_objects(const std::vector<GraphObject>& objs) {
  if (objs.size() >= UINT32_MAX)
    return make_error(Errc::kUnsupported,
                      fmt::format("{} objects: more than the graph numbers", objs.size()));
  for (size_t i = 1; i < objs.size(); ++i)
    if (objs[i].start < objs[i - 1].start + objs[i - 1].size)
      return make_error(Errc::kInvalidArgument,
                        fmt::format("objects {:#x} (+{:#x}) and {:#x} overlap or are out of order",
                                    objs[i - 1].start, objs[i - 1].size, objs[i].start));
  return {};
}

// The root ranges sorted, without the parts inside objects (those are
// scanned as the objects' contents) or scanned by an earlier range.
std::vector<GraphRoot> clip_roots(std::vector<GraphRoot> roots,
                                  const std::vector<GraphObject>& objs) {
  std::stable_sort(roots.begin(), roots.end(),
                   [](const GraphRoot& x, const GraphRoot& y) { return x.start < y.start; });
  std::vector<GraphRoot> out;
  uint64_t done = 0;  // everything below is in `out` already
  for (GraphRoot r : roots) {
    r.start = std::max(r.start, done);
    auto it = std::upper_bound(objs.begin(), objs.end(), r.start,
                               [](uint64_t v, const GraphObject& o) { return v < o.start; });
    if (it != objs.begin()) --it;
    for (; it != objs.end() && it->start < r.end && r.start < r.end; ++it) {
      if (it->start + it->size <= r.start) continue;
      if (it->start > r.start) out.push_back({r.start, it->start, r.tag});
      r.start = std::max(r.start, it->start + it->size);
    }
    if (r.start < r.end) out.push_back(r);
    done = std::max(done, r.end);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<ObjectGraph>> ObjectGraph::build(const Memory& mem,
                                                        std::vector<GraphObject> objects,
                                                        std::vector<GraphRoot> roots,
                                                        std::vector<GraphValue> values,
                                                        const ObjectGraphOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  LR_TRY(check_objects(objects));
  auto ix = std::make_unique<Impl>(mem);
  ix->objs = std::move(objects);
  ix->values = std::move(values);
  ix->build_spans();
  ix->roots = clip_roots(std::move(roots), ix->objs);
  auto stop = [&] { return o.interrupted && o.interrupted->load(std::memory_order_relaxed); };
  // References from objects, row by row.
  ix->row.assign(ix->objs.size() + 1, 0);
  for (size_t i = 0; i < ix->objs.size(); ++i) {
    if ((i & 0xfff) == 0 && stop()) return make_error(Errc::kInterrupted, "interrupted");
    ix->row[i] = static_cast<uint32_t>(ix->target.size());
    const GraphObject& ob = ix->objs[i];
    if (!ob.scan) continue;
    const uint32_t oi = static_cast<uint32_t>(i);
    bool missed = false;
    auto gap = [&](uint64_t a, uint64_t b) {
      ix->note_unread(a, b, oi, GraphUnread::kNone);
      missed = true;
    };
    ix->scan(
        ob.start, ob.start + ob.size, &ix->stats,
        [&](uint64_t, uint64_t, size_t t) {
          if (t != i) ix->target.push_back(static_cast<uint32_t>(t));
        },
        gap);
    ix->stats.unreadable_objects += missed;
    if (ix->target.size() > o.max_refs)
      return make_error(Errc::kUnsupported,
                        fmt::format("more than {} references: past the graph's bound", o.max_refs));
  }
  ix->row.back() = static_cast<uint32_t>(ix->target.size());
  for (size_t r = 0; r < ix->roots.size(); ++r) {
    if (stop()) return make_error(Errc::kInterrupted, "interrupted");
    const uint32_t ri = static_cast<uint32_t>(r);
    auto gap = [&](uint64_t a, uint64_t b) { ix->note_unread(a, b, GraphUnread::kNone, ri); };
    ix->scan(
        ix->roots[r].start, ix->roots[r].end, &ix->stats,
        [&](uint64_t at, uint64_t, size_t t) {
          ix->root_refs.push_back({at, static_cast<uint32_t>(t), static_cast<uint32_t>(r)});
        },
        gap);
  }
  for (size_t v = 0; v < ix->values.size(); ++v) {
    const size_t t = ix->find(ix->values[v].value);
    if (t != kNone)
      ix->root_refs.push_back({v, static_cast<uint32_t>(t), kValueBit | static_cast<uint32_t>(v)});
  }
  std::stable_sort(ix->root_refs.begin(), ix->root_refs.end(),
                   [](const RootRef& a, const RootRef& b) { return a.target < b.target; });
  ix->target.shrink_to_fit();
  ix->root_refs.shrink_to_fit();
  ObjectGraphStats& st = ix->stats;
  st.objects = ix->objs.size();
  st.refs = ix->target.size() + ix->root_refs.size();
  st.root_refs = ix->root_refs.size();
  uint64_t span_bytes = 0;
  for (const auto& s : ix->spans) span_bytes += s.first.capacity() * 4;
  st.memory_bytes = ix->objs.capacity() * sizeof(GraphObject) + ix->row.capacity() * 4 +
                    ix->target.size() * 4 + ix->root_refs.size() * sizeof(RootRef) + span_bytes +
                    ix->roots.capacity() * sizeof(GraphRoot);
  st.build_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return std::unique_ptr<ObjectGraph>(new ObjectGraph(std::move(ix)));
}

ObjectGraph::ObjectGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ObjectGraph::~ObjectGraph() = default;

size_t ObjectGraph::size() const {
  return impl_->objs.size();
}
const GraphObject& ObjectGraph::object(size_t i) const {
  return impl_->objs[i];
}
size_t ObjectGraph::find(uint64_t addr) const {
  return impl_->find(addr);
}
const std::vector<GraphUnread>& ObjectGraph::unread() const {
  return impl_->unread;
}
const std::vector<GraphRoot>& ObjectGraph::roots() const {
  return impl_->roots;
}
const ObjectGraphStats& ObjectGraph::stats() const {
  return impl_->stats;
}

std::vector<uint8_t> ObjectGraph::reachable() const {
  const Impl& ix = *impl_;
  std::vector<uint32_t> roots;
  roots.reserve(ix.root_refs.size());
  for (const RootRef& r : ix.root_refs) roots.push_back(r.target);
  return mark_reachable(
      ix.objs.size(), roots, [&](size_t c) { return ix.row[c]; }, ix.target);
}

// Who points at each object, made on first use.
void ObjectGraph::Impl::reverse() const {
  std::call_once(in_once, [this] {
    in_off.assign(objs.size() + 1, 0);
    for (uint32_t t : target) ++in_off[t + 1];
    for (size_t i = 1; i < in_off.size(); ++i) in_off[i] += in_off[i - 1];
    in_src.resize_uninitialized(target.size());
    std::vector<uint32_t> next(in_off.begin(), in_off.end() - 1);
    for (size_t c = 0; c + 1 < row.size(); ++c)
      for (uint32_t e = row[c]; e < row[c + 1]; ++e) in_src[next[target[e]]++] = uint32_t(c);
  });
}

GraphRef ObjectGraph::Impl::root_ref(const RootRef& r) const {
  GraphRef g;
  g.target = r.target;
  g.from = r.from;
  if (r.root & kValueBit) {
    const GraphValue& v = values[r.root & ~kValueBit];
    g.value_root = r.root & ~kValueBit;
    g.from = v.index;
    g.value = v.value;
  } else {
    g.root = r.root;
    if (!mem.read(r.from, &g.value, 8).ok()) g.value = 0;
  }
  return g;
}

std::vector<uint64_t> ObjectGraph::Impl::words_into(size_t src, size_t dst) const {
  std::vector<uint64_t> out;
  scan(objs[src].start, objs[src].start + objs[src].size, nullptr,
       [&](uint64_t at, uint64_t, size_t t) {
         if (t == dst) out.push_back(at);
       });
  return out;
}

std::vector<GraphRef> ObjectGraph::referrers(size_t i) const {
  std::vector<GraphRef> out;
  const Impl& ix = *impl_;
  if (i >= ix.objs.size()) return out;
  auto [a, b] = ix.roots_of(i);
  for (auto* r = a; r != b; ++r) out.push_back(ix.root_ref(*r));
  ix.reverse();
  for (uint32_t k = ix.in_off[i]; k < ix.in_off[i + 1]; ++k) {
    const uint32_t s = ix.in_src[k];
    if (k > ix.in_off[i] && s == ix.in_src[k - 1]) continue;  // one rescan per source
    for (uint64_t at : ix.words_into(s, i)) {
      GraphRef g;
      g.from = at;
      g.object = s;
      g.target = static_cast<uint32_t>(i);
      if (!ix.mem.read(at, &g.value, 8).ok()) g.value = 0;
      out.push_back(g);
    }
  }
  return out;
}

std::span<const uint32_t> ObjectGraph::row(size_t i) const {
  const Impl& ix = *impl_;
  return {ix.target.data() + ix.row[i], ix.target.data() + ix.row[i + 1]};
}

std::span<const uint32_t> ObjectGraph::sources(size_t i) const {
  const Impl& ix = *impl_;
  ix.reverse();
  return {ix.in_src.data() + ix.in_off[i], ix.in_src.data() + ix.in_off[i + 1]};
}

size_t ObjectGraph::root_count() const {
  return impl_->root_refs.size();
}

GraphRef ObjectGraph::root_ref(size_t k) const {
  const RootRef& r = impl_->root_refs[k];
  GraphRef g;
  g.target = r.target;
  g.from = r.from;
  if (r.root & kValueBit) {
    g.value_root = r.root & ~kValueBit;
    g.from = impl_->values[g.value_root].index;
  } else {
    g.root = r.root;
  }
  return g;
}

std::vector<uint64_t> ObjectGraph::words_from(size_t src, size_t dst) const {
  return impl_->words_into(src, dst);
}

uint32_t ObjectGraph::ref_count(size_t i) const {
  const Impl& ix = *impl_;
  if (i >= ix.objs.size()) return 0;
  ix.reverse();
  auto [a, b] = ix.roots_of(i);
  return ix.in_off[i + 1] - ix.in_off[i] + static_cast<uint32_t>(b - a);
}

std::vector<GraphRef> ObjectGraph::chain(size_t i, size_t max_depth) const {
  const Impl& ix = *impl_;
  if (i >= ix.objs.size()) return {};
  ix.reverse();
  // Backwards from `i`, breadth first; each object's step towards `i`.
  struct Step {
    uint32_t child;
    uint64_t from;
  };
  std::unordered_map<uint32_t, Step> next_of;
  std::vector<uint32_t> level = {static_cast<uint32_t>(i)};
  next_of.emplace(static_cast<uint32_t>(i), Step{UINT32_MAX, 0});
  for (size_t depth = 0; depth <= max_depth && !level.empty(); ++depth) {
    std::vector<uint32_t> up;
    for (uint32_t cur : level) {
      if (auto [a, b] = ix.roots_of(cur); a != b) {
        std::vector<GraphRef> out = {ix.root_ref(*a)};
        for (uint32_t at = cur; at != i;) {
          const Step& s = next_of.at(at);
          GraphRef g;
          g.from = s.from;
          g.object = at;
          g.target = s.child;
          if (!ix.mem.read(s.from, &g.value, 8).ok()) g.value = 0;
          out.push_back(g);
          at = s.child;
        }
        return out;
      }
      for (uint32_t k = ix.in_off[cur]; k < ix.in_off[cur + 1]; ++k) {
        const uint32_t s = ix.in_src[k];
        if (next_of.count(s)) continue;
        auto words = ix.words_into(s, cur);
        if (words.empty()) continue;
        next_of.emplace(s, Step{cur, words.front()});
        up.push_back(s);
      }
    }
    level = std::move(up);
  }
  return {};
}

}  // namespace lr
