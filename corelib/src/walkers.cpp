#include "leakref/walkers.hpp"

#include <fmt/format.h>

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

void add_issue(WalkResult& r, uint64_t addr, std::string what) {
  ++r.issue_count;
  if (r.issues.size() < kMaxIssues) r.issues.push_back({addr, std::move(what)});
}

// Linux poison values and other pointers that can never be a live link.
bool poisoned(uint64_t p) {
  return (p & 0xffffffffffff0000ull) == 0xdead000000000000ull || p == 0x100 || p == 0x122;
}

inline bool load_ptr(const Memory& mem, uint64_t addr, uint64_t* out) {
  if (const uint8_t* p = mem.span(addr, 8)) {
    std::memcpy(out, p, 8);
    return true;
  }
  return mem.read(addr, out, 8).ok();
}

// Walks links x0, next(x0), ... until `end_value` (a ring head or 0).
// `links` receives link addresses. `check_back(prev_link, link, word1)`
// validates the back pointer stored right after the next pointer.
// `container_of(link)` is only used for messages.
enum class Back { kNone, kPrev, kPprev };

void walk_links(const Memory& mem, uint64_t first, uint64_t next_off, uint64_t end_value,
                Back back, uint64_t head_for_back, uint64_t member_off, const WalkLimits& lim,
                WalkResult& r, std::vector<uint64_t>& links) {
  uint64_t x = first;
  uint64_t prev = head_for_back;
  uint64_t tort = first;
  uint64_t power = 1, lam = 0;
  const size_t base = links.size();
  uint64_t budget = lim.max_nodes > r.objects.size() + links.size()
                        ? lim.max_nodes - r.objects.size() - links.size()
                        : 0;
  uint64_t n = 0;
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
    if (poisoned(x) || (x == 0 && end_value != 0)) {
      r.stop = WalkStop::kCorrupt;
      r.stop_addr = links.size() > base ? links.back() - member_off : 0;
      r.stop_detail = fmt::format("link after object {:#x} is {:#x}: {}", r.stop_addr, x,
                                  x == 0 ? "NULL inside a ring" : "a poison value (freed entry)");
      return;
    }
    uint64_t words[2];
    const uint8_t* p = mem.span(x + next_off, back == Back::kNone ? 8 : 16);
    if (p) {
      std::memcpy(words, p, back == Back::kNone ? 8 : 16);
    } else if (!mem.read(x + next_off, words, back == Back::kNone ? 8 : 16).ok()) {
      r.stop = WalkStop::kFault;
      r.stop_addr = x - member_off;
      r.stop_detail = fmt::format("object {:#x} (link {:#x}) is not readable: {}", x - member_off,
                                  x, mem.why_unreadable(x + next_off));
      return;
    }
    if (back == Back::kPrev && words[1] != prev)
      add_issue(r, x - member_off,
                fmt::format("broken back link: prev={:#x}, expected {:#x}", words[1], prev));
    else if (back == Back::kPprev && words[1] != prev)
      add_issue(r, x - member_off,
                fmt::format("broken back link: pprev={:#x}, expected {:#x}", words[1], prev));
    links.push_back(x);
    ++n;
    uint64_t nx = words[0];
    prev = back == Back::kPprev ? x : x;  // list: prev is our link; hlist: &prev->next == link
    ++lam;
    if (nx == tort && nx != end_value) {
      // Brent: the loop has length lam. Find mu, the index of its first node.
      std::vector<uint64_t> seq(links.begin() + base, links.end());
      seq.push_back(nx);
      size_t mu = 0;
      while (mu + lam < seq.size() && seq[mu] != seq[mu + lam]) ++mu;
      links.resize(base + mu + lam);
      r.stop = WalkStop::kCycle;
      r.cycle_start = seq[mu] - member_off;
      r.cycle_length = lam;
      r.stop_addr = links.back() - member_off;
      r.stop_detail = fmt::format(
          "links loop without returning to the start: object {:#x} points back to {:#x} "
          "({} objects before the loop, {} on it)",
          r.stop_addr, r.cycle_start, mu, lam);
      return;
    }
    if (lam == power) {
      tort = nx;
      power <<= 1;
      lam = 0;
    }
    x = nx;
  }
}

void finish(WalkResult& r, std::vector<uint64_t>& links, uint64_t member_off) {
  r.objects.reserve(r.objects.size() + links.size());
  for (uint64_t l : links) r.objects.push_back(l - member_off);
}

}  // namespace

WalkResult walk_list(const Memory& mem, uint64_t head, uint64_t member_off, const WalkLimits& lim) {
  WalkResult r;
  uint64_t w[2];
  if (!mem.read(head, w, 16).ok()) {
    r.stop = WalkStop::kFault;
    r.stop_addr = head;
    r.stop_detail = fmt::format("list head {:#x} is not readable: {}", head, mem.why_unreadable(head));
    return r;
  }
  std::vector<uint64_t> links;
  walk_links(mem, w[0], 0, head, Back::kPrev, head, member_off, lim, r, links);
  if (r.stop == WalkStop::kEnd && w[1] != (links.empty() ? head : links.back()))
    add_issue(r, head, fmt::format("head's prev={:#x}, but the last entry is {:#x}", w[1],
                                   links.empty() ? head : links.back()));
  finish(r, links, member_off);
  return r;
}

WalkResult walk_hlist(const Memory& mem, uint64_t head, uint64_t member_off, const WalkLimits& lim) {
  WalkResult r;
  uint64_t first;
  if (!load_ptr(mem, head, &first)) {
    r.stop = WalkStop::kFault;
    r.stop_addr = head;
    r.stop_detail = fmt::format("hlist head {:#x} is not readable: {}", head, mem.why_unreadable(head));
    return r;
  }
  std::vector<uint64_t> links;
  // pprev of each node must point at the previous node's `next` field (the
  // node itself, as next is at offset 0) or at the head.
  walk_links(mem, first, 0, 0, Back::kPprev, head, member_off, lim, r, links);
  finish(r, links, member_off);
  return r;
}

WalkResult walk_chain(const Memory& mem, uint64_t first, uint64_t next_off, const WalkLimits& lim) {
  WalkResult r;
  std::vector<uint64_t> links;
  walk_links(mem, first, next_off, 0, Back::kNone, 0, 0, lim, r, links);
  finish(r, links, 0);
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
  return r;
}

WalkResult walk_pointer_array(const Memory& mem, uint64_t base, uint64_t count,
                              const WalkLimits& lim) {
  WalkResult r;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t p;
    if (!load_ptr(mem, base + i * 8, &p)) {
      r.stop = WalkStop::kFault;
      r.stop_addr = base + i * 8;
      r.stop_detail = fmt::format("pointer array slot {} at {:#x} is not readable: {}", i,
                                  base + i * 8, mem.why_unreadable(base + i * 8));
      return r;
    }
    if (!p) continue;
    if (r.objects.size() >= lim.max_nodes) {
      r.stop = WalkStop::kLimit;
      r.stop_detail = fmt::format("stopped after {} objects (--limit)", lim.max_nodes);
      return r;
    }
    r.objects.push_back(p);
  }
  return r;
}

WalkResult walk_buckets(const Memory& mem, uint64_t base, uint64_t nbuckets, uint64_t bucket_size,
                        BucketKind kind, uint64_t member_off, const WalkLimits& lim) {
  WalkResult r;
  r.buckets = nbuckets;
  for (uint64_t i = 0; i < nbuckets; ++i) {
    if ((i & 0xfff) == 0xfff && lim.interrupted && lim.interrupted->load()) {
      r.stop = WalkStop::kInterrupted;
      r.stop_detail = fmt::format("interrupted at bucket {}", i);
      return r;
    }
    uint64_t b = base + i * bucket_size;
    WalkResult one;
    WalkLimits l = lim;
    l.max_nodes = lim.max_nodes > r.objects.size() ? lim.max_nodes - r.objects.size() : 0;
    uint64_t first;
    if (!load_ptr(mem, b, &first)) {
      ++r.faulted_buckets;
      add_issue(r, b, fmt::format("bucket {} at {:#x} not readable: {}", i, b, mem.why_unreadable(b)));
      continue;
    }
    if (kind == BucketKind::kListHead ? first == b : first == 0) {
      ++r.empty_buckets;
      continue;
    }
    if (kind == BucketKind::kHlist)
      one = walk_hlist(mem, b, member_off, l);
    else if (kind == BucketKind::kListHead)
      one = walk_list(mem, b, member_off, l);
    else
      one = walk_chain(mem, first, member_off, l);
    r.longest_chain = std::max<uint64_t>(r.longest_chain, one.objects.size());
    r.objects.insert(r.objects.end(), one.objects.begin(), one.objects.end());
    r.issue_count += one.issue_count;
    for (auto& is : one.issues)
      if (r.issues.size() < kMaxIssues) r.issues.push_back(is);
    if (one.stop == WalkStop::kLimit || one.stop == WalkStop::kInterrupted) {
      r.stop = one.stop;
      r.stop_addr = one.stop_addr;
      r.stop_detail = one.stop_detail;
      return r;
    }
    if (one.stop != WalkStop::kEnd) {
      // A broken chain is reported; the other buckets are still walked.
      add_issue(r, one.stop_addr,
                fmt::format("bucket {}: {} ({})", i, walk_stop_name(one.stop), one.stop_detail));
      if (r.stop == WalkStop::kEnd) {
        r.stop = one.stop;
        r.stop_addr = one.stop_addr;
        r.stop_detail = fmt::format("bucket {}: {}", i, one.stop_detail);
        r.cycle_start = one.cycle_start;
        r.cycle_length = one.cycle_length;
      }
    }
  }
  return r;
}

}  // namespace lr
