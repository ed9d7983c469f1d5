#include "leakref/walkers.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

namespace lr {

const char* walk_stop_name(WalkStop s) {
  switch (s) {
    case WalkStop::kEnd: return "end";
    case WalkStop::kCycle: return "cycle";
    case WalkStop::kFault: return "fault";
    case WalkStop::kCorrupt: return "corrupt";
    case WalkStop::kLimit: return "limit";
    case WalkStop::kInterrupted: return "interrupted";
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

// Linux poison values and other pointers that can never be a live link.
bool poisoned(uint64_t p) {
  return (p & 0xffffffffffff0000ull) == 0xdead000000000000ull || p == 0x100 || p == 0x122;
}

// Reads `n` (8 or 16) bytes at `a` through the cached window `w`, refreshing
// it when `a` leaves it; falls back to a copying read across segments.
inline bool load(const Memory& mem, Window& w, uint64_t a, void* out, size_t n) {
  const uint8_t* p = w.at(a, n);
  if (!p && mem.window(a, &w)) p = w.at(a, n);
  if (p) {
    std::memcpy(out, p, n);
    return true;
  }
  return mem.read(a, out, n).ok();
}

inline void prefetch(const Memory& mem, Window& w, uint64_t a) {
  const uint8_t* p = w.at(a, 1);
  if (!p && mem.window(a, &w)) p = w.at(a, 1);
  if (p) __builtin_prefetch(p);
}

// Grows the result array in large steps and asks for transparent huge pages:
// a million-object walk otherwise spends much of its time in page faults.
inline void grow(std::vector<uint64_t>& v) {
  size_t cap = std::max<size_t>(v.capacity() * 2, size_t{1} << 18);
  v.reserve(cap);
  uintptr_t b = reinterpret_cast<uintptr_t>(v.data());
  uintptr_t lo = (b + (2u << 20) - 1) & ~uintptr_t{(2u << 20) - 1};
  uintptr_t hi = (b + cap * sizeof(uint64_t)) & ~uintptr_t{(2u << 20) - 1};
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

enum class Back { kNone, kPrev, kPprev };

// Follows links x0, next(x0), ... until `end_value` (a ring head, or 0),
// appending containers (link - member_off) to r.objects. For kPrev/kPprev the
// word after the next pointer must point back at the previous link (or at
// `head_for_back` for the first). Cycles are found with Brent's algorithm
// and cut to their distinct nodes.
void walk_links(const Memory& mem, Window& w, uint64_t first, uint64_t next_off,
                uint64_t end_value, Back back, uint64_t head_for_back, uint64_t member_off,
                const WalkLimits& lim, WalkResult& r) {
  const size_t base = r.objects.size();
  const size_t nbytes = back == Back::kNone ? 8 : 16;
  const uint64_t budget = lim.max_nodes > base ? lim.max_nodes - base : 0;
  uint64_t x = first, prev = head_for_back, tort = first, power = 1, lam = 0, n = 0;
  for (;;) {
    if (x == end_value) return;
    if (n >= budget) {
      r.stop = WalkStop::kLimit;
      r.stop_addr = x - member_off;
      r.stop_detail = fmt::format("stopped after {} objects (--limit)", lim.max_nodes);
      return;
    }
    if ((n & 0xffff) == 0xffff && lim.interrupted && lim.interrupted->load()) {
      r.stop = WalkStop::kInterrupted;
      r.stop_addr = x - member_off;
      r.stop_detail = "interrupted";
      return;
    }
    if (x == 0 || poisoned(x)) {
      r.stop = WalkStop::kCorrupt;
      r.stop_addr = r.objects.size() > base ? r.objects.back() : 0;
      r.stop_detail = fmt::format("link after object {:#x} is {:#x}: {}", r.stop_addr, x,
                                  x == 0 ? "NULL inside a ring" : "a poison value (freed entry)");
      return;
    }
    uint64_t words[2];
    if (!load(mem, w, x + next_off, words, nbytes)) {
      r.stop = WalkStop::kFault;
      r.stop_addr = x - member_off;
      r.stop_detail = fmt::format("object {:#x} (link {:#x}) is not readable: {}", x - member_off,
                                  x, mem.why_unreadable(x + next_off));
      return;
    }
    if (back != Back::kNone && words[1] != prev)
      add_issue(r, x - member_off,
                fmt::format("broken back link: {}={:#x}, expected {:#x}",
                            back == Back::kPrev ? "prev" : "pprev", words[1], prev));
    if (r.objects.size() == r.objects.capacity()) grow(r.objects);
    r.objects.push_back(x - member_off);
    ++n;
    // list: a node's prev is the previous link; hlist: its pprev is the
    // address of the previous node's `next`, which is that node's link.
    prev = x;
    uint64_t nx = words[0];
    ++lam;
    if (nx == tort && nx != end_value) {
      // Brent: the loop has length lam; mu is the index of its first node.
      std::vector<uint64_t> seq(r.objects.begin() + base, r.objects.end());
      seq.push_back(nx - member_off);
      size_t mu = 0;
      while (mu + lam < seq.size() && seq[mu] != seq[mu + lam]) ++mu;
      r.objects.resize(base + mu + lam);
      r.stop = WalkStop::kCycle;
      r.cycle_start = seq[mu];
      r.cycle_length = lam;
      r.stop_addr = r.objects.back();
      r.stop_detail = fmt::format(
          "links loop without returning to the start: object {:#x} points back to {:#x} "
          "({} objects before the loop, {} on it)",
          r.stop_addr, r.cycle_start, mu, lam);
      return;
    }
    // Nodes allocated one after another sit at a constant stride; prefetch
    // along it so the dependent loads of a long chain overlap. A wrong guess
    // costs one wasted prefetch; nothing is read from the guessed address.
    if (const uint8_t* g = w.at(nx + next_off + (nx - x) * kStrideAhead, 1)) __builtin_prefetch(g);
    if (lam == power) {
      tort = nx;
      power <<= 1;
      lam = 0;
    }
    x = nx;
  }
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

WalkResult walk_hlist(const Memory& mem, uint64_t head, uint64_t member_off, const WalkLimits& lim) {
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
  r.objects.reserve(n);
  for (uint64_t i = 0; i < n; ++i) r.objects.push_back(base + i * elem_size);
  if (n < count) {
    r.stop = WalkStop::kLimit;
    r.stop_detail = fmt::format("stopped after {} of {} elements (--limit)", n, count);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

WalkResult walk_pointer_array(const Memory& mem, uint64_t base, uint64_t count,
                              const WalkLimits& lim) {
  WalkResult r;
  Window w;
  for (uint64_t i = 0; i < count; ++i) {
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
      r.stop_detail = fmt::format("stopped after {} objects (--limit)", lim.max_nodes);
      break;
    }
    r.objects.push_back(p);
  }
  lim.sink(r.objects.data(), r.objects.size());
  return r;
}

WalkResult walk_buckets(const Memory& mem, uint64_t base, uint64_t nbuckets, uint64_t bucket_size,
                        BucketKind kind, uint64_t member_off, const WalkLimits& lim) {
  WalkResult r;
  r.buckets = nbuckets;
  Window w, bw, pw;
  // Where the first link of bucket i is, and where a link's next pointer is.
  const uint64_t next_off = kind == BucketKind::kChain ? member_off : 0;
  auto first_of = [&](uint64_t i, uint64_t* v) {
    return load(mem, bw, base + i * bucket_size, v, 8);
  };
  // Chains are short and scattered, so every node is a cache miss. Overlap
  // them: while at bucket i, prefetch node k (k = 0..3) of the chain of
  // bucket i + kAhead[k], following links earlier prefetches brought in.
  static constexpr uint64_t kAhead[] = {24, 18, 12, 6};
  struct {
    uint64_t addr = 0;
    std::string detail;
    uint64_t cycle_start = 0, cycle_length = 0;
  } first_stop;
  auto end_of = [&](uint64_t j, uint64_t node) {
    return kind == BucketKind::kListHead ? node == base + j * bucket_size : node == 0;
  };
  for (uint64_t i = 0; i < nbuckets; ++i) {
    if ((i & 0xfff) == 0xfff && lim.interrupted && lim.interrupted->load()) {
      r.stop = WalkStop::kInterrupted;
      r.stop_detail = fmt::format("interrupted at bucket {}", i);
      return r;
    }
    for (int k = 0; k < 4; ++k) {
      uint64_t j = i + kAhead[k], node;
      if (j >= nbuckets || !first_of(j, &node) || end_of(j, node)) continue;
      bool ok = true;
      for (int step = 0; step < k && ok; ++step) {
        const uint8_t* p = pw.at(node + next_off, 8);
        if (!p) ok = false;
        else std::memcpy(&node, p, 8);
        if (ok && end_of(j, node)) ok = false;
      }
      if (ok) prefetch(mem, pw, node + next_off);
    }
    uint64_t b = base + i * bucket_size;
    uint64_t first;
    if (!first_of(i, &first)) {
      ++r.faulted_buckets;
      add_issue(r, b, fmt::format("bucket {} at {:#x} not readable: {}", i, b, mem.why_unreadable(b)));
      continue;
    }
    if (end_of(i, first)) {
      ++r.empty_buckets;
      continue;
    }
    size_t before = r.objects.size();
    // Walk straight into `r`; a failed chain's stop is turned into an issue
    // and the walk goes on with the next bucket.
    WalkStop prev_stop = r.stop;
    r.stop = WalkStop::kEnd;
    switch (kind) {
      case BucketKind::kHlist:
        walk_links(mem, w, first, 0, 0, Back::kPprev, b, member_off, lim, r);
        break;
      case BucketKind::kListHead:
        walk_links(mem, w, first, 0, b, Back::kPrev, b, member_off, lim, r);
        break;
      case BucketKind::kChain:
        walk_links(mem, w, first, next_off, 0, Back::kNone, 0, 0, lim, r);
        break;
    }
    size_t got = r.objects.size() - before;
    r.longest_chain = std::max<uint64_t>(r.longest_chain, got);
    lim.sink(r.objects.data() + before, got);
    WalkStop this_stop = r.stop;
    if (this_stop == WalkStop::kLimit || this_stop == WalkStop::kInterrupted) return r;
    if (this_stop == WalkStop::kEnd) {
      r.stop = prev_stop;
      continue;
    }
    add_issue(r, r.stop_addr, fmt::format("bucket {}: {} ({})", i, walk_stop_name(this_stop),
                                          r.stop_detail));
    if (prev_stop == WalkStop::kEnd) {
      // The first broken bucket names the walk's stop.
      first_stop = {r.stop_addr, fmt::format("bucket {}: {}", i, r.stop_detail), r.cycle_start,
                    r.cycle_length};
      r.stop = this_stop;
    } else {
      r.stop = prev_stop;
    }
    r.stop_addr = first_stop.addr;
    r.stop_detail = first_stop.detail;
    r.cycle_start = first_stop.cycle_start;
    r.cycle_length = first_stop.cycle_length;
  }
  return r;
}

}  // namespace lr
