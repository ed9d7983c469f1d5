// The heap of a process image as the engine sees it, whatever the
// allocator: every block handed out and not yet freed (a chunk), the regions
// the allocator manages, and what its walk could not cover. An allocator
// (targets/<allocator>/) registers a walk; walk_heap tries each in turn.
// Profiles and the reference index scan only live memory through it: a raw
// scan over-counts because free() leaves most of a block untouched.
#pragma once

#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "corelib/base/podarray.hpp"
#include "corelib/base/result.hpp"

namespace lr {

// One chunk handed out by malloc and not yet freed (a value: the walk
// keeps them in a ChunkIndex, 8 bytes each). A usable size is always a
// multiple of 8 (heap chunks are 16-aligned with an 8-byte header; mmapped
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
// pointer / 16 (44 bits; user pointers are 16-aligned below 2^48)
// and a 20-bit size code: a heap chunk's usable size as (usable - bias) / 16
// (up to 4 MiB; the bias is 8 for chunks whose 8-byte header shares their
// first 16-byte granule, 0 for size classes that are multiples of 16), or
// with the other bias in the upper half of the codes (a layered allocator's
// blocks beside the system allocator's: pymalloc's multiples of 16 among
// a C library's 16 k + 8), a mmapped one's in pages (up to 2 GiB); a chunk that
// fits none (or an odd pointer) keeps its exact record in a small side table.
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

  // The allocator's usable sizes are bias + 16 k (8 or 0); set before the
  // first push_back.
  void set_size_bias(uint32_t bias) { bias_ = bias; }
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
    else if (n < kOtherBias)
      c.units = static_cast<uint32_t>(((n << 4) + bias_) >> 3);
    else
      c.units = static_cast<uint32_t>((((n - kOtherBias) << 4) + (8 - bias_)) >> 3);
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
  static constexpr uint32_t kOtherBias = 1u << 18;  // codes from here: the other bias
  HeapChunk side(uint64_t user) const;
  PodArray<uint64_t> words_;
  std::vector<HeapChunk> side_;  // the chunks no code fits, by address
  uint32_t bias_ = 8;
};

struct HeapRegion {
  // kCarved: memory a layered allocator (HeapLayer) maps and carves into
  // the blocks it adds (pymalloc's arenas).
  enum class Kind { kMain, kThread, kMmapped, kCarved };
  Kind kind = Kind::kMain;
  uint64_t start = 0, end = 0;  // the chunk range walked
  uint64_t arena = 0;           // malloc_state of the heap (0 for mmapped chunks)
  bool complete = true;         // false when the chunk chain broke before `end`
};

class Program;
class Residency;

// What every allocator's walk counts.
struct HeapStats {
  uint64_t arenas = 0, chunks = 0, in_use = 0, in_use_bytes = 0, mmapped = 0;
  uint64_t index_bytes = 0;  // memory the walk's chunk index holds
};

// What one allocator knows beyond the chunks (its arenas, caches, keys): the
// allocator's own type, read by the front ends that print it.
struct AllocatorDetails {
  virtual ~AllocatorDetails() = default;
};

// Bytes of the allocator's memory that are no in-use chunk's usable bytes,
// by what the allocator keeps there, per arena (0: mmapped chunks): free
// chunks by the list that holds them, and its own structures. With the
// in-use chunks' usable bytes they add up to HeapWalk::managed.
struct HeapSpace {
  enum class Kind : uint8_t { kFree, kOverhead, kUnknown };
  Kind kind = Kind::kFree;
  std::string what;  // "tcache", "fastbins", "bins", "top", "chunk headers", ...
  uint64_t arena = 0;
  uint64_t bytes = 0, blocks = 0;
  uint64_t resident = 0;  // of `bytes`, resident when captured (HeapLimits::residency)
  std::string where;      // set: names the place instead of `arena` ("pymalloc arenas")
};

struct HeapWalk {
  std::string allocator;  // the registered allocator that walked it
  // The layered allocators (HeapLayer) that added their blocks, in order.
  std::vector<std::string> layers;
  ChunkIndex in_use;  // sorted by address
  std::vector<HeapRegion> regions;
  // Every range the allocator holds from the system (heaps with their
  // headers, mmapped chunks' mappings), and what it keeps there (above).
  // Empty when the allocator's walk does not account its bytes.
  std::vector<std::pair<uint64_t, uint64_t>> managed;
  std::vector<HeapSpace> space;
  // In-use chunks that are the allocator's own structures (a thread's tcache),
  // by user pointer, sorted: counted in `space`, not as the program's.
  std::vector<uint64_t> own_chunks;
  // Memory among the roots' ranges that a layer knows holds no live
  // reference (a Python thread's frames' value stacks past their tops): never
  // a root; refs shows a word there as stale.
  struct Dead {
    uint64_t start = 0, end = 0;
    std::string what;
  };
  std::vector<Dead> dead;
  // Pairs of words inside in-use blocks that chain the block into a list of
  // the runtime's own (a garbage collector's generation lists, which reach
  // every object the collector tracks), by the pair's address, sorted:
  // never references. Every scan of a block's words leaves them out.
  std::vector<uint64_t> links;
  static constexpr uint64_t kLinkBytes = 16;
  // Why a layer knows that which blocks are reachable, taken over this
  // heap's words, may be wrong: the layer's own links among its blocks,
  // which the engine follows as references. Answers on reachability say
  // "partial" with these.
  std::vector<std::string> partial;
  // The allocator's own state outside its regions (a main arena in libc's
  // data): its pointers are bookkeeping, never references a program holds.
  std::vector<std::pair<uint64_t, uint64_t>> bookkeeping;
  HeapStats stats;
  std::shared_ptr<const AllocatorDetails> details;
  // The allocator's rounding: the chunk serving a request of n bytes has
  // fewer than n + round_up usable bytes (mmapped ones: n + round_up_mmapped).
  // 0 when the allocator does not say: any chunk of at least n bytes fits.
  uint64_t round_up = 0, round_up_mmapped = 0;
  // Whether in-use chunk `c` can be the block of a request of `n` bytes.
  bool fits_request(const HeapChunk& c, uint64_t n) const {
    const uint64_t r = c.mmapped() ? round_up_mmapped : round_up;
    return c.usable() >= n && (r == 0 || c.usable() - n < r);
  }
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
  // Which pages were resident when the core was taken: given, the walk
  // counts each HeapSpace's resident bytes too.
  const Residency* residency = nullptr;
};

// An allocator a program registers: `walk` gives kNotFound when the core's
// heap is not this allocator's (the message says what it looked for), any
// other error when it is but cannot be read.
// An allocator layered on the system's: it maps memory of its own and
// carves it into blocks (CPython's pymalloc arenas), which a walk of the
// system allocator sees as one anonymous mapping. After the system
// allocator's walk, each registered layer adds its in-use blocks (kept
// sorted), its regions (kCarved), the ranges it manages and the space it
// keeps free or for itself, so that every command sees its blocks as heap
// blocks. kNotFound: the program has no such allocator; any other error is
// a warning of the walk (the layer's memory then stays a mapping).
struct HeapLayer {
  std::string name;
  Result<void> (*carve)(const Program& prog, const HeapLimits& limits, HeapWalk& heap) = nullptr;
};
void register_heap_layer(const HeapLayer& l);  // a name registered twice is kept once

// Where an address no in-use block holds lies in an allocator's memory.
struct HeapPlace {
  std::string what;             // "… a free chunk in the bins …"; "" unknown
  uint64_t start = 0, end = 0;  // the free chunk's user bytes (0, 0: none)
};

struct Allocator {
  std::string name;
  Result<HeapWalk> (*walk)(const Program& prog, const HeapLimits& limits) = nullptr;
  // Where `addr`, in no in-use block of `heap`, lies in the allocator's
  // memory: what refs says of a freed block. Null, or an empty place for an
  // address it does not hold.
  HeapPlace (*locate)(const Program& prog, const HeapWalk& heap, uint64_t addr) = nullptr;
};
void register_allocator(const Allocator& a);  // a name registered twice is kept once
// The walking allocator's word on `addr` (Allocator::locate); empty when it
// has none.
HeapPlace locate_in_heap(const Program& prog, const HeapWalk& heap, uint64_t addr);

// What marks a heap as an allocator's that no registered walk reads: a
// library the process maps (the start of its file name) or a
// symbol a program that links it statically defines. When no walk
// recognises a heap, walk_heap names the allocator these find.
struct AllocatorSignature {
  std::string name;
  std::vector<std::string> libraries;
  std::vector<std::string> symbols;
};
void register_allocator_signature(const AllocatorSignature& s);
// The core's heap, walked by the first registered allocator that recognises
// it; kNotFound naming what each looked for when none does.
Result<HeapWalk> walk_heap(const Program& prog, const HeapLimits& limits = {});

}  // namespace lr
