// Where glibc's malloc keeps what the heap walk reads, for the libc of one
// core: from libc's own DWARF when its debuginfo is here (libc6-dbg), else
// from a table of the releases leakref was checked on, chosen by the version
// libc's own banner states. A release in neither is refused, never guessed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "corelib/base/result.hpp"

namespace lr {

class Memory;
class Module;
class TypeRegistry;

// tcache bins of 32 + 16 i bytes (i < 64); from 2.42, 12 large bins after
// them, bin 64 + k holding chunks of 2^(10+k) to 2^(11+k) - 1 bytes (past
// the small ones), each list sorted by size.
inline constexpr uint64_t kSmallTcacheBins = 64;
inline constexpr uint64_t kMaxTcacheBins = 64 + 12;

struct GlibcLayout {
  std::string version;  // "2.36", from libc's banner; "" when not read
  std::string from;     // "libc's DWARF (PATH)" or "leakref's table for glibc 2.36"
  // struct malloc_state
  uint64_t state_size = 0, fastbins = 0, nfastbins = 0, top = 0, next = 0, system_mem = 0;
  // heap_info: a thread heap's header (its arena pointer first)
  uint64_t heap_info_size = 0, heap_ar_ptr = 0, heap_size = 0;
  // tcache_perthread_struct: `bins` counts of `count_width` bytes, then the
  // entries; the struct's own size decides the chunk malloc gives it.
  uint64_t tcache_bins = 0, tcache_count_width = 0, tcache_entries = 0, tcache_size = 0;
  // struct malloc_par (mp_): where sbrk_base is, the main heap's first
  // chunk; 0 when unknown (a table layout), then the heap's mapping starts it.
  uint64_t par_sbrk_base = 0;
  // 2.42+: the counts are the slots each bin has left (num_slots), all bins
  // starting from one number (the tcache_count tunable); before, entries.
  bool tcache_slots = false;
  bool safe_linking = false;  // 2.32+: free-list links stored as (&link >> 12) ^ next

  // The first chunk of a thread heap that holds its arena's malloc_state:
  // after heap_info and the state, where chunk2mem is 16-aligned.
  uint64_t first_chunk_with_state() const;
  // The chunk size malloc gives a tcache_perthread_struct.
  uint64_t tcache_chunk() const;
  // The chunk sizes tcache bin `i` holds: [*lo, *hi].
  static void tcache_bin_sizes(uint64_t i, uint64_t* lo, uint64_t* hi);
  // A link read from a free list, unmangled (safe-linking) when this glibc
  // mangles them; `link_addr` is where it was stored.
  uint64_t unmangle(uint64_t link_addr, uint64_t stored) const {
    return safe_linking ? (link_addr >> 12) ^ stored : stored;
  }
};

// "2.36" from libc's banner ("... release version 2.36.") in its mapped
// image `[base, end)`; "" when there is none.
std::string glibc_version(const Memory& mem, uint64_t base, uint64_t end);

// The layout libc's DWARF gives (malloc_state, heap_info,
// tcache_perthread_struct); kNotFound when its DWARF lacks one of them.
Result<GlibcLayout> glibc_layout_from_dwarf(TypeRegistry& types, Module& libc,
                                            const std::string& version);

// The table's layout for `version`; kUnsupported naming it when leakref has
// no table for that release.
Result<GlibcLayout> glibc_layout_for_release(const std::string& version);

// A layout read from DWARF, kept in leakref's cache directory under libc's
// build-id: every core of that libc has it, and reading libc's DWARF costs
// ~110 ms and 16 MB a core (libdw decompresses its .debug_info), which a
// batch of cores would pay per dump. A cache file that does not read back
// whole and within bounds is not used (and is written again).
std::optional<GlibcLayout> cached_glibc_layout(const std::string& build_id);
void cache_glibc_layout(const std::string& build_id, const GlibcLayout& L);

// glibc 2.36 on x86_64 (Debian 12), for callers with no libc to read (the
// fuzzers' synthetic cores).
GlibcLayout glibc_default_layout();

}  // namespace lr
