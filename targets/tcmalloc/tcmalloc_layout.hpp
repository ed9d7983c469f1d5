// Where gperftools' tcmalloc (2.x) keeps what the heap walk reads, from the
// library's own DWARF and symbol table: the page map (a two-level radix
// tree from each page to its span), the spans, the size classes, the
// central free lists' transfer slots and the thread caches. Its statics are
// hidden symbols: a stripped build is refused, naming what to install.
#pragma once

#include <cstdint>
#include <string>

#include "corelib/base/result.hpp"

namespace lr {

class Module;
class TypeRegistry;

struct TcmallocLayout {
  std::string from;  // "libtcmalloc_minimal.so.4's DWARF (PATH)"
  // Globals, at their runtime addresses.
  uint64_t pageheap = 0;  // tcmalloc::Static::pageheap_ (a PageHeap)
  uint64_t root = 0;      // its pagemap_'s root_ array
  uint64_t root_slots = 0, leaf_slots = 0;
  uint64_t sizemap = 0;  // tcmalloc::Static::sizemap_
  uint64_t class_to_size = 0, class_size_width = 0, nclasses_max = 0, num_size_classes = 0;
  uint64_t num_objects_to_move = 0;        // offset in SizeMap: int32 per class
  uint64_t class_to_pages = 0;             // offset in SizeMap: size_t per class
  uint64_t central = 0, central_size = 0;  // Static::central_cache_[nclasses_max]
  uint64_t tc_slots = 0, tc_entry_size = 0, tc_nslots = 0, used_slots = 0;  // CentralFreeList
  uint64_t thread_heaps = 0;  // ThreadCache::thread_heaps_ (a ThreadCache *)
  uint64_t tc_list = 0, freelist_size = 0, fl_list = 0, fl_length = 0, fl_length_width = 0,
           tc_next = 0, tc_nlists = 0;  // ThreadCache, ThreadCache::FreeList
  // tcmalloc::Span: start and length in pages, free objects, and the
  // bitfields refcount, sizeclass, location (offset in bits from its start).
  uint64_t span_size = 0, span_start = 0, span_length = 0, span_objects = 0;
  uint64_t sizeclass_bit = 0, sizeclass_bits = 0, location_bit = 0, location_bits = 0;
};

// kNotFound when `lib` has no tcmalloc symbol at all, kUnsupported naming
// what is missing when it is tcmalloc but stripped or of another layout.
Result<TcmallocLayout> tcmalloc_layout_from_dwarf(TypeRegistry& types, Module& lib);

}  // namespace lr
