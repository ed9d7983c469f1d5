// Layer 4: the glibc malloc heap of a process image (glibc 2.36, x86_64
// layouts; no libc debuginfo needed). Finds the arenas, walks every heap
// chunk by chunk and classifies each chunk as in use or free, so profiles
// (GlusterFS accounting headers, pooled objects) can scan only live memory:
// a raw scan over-counts because free() leaves most of a block untouched.
#pragma once

#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "leakref/memory.hpp"
#include "leakref/podarray.hpp"
#include "leakref/result.hpp"

namespace lr {

class CoreFile;
class ModuleSet;

// One chunk handed out by malloc and not yet freed (a value: the walk
// keeps them in a ChunkIndex, 8 bytes each). A usable size is always a
// multiple of 8 (glibc chunks are 16-aligned with an 8-byte header; mmapped
// ones page-sized with 16).
struct HeapChunk {
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
constexpr uint64_t kMaxChunkUsable = (uint64_t{1} << 34) - 8;  // 16 GiB

// The in-use chunks of a heap, in 8 bytes each: a big core's heap has tens
// of millions, and every command holds them all. A word is the user
// pointer / 16 (44 bits; glibc's user pointers are 16-aligned below 2^48)
// and a 20-bit size code: a heap chunk's usable size as (usable - 8) / 16
// (up to 8 MiB), a mmapped one's in pages (up to 2 GiB); a chunk that fits
// neither (or an odd pointer) keeps its exact record in a small side table.
// Words sort as their user pointers do. Read-only access yields values.
class ChunkIndex {
 public:
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = HeapChunk;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = HeapChunk;
    iterator() = default;
    iterator(const ChunkIndex* ix, size_t i) : ix_(ix), i_(i) {}
    HeapChunk operator*() const { return (*ix_)[i_]; }
    HeapChunk operator[](difference_type d) const { return (*ix_)[i_ + d]; }
    iterator& operator++() { return ++i_, *this; }
    iterator& operator--() { return --i_, *this; }
    iterator operator++(int) { return iterator(ix_, i_++); }
    iterator operator--(int) { return iterator(ix_, i_--); }
    iterator& operator+=(difference_type d) { return i_ += d, *this; }
    iterator& operator-=(difference_type d) { return i_ -= d, *this; }
    iterator operator+(difference_type d) const { return iterator(ix_, i_ + d); }
    iterator operator-(difference_type d) const { return iterator(ix_, i_ - d); }
    difference_type operator-(const iterator& o) const {
      return static_cast<difference_type>(i_) - static_cast<difference_type>(o.i_);
    }
    auto operator<=>(const iterator& o) const { return i_ <=> o.i_; }
    bool operator==(const iterator& o) const { return i_ == o.i_; }
    size_t index() const { return i_; }

   private:
    const ChunkIndex* ix_ = nullptr;
    size_t i_ = 0;
  };

  void push_back(const HeapChunk& c);
  HeapChunk operator[](size_t i) const {
    const uint64_t w = words_[i];
    const uint32_t code = w & kCodeMask;
    HeapChunk c;
    c.user = (w >> kCodeBits) << 4;
    if ((code & kSizeMask) == kSizeMask) return side(c.user);
    const uint64_t n = code & kSizeMask;
    if (code & kMmappedBit)
      c.units = static_cast<uint32_t>(((n << 12) - 16) >> 3) | 0x80000000u;
    else
      c.units = static_cast<uint32_t>(((n << 4) + 8) >> 3);
    return c;
  }
  size_t size() const { return words_.size(); }
  bool empty() const { return words_.empty(); }
  HeapChunk front() const { return (*this)[0]; }
  HeapChunk back() const { return (*this)[size() - 1]; }
  iterator begin() const { return iterator(this, 0); }
  iterator end() const { return iterator(this, size()); }
  // Keeps the chunks `keep` says yes to, in order.
  template <class Pred>
  void filter(Pred keep) {
    size_t n = 0;
    for (size_t i = 0; i < words_.size(); ++i)
      if (keep((*this)[i])) words_[n++] = words_[i];
    words_.truncate(n);
  }
  // Orders by address; the walk appends a few runs each in order, so runs
  // are merged rather than everything sorted.
  void sort();
  void shrink_to_fit() { words_.shrink_to_fit(); }
  uint64_t bytes() const { return words_.capacity() * 8 + side_.capacity() * sizeof(HeapChunk); }
  // The words themselves, for a hot loop to prefetch.
  const uint64_t* word_data() const { return words_.data(); }

 private:
  static constexpr unsigned kCodeBits = 20;
  static constexpr uint64_t kCodeMask = (uint64_t{1} << kCodeBits) - 1;
  static constexpr uint32_t kMmappedBit = 1u << 19, kSizeMask = kMmappedBit - 1;
  HeapChunk side(uint64_t user) const;
  PodArray<uint64_t> words_;
  std::vector<HeapChunk> side_;  // the chunks no code fits, by address
};

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
  ChunkIndex in_use;  // sorted by address
  std::vector<HeapRegion> regions;
  uint64_t main_arena = 0;  // 0 when it could not be found
  uint64_t tcache_key = 0;  // 0 when no tcache entry was seen
  HeapStats stats;
  std::vector<std::string> warnings;  // damaged chains, lists cut short
  // The in-use chunk whose user range [user, user+usable) holds addr; none
  // if none does.
  std::optional<HeapChunk> chunk_containing(uint64_t addr) const;
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
