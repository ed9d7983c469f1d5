#include "corelib/objects/walkers.hpp"

#include <fmt/format.h>

#include "corelib/base/huge_pages.hpp"

namespace lr {

const char* walk_stop_name(WalkStop s) {
  switch (s) {
    case WalkStop::kEnd:
      return "end";
    case WalkStop::kCycle:
      return "cycle";
    case WalkStop::kFault:
      return "fault";
    case WalkStop::kCorrupt:
      return "corrupt";
    case WalkStop::kLimit:
      return "limit";
    case WalkStop::kInterrupted:
      return "interrupted";
  }
  return "?";
}

namespace {

constexpr size_t kMaxIssues = 100;
constexpr uint64_t kStrideAhead = 32;
using Window = Memory::Window;

void add_issue(WalkResult& r, uint64_t addr, std::string what) {
  ++r.issue_count;
  if (r.issues.size() < kMaxIssues) r.issues.push_back({addr, std::move(what)});
}

// The kernel's poison values and other pointers that can never be a live link.
bool poisoned(uint64_t p) {
  return (p & 0xffffffffffff0000ull) == 0xdead000000000000ull || p == 0x100 || p == 0x122;
}

inline bool load(const Memory& mem, Window& w, uint64_t a, void* out, size_t n) {
  if (const uint8_t* p = mem.direct(w, a, n)) {
    std::memcpy(out, p, n);
    return true;
  }
  return mem.read(a, out, n).ok();
}

// Prefetches the link words at `a` (both cache lines when they straddle
// one) and the start of the container `cont` bytes before it, where
// refcounts usually sit: the evaluation that follows reads them. False when
// the link is not inside the window [wstart, wstart + wlen).
// Always inlined: GCC 12 finds an outlined copy free of side effects
// (prefetches do not count), and deletes every call whose result is unused.
[[gnu::always_inline]] inline bool prefetch_in(const uint8_t* wdata, uint64_t wstart, uint64_t wlen,
                                               uint64_t a, uint64_t cont) {
  const uint64_t o = a - wstart;
  if (o >= wlen || wlen - o < 16) return false;
  const uint8_t* p = wdata + o;
  __builtin_prefetch(p);
  __builtin_prefetch(p + 15);
  if (cont && cont <= o) __builtin_prefetch(p - cont);
  return true;
}
// The same through `w`, moved to the link's range when needed.
inline void prefetch_node(const Memory& mem, Window& w, uint64_t a, uint64_t cont) {
  if (mem.direct(w, a, 16)) prefetch_in(w.data, w.start, w.end - w.start, a, cont);
}

// Grows the result array in large steps and asks for transparent huge pages:
// a million-object walk otherwise spends much of its time in page faults.
// The first step is small: profiles run thousands of short walks (an inode's
// dentries and fds), and a 2 MiB reservation each would be an mmap apiece.
// Past 2 MiB the array jumps to 64 MiB of address space: pages are only
// made when written, and a long list (whose length nothing predicts) is
// then not copied at every doubling (6 MB of copies and new pages for a
// million objects, a quarter of that walk's time on a fresh process).
inline void grow(std::vector<uint64_t>& v) {
  const size_t c = v.capacity();
  reserve_huge(v, c == 0                  ? 64
                  : c < (size_t{1} << 18) ? size_t{1} << 18
                                          : std::max(c * 2, size_t{1} << 23));
}

enum class Back { kNone, kPrev, kPprev };

// One chain of links being followed: x0, next(x0), ... until `end` (a ring
// head, or 0). Containers (link - cont) are appended to *out. For
// kPrev/kPprev the word after the next pointer must point back at the
// previous link (`prev` starts at the head). Cycles are found with Brent's
// algorithm and cut to their distinct nodes. Used for single lists and for
// every lane of an interleaved hash walk.
struct Chain {
  uint64_t next_off = 0, cont = 0, end = 0;
  Back back = Back::kNone;
  uint64_t limit = 0;  // max objects in *out, for the message
  const char* limit_name = "the object limit";
  std::vector<uint64_t>* out = nullptr;
  size_t base = 0;
  uint64_t x = 0, prev = 0, tort = 0, power = 1, lam = 0;
  WalkStop stop = WalkStop::kEnd;
  uint64_t stop_addr = 0, cycle_start = 0, cycle_length = 0;
  std::string detail;

  void begin(uint64_t first, uint64_t head) {
    base = out->size();
    x = tort = first;
    prev = head;
    power = 1;
    lam = 0;
    stop = WalkStop::kEnd;
    detail.clear();
  }
  bool fail(WalkStop s, uint64_t at, std::string d) {
    stop = s;
    stop_addr = at;
    detail = std::move(d);
    return false;
  }
  // Bytes of link words a step reads: next, and prev/pprev when checked.
  template <Back B>
  static constexpr uint64_t kLinkBytes = B == Back::kNone ? 8 : 16;
  // How many offsets in a window of `wlen` bytes hold a whole link.
  template <Back B>
  static uint64_t link_fit(uint64_t wlen) {
    return wlen >= kLinkBytes<B> ? wlen - kLinkBytes<B> + 1 : 0;
  }

  // Appends the node at link x and moves on to `nx`, its next link: the tail
  // both steps share. Every field is read before anything is written (the
  // append may alias them), so the state stays in registers. False when
  // `nx` closes a loop (the chain has then stopped, cut to its distinct
  // nodes). The caller has made room in *out.
  [[gnu::always_inline]] inline bool advance(uint64_t nx) {
    const uint64_t at = x;
    // list: a node's prev is the previous link; hlist: its pprev is the
    // address of the previous node's `next`, which is that node's link.
    if (nx == tort && nx != end) return cycle(nx);
    const uint64_t l = lam + 1;
    prev = at;
    x = nx;
    if (l == power) {
      tort = nx;
      power <<= 1;
      lam = 0;
    } else {
      lam = l;
    }
    out->push_back(at - cont);
    return true;
  }

  // One step of the common case over a window's bytes (`fit` from
  // link_fit): a readable, well-linked node inside the window, below the
  // limit, with room in *out. kSlow: nothing was changed and step_slow()
  // must take this link (fault, window change, odd link, back-link issue,
  // limit, growth).
  enum Fast { kMoved, kOver, kSlow };
  template <Back B>
  [[gnu::always_inline]] inline Fast step_fast(const uint8_t* wdata, uint64_t wstart,
                                               uint64_t fit) {
    const uint64_t at = x;
    if (at == end) return kOver;
    const uint64_t o = at + next_off - wstart;
    const size_t n = out->size();
    if (o >= fit || at < 0x1000 || (at >> 16) == 0xdead00000000ull || n >= limit ||
        n == out->capacity())
      return kSlow;
    uint64_t words[2];
    std::memcpy(words, wdata + o, kLinkBytes<B>);
    if (B != Back::kNone && words[1] != prev) return kSlow;
    return advance(words[0]) ? kMoved : kOver;
  }
  // Every other step: the limit, 0/0x100/0x122/0xdead... links, a link
  // outside the window (moved) or unreadable, a broken back link (reported,
  // the walk goes on), growth of *out. False when the chain is over.
  template <Back B>
  [[gnu::noinline]] bool step_slow(const Memory& mem, Window& w, WalkResult& issues) {
    if (x == end) return false;
    if (out->size() >= limit || x < 0x1000 || (x >> 16) == 0xdead00000000ull)
      if (!odd_link()) return false;
    uint64_t words[2];
    if (!load(mem, w, x + next_off, words, kLinkBytes<B>)) return unreadable(mem);
    if (B != Back::kNone && words[1] != prev) broken_back(issues, words[1]);
    if (out->size() == out->capacity()) grow(*out);
    return advance(words[0]);
  }
  // Follows one link; false when the chain is over (end reached or `stop`).
  template <Back B>
  [[gnu::always_inline]] inline bool step(const Memory& mem, Window& w, WalkResult& issues) {
    Fast f = step_fast<B>(w.data, w.start, link_fit<B>(w.end - w.start));
    return f == kSlow ? step_slow<B>(mem, w, issues) : f == kMoved;
  }
  bool step(const Memory& mem, Window& w, WalkResult& issues) {
    switch (back) {
      case Back::kPrev:
        return step<Back::kPrev>(mem, w, issues);
      case Back::kPprev:
        return step<Back::kPprev>(mem, w, issues);
      case Back::kNone:
        break;
    }
    return step<Back::kNone>(mem, w, issues);
  }
  // The limit is reached or the link is a low or poison value: false (the
  // chain stops) unless the link is merely low but otherwise plausible.
  [[gnu::cold, gnu::noinline]] bool odd_link() {
    if (out->size() >= limit)
      return fail(WalkStop::kLimit, x - cont,
                  fmt::format("stopped after {} objects ({})", limit, limit_name));
    if (x == 0 || poisoned(x)) {
      uint64_t last = out->size() > base ? out->back() : 0;
      return fail(WalkStop::kCorrupt, last,
                  fmt::format("link after object {:#x} is {:#x}: {}", last, x,
                              x == 0 ? "NULL inside a ring" : "a poison value (freed entry)"));
    }
    return true;
  }
  [[gnu::cold, gnu::noinline]] bool unreadable(const Memory& mem) {
    return fail(WalkStop::kFault, x - cont,
                fmt::format("object {:#x} (link {:#x}) is not readable: {}", x - cont, x,
                            mem.why_unreadable(x + next_off)));
  }
  [[gnu::cold, gnu::noinline]] void broken_back(WalkResult& issues, uint64_t got) {
    add_issue(issues, x - cont,
              fmt::format("broken back link: {}={:#x}, expected {:#x}",
                          back == Back::kPrev ? "prev" : "pprev", got, prev));
  }
  // Brent: the loop has length lam; mu is the index of its first node.
  [[gnu::cold, gnu::noinline]] bool cycle(uint64_t nx) {
    out->push_back(x - cont);
    prev = x;
    ++lam;
    std::vector<uint64_t> seq(out->begin() + base, out->end());
    seq.push_back(nx - cont);
    size_t mu = 0;
    while (mu + lam < seq.size() && seq[mu] != seq[mu + lam]) ++mu;
    out->resize(base + mu + lam);
    cycle_start = seq[mu];
    cycle_length = lam;
    if (mu == 0)  // a ring through the first object: not "without returning"
      return fail(WalkStop::kCycle, out->back(),
                  fmt::format("links form a ring back to the first object: object {:#x} points "
                              "to {:#x} ({} objects) instead of ending",
                              out->back(), cycle_start, lam));
    return fail(WalkStop::kCycle, out->back(),
                fmt::format("links loop without returning to the start: object {:#x} points "
                            "back to {:#x} ({} objects before the loop, {} on it)",
                            out->back(), cycle_start, mu, lam));
  }
  // Copies how the chain stopped into `r`.
  void report(WalkResult& r) const {
    r.stop = stop;
    r.stop_addr = stop_addr;
    r.stop_detail = detail;
    r.cycle_start = cycle_start;
    r.cycle_length = cycle_length;
  }
};

// A single list/hlist/chain walked into r.objects.
void walk_links(const Memory& mem, Window& w, uint64_t first, uint64_t next_off, uint64_t end_value,
                Back back, uint64_t head_for_back, uint64_t member_off, const WalkLimits& lim,
                WalkResult& r) {
  Chain c;
  c.next_off = next_off;
  c.cont = member_off;
  c.end = end_value;
  c.back = back;
  c.limit = lim.max_nodes;
  c.limit_name = lim.max_nodes_name;
  c.out = &r.objects;
  c.begin(first, head_for_back);
  for (uint64_t n = 1; c.step(mem, w, r); ++n) {
    // Nodes allocated one after another sit at a constant stride; prefetch
    // along it so the dependent loads of a long chain overlap. A wrong guess
    // costs one wasted prefetch; nothing is read from the guessed address.
    if (const uint8_t* g = w.at(c.x + next_off + (c.x - c.prev) * kStrideAhead, 1))
      __builtin_prefetch(g);
    if ((n & 0xffff) == 0 && lim.interrupted && lim.interrupted->load()) {
      c.fail(WalkStop::kInterrupted, c.x - member_off, "interrupted");
      break;
    }
  }
  if (c.stop != WalkStop::kEnd) c.report(r);
}

WalkResult fault_at(uint64_t a, const char* what, const Memory& mem) {
  WalkResult r;
  r.stop = WalkStop::kFault;
  r.stop_addr = a;
  r.stop_detail = fmt::format("{} {:#x} is not readable: {}", what, a, mem.why_unreadable(a));
  return r;
}

}  // namespace

WalkResult walk_list(const Memory& mem, uint64_t head, uint64_t member_off, const WalkLimits& lim) {
  WalkResult r;
  Window w;
  uint64_t hw[2];
  if (!load(mem, w, head, hw, 16)) return fault_at(head, "list head", mem);
  walk_links(mem, w, hw[0], 0, head, Back::kPrev, head, member_off, lim, r);
  uint64_t last = r.objects.empty() ? head : r.objects.back() + member_off;
  if (r.stop == WalkStop::kEnd && hw[1] != last)
    add_issue(r, head, fmt::format("head's prev={:#x}, but the last entry is {:#x}", hw[1], last));
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

WalkResult walk_hlist(const Memory& mem, uint64_t head, uint64_t member_off,
                      const WalkLimits& lim) {
  WalkResult r;
  Window w;
  uint64_t first;
  if (!load(mem, w, head, &first, 8)) return fault_at(head, "hlist head", mem);
  walk_links(mem, w, first, 0, 0, Back::kPprev, head, member_off, lim, r);
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

WalkResult walk_chain(const Memory& mem, uint64_t first, uint64_t next_off, const WalkLimits& lim) {
  WalkResult r;
  Window w;
  walk_links(mem, w, first, next_off, 0, Back::kNone, 0, 0, lim, r);
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

WalkResult walk_array(const Memory& mem, uint64_t base, uint64_t count, uint64_t elem_size,
                      const WalkLimits& lim) {
  WalkResult r;
  (void)mem;
  uint64_t n = std::min(count, lim.max_nodes);
  for (uint64_t i = 0; i < n; ++i) {
    if ((i & 0xffff) == 0xffff && lim.interrupted && lim.interrupted->load()) {
      r.stop = WalkStop::kInterrupted;
      r.stop_addr = base + i * elem_size;
      r.stop_detail = fmt::format("interrupted at element {}", i);
      lim.sink(r.objects.data(), r.objects.size());
      return r;
    }
    if (r.objects.size() == r.objects.capacity()) grow(r.objects);
    r.objects.push_back(base + i * elem_size);
  }
  if (n < count) {
    r.stop = WalkStop::kLimit;
    r.stop_detail =
        fmt::format("stopped after {} of {} elements ({})", n, count, lim.max_nodes_name);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

WalkResult walk_given(const std::vector<uint64_t>& objects, const WalkLimits& lim) {
  WalkResult r;
  const uint64_t n = std::min<uint64_t>(objects.size(), lim.max_nodes);
  r.objects.assign(objects.begin(), objects.begin() + static_cast<ptrdiff_t>(n));
  if (n < objects.size()) {
    r.stop = WalkStop::kLimit;
    r.stop_detail = fmt::format("stopped after {} objects ({})", lim.max_nodes, lim.max_nodes_name);
  }
  // In blocks, as the other walkers hand them, so the interrupt flag is seen.
  constexpr size_t kBlock = 4096;
  for (size_t i = 0; i < r.objects.size(); i += kBlock) {
    if (lim.interrupted && lim.interrupted->load()) {
      r.stop = WalkStop::kInterrupted;
      r.stop_addr = r.objects[i];
      r.stop_detail = fmt::format("interrupted at object {}", i);
      r.objects.resize(i);
      break;
    }
    lim.sink(r.objects.data() + i, std::min(kBlock, r.objects.size() - i));
  }
  return r;
}

WalkResult walk_pointer_array(const Memory& mem, uint64_t base, uint64_t count,
                              const WalkLimits& lim) {
  WalkResult r;
  Window w;
  for (uint64_t i = 0; i < count; ++i) {
    if ((i & 0xffff) == 0xffff && lim.interrupted && lim.interrupted->load()) {
      r.stop = WalkStop::kInterrupted;
      r.stop_addr = base + i * 8;
      r.stop_detail = fmt::format("interrupted at slot {}", i);
      break;
    }
    uint64_t p;
    if (!load(mem, w, base + i * 8, &p, 8)) {
      r.stop = WalkStop::kFault;
      r.stop_addr = base + i * 8;
      r.stop_detail = fmt::format("pointer array slot {} at {:#x} is not readable: {}", i,
                                  base + i * 8, mem.why_unreadable(base + i * 8));
      break;
    }
    if (!p) continue;
    if (r.objects.size() >= lim.max_nodes) {
      r.stop = WalkStop::kLimit;
      r.stop_detail =
          fmt::format("stopped after {} objects ({})", lim.max_nodes, lim.max_nodes_name);
      break;
    }
    r.objects.push_back(p);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

namespace {

template <Back B>
WalkResult walk_buckets_t(const Memory& mem, uint64_t base, uint64_t nbuckets, uint64_t bucket_size,
                          BucketKind kind, uint64_t member_off, const WalkLimits& lim) {
  // A hot loop, kept whole (docs/architecture.md lists it): its lanes, ring
  // of pending buckets and limits are one state every round touches.
  // Chains are short and scattered, so every node is a cache miss. kLanes
  // consecutive buckets are walked together, one node per lane per round:
  // each lane's next node is prefetched a round before it is read, so the
  // misses overlap. Finished buckets are flushed strictly in bucket order,
  // so the output (and every check) is that of walking them one by one.
  // 64 lanes: a first walk of a 1M-entry table over a cold core took
  // 18.8 ms (median of 12) against 19.9 ms with 32 (scripts/bench.sh core).
  constexpr size_t kLanes = 64;
  const uint64_t next_off = kind == BucketKind::kChain ? member_off : 0;
  const uint64_t cont = kind == BucketKind::kChain ? 0 : member_off;  // link -> container
  struct Lane {
    uint64_t bucket = 0;
    bool busy = false, done = true;
    std::vector<uint64_t> nodes;
    Chain c;
  };
  WalkResult r;
  r.buckets = nbuckets;
  Window w, bw;
  std::vector<Lane> lanes(kLanes);
  for (auto& L : lanes) {
    L.c.next_off = next_off;
    L.c.cont = cont;
    L.c.back = B;
    L.c.limit = lim.max_nodes;  // bounds one lane's memory; flush() cuts exactly
    L.c.limit_name = lim.max_nodes_name;
    L.c.out = &L.nodes;
  }
  uint64_t next_bucket = 0;
  const uint64_t estimate_at = nbuckets >= 8192 ? nbuckets / 64 : 0;
  uint64_t fault_bucket = 0, fault_addr = 0;
  std::string fault_what;
  size_t head = 0;  // lane holding the lowest unflushed bucket
  bool have_first_stop = false;
  bool array_fault = false;

  // The bucket array is contiguous: past an unreadable bucket the rest is
  // not worth scanning (and a corrupt count could make that endless).
  auto bucket_fault = [&](uint64_t bucket, uint64_t b) __attribute__((cold, noinline)) {
    ++r.faulted_buckets;
    next_bucket = nbuckets;
    fault_bucket = bucket;
    fault_addr = b;
    fault_what =
        fmt::format("bucket {} at {:#x} not readable: {}", bucket, b, mem.why_unreadable(b));
    add_issue(r, b, fault_what);
    array_fault = true;
  };
  auto start = [&](Lane & L) __attribute__((always_inline)) {
    L.busy = false;
    L.done = true;
    L.nodes.clear();
    L.c.stop = WalkStop::kEnd;
    if (next_bucket >= nbuckets) return;
    L.busy = true;
    L.bucket = next_bucket++;
    uint64_t b = base + L.bucket * bucket_size, first;
    if (!load(mem, bw, b, &first, 8)) {
      bucket_fault(L.bucket, b);
      return;
    }
    L.c.end = kind == BucketKind::kListHead ? b : 0;
    if (first == L.c.end) {
      ++r.empty_buckets;
      return;
    }
    L.done = false;
    L.c.begin(first, b);
    prefetch_node(mem, w, first + next_off, cont + next_off);
  };
  size_t sunk = 0;  // r.objects[0, sunk) have been passed to the sink
  auto sink_rest = [&]() {
    lim.sink(r.objects.data() + sunk, r.objects.size() - sunk);
    sunk = r.objects.size();
  };
  // Appends a finished lane; false when the walk must stop (limit).
  auto flush = [&](Lane& L) -> bool {
    size_t room = lim.max_nodes > r.objects.size() ? lim.max_nodes - r.objects.size() : 0;
    bool cut = L.nodes.size() > room;
    size_t n = cut ? room : L.nodes.size();
    while (r.objects.capacity() < r.objects.size() + n) grow(r.objects);
    r.objects.insert(r.objects.end(), L.nodes.begin(), L.nodes.begin() + n);
    r.longest_chain = std::max<uint64_t>(r.longest_chain, L.nodes.size());
    if (L.bucket + 1 == estimate_at) {
      // A large table's first buckets predict its size: reserving a quarter
      // more than that at once saves the doubling copies (8 MB for a million
      // objects), and pages never touched cost nothing.
      uint64_t est = r.objects.size() * (nbuckets / estimate_at);
      est = std::min<uint64_t>(est + est / 4, lim.max_nodes);
      if (est > r.objects.capacity()) reserve_huge(r.objects, est);
    }
    // Evaluate in batches: nodes flushed a few buckets ago are still cached.
    const Chain& c = L.c;
    if (r.objects.size() - sunk >= 64 || cut || c.stop != WalkStop::kEnd) sink_rest();
    if (cut || c.stop == WalkStop::kLimit) {
      r.stop = WalkStop::kLimit;
      r.stop_addr = cut ? L.nodes[n] : c.stop_addr;
      r.stop_detail =
          fmt::format("stopped after {} objects ({})", lim.max_nodes, lim.max_nodes_name);
      return false;
    }
    if (c.stop != WalkStop::kEnd) {
      // A broken chain is reported; the other buckets are still walked.
      add_issue(r, c.stop_addr,
                fmt::format("bucket {}: {} ({})", L.bucket, walk_stop_name(c.stop), c.detail));
      if (!have_first_stop) {
        have_first_stop = true;
        c.report(r);
        r.stop_detail = fmt::format("bucket {}: {}", L.bucket, c.detail);
      }
    }
    return true;
  };

  for (auto& L : lanes) start(L);
  for (uint64_t round = 0;; ++round) {
    if ((round & 0x3fff) == 0x3fff && lim.interrupted && lim.interrupted->load()) {
      r.stop = WalkStop::kInterrupted;
      r.stop_detail = fmt::format("interrupted at bucket {}", lanes[head].bucket);
      sink_rest();
      return r;
    }
    // The window's bounds live in locals for the round; only step_slow()
    // and prefetch_node() move the window, and they are taken again after.
    const uint8_t* wdata = w.data;
    uint64_t wstart = w.start, wlen = w.end - w.start;
    for (auto& L : lanes) {
      if (L.done) continue;
      switch (L.c.template step_fast<B>(wdata, wstart, Chain::link_fit<B>(wlen))) {
        case Chain::kMoved:
          if (L.c.x != L.c.end) prefetch_in(wdata, wstart, wlen, L.c.x + next_off, cont + next_off);
          break;
        case Chain::kOver:
          L.done = true;
          break;
        case Chain::kSlow:
          if (!L.c.template step_slow<B>(mem, w, r))
            L.done = true;
          else if (L.c.x != L.c.end)
            prefetch_node(mem, w, L.c.x + next_off, cont + next_off);
          wdata = w.data;
          wstart = w.start;
          wlen = w.end - w.start;
          break;
      }
    }
    // Flush finished buckets in order, refilling their lanes.
    while (lanes[head].busy && lanes[head].done) {
      if (!flush(lanes[head])) return r;
      start(lanes[head]);
      head = (head + 1) % kLanes;
    }
    if (!lanes[head].busy) break;  // no bucket left in flight
  }
  sink_rest();
  if (array_fault && r.stop == WalkStop::kEnd) {
    r.stop = WalkStop::kFault;
    r.stop_addr = fault_addr;
    r.stop_detail = fmt::format("the bucket array is not readable past {} of {} buckets: {}",
                                fault_bucket, nbuckets, fault_what);
  }
  return r;
}

}  // namespace

WalkResult walk_buckets(const Memory& mem, uint64_t base, uint64_t nbuckets, uint64_t bucket_size,
                        BucketKind kind, uint64_t member_off, const WalkLimits& lim) {
  switch (kind) {
    case BucketKind::kHlist:
      return walk_buckets_t<Back::kPprev>(mem, base, nbuckets, bucket_size, kind, member_off, lim);
    case BucketKind::kListHead:
      return walk_buckets_t<Back::kPrev>(mem, base, nbuckets, bucket_size, kind, member_off, lim);
    case BucketKind::kChain:
      break;
  }
  return walk_buckets_t<Back::kNone>(mem, base, nbuckets, bucket_size, kind, member_off, lim);
}

}  // namespace lr
