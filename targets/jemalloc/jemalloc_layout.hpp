// Where jemalloc 5.3 keeps what the heap walk reads, from the library's own
// DWARF and symbol table (its -dbgsym / -dbg package, or the build's
// unstripped file): the extent map (a radix tree from every page the
// allocator holds to its extent), the extents, the size classes, the
// arenas with the thread caches each lists, and the metadata blocks (base).
// A stripped build names none of these (they are hidden symbols): it is
// refused, naming what to install, never searched for by shape.
#pragma once

#include <cstdint>
#include <string>

#include "corelib/base/result.hpp"

namespace lr {

class Module;
class TypeRegistry;

struct JemallocLayout {
  std::string version;  // "5.3.0-0-g54eaed1d..." from the library's banner; "" unknown
  std::string from;     // "libjemalloc.so.2's DWARF (PATH)"
  // Globals, at their runtime addresses.
  uint64_t emap = 0;        // je_arena_emap_global (an emap_t: its rtree first)
  uint64_t root = 0;        // its rtree's root array
  uint64_t root_slots = 0;  // entries of that array (2^(bits the root level takes))
  // struct rtree_leaf_elm_s: one word "szind | edata | state | is_head |
  // slab" (RTREE_LEAF_COMPACT, when the address bits leave room for szind),
  // else le_edata then le_metadata "szind << 5 | state << 2 | is_head << 1 | slab".
  uint64_t leaf_elm_size = 0, le_metadata = 0;
  bool leaf_compact = false;
  uint64_t bin_infos = 0, nbins = 0;    // je_bin_infos[SC_NBINS]
  uint64_t index2size = 0, nsizes = 0;  // je_sz_index2size_tab[SC_NSIZES]
  uint64_t arenas = 0, narenas = 0;     // je_arenas[MALLOCX_ARENA_LIMIT]
  uint64_t b0 = 0;                      // base.c's b0: the base of metadata not an arena's
  uint64_t nhbins = 0;                  // je_nhbins: thread-cache bins in use
  uint64_t opt_tcache = 0;              // je_opt_tcache (bool); 0: no such symbol
  uint64_t tcache_bin_info = 0;         // je_tcache_bin_info: points at each bin's ncached_max
  uint64_t tcache_bin_info_size = 0, ncached_max = 0;
  // struct bin_info_s
  uint64_t bin_info_size = 0, reg_size = 0, slab_size = 0, nregs = 0;
  // struct edata_s
  uint64_t edata_size = 0, e_bits = 0, e_addr = 0, e_size = 0, e_slab_data = 0;
  // struct arena_s: the list of thread caches (tcache_slow_s.link ring), its base
  uint64_t arena_tcache_ql = 0, arena_base = 0;
  // struct tcache_slow_s / tcache_s / cache_bin_s
  uint64_t slow_next = 0, slow_tcache = 0, slow_dyn_alloc = 0;
  uint64_t tcache_bins = 0, tcache_nbins = 0, cache_bin_size = 0, stack_head = 0,
           low_bits_empty = 0;
  // struct base_s / base_block_s
  uint64_t base_blocks = 0, block_size = 0, block_next = 0;
};

// The layout `lib` (libjemalloc, or a program that links jemalloc
// statically) gives through its DWARF and symbols; kNotFound when it has no
// jemalloc symbols at all (another allocator), kUnsupported naming what is
// missing when it is jemalloc but stripped or of a layout this walk does not
// read.
Result<JemallocLayout> jemalloc_layout_from_dwarf(TypeRegistry& types, Module& lib);

}  // namespace lr
