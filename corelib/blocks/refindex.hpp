// Who points where, for a whole process core, built once. One pass
// over every readable word of the process's live memory — in-use heap
// chunks, module data and .bss, each thread's stack from its stack pointer
// up, each thread's TLS, its registers, and other writable mappings —
// records each word that points into an in-use heap chunk (its start or
// anywhere inside it; low tag bits are ignored), as a compact index used by
// every question: who points at this chunk (refs), which chunks nothing
// live reaches (leaks), how many references an object really has
// (reconcile, correlate).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/blocks/reach.hpp"
#include "corelib/blocks/roots.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/dump/elfcore.hpp"

namespace lr {

struct Ref {
  uint64_t from = 0;    // the word's address (kRegister: the register's index)
  uint64_t value = 0;   // the word (a pointer into the target, maybe tagged)
  uint32_t target = 0;  // index into HeapWalk::in_use
  RefFrom kind = RefFrom::kChunk;
  int tid = 0;  // kStack, kTls, kRegister: the thread
  // The word lies in dead memory (RootModel::stale, an exited thread's
  // stack): shown to say what a leak's last pointer was, never a reference.
  bool stale = false;
  // A step of anchor_chain's, not a word: the container at `from` holds
  // the target as a whole (its node, its element array).
  bool whole = false;
};

struct RefIndexOptions {
  // Chunks whose contents are not live (pool free lists): not scanned.
  std::vector<uint64_t> skip_chunks;
  // What the C library knows of its threads' memory (thread_memory()): the
  // bounds of each thread's TLS, and the stacks of threads that no longer
  // exist, which are then not roots. Null: stacks are what the core says.
  const ThreadMemory* threads = nullptr;
  std::atomic<uint64_t>* progress = nullptr;  // bytes scanned, a MiB at a time
  const std::atomic<bool>* interrupted = nullptr;
};

struct RefIndexStats {
  uint64_t bytes_scanned = 0, words = 0, refs = 0, roots = 0;
  uint64_t roots_by_kind[kRefFromKinds] = {};  // root references by RefFrom (kChunk's slot stays 0)
  uint64_t self_refs = 0;  // words of a chunk pointing into the same chunk (not recorded)
  uint64_t build_ns = 0;
  uint64_t index_bytes = 0;  // the references (4 bytes each from chunks, 16 from roots)
  uint64_t table_bytes = 0;  // per chunk and per 256 heap bytes: lookup tables
};

// Who points into an object: what --reconcile asks of a reference index,
// a process core's (RefIndex) or a kernel image's.
class RefSource {
 public:
  virtual ~RefSource() = default;
  // The references whose word points into [addr, addr + size), from outside
  // it (each Ref's value is the word). kNotFound when the index covers no
  // object holding `addr`.
  virtual Result<std::vector<Ref>> refs_into(uint64_t addr, uint64_t size) const = 0;
  // Whether reference `r` lies in an object nothing live reaches (a leaked
  // block): a reference that keeps its target only as long as the leak.
  // False when the source cannot tell.
  virtual bool from_unreachable(const Ref& r) const {
    (void)r;
    return false;
  }
  // Why the references found may not be all there are (roots the dump does
  // not hold, ...): each reason once; empty when the source is whole.
  virtual const std::vector<std::string>& partial() const {
    static const std::vector<std::string> none;
    return none;
  }
};

class RefIndex final : public RefSource {
 public:
  // Scans `core` once. The index borrows `heap` (its chunk order is the
  // target numbering): keep it alive and unchanged while the index is used.
  // kInterrupted when `o.interrupted` was set.
  static Result<std::unique_ptr<RefIndex>> build(const CoreFile& core, const ModuleSet& mods,
                                                 const HeapWalk& heap,
                                                 const RefIndexOptions& o = {});
  ~RefIndex() override;

  const HeapWalk& heap() const { return heap_; }
  size_t chunks() const { return heap_.in_use.size(); }
  // The chunk holding `addr` ([user, user + usable)); SIZE_MAX when none.
  size_t chunk_at(uint64_t addr) const;

  // The references into chunk `c`, roots first, then by referring address.
  std::vector<Ref> refs_to(size_t c) const;
  // Only the roots' references into chunk `c`, by address: no reverse rows
  // made (naming a holder's edge needs no more).
  std::vector<Ref> root_refs_to(size_t c) const;
  // The references whose word points into the object [addr, addr + size)
  // (an object inside a heap block: a block of its own, or one of a pool's),
  // from outside it; each Ref's value is the word. kNotFound when `addr` is
  // in no in-use heap block (the index holds references to heap blocks).
  Result<std::vector<Ref>> refs_into(uint64_t addr, uint64_t size) const override;
  // A reference from a heap block no root reaches (reachable(), made once).
  bool from_unreachable(const Ref& r) const override;
  // How many references chunk `c` has (from other chunks and from roots).
  uint32_t ref_count(size_t c) const;
  // The chunks chunk `c` points into (its outgoing references), in order.
  std::vector<uint32_t> points_to(size_t c) const;
  // The same without a copy: one entry per referring word, valid while the
  // index lives.
  std::span<const uint32_t> row(size_t c) const;
  // The chunks pointing into chunk `c`, one entry per referring word, in
  // chunk order (the reverse rows, made on first use).
  std::span<const uint32_t> referrers(size_t c) const;
  // The words of chunk `src` that point into chunk `dst`, by address.
  std::vector<uint64_t> words_from(size_t src, size_t dst) const;
  // Every word of an in-use chunk that points into one of `targets` (chunk
  // numbers), each source chunk read once however many targets it points
  // into: refs_to per target reads a source once per target, and a vector
  // of a million shared_ptrs would be read a million times. `fn` gets
  // each as a Ref (kChunk, its value set) with its source chunk, by source
  // chunk then address.
  void each_chunk_ref_into(std::span<const uint32_t> targets,
                           const std::function<void(const Ref&, uint32_t src)>& fn) const;
  // reachable(), and per chunk of `targets` (in their order; a number past
  // the chunks has none) the words of reached chunks that point at its very
  // start, counted in the same pass from the index with no chunk read again
  // (a shared_ptr's word points at its control block's start; a census of
  // millions of blocks would rescan the heap, or walk every row twice).
  std::vector<uint8_t> reachable_counting_starts(std::span<const uint32_t> targets,
                                                 std::vector<uint32_t>* start_refs) const;
  // The references from roots (never stale), by target then address.
  size_t root_count() const;
  Ref root_ref(size_t i) const;

  // Per chunk: kReached when a chain of references from a root reaches it,
  // kReferenced when anything (a root or a chunk) points into it.
  static constexpr uint8_t kReached = kReachMark, kReferenced = kReferencedMark;
  std::vector<uint8_t> reachable() const;
  // The same with the words of each extent's chunk outside [begin, end)
  // (bytes from its start) taken for no references: a vector's capacity
  // past its elements keeps what its erased elements held.
  struct LiveExtent {
    uint32_t chunk = 0;
    uint64_t begin = 0, end = 0;
  };
  std::vector<uint8_t> reachable(const std::vector<LiveExtent>& live) const;
  // Rows cut to their live extents: each extent's chunk's row keeps only
  // the references from inside [begin, end) (a row is in address order, so
  // they are one run of it); any other row is whole. For a graph over the
  // index (the retained tree) that must agree with reachable(live).
  class LiveRows {
   public:
    std::span<const uint32_t> row(const RefIndex& ix, size_t c) const;
    bool empty() const { return cut_.empty(); }

   private:
    friend class RefIndex;
    struct Cut {
      uint32_t skip = 0, keep = 0;
    };
    std::unordered_map<uint32_t, Cut> cut_;
    std::vector<uint64_t> has_;  // a bit per chunk: whether cut_ holds it
  };
  LiveRows live_rows(const std::vector<LiveExtent>& live) const;
  // One shortest chain of references from a root to chunk `c` (the root's
  // reference first, the one into `c` last); empty when unreachable or when
  // longer than `max_depth` steps. `holder` (may be empty) gives the address
  // of what holds a chunk as a whole (the container a node belongs to, 0:
  // none): one step from there, however deep the node hangs in its tree.
  std::vector<Ref> anchor_chain(size_t c, size_t max_depth,
                                const std::function<uint64_t(size_t)>& holder = {}) const;

  const std::vector<RootRange>& root_ranges() const { return model_.roots; }
  // Dead memory (not roots) and writable memory the core lacks (roots not
  // read): see RootModel.
  const std::vector<RootRange>& stale_ranges() const { return model_.stale; }
  const std::vector<RootRange>& unread_ranges() const { return model_.unread; }
  // Why reachability answers from this index are partial (RootModel); empty:
  // whole.
  const std::vector<std::string>& partial() const override { return model_.partial; }
  // The words in dead memory that point into chunk `c` (each Ref stale):
  // what held a leaked block before its thread exited.
  std::vector<Ref> stale_refs_to(size_t c) const;
  // Every word of live memory (roots, in-use blocks, registers) that points
  // into [a, b), memory no in-use block holds (a freed block: the dangling
  // pointers to it). A whole pass over the core, for one question.
  std::vector<Ref> words_into(uint64_t a, uint64_t b) const;
  const RefIndexStats& stats() const { return stats_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  struct Impl;

 private:
  RefIndex(const HeapWalk& heap, const Memory& mem);
  const HeapWalk& heap_;
  const Memory& mem_;
  std::unique_ptr<Impl> impl_;
  RootModel model_;
  RefIndexStats stats_;
  std::vector<std::string> warnings_;
};

}  // namespace lr
