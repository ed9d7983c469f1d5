// glibc's malloc as an allocator the engine walks (corelib/blocks/heap.hpp):
// finds the arenas, walks every heap chunk by chunk and classifies each chunk
// as in use or free, on the layout of the core's own libc (glibc_layout.hpp):
// from its DWARF when libc's debuginfo is here, else a release leakref has
// checked; x86_64.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/dump/memory.hpp"
#include "corelib/registry/target.hpp"
#include "targets/glibc/glibc_layout.hpp"

namespace lr {

class CoreFile;
class ModuleSet;
class Program;

// Where a heap may be: writable anonymous memory of the image, and the
// libc data that holds main_arena. Built from a core by heap_input_from_core;
// other front ends fill it themselves.
struct HeapInput {
  std::vector<std::pair<uint64_t, uint64_t>> anon;       // readable, not file-backed
  std::vector<std::pair<uint64_t, uint64_t>> libc_data;  // libc's readable data ranges
  uint64_t mp_at = 0;          // libc's mp_ (struct malloc_par, from its symbol); 0: unknown
  uint64_t tcache_key_at = 0;  // libc's tcache_key variable (2.34+, from its symbol); 0: unknown
  GlibcLayout layout = glibc_default_layout();  // walk_core: the core's libc's
  // Every thread's tcache, sorted, from libc's DWARF (glibc_thread_tcaches):
  // then only these are tcaches. Unknown: blocks of a tcache's size and
  // shape are taken for one, and the walk says so (`tcaches_why`).
  bool tcaches_known = false;
  std::vector<uint64_t> tcaches;
  std::string tcaches_why;
};
HeapInput heap_input_from_core(const CoreFile& core, const ModuleSet& mods);

// What the glibc walk knows beyond the chunks (HeapWalk::details).
struct GlibcHeap : AllocatorDetails {
  uint64_t main_arena = 0;  // 0 when it could not be found
  uint64_t tcache_key = 0;  // 0: unknown
  // Where tcache_key came from: "libc" (its variable, read through its
  // symbol), "tcache entries" (the key every free tcache entry carries), ""
  // (neither: no symbol and no entry).
  std::string tcache_key_from;
  uint64_t heaps = 0, bin_free = 0, fastbin_free = 0, tcache_free = 0, tcache_structs = 0;
  // Each arena's malloc_state.system_mem (bytes it has from the system), as read.
  std::vector<std::pair<uint64_t, uint64_t>> system_mem;
  // The layout walked: its glibc release and where it came from (an arena's
  // own pointers, malloc_state's bytes, are bookkeeping, not references).
  GlibcLayout layout;
};

// kNotFound when no glibc arena can be identified (not glibc, static malloc
// replaced, or the heap is not in the image); damage met on the way gives
// partial results and warnings instead.
Result<HeapWalk> walk_glibc_heap(const Memory& mem, const HeapInput& in,
                                 const HeapLimits& limits = {});

// The layout of the libc `prog` runs: its DWARF, else the table's release
// named by its banner; kUnsupported naming the release when neither.
Result<GlibcLayout> glibc_layout_of(const Program& prog);

// glibc's malloc as the engine's allocator "glibc".
Allocator glibc_allocator();
// Each thread's tcache (the user pointer its `tcache` TLS variable holds),
// for every descriptor on glibc's thread lists: live threads, and exited
// ones whose stacks it keeps (in a fork child, the parent's other threads).
// kNotFound saying what is missing (libc's and ld.so's DWARF).
Result<std::vector<uint64_t>> glibc_thread_tcaches(const Program& prog);
// What glibc registers: its malloc, and the thread pointers its thread list
// gives (glibc_threads.cpp) for cores without them.
TargetSpec glibc_target();

}  // namespace lr
