// gperftools' tcmalloc (2.x) as an allocator the engine walks
// (corelib/blocks/heap.hpp): every span from the page map; a small-object
// span's objects are in use unless a free list holds them (the span's own,
// a central list's transfer slots, a thread cache's); a large span is one
// block.
#pragma once

#include <cstdint>

#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "targets/tcmalloc/tcmalloc_layout.hpp"

namespace lr {

class Memory;

// What the tcmalloc walk knows beyond the blocks (HeapWalk::details).
struct TcmallocHeap : AllocatorDetails {
  TcmallocLayout layout;
  uint64_t page = 0;  // its page size (kPageShift)
  uint64_t small_spans = 0, large_spans = 0, free_spans = 0, thread_caches = 0;
  uint64_t span_free = 0, central_free = 0, thread_free = 0;  // objects
};

// kNotFound when the page map holds no span; damage met on the way gives
// warnings and a bounded partial result.
Result<HeapWalk> walk_tcmalloc_heap(const Memory& mem, const TcmallocLayout& layout,
                                    const HeapLimits& limits = {});

}  // namespace lr
