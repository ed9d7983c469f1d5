// jemalloc 5.3's heap (include/jemalloc/internal/{rtree,edata,bitmap,
// cache_bin}.h): the walk reads
//   the rtree: root[2^(NSB/2)] of leaf pointers, each leaf 2^(NSB - NSB/2)
//     words "szind:16 | edata:48 (128-aligned) | state:3 << 2 | is_head << 1
//     | slab" for x86_64's 48-bit addresses (NSB = 48 - LG_PAGE);
//   each extent (edata_s): e_addr (a large block's user pointer, its page
//     base plus the cache-oblivious offset), e_size_esn (size in its page
//     bits), e_slab_data (a slab's bitmap: bit i clear = region i in use);
//   bin_infos[szind] (reg_size, nregs, slab_size), sz_index2size_tab;
//   each arena's tcache_ql ring of tcache_slow_s, whose tcache_t's bins
//     hold (low_bits_empty - (uint16_t)stack_head) / 8 cached regions;
//   each base's blocks (size, next): metadata, never a root.
#include "targets/jemalloc/jemalloc_heap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include "corelib/dump/memory.hpp"

namespace lr {
namespace {

constexpr uint64_t kEdataAlign = 128;
constexpr uint64_t kArenaIndMask = 0xfff;  // e_bits: arena index, MALLOCX_ARENA_BITS
constexpr unsigned kStateShift = 17;       // e_bits: after arena, slab, committed, pai,
constexpr uint64_t kStateMask = 7;         // zeroed, guarded
constexpr uint64_t kMaxRing = 1u << 16;    // thread caches per arena, base blocks per base
enum State : uint8_t { kActive = 0, kDirty = 1, kMuzzy = 2, kRetained = 3, kMaxState = 5 };

// One extent as the rtree names it, with the page that named it.
struct Extent {
  uint64_t edata = 0, key = 0;
  uint8_t state = 0, szind = 0;
  bool slab = false;
};

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

struct Walk {
  Walk(const Memory& m, const JemallocLayout& l, const HeapLimits& lim, HeapWalk& o,
       JemallocHeap& details)
      : mem(m), L(l), limits(lim), out(o), g(details) {}
  const Memory& mem;
  const JemallocLayout& L;
  const HeapLimits& limits;
  HeapWalk& out;
  JemallocHeap& g;
  std::vector<uint64_t> size_of;  // sz_index2size_tab
  struct Bin {
    uint64_t reg_size = 0, slab_size = 0, nregs = 0;
  };
  std::vector<Bin> bins;
  std::vector<uint64_t> arena_of;  // je_arenas[]
  std::vector<uint64_t> cached;    // thread-cached regions: free (sorted before the extents)
  // At most as many as the extents can hold (and a few more to be told
  // about): looping rings and forged counts end there, not in memory.
  uint64_t cached_cap = 0;
  // The blocks thread caches keep their stacks in (tcache_slow_s.dyn_alloc):
  // below each stack's head lie pointers to regions it handed out long
  // ago, so they are the allocator's, never scanned as the program's.
  std::vector<uint64_t> stacks;
  size_t next_cached = 0, next_stack = 0;
  uint64_t walked_end =
      0;  // the end of the last extent walked  // cursors: blocks come in address order
  uint64_t blocks = 0, cached_bytes = 0, stack_bytes = 0, nstacks = 0;
  uint64_t slab_pad = 0, large_pad = 0, base_bytes = 0, free_bytes[4] = {0, 0, 0, 0};
  unsigned bad_extents = 0;
  unsigned lg_vaddr = 0, lg_page = 0;  // the tree's, once read_emap has them
  std::map<uint64_t, uint64_t> nodes;  // rtree nodes read: start -> end

  bool u64(uint64_t a, uint64_t* v) const { return mem.read(a, v, 8).ok(); }
  void warn(std::string m) { out.warnings.push_back(std::move(m)); }
};

// The size classes and bins, as the library computed them at boot.
Result<void> read_classes(Walk& w) {
  const JemallocLayout& L = w.L;
  w.size_of.resize(L.nsizes);
  LR_TRY(w.mem.read(L.index2size, w.size_of.data(), L.nsizes * 8));
  std::vector<uint8_t> raw(L.nbins * L.bin_info_size);
  LR_TRY(w.mem.read(L.bin_infos, raw.data(), raw.size()));
  for (uint64_t i = 0; i < L.nbins; ++i) {
    const uint8_t* b = raw.data() + i * L.bin_info_size;
    Walk::Bin bin;
    uint32_t nregs = 0;
    std::memcpy(&bin.reg_size, b + L.reg_size, 8);
    std::memcpy(&bin.slab_size, b + L.slab_size, 8);
    std::memcpy(&nregs, b + L.nregs, 4);
    bin.nregs = nregs;
    if (bin.reg_size != w.size_of[i] || bin.nregs == 0 || bin.nregs * bin.reg_size > bin.slab_size)
      return make_error(Errc::kBadFormat,
                        fmt::format("jemalloc's bin {} (regions of {} bytes, {} per {}-byte "
                                    "slab) does not match its size class of {} bytes",
                                    i, bin.reg_size, bin.nregs, bin.slab_size, w.size_of[i]));
    w.bins.push_back(bin);
  }
  // The first large class is four pages (SC_LG_NGROUP = 2).
  const uint64_t page = w.size_of[L.nbins] / 4;
  if (page < 4096 || (page & (page - 1)) || page > (1u << 16))
    return make_error(Errc::kBadFormat,
                      fmt::format("jemalloc's first large size class ({} bytes) gives no page "
                                  "size it can have",
                                  w.size_of[L.nbins]));
  w.g.page = page;
  w.arena_of.resize(L.narenas);
  LR_TRY(w.mem.read(L.arenas, w.arena_of.data(), L.narenas * 8));
  return {};
}

// The rtree's levels (rtree.h's rtree_levels): the bits of a page number
// each level takes, for `lg_vaddr`-bit addresses and `lg_page`-byte pages.
std::vector<unsigned> rtree_levels(unsigned lg_vaddr, unsigned lg_page) {
  const unsigned nsb = lg_vaddr - lg_page;
  if (nsb <= 10) return {nsb};
  if (nsb <= 36) return {nsb / 2, nsb - nsb / 2};
  if (nsb <= 52) return {nsb / 3, nsb / 3 + nsb % 3 / 2, nsb / 3 + nsb % 3 - nsb % 3 / 2};
  return {};
}

// The address bits jemalloc was built for (LG_VADDR, from the build
// machine's CPU: 48, or 57 where it reports five-level paging): the one
// whose root level has the root's slots and whose leaves are compact
// exactly when the high bits hold a size index.
Result<std::vector<unsigned>> pick_levels(Walk& w, unsigned lg_page) {
  const JemallocLayout& L = w.L;
  for (unsigned lg_vaddr : {48u, 52u, 57u}) {
    std::vector<unsigned> lv = rtree_levels(lg_vaddr, lg_page);
    const bool compact = 64 - lg_vaddr >= 64 - static_cast<unsigned>(__builtin_clzll(L.nsizes - 1));
    if (!lv.empty() && (uint64_t{1} << lv[0]) == L.root_slots && compact == L.leaf_compact) {
      w.lg_vaddr = lg_vaddr;
      return lv;
    }
  }
  return make_error(Errc::kUnsupported,
                    fmt::format("jemalloc's rtree root has {} slots and {} leaves: no address "
                                "width it is built for (48, 52 or 57 bits) gives that with "
                                "{}-byte pages",
                                L.root_slots, L.leaf_compact ? "compact" : "two-word", w.g.page));
}

// One leaf entry as an Extent (edata 0: none).
Extent decode_leaf(const Walk& w, const uint8_t* elm, uint64_t key) {
  Extent x;
  x.key = key;
  uint64_t bits = 0;
  std::memcpy(&bits, elm, 8);
  if (w.L.leaf_compact) {
    const unsigned nhib = 64 - w.lg_vaddr;
    x.edata =
        static_cast<uint64_t>(static_cast<int64_t>(bits << nhib) >> nhib) & ~(kEdataAlign - 1);
    x.szind = static_cast<uint8_t>(bits >> w.lg_vaddr);
  } else {
    x.edata = bits;
    uint32_t meta = 0;
    std::memcpy(&meta, elm + w.L.le_metadata, 4);
    bits = meta;
    x.szind = static_cast<uint8_t>(meta >> 5);
  }
  x.state = (bits >> 2) & 7;
  x.slab = bits & 1;
  return x;
}

// The entries under one node of level `lv` whose page numbers start `prefix`.
void read_node(Walk& w, const std::vector<unsigned>& levels, size_t lv, uint64_t node,
               uint64_t prefix, std::vector<Extent>& ext) {
  const bool leaf = lv + 1 == levels.size();
  const uint64_t n = uint64_t{1} << levels[lv], esz = leaf ? w.L.leaf_elm_size : 8;
  // Nodes never share memory: one that overlaps a node read before is
  // damage (or a loop), and reading it again and again could take hours.
  auto next = w.nodes.lower_bound(node);
  if ((next != w.nodes.end() && next->first < node + n * esz) ||
      (next != w.nodes.begin() && std::prev(next)->second > node)) {
    w.warn(fmt::format("jemalloc's rtree node {:#x} overlaps another node; not read", node));
    return;
  }
  w.nodes.emplace(node, node + n * esz);
  std::vector<uint8_t> buf(n * esz);
  if (auto r = w.mem.read(node, buf.data(), buf.size()); !r.ok()) {
    w.warn(fmt::format("jemalloc's rtree {} {:#x} is unreadable: {}", leaf ? "leaf" : "node", node,
                       r.error().message));
    return;
  }
  unsigned below = 0;
  for (size_t k = lv + 1; k < levels.size(); ++k) below += levels[k];
  for (uint64_t j = 0; j < n; ++j) {
    const uint64_t page = (prefix << levels[lv]) | j;
    uint64_t word = 0;
    std::memcpy(&word, buf.data() + j * esz, 8);
    if (!word) continue;
    if (!leaf) {
      read_node(w, levels, lv + 1, word, page, ext);
      continue;
    }
    const Extent x = decode_leaf(w, buf.data() + j * esz, page << (below + w.lg_page));
    if (!x.edata || (!ext.empty() && ext.back().edata == x.edata)) continue;  // its next page
    ext.push_back(x);
  }
}

// The rtree's leaf entries, one Extent per extent (the lowest page naming it).
Result<std::vector<Extent>> read_emap(Walk& w) {
  w.lg_page = static_cast<unsigned>(__builtin_ctzll(w.g.page));
  LR_ASSIGN(const std::vector<unsigned> levels, pick_levels(w, w.lg_page));
  std::vector<Extent> ext;
  // The root is an array inside the rtree_t, read as a node at its address.
  read_node(w, levels, 0, w.L.root, 0, ext);
  // A large extent names only its first and last pages: one entry each.
  std::stable_sort(ext.begin(), ext.end(),
                   [](const Extent& a, const Extent& b) { return a.edata < b.edata; });
  ext.erase(std::unique(ext.begin(), ext.end(),
                        [](const Extent& a, const Extent& b) { return a.edata == b.edata; }),
            ext.end());
  return ext;
}

// One allocated block, taken in address order: free when a thread cache
// holds it, the allocator's own when it is a cache's stack, else in use.
void take(Walk& w, uint64_t user, uint64_t usable) {
  ++w.blocks;
  auto at = [user](const std::vector<uint64_t>& v, size_t& i) {
    while (i < v.size() && v[i] < user) ++i;
    return i < v.size() && v[i] == user;
  };
  if (at(w.cached, w.next_cached)) {
    ++w.g.tcache_free;
    w.cached_bytes += usable;
  } else if (at(w.stacks, w.next_stack)) {
    ++w.nstacks;
    w.stack_bytes += usable;
    w.out.bookkeeping.emplace_back(user, user + usable);
  } else {
    w.out.in_use.push_back(HeapChunk::make(user, usable, false));
    w.out.stats.in_use_bytes += usable;
  }
}

// A slab's regions: in use where its bitmap's bit is clear.
void walk_slab(Walk& w, const Extent& x, const uint8_t* ed, uint64_t base, uint64_t size) {
  const Walk::Bin& b = w.bins[x.szind];
  if (size != b.slab_size || w.L.e_slab_data + (b.nregs + 63) / 64 * 8 > w.L.edata_size) {
    ++w.bad_extents;
    return;
  }
  ++w.g.slabs;
  const uint8_t* bitmap = ed + w.L.e_slab_data;
  uint64_t nfree = 0;
  for (uint64_t r = 0; r < b.nregs; ++r) {
    uint64_t group = 0;
    std::memcpy(&group, bitmap + (r / 64) * 8, 8);
    if ((group >> (r % 64)) & 1) {
      ++nfree;
      continue;
    }
    take(w, base + r * b.reg_size, b.reg_size);
  }
  w.g.slab_free += nfree;
  w.free_bytes[0] += nfree * b.reg_size;
  w.slab_pad += b.slab_size - b.nregs * b.reg_size;
}

// One extent, checked against the rtree entry that named it.
void walk_extent(Walk& w, const Extent& x, const uint8_t* ed, Ranges& managed) {
  const JemallocLayout& L = w.L;
  uint64_t bits = 0, addr = 0, size = 0;
  std::memcpy(&bits, ed + L.e_bits, 8);
  std::memcpy(&addr, ed + L.e_addr, 8);
  std::memcpy(&size, ed + L.e_size, 8);
  const uint64_t page = w.g.page, base = addr & ~(page - 1);
  size &= ~(page - 1);
  // Extents come in address order and never overlap: one that starts
  // inside the one before is damage, and its blocks would break the order.
  const bool fits = size > 0 && size <= (uint64_t{1} << w.lg_vaddr) && base + size > base &&
                    base >= w.walked_end && x.key >= base && x.key < base + size &&
                    ((bits >> kStateShift) & kStateMask) == x.state && x.state <= kMaxState;
  if (!fits) {
    ++w.bad_extents;
    return;
  }
  w.walked_end = base + size;
  if (x.state == kRetained) {
    ++w.g.retained;
    return;  // address space kept, no memory behind it
  }
  managed.emplace_back(base, base + size);
  const uint64_t arena =
      (bits & kArenaIndMask) < w.arena_of.size() ? w.arena_of[bits & kArenaIndMask] : 0;
  w.out.regions.push_back({HeapRegion::Kind::kThread, base, base + size, arena, true});
  if (x.state == kDirty || x.state == kMuzzy) {
    ++(x.state == kDirty ? w.g.dirty : w.g.muzzy);
    w.free_bytes[x.state] += size;
    return;
  }
  if (x.state != kActive) return;  // in transition: a thread was between two states
  if (x.slab && x.szind < w.bins.size()) return walk_slab(w, x, ed, base, size);
  const uint64_t usable = x.szind < w.size_of.size() ? w.size_of[x.szind] : 0;
  if (x.slab || usable == 0 || usable % 8 || usable > kMaxChunkUsable || addr < base ||
      addr + usable > base + size) {
    ++w.bad_extents;
    return;
  }
  ++w.g.large;
  w.large_pad += size - usable;
  take(w, addr, usable);
}

// Each arena's thread caches: their cached regions are free, and the
// memory their stacks live in (dyn_alloc) is the allocator's own.
void read_tcaches(Walk& w) {
  const JemallocLayout& L = w.L;
  // tcache_bin_info points at the bins' infos (allocated at boot).
  std::vector<uint16_t> ncached_max(L.tcache_nbins, 0);
  uint64_t info = 0;
  if (!w.u64(L.tcache_bin_info, &info)) info = 0;
  for (uint64_t i = 0; info && i < L.tcache_nbins; ++i)
    if (!w.mem.read(info + i * L.tcache_bin_info_size + L.ncached_max, &ncached_max[i], 2).ok())
      break;
  uint64_t nhbins = 0;
  if (!w.u64(L.nhbins, &nhbins)) nhbins = 0;
  nhbins = std::min<uint64_t>(nhbins & 0xffffffff, L.tcache_nbins);
  for (uint64_t arena : w.arena_of) {
    if (!arena) continue;
    ++w.g.arenas;
    uint64_t first = 0, slow = 0;
    if (!w.u64(arena + L.arena_tcache_ql, &first) || !first) continue;
    uint64_t n = 0;
    for (slow = first; slow && n < kMaxRing; ++n) {
      uint64_t tcache = 0, dyn = 0;
      if (!w.u64(slow + L.slow_tcache, &tcache) || !w.u64(slow + L.slow_dyn_alloc, &dyn)) break;
      ++w.g.tcaches;
      if (dyn) w.stacks.push_back(dyn);
      for (uint64_t b = 0; b < nhbins; ++b) {
        const uint64_t bin = tcache + L.tcache_bins + b * L.cache_bin_size;
        uint64_t head = 0;
        uint16_t empty = 0;
        if (!w.u64(bin + L.stack_head, &head) ||
            !w.mem.read(bin + L.low_bits_empty, &empty, 2).ok())
          continue;
        const uint64_t count = static_cast<uint16_t>(empty - static_cast<uint16_t>(head)) / 8;
        if (count > ncached_max[b]) {
          w.warn(
              fmt::format("jemalloc thread cache {:#x}: bin {} says {} cached regions, past "
                          "its {} slots; not read",
                          tcache, b, count, ncached_max[b]));
          continue;
        }
        if (w.cached.size() + count > w.cached_cap) {
          w.warn(
              fmt::format("jemalloc: its thread caches hold more regions than its extents "
                          "have ({}); the rest are not read",
                          w.cached_cap));
          return;
        }
        std::vector<uint64_t> items(count);
        if (count && w.mem.read(head, items.data(), count * 8).ok())
          w.cached.insert(w.cached.end(), items.begin(), items.end());
      }
      if (!w.u64(slow + L.slow_next, &slow) || slow == first) break;
    }
    if (n >= kMaxRing)
      w.warn(
          fmt::format("jemalloc arena {:#x}: its thread-cache ring does not close within {} "
                      "entries; cut there",
                      arena, kMaxRing));
  }
}

// Every base's blocks (b0's and each arena's): jemalloc's metadata.
void read_bases(Walk& w, Ranges& managed) {
  std::vector<uint64_t> bases;
  uint64_t b = 0;
  if (w.u64(w.L.b0, &b) && b) bases.push_back(b);
  for (uint64_t arena : w.arena_of)
    if (arena && w.u64(arena + w.L.arena_base, &b) && b) bases.push_back(b);
  std::sort(bases.begin(), bases.end());
  bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
  std::set<uint64_t> seen;  // a block met twice closes a loop
  for (uint64_t base : bases) {
    uint64_t block = 0, n = 0;
    if (!w.u64(base + w.L.base_blocks, &block)) continue;
    for (; block && n < kMaxRing && seen.size() < kMaxRing && seen.insert(block).second; ++n) {
      uint64_t size = 0, next = 0;
      if (!w.u64(block + w.L.block_size, &size) || !w.u64(block + w.L.block_next, &next) ||
          size == 0 || size > (uint64_t{1} << 40) || block + size < block) {
        w.warn(
            fmt::format("jemalloc base {:#x}: block {:#x} is unreadable or of no size; its "
                        "list is cut there",
                        base, block));
        break;
      }
      w.out.bookkeeping.emplace_back(block, block + size);
      managed.emplace_back(block, block + size);
      ++w.g.base_blocks;
      w.base_bytes += size;
      block = next;
    }
  }
}

}  // namespace

namespace {

// Arenas list their threads' caches only in a build with statistics (the
// default, and Debian's): with the caches on and none listed while slabs
// are in use, the regions they hold cannot be told from in-use ones.
void check_tcaches_listed(Walk& w) {
  uint8_t on = 0;
  if (w.g.tcaches || !w.g.slabs || !w.L.opt_tcache || !w.mem.read(w.L.opt_tcache, &on, 1).ok() ||
      !on)
    return;
  w.warn(
      "jemalloc: thread caches are on (opt.tcache) but no arena lists one (a build "
      "without statistics keeps no list): regions they hold are counted in use");
}

// The counts and the allocator's space, once every extent is walked.
void finish_blocks(Walk& w) {
  w.out.in_use.shrink_to_fit();
  w.out.stats.in_use = w.out.in_use.size();
  w.out.stats.chunks = w.blocks + w.g.slab_free;
  w.out.stats.index_bytes = w.out.in_use.bytes();
  // A cached pointer that is no allocated region: the cache or the bitmap is damaged.
  if (w.g.tcache_free != w.cached.size())
    w.warn(
        fmt::format("jemalloc: {} of the {} regions its thread caches hold are no allocated "
                    "region of a slab or large extent",
                    w.cached.size() - w.g.tcache_free, w.cached.size()));
  auto space = [&](HeapSpace::Kind k, const char* what, uint64_t bytes, uint64_t blocks) {
    if (bytes) w.out.space.push_back({k, what, 0, bytes, blocks, 0, {}});
  };
  using K = HeapSpace::Kind;
  space(K::kFree, "thread caches", w.cached_bytes, w.g.tcache_free);
  space(K::kFree, "free slab regions", w.free_bytes[0], w.g.slab_free);
  space(K::kFree, "dirty extents", w.free_bytes[kDirty], w.g.dirty);
  space(K::kFree, "muzzy extents", w.free_bytes[kMuzzy], w.g.muzzy);
  space(K::kOverhead, "thread-cache stacks", w.stack_bytes, w.nstacks);
  space(K::kOverhead, "slab tails", w.slab_pad, 0);
  space(K::kOverhead, "large-block padding", w.large_pad, 0);
}

// Every extent's edata, read once, walked in address order: the blocks
// then come sorted, with nothing to sort afterwards (millions of them).
void walk_extents(Walk& w, const std::vector<Extent>& ext, Ranges& managed) {
  const uint64_t esz = w.L.edata_size;
  std::vector<uint8_t> ed(ext.size() * esz);
  std::vector<std::pair<uint64_t, size_t>> order;  // (e_addr, extent)
  order.reserve(ext.size());
  for (size_t i = 0; i < ext.size(); ++i) {
    uint8_t* e = ed.data() + i * esz;
    if (!w.mem.read(ext[i].edata, e, esz).ok()) {
      ++w.bad_extents;
      continue;
    }
    uint64_t addr = 0;
    std::memcpy(&addr, e + w.L.e_addr, 8);
    order.emplace_back(addr, i);
  }
  std::sort(order.begin(), order.end());
  std::sort(w.cached.begin(), w.cached.end());
  std::sort(w.stacks.begin(), w.stacks.end());
  w.out.in_use.set_size_bias(0);  // jemalloc's classes: 8, then multiples of 16
  for (const auto& [addr, i] : order) {
    walk_extent(w, ext[i], ed.data() + i * esz, managed);
    if (w.limits.progress && (i & 255) == 0)
      w.limits.progress->store(w.blocks, std::memory_order_relaxed);
  }
}

// Adjacent ranges as one (the refindex and the account look them up).
Ranges merged(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r)
    if (!out.empty() && x.first <= out.back().second)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  return out;
}

void finish_regions(Walk& w, Ranges managed) {
  auto& regs = w.out.regions;
  std::sort(regs.begin(), regs.end(),
            [](const HeapRegion& a, const HeapRegion& b) { return a.start < b.start; });
  std::vector<HeapRegion> joined;
  for (const auto& r : regs)
    if (!joined.empty() && joined.back().end == r.start && joined.back().arena == r.arena)
      joined.back().end = r.end;
    else
      joined.push_back(r);
  regs = std::move(joined);
  if (w.base_bytes)
    w.out.space.push_back({HeapSpace::Kind::kOverhead,
                           "metadata (base blocks)",
                           0,
                           w.base_bytes,
                           w.g.base_blocks,
                           0,
                           {}});
  w.out.managed = merged(std::move(managed));
}

}  // namespace

Result<HeapWalk> walk_jemalloc_heap(const Memory& mem, const JemallocLayout& layout,
                                    const HeapLimits& limits) {
  HeapWalk out;
  out.allocator = "jemalloc";
  auto details = std::make_shared<JemallocHeap>();
  details->layout = layout;
  Walk w(mem, layout, limits, out, *details);
  LR_TRY(read_classes(w));
  LR_ASSIGN(std::vector<Extent> ext, read_emap(w));
  if (ext.empty())
    return make_error(Errc::kNotFound,
                      "no jemalloc extent found (its extent map is empty: nothing allocated)");
  uint64_t most_regions = 1;
  for (const auto& b : w.bins) most_regions = std::max(most_regions, b.nregs);
  w.cached_cap = ext.size() * most_regions + 1024;
  read_tcaches(w);  // first: the blocks they hold are told apart as the extents are walked
  Ranges managed;
  walk_extents(w, ext, managed);
  if (w.bad_extents)
    out.warnings.push_back(fmt::format(
        "jemalloc: {} of {} extents in its extent map do not match their rtree entries or "
        "their size class; their blocks are not listed",
        w.bad_extents, ext.size()));
  read_bases(w, managed);
  check_tcaches_listed(w);
  finish_blocks(w);
  finish_regions(w, std::move(managed));
  out.stats.arenas = details->arenas;
  out.bookkeeping = merged(std::move(out.bookkeeping));
  out.details = std::move(details);
  return out;
}

}  // namespace lr
