// libFuzzer target: the jemalloc 5.3 heap walk over adversarial allocator
// state. The input is records "u32 offset, u8 length, bytes" written into a
// sparse 256 MiB address space at kBase (unwritten bytes read as zero),
// over jemalloc's globals as a 48-bit build lays them out: the extent map's
// root, the size classes and bins (filled in valid first, then open to the
// records), the arenas, b0, nhbins and the thread-cache bin infos. Looping
// rtree nodes, extents outside the space, tcache counts past their arrays,
// rings and block lists that cycle must neither crash nor hang the walk.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "targets/jemalloc/jemalloc_heap.hpp"
#include "tests/fuzz/sparse_memory.hpp"

namespace {

using lrfuzz::kBase;
using lrfuzz::kPage;
using lrfuzz::kSpan;
using lrfuzz::SparseMemory;

// jemalloc 5.3 as scripts/jemalloc-build 48 builds it, globals at fixed places.
lr::JemallocLayout layout() {
  lr::JemallocLayout L;
  L.emap = kBase;
  L.root = kBase + 0x78;
  L.root_slots = 1u << 18;
  L.leaf_elm_size = 8;
  L.leaf_compact = true;
  L.index2size = kBase + 0x300000, L.nsizes = 232;
  L.bin_infos = kBase + 0x301000, L.nbins = 36;
  L.arenas = kBase + 0x302000, L.narenas = 4095;
  L.b0 = kBase + 0x30a000, L.nhbins = kBase + 0x30a008, L.tcache_bin_info = kBase + 0x30a010;
  L.tcache_bin_info_size = 2;
  L.bin_info_size = 40, L.reg_size = 0, L.slab_size = 8, L.nregs = 16;
  L.edata_size = 128, L.e_bits = 0, L.e_addr = 8, L.e_size = 16, L.e_slab_data = 64;
  L.arena_tcache_ql = 0x2898, L.arena_base = 0x13458;
  L.slow_next = 0, L.slow_tcache = 0xa8, L.slow_dyn_alloc = 0xa0;
  L.tcache_bins = 8, L.tcache_nbins = 73, L.cache_bin_size = 24, L.stack_head = 0;
  L.low_bits_empty = 0x14;
  L.base_blocks = 0xa0, L.block_size = 0, L.block_next = 8;
  return L;
}

// Size classes as jemalloc's with 16-byte quanta and 4 KiB pages: 8, then
// four per doubling; each bin's slab an exact number of pages.
void size_classes(SparseMemory& m, const lr::JemallocLayout& L) {
  std::vector<uint64_t> sizes{8, 16, 32, 48, 64};
  while (sizes.size() < L.nsizes) {
    const uint64_t lg = 63 - __builtin_clzll(sizes.back() - 1);
    sizes.push_back(sizes.back() + (uint64_t{1} << (lg - 1)));
  }
  sizes[L.nbins] = 4 * kPage;  // the first large class: four pages
  for (uint64_t i = 0; i < L.nsizes; ++i) m.put64(L.index2size + 8 * i, sizes[i]);
  for (uint64_t i = 0; i < L.nbins; ++i) {
    const uint64_t r = sizes[i], g = std::gcd(r, kPage), slab = r / g * kPage;
    const uint64_t at = L.bin_infos + i * L.bin_info_size;
    m.put64(at, r);
    m.put64(at + 8, slab);
    m.put64(at + 16, slab / r);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SparseMemory mem;
  const lr::JemallocLayout L = layout();
  size_classes(mem, L);
  mem.load(data, size);
  lr::HeapLimits lim;
  auto w = lr::walk_jemalloc_heap(mem, L, lim);
  if (!w.ok()) return 0;
  // What the walk returns holds its promises: blocks sorted by address,
  // each found again by an address inside it.
  uint64_t last = 0;
  for (const auto& c : w->in_use) {
    if (c.user < last) __builtin_trap();
    last = c.user;
    if (c.usable() && !w->chunk_containing(c.user)) __builtin_trap();
  }
  return 0;
}
