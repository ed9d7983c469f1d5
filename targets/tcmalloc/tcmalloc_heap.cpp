// gperftools' tcmalloc heap (src/{pagemap,span,central_freelist,
// thread_cache}.h): the walk reads
//   the page map (TCMalloc_PageMap2: root_[] of leaves, values[] a Span* per
//     page; a small-object span names every page, others their first and last);
//   each span: start and length in pages, sizeclass (0: one large block),
//     location (IN_USE, or free in the page heap), objects (its free list);
//   SizeMap: class_to_size_[], num_objects_to_move_[], num_size_classes;
//   central_cache_[cl]: tc_slots_[used_slots_] transfer batches {head, tail};
//   the thread caches (thread_heaps_, next_), each list_[cl] {list_, length_}.
// A free object's first word links it to the next.
#include "targets/tcmalloc/tcmalloc_heap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

#include "corelib/dump/memory.hpp"

namespace lr {
namespace {

constexpr unsigned kAddressBits = 48;  // MapSelector<48>: TCMalloc_PageMap2
constexpr uint64_t kMaxThreads = 1u << 16, kMaxBatch = 1024;
enum Location : uint8_t { kInUse = 0, kNormalFree = 1, kReturned = 2 };

struct SpanRec {
  uint64_t span = 0, key = 0, last = 0, start = 0, length = 0;  // key..last: pages naming it
  uint8_t cls = 0, loc = 0;
};

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

struct Walk {
  Walk(const Memory& m, const TcmallocLayout& l, const HeapLimits& lim, HeapWalk& o,
       TcmallocHeap& details)
      : mem(m), L(l), limits(lim), out(o), g(details) {}
  const Memory& mem;
  const TcmallocLayout& L;
  const HeapLimits& limits;
  HeapWalk& out;
  TcmallocHeap& g;
  unsigned shift = 0, leaf_bits = 0;
  uint64_t nclasses = 0;
  std::vector<uint64_t> class_size, class_pages;
  std::vector<int32_t> to_move;
  std::vector<uint64_t> free_objs;  // every free list's objects, sorted once read
  // At most as many as the in-use small spans have objects (and a few more
  // to be told about): looping lists and rings end there, not in memory.
  uint64_t free_cap = 0;
  bool capped = false;
  std::map<uint64_t, uint64_t> nodes;
  uint64_t bad_spans = 0, free_matched = 0, free_bytes = 0, tails = 0, free_pages[3] = {0, 0, 0};

  bool u64(uint64_t a, uint64_t* v) const { return mem.read(a, v, 8).ok(); }
  void warn(std::string m) { out.warnings.push_back(std::move(m)); }
};

// The size classes, and the page size the map's two levels give.
Result<void> read_classes(Walk& w) {
  const TcmallocLayout& L = w.L;
  const unsigned bits =
      static_cast<unsigned>(__builtin_ctzll(L.root_slots) + __builtin_ctzll(L.leaf_slots));
  if ((L.root_slots & (L.root_slots - 1)) || (L.leaf_slots & (L.leaf_slots - 1)) ||
      bits >= kAddressBits || kAddressBits - bits < 12 || kAddressBits - bits > 18)
    return make_error(Errc::kUnsupported,
                      fmt::format("tcmalloc's page map has {} x {} slots: not the two-level "
                                  "map of 48-bit addresses this walk reads",
                                  L.root_slots, L.leaf_slots));
  w.shift = kAddressBits - bits;
  w.leaf_bits = static_cast<unsigned>(__builtin_ctzll(L.leaf_slots));
  w.g.page = uint64_t{1} << w.shift;
  int32_t n = 0;
  LR_TRY(w.mem.read(L.sizemap + L.num_size_classes, &n, 4));
  if (n < 2 || static_cast<uint64_t>(n) > L.nclasses_max)
    return make_error(
        Errc::kBadFormat,
        fmt::format("tcmalloc's SizeMap says {} size classes (at most {})", n, L.nclasses_max));
  w.nclasses = static_cast<uint64_t>(n);
  std::vector<uint8_t> raw(L.nclasses_max * L.class_size_width);
  LR_TRY(w.mem.read(L.class_to_size, raw.data(), raw.size()));
  w.class_size.assign(w.nclasses, 0);
  for (uint64_t c = 0; c < w.nclasses; ++c)
    std::memcpy(&w.class_size[c], raw.data() + c * L.class_size_width, L.class_size_width);
  std::vector<uint64_t> pages(L.nclasses_max);
  LR_TRY(w.mem.read(L.sizemap + L.class_to_pages, pages.data(), L.nclasses_max * 8));
  w.class_pages.assign(pages.begin(), pages.begin() + static_cast<long>(w.nclasses));
  w.to_move.assign(L.nclasses_max, 0);
  LR_TRY(w.mem.read(L.sizemap + L.num_objects_to_move, w.to_move.data(), L.nclasses_max * 4));
  return {};
}

// The spans the page map names, each once, in address order.
std::vector<SpanRec> read_page_map(Walk& w) {
  const TcmallocLayout& L = w.L;
  std::vector<uint64_t> root(L.root_slots), leaf(L.leaf_slots);
  std::vector<SpanRec> spans;
  if (!w.mem.read(L.root, root.data(), root.size() * 8).ok()) return spans;
  for (uint64_t i = 0; i < root.size(); ++i) {
    const uint64_t node = root[i], end = node + L.leaf_slots * 8;
    if (!node) continue;
    auto next = w.nodes.lower_bound(node);
    if ((next != w.nodes.end() && next->first < end) ||
        (next != w.nodes.begin() && std::prev(next)->second > node) || end < node ||
        !w.mem.read(node, leaf.data(), leaf.size() * 8).ok()) {
      w.warn(
          fmt::format("tcmalloc's page map leaf {:#x} is unreadable or overlaps another; "
                      "not read",
                      node));
      continue;
    }
    w.nodes.emplace(node, end);
    for (uint64_t j = 0; j < leaf.size(); ++j) {
      const uint64_t page = (i << w.leaf_bits) | j;
      if (!leaf[j]) continue;
      if (!spans.empty() && spans.back().span == leaf[j] && spans.back().last + 1 == page) {
        spans.back().last = page;
        continue;
      }
      SpanRec s;
      s.span = leaf[j];
      s.key = s.last = page;
      spans.push_back(s);
    }
  }
  // A span named by several runs of pages (its first and last pages; stale
  // entries tcmalloc leaves behind when spans merge or are deleted) is read
  // once; which runs are its own is decided when it is read.
  std::sort(spans.begin(), spans.end(), [](const SpanRec& a, const SpanRec& b) {
    return a.span != b.span ? a.span < b.span : a.key < b.key;
  });
  return spans;
}

uint64_t bitfield(const uint8_t* p, uint64_t bit, uint64_t width) {
  uint32_t v = 0;
  std::memcpy(&v, p + bit / 8, 4);
  return (v >> (bit % 8)) & ((1u << width) - 1);
}

// Each span read once, kept when a page that names it lies inside it: an
// entry outside is stale (tcmalloc leaves the map's entries for pages
// inside free or deleted spans as they were), not damage. The good ones in
// address order, none overlapping the one before.
void read_spans(Walk& w, std::vector<SpanRec>& runs) {
  const TcmallocLayout& L = w.L;
  std::vector<uint8_t> buf(L.span_size);
  std::vector<SpanRec> good;
  const uint64_t pages = uint64_t{1} << (kAddressBits - w.shift);
  for (size_t i = 0; i < runs.size();) {
    size_t e = i;
    while (e < runs.size() && runs[e].span == runs[i].span) ++e;
    SpanRec s = runs[i];
    const bool read = w.mem.read(s.span, buf.data(), buf.size()).ok();
    std::memcpy(&s.start, buf.data() + L.span_start, 8);
    std::memcpy(&s.length, buf.data() + L.span_length, 8);
    bool named = false;
    for (size_t k = i; read && k < e; ++k)
      named |= s.length > 0 && s.length <= pages && runs[k].key < s.start + s.length &&
               runs[k].last >= s.start;
    i = e;
    if (!named) continue;  // stale entries only
    s.cls = static_cast<uint8_t>(bitfield(buf.data(), L.sizeclass_bit, L.sizeclass_bits));
    s.loc = static_cast<uint8_t>(bitfield(buf.data(), L.location_bit, L.location_bits));
    // A small-object span has its class's pages (SizeMap.class_to_pages_):
    // more would be objects tcmalloc never carved.
    if (s.start >= pages || s.length > pages - s.start || s.loc > kReturned ||
        s.cls >= w.nclasses || (s.cls && s.length != w.class_pages[s.cls])) {
      ++w.bad_spans;
      continue;
    }
    good.push_back(s);
  }
  std::sort(good.begin(), good.end(),
            [](const SpanRec& a, const SpanRec& b) { return a.start < b.start; });
  runs.clear();
  for (const SpanRec& s : good)
    if (runs.empty() || s.start >= runs.back().start + runs.back().length)
      runs.push_back(s);
    else
      ++w.bad_spans;
}

// A singly linked free list from `head`, at most `most` objects: each
// pointer kept (checked against the spans later). A cycle or a list longer
// than it says ends the walk of that list with a warning.
void follow(Walk& w, uint64_t head, uint64_t most, uint64_t tail, const char* what) {
  uint64_t p = head, n = 0;
  while (p && n < most) {
    if (w.free_objs.size() >= w.free_cap) {
      if (!w.capped)
        w.warn(
            fmt::format("tcmalloc: its free lists hold more objects than its spans have ({}); "
                        "the rest are not read",
                        w.free_cap));
      w.capped = true;
      return;
    }
    w.free_objs.push_back(p);
    ++n;
    if (p == tail) return;
    if (!w.u64(p, &p)) {
      w.warn(fmt::format("tcmalloc {}: object {:#x} is unreadable; its list is cut there", what,
                         w.free_objs.back()));
      return;
    }
  }
  if (p && tail == 0)
    w.warn(fmt::format("tcmalloc {}: its list runs past {} objects; cut there", what, most));
}

// The objects every free list holds: each small span's own, the central
// lists' transfer batches, the thread caches'.
void read_free_lists(Walk& w, const std::vector<SpanRec>& spans) {
  const TcmallocLayout& L = w.L;
  w.free_cap = 1024;
  for (const SpanRec& s : spans)
    if (s.loc == kInUse && s.cls) w.free_cap += (s.length << w.shift) / w.class_size[s.cls];
  for (const SpanRec& s : spans)
    if (s.loc == kInUse && s.cls) {
      uint64_t head = 0;
      if (w.u64(s.span + L.span_objects, &head))
        follow(w, head, (s.length << w.shift) / w.class_size[s.cls], 0, "span free list");
    }
  for (uint64_t cl = 1; cl < w.nclasses; ++cl) {
    const uint64_t c = L.central + cl * L.central_size;
    int32_t used = 0;
    if (!w.mem.read(c + L.used_slots, &used, 4).ok() || used <= 0) continue;
    const uint64_t batch = std::clamp<int64_t>(w.to_move[cl], 1, kMaxBatch);  // real: <= 32
    for (uint64_t k = 0; k < std::min<uint64_t>(used, L.tc_nslots); ++k) {
      uint64_t ht[2] = {0, 0};
      if (w.mem.read(c + L.tc_slots + k * L.tc_entry_size, ht, 16).ok())
        follow(w, ht[0], batch, ht[1], "central transfer slot");
    }
  }
  uint64_t tc = 0, n = 0;
  if (L.thread_heaps && !w.u64(L.thread_heaps, &tc)) tc = 0;
  for (; tc && n < kMaxThreads; ++n) {
    ++w.g.thread_caches;
    for (uint64_t cl = 0; cl < std::min(L.tc_nlists, w.nclasses); ++cl) {
      const uint64_t fl = tc + L.tc_list + cl * L.freelist_size;
      uint64_t head = 0;
      uint32_t len = 0;
      if (!w.u64(fl + L.fl_list, &head) ||
          !w.mem.read(fl + L.fl_length, &len, L.fl_length_width).ok())
        continue;
      follow(w, head, std::min<uint64_t>(len, w.limits.max_list), 0, "thread cache");
    }
    if (!w.u64(tc + L.tc_next, &tc)) break;
  }
  std::sort(w.free_objs.begin(), w.free_objs.end());
  const size_t before = w.free_objs.size();
  w.free_objs.erase(std::unique(w.free_objs.begin(), w.free_objs.end()), w.free_objs.end());
  if (w.free_objs.size() != before)
    w.warn(fmt::format("tcmalloc: {} objects are on two free lists at once",
                       before - w.free_objs.size()));
}

// The blocks of every span, in address order: a small span's objects that
// no free list holds, a large span whole.
void walk_spans(Walk& w, const std::vector<SpanRec>& spans, Ranges& managed) {
  w.out.in_use.set_size_bias(0);  // tcmalloc's classes: 8, then multiples of 16
  size_t f = 0;
  for (const SpanRec& s : spans) {
    const uint64_t base = s.start << w.shift, bytes = s.length << w.shift;
    managed.emplace_back(base, base + bytes);
    w.out.regions.push_back({HeapRegion::Kind::kThread, base, base + bytes, 0, true});
    if (s.loc != kInUse) {
      ++w.g.free_spans;
      w.free_pages[s.loc] += bytes;
      continue;
    }
    if (!s.cls) {
      // A block past what the index holds is damage, said with the others.
      if (bytes > kMaxChunkUsable) {
        ++w.bad_spans;
        continue;
      }
      ++w.g.large_spans;
      w.out.in_use.push_back(HeapChunk::make(base, bytes, false));
      w.out.stats.in_use_bytes += bytes;
      continue;
    }
    ++w.g.small_spans;
    const uint64_t size = w.class_size[s.cls], n = size ? bytes / size : 0;
    if (!size || size % 8) {
      ++w.bad_spans;
      continue;
    }
    w.tails += bytes - n * size;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t obj = base + i * size;
      while (f < w.free_objs.size() && w.free_objs[f] < obj) ++f;
      if (f < w.free_objs.size() && w.free_objs[f] == obj) {
        ++w.free_matched;
        w.free_bytes += size;
        continue;
      }
      w.out.in_use.push_back(HeapChunk::make(obj, size, false));
      w.out.stats.in_use_bytes += size;
    }
  }
}

void finish(Walk& w, Ranges managed) {
  HeapWalk& out = w.out;
  out.in_use.shrink_to_fit();
  out.stats.in_use = out.in_use.size();
  out.stats.chunks = out.stats.in_use + w.free_matched;
  out.stats.index_bytes = out.in_use.bytes();
  if (w.free_matched != w.free_objs.size())
    w.warn(
        fmt::format("tcmalloc: {} of the {} objects on its free lists are no object of an "
                    "in-use span",
                    w.free_objs.size() - w.free_matched, w.free_objs.size()));
  if (w.bad_spans)
    w.warn(
        fmt::format("tcmalloc: {} spans in its page map do not match the pages naming them, "
                    "their size class or each other; their blocks are not listed",
                    w.bad_spans));
  auto space = [&](HeapSpace::Kind k, const char* what, uint64_t bytes, uint64_t blocks) {
    if (bytes) out.space.push_back({k, what, 0, bytes, blocks, 0, {}});
  };
  using K = HeapSpace::Kind;
  space(K::kFree, "free objects (spans, central and thread caches)", w.free_bytes, w.free_matched);
  space(K::kFree, "free spans", w.free_pages[kNormalFree], 0);
  space(K::kFree, "returned spans", w.free_pages[kReturned], 0);
  space(K::kOverhead, "span tails", w.tails, 0);
  std::sort(managed.begin(), managed.end());
  out.managed = std::move(managed);
  // Neighbouring spans as one region: the reference index looks them up.
  std::vector<HeapRegion> joined;
  for (const auto& r : out.regions)
    if (!joined.empty() && joined.back().end == r.start)
      joined.back().end = r.end;
    else
      joined.push_back(r);
  out.regions = std::move(joined);
}

}  // namespace

Result<HeapWalk> walk_tcmalloc_heap(const Memory& mem, const TcmallocLayout& layout,
                                    const HeapLimits& limits) {
  HeapWalk out;
  out.allocator = "tcmalloc";
  auto details = std::make_shared<TcmallocHeap>();
  details->layout = layout;
  Walk w(mem, layout, limits, out, *details);
  LR_TRY(read_classes(w));
  std::vector<SpanRec> spans = read_page_map(w);
  read_spans(w, spans);
  if (spans.empty())
    return make_error(Errc::kNotFound,
                      "no tcmalloc span found (its page map is empty: nothing allocated)");
  read_free_lists(w, spans);
  Ranges managed;
  walk_spans(w, spans, managed);
  finish(w, std::move(managed));
  out.stats.arenas = 1;
  out.details = std::move(details);
  return out;
}

}  // namespace lr
