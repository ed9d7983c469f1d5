// jemalloc 5.3 as an allocator the engine walks (corelib/blocks/heap.hpp):
// Debian's libjemalloc2, or jemalloc linked into a program. Every extent
// comes from the extent map (arena_emap_global's radix tree, which maps each
// page jemalloc holds to its extent): a slab's regions are in use where its
// bitmap says so, a large extent is one block. Regions that sit in a thread
// cache (each arena lists its threads' caches) are free. The metadata
// jemalloc keeps in its base blocks is bookkeeping, never a root.
#pragma once

#include <cstdint>

#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "targets/jemalloc/jemalloc_layout.hpp"

namespace lr {

class Memory;

// What the jemalloc walk knows beyond the blocks (HeapWalk::details).
struct JemallocHeap : AllocatorDetails {
  JemallocLayout layout;
  uint64_t page = 0;  // its page size (LG_PAGE), from its size classes
  uint64_t arenas = 0, tcaches = 0, base_blocks = 0;
  // Extents by state: active slabs and large blocks, then the free ones.
  uint64_t slabs = 0, large = 0, dirty = 0, muzzy = 0, retained = 0;
  uint64_t slab_free = 0, tcache_free = 0;  // regions
};

// kNotFound when the layout's extent map is empty or unreadable (not this
// process's jemalloc); damage met on the way gives warnings and a bounded
// partial result.
Result<HeapWalk> walk_jemalloc_heap(const Memory& mem, const JemallocLayout& layout,
                                    const HeapLimits& limits = {});

}  // namespace lr
