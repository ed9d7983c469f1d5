// libFuzzer target: the tcmalloc (gperftools 2.x) heap walk over
// adversarial allocator state, in the sparse address space of
// sparse_memory.hpp, on a layout of the walk's own choosing (the walk is
// driven by the layout alone): the page map's root at kBase + 0x100, the
// size classes (filled in valid first, then open to the input), the
// central lists and the thread-cache list. Stale and looping page-map
// entries, spans outside the space, free lists that cycle or run past
// their counts must neither crash nor hang the walk.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "targets/tcmalloc/tcmalloc_heap.hpp"
#include "tests/fuzz/sparse_memory.hpp"

namespace {

using lrfuzz::kBase;
using lrfuzz::SparseMemory;

lr::TcmallocLayout layout() {
  lr::TcmallocLayout L;
  L.pageheap = kBase;
  L.root = kBase + 0x100, L.root_slots = 1u << 17, L.leaf_slots = 1u << 18;  // 8 KiB pages
  L.sizemap = kBase + 0x200000;
  L.class_to_size = L.sizemap, L.class_size_width = 4, L.nclasses_max = 128;
  L.num_objects_to_move = 0x200, L.num_size_classes = 0x400, L.class_to_pages = 0x800;
  L.central = kBase + 0x210000, L.central_size = 1216;
  L.tc_slots = 16, L.tc_entry_size = 16, L.tc_nslots = 64, L.used_slots = 1040;
  L.thread_heaps = kBase + 0x2f0000;
  L.tc_next = 8, L.tc_list = 16, L.freelist_size = 24, L.tc_nlists = 128;
  L.fl_list = 0, L.fl_length = 8, L.fl_length_width = 4;
  L.span_size = 48, L.span_start = 0, L.span_length = 8, L.span_objects = 32;
  L.sizeclass_bit = 42 * 8, L.sizeclass_bits = 8, L.location_bit = 43 * 8, L.location_bits = 2;
  return L;
}

// 86 classes as tcmalloc's: 8, 16, then 16-byte steps, then wider ones.
void size_classes(SparseMemory& m, const lr::TcmallocLayout& L) {
  uint8_t n[4] = {86, 0, 0, 0};
  m.write(L.sizemap + L.num_size_classes, n, 4);
  uint32_t size = 0;
  for (uint64_t c = 0; c < 86; ++c) {
    size = c == 0 ? 0 : c == 1 ? 8 : c < 10 ? size + 16 : size + size / 8 / 16 * 16 + 16;
    uint8_t b[4] = {static_cast<uint8_t>(size), static_cast<uint8_t>(size >> 8),
                    static_cast<uint8_t>(size >> 16), 0};
    m.write(L.class_to_size + 4 * c, b, 4);
    uint8_t mv[4] = {32, 0, 0, 0};
    m.write(L.sizemap + L.num_objects_to_move + 4 * c, mv, 4);
    m.put64(L.sizemap + L.class_to_pages + 8 * c, 1 + size / 4096);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SparseMemory mem;
  const lr::TcmallocLayout L = layout();
  size_classes(mem, L);
  mem.load(data, size);
  lr::HeapLimits lim;
  lim.max_list = 1u << 12;
  auto w = lr::walk_tcmalloc_heap(mem, L, lim);
  if (!w.ok()) return 0;
  // Blocks sorted by address, each found again by an address inside it.
  uint64_t last = 0;
  for (const auto& c : w->in_use) {
    if (c.user < last) __builtin_trap();
    last = c.user;
    if (c.usable() && !w->chunk_containing(c.user)) __builtin_trap();
  }
  return 0;
}
