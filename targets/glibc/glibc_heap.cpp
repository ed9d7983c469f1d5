// glibc's malloc heap walk (malloc/malloc.c, arena.c), on the layout of the
// core's own libc (glibc_layout.hpp: its DWARF, or a checked release):
//   malloc_state: fastbinsY, top, next, system_mem
//   heap_info:    ar_ptr first; the heap's size
//   chunk:        prev_size @0, size|flags @8, user data @16
// A chunk is in use when the next chunk's PREV_INUSE bit is set and it is on
// no fastbin or tcache list (those keep PREV_INUSE set). From 2.32 both lists
// are safe-linked: stored = (address_of_link >> 12) ^ next.
#include "targets/glibc/glibc_heap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/dump/residency.hpp"

namespace lr {
namespace {

constexpr uint64_t kPrevInuse = 1, kIsMmapped = 2, kSizeMask = ~uint64_t{7};
constexpr uint64_t kHeapMax = 64ull << 20;  // HEAP_MAX_SIZE on 64-bit
constexpr uint64_t kMinChunk = 32, kPage = 4096;
constexpr uint64_t kPrefetchAhead = 2048;  // bytes: a few dozen small chunks

class Reader {
 public:
  explicit Reader(const Memory& m) : mem_(m) {}
  bool u64(uint64_t a, uint64_t* v) const {
    if (const uint8_t* p = mem_.direct(w_, a, 8)) {
      std::memcpy(v, p, 8);
      return true;
    }
    auto r = mem_.read_u64(a);
    if (!r) return false;
    *v = *r;
    return true;
  }
  const uint8_t* bytes(uint64_t a, size_t n) const { return mem_.direct(w_, a, n); }

 private:
  const Memory& mem_;
  mutable Memory::Window w_;
};

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

bool is_libc(const Module& m) {
  return m.basename().rfind("libc.so", 0) == 0 || m.basename().rfind("libc-", 0) == 0;
}

const std::pair<uint64_t, uint64_t>* range_of(const Ranges& rs, uint64_t a) {
  for (const auto& r : rs)
    if (a >= r.first && a < r.second) return &r;
  return nullptr;
}

// Where each byte of the allocator's memory went (HeapWalk::space), summed
// per (kind, what, arena) as the walk meets them.
class SpaceTally {
 public:
  // `resident`: how many of the bytes were resident (0 when not known).
  void add(HeapSpace::Kind k, const char* what, uint64_t arena, int64_t bytes, int64_t blocks,
           int64_t resident) {
    auto& v = sums_[{k, what, arena}];
    v.bytes += bytes;
    v.blocks += blocks;
    v.resident += resident;
  }
  std::vector<HeapSpace> take() const {
    std::vector<HeapSpace> out;
    for (const auto& [k, v] : sums_)
      if (v.bytes || v.blocks)
        out.push_back({std::get<0>(k),
                       std::get<1>(k),
                       std::get<2>(k),
                       static_cast<uint64_t>(v.bytes),
                       static_cast<uint64_t>(v.blocks),
                       static_cast<uint64_t>(v.resident),
                       {}});
    return out;
  }

 private:
  struct Sums {
    int64_t bytes = 0, blocks = 0, resident = 0;
  };
  std::map<std::tuple<HeapSpace::Kind, std::string, uint64_t>, Sums> sums_;
};
using SK = HeapSpace::Kind;

// What a free chunk that keeps its in-use bit is on.
enum class FreeList : uint8_t { kFastbin, kTcache };

struct Walker {
  const Reader& rd;
  const GlibcLayout& L;
  const HeapLimits& lim;
  HeapWalk& out;
  GlibcHeap& g;
  ChunkIndex cand;                                     // in-use by the PREV_INUSE test
  std::unordered_map<uint64_t, FreeList> free_chunks;  // fastbin and tcache chunk addresses
  uint64_t tcache_steps = 0;  // entries all tcache candidates have followed
  SpaceTally space;
  std::vector<uint64_t> tcache_structs;  // user pointers
  uint64_t tcache_chunk = 0;             // the chunk size a tcache_perthread_struct has (layout's)
  const HeapInput* in = nullptr;         // its tcaches, when libc's DWARF gave them
  uint64_t by_shape = 0;                 // empty tcaches taken by their shape alone
  uint64_t unnamed = 0;                  // tcaches with entries no thread's variable named
  std::vector<uint64_t> rejected_empty;  // empty-looking blocks no variable named
  bool trust_names = true;               // false once a tcache with entries went unnamed

  // Names that missed a tcache its entries prove are not trusted: the empty
  // ones they did not name are taken by shape after all (and said).
  void recheck_unnamed() {
    if (!unnamed || rejected_empty.empty()) return;
    trust_names = false;
    for (uint64_t u : std::exchange(rejected_empty, {})) tcache_candidate(u);
  }

  // A candidate in-use chunk; one larger than leakref indexes is a warning
  // (left out, never recorded with a wrong size).
  void add(uint64_t user, uint64_t usable, bool mmapped) {
    if (user >> 48) {
      out.warnings.push_back(fmt::format(
          "chunk at {:#x}: above the 48-bit user space leakref indexes; left out", user));
      return;
    }
    if (usable > kMaxChunkUsable) {
      out.warnings.push_back(
          fmt::format("chunk at {:#x}: {} usable bytes, more than leakref "
                      "indexes ({}); left out",
                      user, usable, kMaxChunkUsable));
      return;
    }
    cand.push_back(HeapChunk::make(user, usable, mmapped));
    // A thread's tcache is a chunk of its own size: looked at here, while
    // the walk is on it, not in another pass over millions of chunks.
    if (!mmapped && usable + 8 == tcache_chunk) tcache_candidate(user);
  }

  // Walks chunks in [first, end) up to `top` (excluded), accounting their
  // bytes to `arena`. Returns false when the chain broke before reaching
  // top/end (the bytes not walked are accounted as unknown).
  bool chain(uint64_t first, uint64_t end, uint64_t top, uint64_t arena) {
    // A heap whose mapping in the core ends before its first chunk (a
    // forged heap_info size) has no chunks: nothing to walk, nothing unknown.
    if (first >= end) return true;
    ChainTally t;
    const bool ok = chain_tally(first, end, top, arena, &t);
    // 8 bytes of header each (the prev_size word before it belongs to the
    // chunk before: it is in that one's usable bytes when it is in use).
    space.add(SK::kOverhead, "chunk headers", arena, 8 * t.in_use_n, t.in_use_n, t.header_res);
    space.add(SK::kFree, "bins", arena, t.free_bytes, t.free_n, t.free_res);
    return ok;
  }

  // Resident bytes of [a, b), when the capture says which pages were.
  int64_t res(uint64_t a, uint64_t b) const {
    return lim.residency ? static_cast<int64_t>(lim.residency->bytes(a, b)) : 0;
  }

  struct ChainTally {
    uint64_t in_use_n = 0, free_n = 0, free_bytes = 0;
    int64_t header_res = 0, free_res = 0;
  };

  bool chain_tally(uint64_t first, uint64_t end, uint64_t top, uint64_t arena, ChainTally* t) {
    uint64_t c = first, n = 0;
    while (c < end && end - c >= 16) {
      if (c == top) return true;
      if ((++n & 4095) == 0 && lim.progress)
        lim.progress->fetch_add(4096, std::memory_order_relaxed);
      if (n > lim.max_chunks) {
        out.warnings.push_back(
            fmt::format("heap at {:#x}: more than {} chunks, walk stopped", first, lim.max_chunks));
        const uint64_t stop = top > c && top < end ? top : end;
        space.add(SK::kUnknown, "not walked", arena, stop - c, 1, res(c, stop));
        return false;
      }
      uint64_t head;
      if (!rd.u64(c + 8, &head)) break;
      // The chain is one dependent load after another: ask for the bytes
      // a few chunks ahead while this one is read.
      if (const uint8_t* ahead = rd.bytes(c + kPrefetchAhead, 8)) __builtin_prefetch(ahead);
      uint64_t size = head & kSizeMask;
      // A fencepost closes an old heap; one before the arena's top ends
      // the walk early, which is said, with the bytes not walked.
      if ((size == 0 || size == 16) && !(top > c && top < end)) {
        space.add(SK::kOverhead, "fenceposts", arena, end - c, 1, res(c, end));
        return true;
      }
      if (size == 0 || size == 16) break;
      if (size < kMinChunk || size % 16 != 0 || size > end - c) break;  // no wrap-around
      ++out.stats.chunks;
      uint64_t next = c + size, nhead = 0;
      bool in_use;
      if (end - next >= 16 && rd.u64(next + 8, &nhead))
        in_use = nhead & kPrevInuse;
      else
        in_use = next >= end;  // nothing follows: the chunk ends the heap
      if (in_use) {
        add(c + 16, size - 8, false);
        ++t->in_use_n;
        if (lim.residency) t->header_res += res(c + 8, c + 16);
      } else {
        ++g.bin_free;
        ++t->free_n;
        t->free_bytes += size;
        if (lim.residency) t->free_res += res(c, next);
      }
      c = next;
    }
    if (c == top || c == end) return true;
    uint64_t stop = top > c && top < end ? top : end;
    space.add(SK::kUnknown, "not walked", arena, stop - c, 1, res(c, stop));
    out.warnings.push_back(fmt::format(
        "heap [{:#x}, {:#x}): chunk chain breaks at {:#x}; chunks after it are not seen ({} "
        "bytes not walked)",
        first, end, c, stop - c));
    return false;
  }

  void fastbins(uint64_t state) {
    for (uint64_t i = 0; i < L.nfastbins; ++i) {
      uint64_t link_addr = state + L.fastbins + 8 * i, p = 0, n = 0;
      if (!rd.u64(link_addr, &p)) return;
      std::unordered_set<uint64_t> seen;
      while (p != 0) {
        if (p % 16 != 0 || ++n > lim.max_list || !seen.insert(p).second) {
          out.warnings.push_back(
              fmt::format("arena {:#x}: fastbin {} is corrupt at {:#x}", state, i, p));
          break;
        }
        free_chunks.emplace(p, FreeList::kFastbin);
        ++g.fastbin_free;
        uint64_t stored;
        if (!rd.u64(p + 16, &stored)) break;
        p = L.unmangle(p + 16, stored);
      }
    }
  }

  // One tcache entry `e` of bin `i`: 16-aligned, its chunk of that bin's
  // size, carrying the key (the first one met sets it). Its stored next
  // pointer goes to `stored`.
  // Its chunk's size goes to `size` (when given).
  bool tcache_entry(uint64_t e, uint64_t i, uint64_t* key, uint64_t* stored,
                    uint64_t* size = nullptr) const {
    uint64_t head, ek, lo, hi;
    GlibcLayout::tcache_bin_sizes(i, &lo, &hi);
    if (e == 0 || e % 16 != 0 || !rd.u64(e - 8, &head) || (head & kSizeMask) < lo ||
        (head & kSizeMask) > hi || !rd.u64(e + 8, &ek) || ek == 0 || (*key != 0 && ek != *key) ||
        !rd.u64(e, stored))
      return false;
    *key = ek;
    if (size) *size = head & kSizeMask;
    return true;
  }

  static uint64_t bin_max(uint64_t i) {
    uint64_t lo, hi;
    GlibcLayout::tcache_bin_sizes(i, &lo, &hi);
    return hi;
  }

  // "48 bytes", or a large bin's "1056-2032 bytes".
  static std::string bin_bytes(uint64_t i) {
    uint64_t lo, hi;
    GlibcLayout::tcache_bin_sizes(i, &lo, &hi);
    return lo == hi ? fmt::format("{} bytes", lo) : fmt::format("{}-{} bytes", lo, hi);
  }

  // Each bin's entries from its count as stored: 2.42's slots left are
  // taken from the number every bin started with, which the emptiest bin
  // still has (an empty bin's entry must then be NULL, as checked after).
  void tcache_counts(uint64_t* counts, uint64_t bins) const {
    if (!L.tcache_slots) return;
    const uint64_t fill = *std::max_element(counts, counts + bins);
    for (uint64_t i = 0; i < bins; ++i) counts[i] = fill - counts[i];
  }

  void damaged_named(uint64_t user, uint64_t bin, uint64_t count) {
    out.warnings.push_back(fmt::format(
        "the thread cache at {:#x} (a thread's tcache variable names it) is damaged: bin {} "
        "{}; its free chunks are not read and are counted in use",
        user, bin,
        count == 0 ? "is empty but points somewhere"
                   : fmt::format("says {} entries that are no free chunks of its size", count)));
  }

  // An in-use chunk of tcache_perthread_struct's size (0x290 in glibc 2.30 to
  // 2.41, 0x300 in 2.43) is one when every empty bin's pointer is NULL and
  // every other bin's first entry is well formed (a size of its bin, one key). Past the first
  // entry, damage (a cycle, an entry that is not one, a list shorter or longer than its count)
  // keeps the entries read so far and says what was not read.
  void tcache_candidate(uint64_t user) {
    // Each thread's tcache variable names its tcache: an empty-looking
    // block of that size that none names is the program's (a zero-filled
    // calloc looks like an empty tcache). One with entries is proved by them
    // (each a free chunk of its bin with the key), named or not.
    const bool named =
        in && in->tcaches_known && std::binary_search(in->tcaches.begin(), in->tcaches.end(), user);
    const uint64_t bins = L.tcache_bins, width = L.tcache_count_width;
    const uint8_t* b = rd.bytes(user, L.tcache_entries + bins * 8);
    if (!b || bins > kMaxTcacheBins) return;
    uint64_t counts[kMaxTcacheBins], entries[kMaxTcacheBins];
    for (uint64_t i = 0; i < bins; ++i) {
      uint16_t c16 = 0;
      std::memcpy(&c16, b + i * width, width);  // little-endian: 1 byte (< 2.30) or 2
      counts[i] = c16;
      std::memcpy(&entries[i], b + L.tcache_entries + 8 * i, 8);
    }
    tcache_counts(counts, bins);
    uint64_t key = 0, stored = 0;
    for (uint64_t i = 0; i < bins; ++i)
      if (counts[i] == 0 ? entries[i] != 0 : !tcache_entry(entries[i], i, &key, &stored)) {
        // A block a thread's tcache variable names is its tcache, damaged
        // or not: what it holds is not read, and that is said.
        if (named) damaged_named(user, i, counts[i]);
        return;
      }
    bool empty = true;
    for (uint64_t i = 0; i < bins; ++i) empty &= counts[i] == 0;
    if (empty && trust_names && in && in->tcaches_known && !named) {
      rejected_empty.push_back(user);  // taken again if the names prove unreliable
      return;
    }
    std::vector<uint64_t> found;
    for (uint64_t i = 0; i < bins; ++i)
      if (counts[i] && !tcache_bin(user, i, counts[i], entries[i], &key, found)) {
        if (named) damaged_named(user, i, counts[i]);
        return;
      }
    ++g.tcache_structs;
    // An empty one is all zeros, as a zeroed block of the program's of that
    // size is: taken by shape alone, that is a guess, said once.
    by_shape += (!(in && in->tcaches_known) || !trust_names) && empty;
    unnamed += in && in->tcaches_known && !named && !empty;
    tcache_structs.push_back(user);
    if (key) g.tcache_key = key;
    for (uint64_t c : found) free_chunks.emplace(c, FreeList::kTcache);
    g.tcache_free += found.size();
  }

  // Follows bin `i` of the tcache at `user` (count `count`, first entry
  // `e`), adding its chunks to `found`. False when the step budget ran out.
  bool tcache_bin(uint64_t user, uint64_t i, uint64_t count, uint64_t e, uint64_t* key,
                  std::vector<uint64_t>& found) {
    std::unordered_set<uint64_t> seen;
    uint64_t k = 0, stored = 0, last_size = 0, size = 0;
    std::string why;
    for (; k < count; ++k) {
      // Counts go up to 65535 per bin; forged candidates must not add up to
      // billions of reads.
      if (++tcache_steps > lim.max_list) {
        if (tcache_steps == lim.max_list + 1)
          out.warnings.push_back(
              fmt::format("tcache lists: more than {} entries followed; later candidates skipped",
                          lim.max_list));
        return false;
      }
      if (e == 0) {
        why = fmt::format("the list ends after {} entries", k);
        break;
      }
      if (!seen.insert(e).second) {
        why = fmt::format("entry {:#x} comes round again (a cycle) after {} entries", e, k);
        break;
      }
      if (!tcache_entry(e, i, key, &stored, &size)) {
        why = fmt::format("entry {:#x} is not a free chunk of {} with the tcache key", e,
                          bin_bytes(i));
        break;
      }
      // A large bin is kept sorted by size, smallest first.
      if (size < last_size) {
        why = fmt::format("entry {:#x} is smaller than the one before it", e);
        break;
      }
      last_size = size;
      found.push_back(e - 16);
      e = L.unmangle(e, stored);
    }
    if (why.empty() && e != 0) why = fmt::format("the list goes on past its {} entries", count);
    if (!why.empty())
      out.warnings.push_back(fmt::format(
          "tcache at {:#x}, bin of {}: its count says {} but {}; {} entries kept, the rest "
          "(up to {} bytes) may be free chunks counted as in use",
          user, bin_bytes(i), count, why, k, (count > k ? count - k : 0) * bin_max(i)));
    return true;
  }

  // The top chunk of `arena` when it lies in [first, end): free, and any
  // bytes between its end and `end` (none in a sound heap) unknown.
  void account_top(uint64_t arena, uint64_t first, uint64_t end, uint64_t top) {
    uint64_t head = 0;
    if (top < first || top >= end || end - top < 16 || !rd.u64(top + 8, &head)) return;
    const uint64_t size = std::min(head & kSizeMask, end - top);
    space.add(SK::kFree, "top", arena, size, 1, res(top, top + size));
    if (top + size < end)
      space.add(SK::kUnknown, "after the top chunk", arena, end - top - size, 1,
                res(top + size, end));
  }

  // An aligned request above the mmap threshold (posix_memalign, aligned_alloc)
  // is served from a mapping whose chunk starts `lead` bytes in (glibc's
  // _int_memalign: prev_size holds the gap, the size the rest), leaving the
  // mapping's first header stale. The chunk's user pointer is aligned to a
  // power of two A, where _int_memalign puts it: the first A-aligned user
  // pointer past the mapping's own, at least MINSIZE (32) on. One place per
  // A, each checked for both words exactly. 0 when the chunk starts the
  // mapping.
  uint64_t aligned_lead(uint64_t p, uint64_t size) const {
    for (uint64_t a = 32; a && a < size; a <<= 1) {
      uint64_t lead = (((p + 16 + a - 1) & ~(a - 1)) - 16) - p;
      if (lead == 0) continue;
      if (lead < 32) lead += a;
      if (lead + 16 >= size) break;
      uint64_t prev = 0, head = 0;
      if (rd.u64(p + lead, &prev) && prev == lead && rd.u64(p + lead + 8, &head) &&
          head == ((size - lead) | kIsMmapped))
        return lead;
    }
    return 0;
  }

  void mmapped(uint64_t start, uint64_t end) {
    if (start > ~uint64_t{0} - kPage) return;
    for (uint64_t p = (start + kPage - 1) & ~(kPage - 1);
         p >= start && p < end && end - p >= kPage;) {
      uint64_t prev, head;
      if (rd.u64(p, &prev) && prev == 0 && rd.u64(p + 8, &head) && (head & 7) == kIsMmapped) {
        // The chunk is its whole mapping, or (2.43, Debian unstable's) the
        // mapping but its last 16 bytes: the size tells which.
        const uint64_t size = head & kSizeMask, tail = size % kPage == 0 ? 0 : 16;
        if (size >= kPage && (size + tail) % kPage == 0 && size + tail <= end - p) {
          const uint64_t lead = aligned_lead(p, size);
          add(p + lead + 16, size - lead - 16, true);
          out.regions.push_back({HeapRegion::Kind::kMmapped, p, p + size, 0, true});
          out.managed.emplace_back(p, p + size + tail);
          space.add(SK::kOverhead, "mmapped chunk headers", 0, lead + 16 + tail, 1,
                    res(p, p + lead + 16) + res(p + size, p + size + tail));
          ++out.stats.mmapped;
          p += size + tail;
          continue;
        }
      }
      p += kPage;
    }
  }
};

bool plausible_main_arena(const Reader& rd, const GlibcLayout& L, const Ranges& anon, uint64_t p) {
  uint64_t next, top, sysmem, tophead;
  if (!rd.u64(p + L.next, &next) || !rd.u64(p + L.top, &top) || !rd.u64(p + L.system_mem, &sysmem))
    return false;
  if (next != p && (next & (kHeapMax - 1)) != L.heap_info_size) return false;
  if (top % 16 != 0 || sysmem == 0 || sysmem % kPage != 0) return false;
  const auto* r = range_of(anon, top);
  if (!r || !rd.u64(top + 8, &tophead)) return false;
  uint64_t tsize = tophead & kSizeMask;
  return (tophead & kPrevInuse) && tsize % 16 == 0 && top + tsize <= r->second &&
         top + tsize > r->second - kPage;
}

}  // namespace

HeapInput heap_input_from_core(const CoreFile& core, const ModuleSet& mods) {
  HeapInput in;
  const auto& files = core.mapped_ranges();
  for (const auto& s : core.segments()) {
    if (s.kind != SegmentInfo::Kind::kCore) continue;
    // Cut file-backed VMAs out; merge what remains with its neighbour.
    uint64_t a = s.start;
    while (a < s.end) {
      uint64_t b = s.end;
      bool file = false;
      for (const auto& f : files) {
        if (a >= f.start && a < f.end) {
          file = true;
          b = std::min(b, f.end);
          break;
        }
        if (f.start > a && f.start < b) b = f.start;
      }
      if (!file) {
        if (!in.anon.empty() && in.anon.back().second == a)
          in.anon.back().second = b;
        else
          in.anon.emplace_back(a, b);
      }
      a = b;
    }
  }
  for (const auto& m : mods.modules()) {
    if (!is_libc(*m)) continue;
    for (const auto& s : core.segments())
      if (s.kind != SegmentInfo::Kind::kMissing && s.end > m->base && s.start < m->end)
        in.libc_data.emplace_back(std::max(s.start, m->base), std::min(s.end, m->end));
    // A local symbol: only libc's .symtab (libc6-dbg) has it.
    const Symbol* k = m->find_one_symbol("tcache_key");
    if (k && k->is_object && k->size == 8) in.tcache_key_at = k->addr;
    if (const Symbol* mp = m->find_one_symbol("mp_"); mp && mp->is_object) in.mp_at = mp->addr;
  }
  return in;
}

namespace {

// The arenas: thread heaps (64 MiB-aligned, heap_info first; a heap whose
// ar_ptr is heap+48 holds its arena's malloc_state and names the arena),
// the ring of arenas through malloc_state.next, and main_arena (the one
// member not inside a thread heap, else found in libc's data).
struct Arenas {
  std::vector<uint64_t> heap_starts, arenas;
  uint64_t main_arena = 0;
  std::vector<std::string> warnings;  // a ring that does not close
};

uint64_t scan_libc_data(const Reader& rd, const HeapInput& in);

Arenas find_arenas(const Reader& rd, const HeapInput& in) {
  const GlibcLayout& L = in.layout;
  Arenas f;
  for (const auto& r : in.anon) {
    if (r.first > ~uint64_t{0} - kHeapMax) continue;  // no aligned start fits (vsyscall page)
    for (uint64_t a = (r.first + kHeapMax - 1) & ~(kHeapMax - 1);
         a >= r.first && a < r.second && r.second - a > L.heap_info_size; a += kHeapMax) {
      uint64_t ar;
      if (!rd.u64(a + L.heap_ar_ptr, &ar)) continue;
      f.heap_starts.push_back(a);
      if (ar == a + L.heap_info_size) f.arenas.push_back(ar);
    }
  }
  // glibc keeps the arenas in one ring through `next`; a ring that ends
  // (NULL, unreadable) or loops back anywhere but where it began is damage,
  // and arenas past the break are found only by their heaps.
  auto follow_ring = [&](uint64_t from) {
    std::vector<uint64_t> seen{from};
    uint64_t p = from;
    for (int n = 0; n < 4096; ++n) {
      uint64_t next = 0;
      const bool read = rd.u64(p + L.next, &next);
      if (!read || next == 0) {
        f.warnings.push_back(
            fmt::format("arena {:#x}: its next is {}: the ring of arenas is "
                        "broken there; arenas past it are found by their heaps only",
                        p, read ? "NULL" : "not readable"));
        return;
      }
      if (next == from) return;
      if (std::find(seen.begin(), seen.end(), next) != seen.end()) {
        f.warnings.push_back(
            fmt::format("arena {:#x}: its next points back at {:#x}{}: the ring "
                        "of arenas does not close; arenas past it are found by "
                        "their heaps only",
                        p, next, next == p ? " (itself)" : ""));
        return;
      }
      seen.push_back(next);
      if ((next & (kHeapMax - 1)) != L.heap_info_size)
        f.main_arena = next;
      else if (std::find(f.arenas.begin(), f.arenas.end(), next) == f.arenas.end())
        f.arenas.push_back(next);
      p = next;
    }
  };
  if (!f.arenas.empty()) follow_ring(f.arenas.front());
  if (!f.main_arena) {
    f.main_arena = scan_libc_data(rd, in);
    if (f.main_arena) follow_ring(f.main_arena);
  }
  return f;
}

// main_arena in libc's data, by its shape. libc's data is a few hundred KiB;
// a forged core can claim terabytes: unreadable pages are skipped and the
// scan stops after 32 MiB of candidates.
uint64_t scan_libc_data(const Reader& rd, const HeapInput& in) {
  const uint64_t state = in.layout.state_size;
  uint64_t budget = uint64_t{1} << 22;
  for (const auto& r : in.libc_data) {
    for (uint64_t p = (r.first + 7) & ~uint64_t{7};
         p + state <= r.second && p + state > p && budget; p += 8, --budget) {
      uint64_t w;
      if (!rd.u64(p, &w)) {
        uint64_t next_page = (p | (kPage - 1)) + 1;
        if (next_page <= p) break;
        p = next_page - 8;
        continue;
      }
      if (plausible_main_arena(rd, in.layout, in.anon, p)) return p;
    }
    if (!budget) break;
  }
  return 0;
}

// Where the main heap starts: mp_.sbrk_base when libc's DWARF says where it
// is and it lies in the mapping before top, else the mapping's start (where
// the kernel's brk area starts; qemu-user's starts below glibc's first sbrk).
uint64_t main_heap_start(const Walker& w, const HeapInput& in, uint64_t vma_start, uint64_t top) {
  uint64_t base = 0;
  if (w.L.par_sbrk_base && in.mp_at && w.rd.u64(in.mp_at + w.L.par_sbrk_base, &base) &&
      base >= vma_start && base <= top && base % 16 == 0)
    return base;
  return vma_start;
}

// The main heap: from the brk base to the end of main_arena's top chunk.
void walk_main_heap(Walker& w, const HeapInput& in, uint64_t main_arena, Ranges& heap_ranges) {
  uint64_t top = 0, tophead = 0;
  w.rd.u64(main_arena + w.L.top, &top);
  const auto* r = range_of(in.anon, top);
  if (r && w.rd.u64(top + 8, &tophead) && (tophead & kSizeMask) <= r->second - top) {
    const uint64_t end = top + (tophead & kSizeMask), start = main_heap_start(w, in, r->first, top);
    HeapRegion hr{HeapRegion::Kind::kMain, start, end, main_arena, true};
    hr.complete = w.chain(start, end, top, main_arena);
    w.account_top(main_arena, start, end, top);
    w.out.regions.push_back(hr);
    w.out.managed.emplace_back(start, end);
    heap_ranges.emplace_back(start, end);
    ++w.g.heaps;
  } else {
    w.out.warnings.push_back(fmt::format(
        "main_arena {:#x}: top chunk {:#x} is not in the image or overruns it", main_arena, top));
  }
  w.fastbins(main_arena);
}

// Each thread heap of a known arena, chunk by chunk.
void walk_thread_heaps(Walker& w, const HeapInput& in, const Arenas& f, Ranges& heap_ranges) {
  for (uint64_t a : f.heap_starts) {
    uint64_t ar, size;
    if (!w.rd.u64(a + w.L.heap_ar_ptr, &ar) || !w.rd.u64(a + w.L.heap_size, &size)) continue;
    if (std::find(f.arenas.begin(), f.arenas.end(), ar) == f.arenas.end()) continue;
    if (size < kPage || size > kHeapMax) {
      w.out.warnings.push_back(fmt::format("heap {:#x}: implausible size {:#x}", a, size));
      continue;
    }
    const auto* r = range_of(in.anon, a);
    uint64_t end = std::min(a + size, r->second);
    uint64_t top = 0;
    w.rd.u64(ar + w.L.top, &top);
    const uint64_t hi = w.L.heap_info_size;
    uint64_t first = ar == a + hi ? a + w.L.first_chunk_with_state() : a + hi;
    HeapRegion hr{HeapRegion::Kind::kThread, first, end, ar, true};
    w.space.add(SK::kOverhead, ar == a + hi ? "heap_info and arena" : "heap_info", ar,
                std::min(first, end) - a, 1, w.res(a, std::min(first, end)));
    hr.complete = w.chain(first, end, top, ar);
    w.account_top(ar, first, end, top);
    w.out.regions.push_back(hr);
    w.out.managed.emplace_back(a, end);
    heap_ranges.emplace_back(a, a + kHeapMax);  // the whole reservation: no mmapped chunk there
    ++w.g.heaps;
  }
  for (uint64_t ar : f.arenas) w.fastbins(ar);
}

// Large requests are mmapped chunks in anonymous memory outside the heaps.
void walk_mmapped(Walker& w, const HeapInput& in, const Ranges& heap_ranges) {
  for (const auto& r : in.anon) {
    uint64_t a = r.first;
    std::vector<std::pair<uint64_t, uint64_t>> inside;
    for (const auto& h : heap_ranges)
      if (h.first < r.second && h.second > r.first) inside.push_back(h);
    std::sort(inside.begin(), inside.end());
    for (const auto& h : inside) {
      if (h.first > a) w.mmapped(a, h.first);
      a = std::max(a, h.second);
    }
    if (a < r.second) w.mmapped(a, r.second);
  }
}

// The candidates less the free chunks found on lists, filtered in place:
// the walk's memory stays at one record per chunk instead of two copies.
// A free chunk left out of the in-use ones is free bytes of its arena (its
// header was counted as an in-use chunk's).
void account_listed(Walker& w, const HeapChunk& c, FreeList on,
                    const std::vector<HeapRegion>& by_start) {
  auto it = std::upper_bound(by_start.begin(), by_start.end(), c.user,
                             [](uint64_t a, const HeapRegion& r) { return a < r.start; });
  const uint64_t arena = it == by_start.begin() ? 0 : std::prev(it)->arena;
  const int64_t header_res = w.res(c.user - 8, c.user);
  w.space.add(SK::kFree, on == FreeList::kTcache ? "tcache" : "fastbins", arena, c.usable() + 8, 1,
              header_res + w.res(c.user, c.user + c.usable()));
  w.space.add(SK::kOverhead, "chunk headers", arena, -8, -1, -header_res);
}

// The allocator's own chunks (each thread's tcache_perthread_struct): in
// use, but the allocator's bytes.
void account_own(Walker& w) {
  std::sort(w.tcache_structs.begin(), w.tcache_structs.end());
  for (uint64_t u : w.tcache_structs)
    if (auto c = w.out.chunk_containing(u); c && c->user == u) {
      uint64_t arena = 0;
      for (const auto& r : w.out.regions)
        if (u >= r.start && u < r.end) arena = r.arena;
      w.space.add(SK::kOverhead, "tcache structures", arena, c->usable(), 1,
                  w.res(u, u + c->usable()));
      w.out.own_chunks.push_back(u);
    }
}

void keep_in_use(Walker& w) {
  HeapWalk& out = w.out;
  out.in_use = std::move(w.cand);
  out.in_use.sort();  // a few runs, merged
  // The chunks the free lists hold, by user pointer, met in address order
  // as the sorted chunks are: one pass, no lookup per chunk.
  std::vector<std::pair<uint64_t, FreeList>> listed;
  listed.reserve(w.free_chunks.size());
  for (const auto& [chunk, list] : w.free_chunks) listed.emplace_back(chunk + 16, list);
  std::sort(listed.begin(), listed.end());
  std::vector<HeapRegion> by_start;
  for (const auto& r : out.regions)
    if (r.kind != HeapRegion::Kind::kMmapped) by_start.push_back(r);
  std::sort(by_start.begin(), by_start.end(),
            [](const HeapRegion& a, const HeapRegion& b) { return a.start < b.start; });
  size_t k = 0;
  uint64_t bytes = 0;
  out.in_use.filter([&](const HeapChunk& c) {
    while (k < listed.size() && listed[k].first < c.user) ++k;
    if (!c.mmapped() && k < listed.size() && listed[k].first == c.user) {
      account_listed(w, c, listed[k].second, by_start);
      return false;
    }
    bytes += c.usable();
    return true;
  });
  out.in_use.shrink_to_fit();  // in place (mremap): the tail was never touched
  out.stats.in_use_bytes = bytes;
  out.stats.index_bytes = out.in_use.bytes();
  out.stats.in_use = out.in_use.size();
  account_own(w);
  out.space = w.space.take();
}

}  // namespace

namespace {
// Each arena's system_mem against the bytes of its heaps the walk found:
// what the account's total stands on, said when the two differ.
void check_system_mem(Walker& w, const Arenas& f) {
  std::vector<uint64_t> arenas = f.arenas;
  if (f.main_arena) arenas.push_back(f.main_arena);
  for (uint64_t ar : arenas) {
    uint64_t sysmem = 0, found = 0;
    if (!w.rd.u64(ar + w.L.system_mem, &sysmem)) continue;
    for (const auto& r : w.out.regions)
      if (r.arena == ar && r.kind != HeapRegion::Kind::kMmapped)
        found +=
            r.end - (r.kind == HeapRegion::Kind::kThread ? r.start & ~(kHeapMax - 1) : r.start);
    w.g.system_mem.emplace_back(ar, sysmem);
    if (found != sysmem)
      w.out.warnings.push_back(
          fmt::format("arena {:#x}: its system_mem says {} bytes but its heaps in the core hold {}",
                      ar, sysmem, found));
  }
}

// gdb reads libc's tcache_key; without its symbol the key the free tcache
// entries carry is the same value, and with neither it is unknown.
void read_tcache_key(const Reader& rd, const HeapInput& in, GlibcHeap& g,
                     std::vector<std::string>& warnings) {
  uint64_t k = 0;
  if (in.tcache_key_at && rd.u64(in.tcache_key_at, &k)) {
    if (g.tcache_key && g.tcache_key != k)
      warnings.push_back(
          fmt::format("libc's tcache_key is {:#x} but the free tcache entries carry "
                      "{:#x}: those entries are suspect",
                      k, g.tcache_key));
    g.tcache_key = k;
    g.tcache_key_from = "libc";
  } else if (g.tcache_key) {
    g.tcache_key_from = "tcache entries";
  }
}
}  // namespace

Result<HeapWalk> walk_glibc_heap(const Memory& mem, const HeapInput& in, const HeapLimits& limits) {
  Reader rd(mem);
  HeapWalk out;
  out.allocator = "glibc";
  auto details = std::make_shared<GlibcHeap>();
  GlibcHeap& g = *details;
  Walker w{rd,  in.layout, limits, out, g,   {}, {}, 0, {}, {}, in.layout.tcache_chunk(),
           &in, 0,         0,      {},  true};
  const Arenas f = find_arenas(rd, in);
  g.main_arena = f.main_arena;
  if (!g.main_arena && f.arenas.empty())
    return make_error(
        Errc::kNotFound,
        "no glibc malloc arena found (not a glibc heap, or libc's data is not in the image)");
  out.stats.arenas = f.arenas.size() + (g.main_arena ? 1 : 0);
  for (const auto& m : f.warnings) out.warnings.push_back(m);
  Ranges heap_ranges;
  if (g.main_arena) walk_main_heap(w, in, g.main_arena, heap_ranges);
  walk_thread_heaps(w, in, f, heap_ranges);
  walk_mmapped(w, in, heap_ranges);
  w.recheck_unnamed();
  keep_in_use(w);
  if (w.by_shape)
    out.warnings.push_back(fmt::format(
        "{} zero-filled block{} of a tcache's size {} taken for thread caches by shape alone ({}): "
        "a zeroed block of the program's of that size would be taken for one",
        w.by_shape, w.by_shape == 1 ? "" : "s", w.by_shape == 1 ? "is" : "are",
        !w.trust_names ? "the threads' tcache variables missed tcaches their entries prove"
        : in.tcaches_why.empty() ? "no thread's tcache variable was read"
                                 : in.tcaches_why));
  check_system_mem(w, f);
  read_tcache_key(rd, in, g, out.warnings);
  if (g.main_arena) out.bookkeeping.emplace_back(g.main_arena, g.main_arena + in.layout.state_size);
  g.layout = in.layout;
  out.details = std::move(details);
  // A request of n bytes gets at most n + 24 usable bytes (16-byte chunks,
  // 8 bytes of header, 24 usable at least: malloc(0)); an mmapped chunk
  // whole pages, at most n + 8192.
  out.round_up = 25;
  out.round_up_mmapped = 8193;
  return out;
}

Result<GlibcLayout> glibc_layout_of(const Program& prog) {
  Module* libc = nullptr;
  for (const auto& m : prog.modules().modules())
    if (is_libc(*m) && !m->types_only) libc = m.get();
  if (!libc)
    return make_error(Errc::kNotFound,
                      "no glibc malloc arena found (no libc.so among the core's modules)");
  // The release decides what no DWARF says (safe-linking): without it,
  // nothing is guessed.
  const std::string v = glibc_version(prog.mem(), libc->base, libc->end);
  if (v.empty()) {
    // Most often its file is not here, or is another build (a core from
    // another machine): the core's reader says which.
    std::string why;
    for (uint64_t a = libc->base; a < libc->end && a >= libc->base && why.empty(); a += kPage)
      why = prog.mem().why_unreadable(a);
    if (why.empty()) why = "the banner is not in it";
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: no glibc release string in its image ({}): which malloc "
                                  "layout it has is not guessed",
                                  libc->path, why));
  }
  // A layout this libc's DWARF gave before (same build-id, same DWARF).
  if (auto kept = cached_glibc_layout(libc->build_id); kept && kept->version == v) return *kept;
  if (!libc->dwarf()) return glibc_layout_for_release(v);
  auto dwarf = glibc_layout_from_dwarf(prog.types(), *libc, v);
  if (dwarf.ok()) {
    cache_glibc_layout(libc->build_id, dwarf.value());
    return dwarf;
  }
  // DWARF that lacks malloc's structures: the table's, when it has the release.
  auto table = glibc_layout_for_release(v);
  if (!table.ok())
    return make_error(Errc::kUnsupported,
                      fmt::format("glibc {}: {}; its malloc is not one this heap walk reads", v,
                                  dwarf.error().message));
  table->from += " (" + dwarf.error().message + ")";
  return table;
}

namespace {
Result<HeapWalk> walk_core(const Program& prog, const HeapLimits& limits) {
  if (!prog.core())
    return make_error(Errc::kNotFound, "no glibc malloc arena found (not a process core)");
  HeapInput in = heap_input_from_core(*prog.core(), prog.modules());
  LR_ASSIGN(in.layout, glibc_layout_of(prog));
  if (auto t = glibc_thread_tcaches(prog); t.ok()) {
    in.tcaches_known = true;
    in.tcaches = std::move(t).value();
  } else {
    in.tcaches_why = t.error().message;
  }
  return walk_glibc_heap(prog.mem(), in, limits);
}
}  // namespace

namespace {

// The chunk of region `r` holding `addr`, by its chain from the region's
// start: its start and size, and whether its neighbour marks it in use;
// false when the chain breaks first.
bool chunk_in_region(const Memory& mem, const HeapRegion& r, uint64_t addr, uint64_t* at,
                     uint64_t* size, bool* marked_used) {
  for (uint64_t p = r.start; p + 16 <= r.end;) {
    uint64_t head = 0, next = 0;
    if (!mem.read(p + 8, &head, 8).ok()) return false;
    const uint64_t n = head & kSizeMask;
    if (n < 16 || n % 16 != 0 || n > r.end - p) return false;
    if (addr < p + n) {
      *at = p, *size = n;
      *marked_used =
          p + n + 16 <= r.end && mem.read(p + n + 8, &next, 8).ok() && (next & kPrevInuse);
      return true;
    }
    p += n;
  }
  return false;
}

// Where a freed (or never allocated) address lies in glibc's heap.
HeapPlace locate_glibc(const Program& prog, const HeapWalk& heap, uint64_t addr) {
  for (const auto& r : heap.regions) {
    if (addr < r.start || addr >= r.end) continue;
    if (r.kind == HeapRegion::Kind::kMmapped)
      return {
          fmt::format("in the mapping of the mmapped chunk at {:#x}, before its block "
                      "(an aligned request's gap, or the chunk's header)",
                      r.start)};
    const std::string arena = fmt::format("arena {:#x}", r.arena);
    uint64_t at = 0, size = 0;
    bool used = false;
    if (!chunk_in_region(prog.mem(), r, addr, &at, &size, &used))
      return {fmt::format("in {}'s heap {:#x}-{:#x}, past a break in its chunk chain", arena,
                          r.start, r.end)};
    if (addr < at + 16)
      return {fmt::format("in the header of the chunk at {:#x} ({} bytes), {}", at, size, arena)};
    const char* where = used ? "a free chunk on a thread cache (tcache) or fastbin list: "
                               "its neighbour still marks it in use"
                        : at + size + 32 >= r.end ? "the top chunk: memory the arena has not "
                                                    "handed out since, or took back"
                                                  : "a free chunk in the bins (unsorted, small "
                                                    "or large): its neighbour marks it free";
    return {fmt::format("{:#x} is {:#x} into the chunk at {:#x} ({} bytes), {}, {}", addr,
                        addr - at - 16, at, size, where, arena),
            at + 16, at + size};
  }
  return {};
}

}  // namespace

Allocator glibc_allocator() {
  return {"glibc", &walk_core, &locate_glibc};
}

}  // namespace lr
