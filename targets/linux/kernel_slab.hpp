// SLUB slab caches and every object in them, from a vmcore.
// Slabs are found by one pass over the struct page array (vmemmap), so full
// slabs SLUB keeps on no list are found too; each slab's free objects are
// decoded from its freelist and, for a CPU's active slab, that CPU's
// lockless freelist (freelist pointer hardening undone with the cache's
// random value from the dump). With slub_debug=U a cache stores each
// object's allocation and free `struct track` (caller, pid, cpu, jiffies and
// a stack depot handle); StackDepot turns a handle into its stack.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "targets/linux/kernel.hpp"

namespace lr {

struct KSlabCache {
  uint64_t addr = 0;
  std::string name;
  uint64_t object_size = 0, size = 0;  // the object, and its stride in a slab (with metadata)
  uint64_t offset = 0;                 // free pointer offset from the object
  uint64_t inuse = 0, red_left_pad = 0, flags = 0;
  uint64_t objects_per_slab = 0, order = 0;  // kmem_cache.oo
  bool hardened = false;                     // free pointers stored encoded (kmem_cache.random)
  bool store_user = false;                   // objects carry alloc/free tracks (slub_debug=U)
  bool no_leak_trace = false;                // SLAB_NOLEAKTRACE: kmemleak's own metadata
  // What the page scan and the freelists found.
  uint64_t slabs = 0, objects = 0, allocated = 0, free = 0;
  uint64_t cpu_slabs = 0, cpu_partial_slabs = 0, node_partial_slabs = 0, full_slabs = 0;
  uint64_t other_slabs = 0;        // on no list SLUB keeps (full slabs of non-debug caches)
  uint64_t node_partial_free = 0;  // free objects in node partial slabs
  uint64_t sheaf_free = 0;         // free objects held in sheaves (6.18+), within `free`
  // SLUB's own counters summed over nodes (kmem_cache_node; -1: this kernel
  // keeps none): /proc/slabinfo shows num_slabs = nr_slabs, num_objs =
  // total_objects and active_objs = total_objects - node_partial_free.
  int64_t nr_slabs = -1, total_objects = -1, nr_partial = -1;
};

// Where a slab was found.
enum class KSlabWhere : uint8_t {
  kCpu,          // a CPU's active slab (kmem_cache_cpu.slab)
  kCpuPartial,   // on a CPU's partial list
  kNodePartial,  // on a node's partial list
  kFull,         // on a node's full list (tracked only with slub_debug)
  kOther,        // on no list: a full slab of a cache that does not track them
};
const char* slab_where_name(KSlabWhere w);

struct KSlabObject {
  uint64_t addr = 0;  // the object (past a left red zone)
  uint64_t slab = 0;  // its struct slab (struct page) address
  const KSlabCache* cache = nullptr;
  KSlabWhere where = KSlabWhere::kOther;
  int cpu = -1;  // kCpu, kCpuPartial: which CPU
  bool has_tracks = false;
  KSlabTrack alloc, free;  // with has_tracks
};

struct KSlabFilter {
  std::vector<std::string> caches;  // names; empty = every cache
  bool objects = false;             // hand allocated objects to the sink
  bool tracks = false;              // read their tracks (caches that store them)
  // Scan the struct page array even when SLUB's lists hold every slab of
  // the chosen caches by its own count (they do for caches with
  // slub_debug=U, whose full slabs are listed; the scan then only confirms).
  bool scan_pages = false;
};

struct KSlabReport {
  std::vector<KSlabCache> caches;  // slab_caches order, filtered
  bool scanned = false;            // the page array was scanned (else: slabs from SLUB's lists)
  uint64_t pages = 0;              // struct pages scanned
  uint64_t slab_pages = 0;         // slab heads among them (all caches)
  uint64_t unreadable_pages = 0;   // struct pages in memmap holes or not in the dump
  uint64_t walk_ns = 0;
  std::vector<std::string> warnings;  // the first 1,000
  uint64_t warnings_dropped = 0;
};

// Every cache on slab_caches (or those `f` names: an unknown name is
// kNotFound with the nearest), its slabs (from SLUB's lists when they hold
// all of them by SLUB's count, else from the page array) and objects; allocated objects go to
// `on_object` (may be null) in page order when f.objects is set. Bounded:
// freelists stop at the slab's object count, lists at lim.max_objects; a
// corrupt or looping freelist, a list that loops or disagrees with SLUB's
// counters is a warning with the slab named, never a hang.
Result<KSlabReport> kernel_slab(KernelTarget& k, const KSlabFilter& f,
                                const std::function<void(const KSlabObject&)>& on_object,
                                const KernelLimits& lim = {});

// The stack depot: handle -> the stack saved for it. Opened once per target
// (the depot's pool array and record layout from linux-kernel.toml).
class StackDepot {
 public:
  // kNotFound when this kernel has no stack depot.
  static Result<std::unique_ptr<StackDepot>> open(KernelTarget& k);
  ~StackDepot();
  // The return addresses saved for `handle`, innermost first. kInvalidArgument
  // for handle 0; kBadFormat naming what is wrong for a handle that leads to
  // no pool, outside a pool, or to a record that holds another handle or an
  // impossible size (a corrupt dump or track).
  Result<std::vector<uint64_t>> stack(uint32_t handle) const;

  struct Impl;

 private:
  explicit StackDepot(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A track's stack: the frames it keeps itself (before 5.17), else its
// depot handle's (`depot` may be null: then kNotFound); kNotFound when it
// recorded none.
Result<std::vector<uint64_t>> track_stack(const KSlabTrack& t, const StackDepot* depot);

}  // namespace lr
