// Layer 4: the glibc malloc heap of a process image (glibc 2.36, x86_64
// layouts; no libc debuginfo needed). Finds the arenas, walks every heap
// chunk by chunk and classifies each chunk as in use or free, so profiles
// (GlusterFS accounting headers, pooled objects) can scan only live memory:
// a raw scan over-counts because free() leaves most of a block untouched.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "leakref/memory.hpp"
#include "leakref/podarray.hpp"
#include "leakref/result.hpp"

namespace lr {

class CoreFile;
class ModuleSet;

// One chunk handed out by malloc and not yet freed: 16 bytes per chunk so a
// walk over millions of allocations stays small.
// One in-use chunk, in 12 bytes (packed: a big core's heap has tens of
// millions of them, and the walk holds them all). A usable size is always a
// multiple of 8 (glibc chunks are 16-aligned with an 8-byte header; mmapped
// ones page-sized with 16), so it is kept in units of 8 bytes, up to
// kMaxChunkUsable.
constexpr uint64_t kMaxChunkUsable = (uint64_t{1} << 34) - 8;  // 16 GiB
struct __attribute__((packed)) HeapChunk {
  uint64_t user = 0;   // the pointer malloc returned
  uint32_t units = 0;  // usable size / 8 (bits 0..30) | mmapped (bit 31)
  // `usable` must be a multiple of 8 and at most kMaxChunkUsable.
  static HeapChunk make(uint64_t user, uint64_t usable, bool mmapped) {
    HeapChunk c;
    c.user = user;
    c.units = static_cast<uint32_t>(usable >> 3) | (mmapped ? 0x80000000u : 0u);
    return c;
  }
  uint64_t usable() const { return uint64_t{units & 0x7fffffffu} << 3; }
  bool mmapped() const { return units >> 31; }
};
static_assert(sizeof(HeapChunk) == 12);

struct HeapRegion {
  enum class Kind { kMain, kThread, kMmapped };
  Kind kind = Kind::kMain;
  uint64_t start = 0, end = 0;  // the chunk range walked
  uint64_t arena = 0;           // malloc_state of the heap (0 for mmapped chunks)
  bool complete = true;         // false when the chunk chain broke before `end`
};

// Where a heap may be: writable anonymous memory of the image, and the
// libc data that holds main_arena. Built from a core by heap_input_from_core;
// other front ends fill it themselves.
struct HeapInput {
  std::vector<std::pair<uint64_t, uint64_t>> anon;       // readable, not file-backed
  std::vector<std::pair<uint64_t, uint64_t>> libc_data;  // libc's readable data ranges
};
HeapInput heap_input_from_core(const CoreFile& core, const ModuleSet& mods);

struct HeapStats {
  uint64_t arenas = 0, heaps = 0, chunks = 0, in_use = 0, in_use_bytes = 0;
  uint64_t mmapped = 0, bin_free = 0, fastbin_free = 0, tcache_free = 0, tcache_structs = 0;
  uint64_t index_bytes = 0;  // memory the walk's chunk index holds
};

// Bytes of glibc's struct malloc_state (2.36, x86_64): an arena's own
// pointers (top, bins) are malloc's bookkeeping, not references a program
// holds.
constexpr uint64_t kMallocStateBytes = 2200;

struct HeapWalk {
  PodArray<HeapChunk> in_use;  // sorted by address
  std::vector<HeapRegion> regions;
  uint64_t main_arena = 0;  // 0 when it could not be found
  uint64_t tcache_key = 0;  // 0 when no tcache entry was seen
  HeapStats stats;
  std::vector<std::string> warnings;  // damaged chains, lists cut short
  // The in-use chunk whose user range [user, user+usable) holds addr; null if none.
  const HeapChunk* chunk_containing(uint64_t addr) const;
};

struct HeapLimits {
  uint64_t max_chunks = 1ull << 32;  // per heap
  uint64_t max_list = 1u << 20;      // per fastbin / tcache list
  // Chunks read so far, in steps of 4096, for a front end's progress
  // display (relaxed; may be null).
  std::atomic<uint64_t>* progress = nullptr;
};

// kNotFound when no glibc arena can be identified (not glibc, static malloc
// replaced, or the heap is not in the image); damage met on the way gives
// partial results and warnings instead.
Result<HeapWalk> walk_glibc_heap(const Memory& mem, const HeapInput& in,
                                 const HeapLimits& limits = {});

}  // namespace lr
