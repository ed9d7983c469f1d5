// Who points at every kernel object, from a vmcore, as
// kmemleak would scan it but without CONFIG_DEBUG_KMEMLEAK. Objects are the
// slab caches' allocated objects (exact bounds from the slab pass) and
// vmalloc's allocated areas. Roots are the kernel's .data, .bss and
// ro_after_init, each CPU's per-CPU area, each task's kernel stack from its
// saved stack pointer up, every loaded module's memory, and every other
// page of kernel memory (large kmalloc buffers, memblock allocations such
// as the struct page array and boot-time hash tables, page tables): a page
// in use that is no slab, no vmalloc page, and holds no file or anonymous
// data. Free objects and free pages are neither. docs/kernel-leaks.md says
// exactly what is treated how.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "corelib/blocks/objgraph.hpp"
#include "corelib/blocks/refindex.hpp"
#include "corelib/blocks/roots.hpp"
#include "targets/linux/kernel.hpp"
#include "targets/linux/kernel_slab.hpp"

namespace lr {

// One object of the index.
struct KObject {
  enum class Kind : uint8_t { kSlab, kVmalloc, kStack };
  Kind kind = Kind::kSlab;
  uint64_t addr = 0, size = 0;
  uint32_t cache = 0;   // kSlab: index into KRefIndex::caches()
  uint64_t caller = 0;  // kVmalloc, kStack: vm_struct.caller
  int32_t track = -1;   // kSlab: index into KRefIndex::tracks() (slub_debug=U caches)
  bool rcu = false;     // on an RCU callback list: waiting to be freed (not scanned)
  // In a SLAB_NOLEAKTRACE cache: kmemleak's own metadata, whose words point
  // at every object kmemleak tracks. Neither scanned nor a leak, as for
  // kmemleak itself.
  bool untracked = false;
  // Some of its bytes are not in the dump (a page filtered out, a dump cut
  // off): neither leaked nor reachable is known of it.
  bool unread = false;
  uint8_t kmemleak = 0;  // KmemleakNote bits: what kmemleak's metadata says of it
};

// A mark kmemleak's metadata keeps on the object at `pointer`, on a kernel
// built with kmemleak (kernel_refs_kmemleak.cpp).
struct KmemleakNote {
  static constexpr uint8_t kNotLeak = 1;  // kmemleak_not_leak / kmemleak_ignore
  static constexpr uint8_t kNoScan = 2;   // kmemleak_no_scan / kmemleak_ignore
  uint64_t pointer = 0;
  uint8_t mark = 0;
};
// Every marked object kmemleak tracks; none on a kernel without kmemleak.
Result<std::vector<KmemleakNote>> kmemleak_notes(KernelTarget& k, const KernelLimits& lim,
                                                 std::vector<std::string>* warnings);

// What a root range is.
struct KRoot {
  enum class Kind : uint8_t { kKernelData, kPerCpu, kStack, kModule, kPage, kRegisters };
  Kind kind = Kind::kKernelData;
  std::string section;  // kKernelData, kModule: ".data", ".bss", ".data..ro_after_init"
  std::string module;   // kModule
  int cpu = -1;         // kPerCpu
  int pid = 0;          // kStack
  std::string comm;     // kStack
  uint64_t base = 0;    // kPerCpu: the CPU's offset; kStack: stack bottom; kModule: the area
  uint64_t sp = 0;      // kStack: where the scan started
};

struct KRefStats {
  uint64_t slab_objects = 0, vmalloc_areas = 0, module_areas = 0, stacks = 0;
  uint64_t kernel_pages = 0, pages = 0, free_pages = 0, data_pages = 0;
  uint64_t rcu_pending = 0;  // objects on RCU callback lists
  uint64_t untracked = 0;    // objects of SLAB_NOLEAKTRACE caches (kmemleak's metadata)
  // On a kernel with kmemleak: objects it was told are no leak (including
  // the ignored), and told not to scan.
  uint64_t kmemleak_not_leak = 0, kmemleak_no_scan = 0;
  uint64_t cpu_registers = 0;  // CPUs whose registers the dump holds (NT_PRSTATUS)
  uint64_t collect_ns = 0;
};

class KRefIndex {
 public:
  // Builds the index of `k` (standalone or hosted). Damaged lists, stacks
  // and pages are warnings; kInterrupted when asked to stop.
  static Result<std::unique_ptr<KRefIndex>> build(KernelTarget& k, const KernelLimits& lim = {});
  ~KRefIndex();

  const ObjectGraph& graph() const { return *graph_; }
  const std::vector<KObject>& objects() const { return objects_; }  // graph order
  const std::vector<KSlabCache>& caches() const { return caches_; }
  const std::vector<KSlabTrack>& tracks() const { return tracks_; }
  const std::vector<KRoot>& roots() const { return roots_; }         // by GraphRoot::tag
  const std::vector<GraphValue>& values() const { return values_; }  // CPU registers
  const KRefStats& stats() const { return stats_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The roots as a process core's are modelled (kernel_root_model): what
  // was scanned, what the dump does not hold, and why answers about
  // reachability are partial (empty when whole).
  const RootModel& root_model() const { return model_; }
  const std::vector<std::string>& partial() const { return model_.partial; }
  // The object holding `addr`; SIZE_MAX when none.
  size_t find(uint64_t addr) const { return graph_->find(addr); }

  struct Parts;

 private:
  KRefIndex() = default;
  std::unique_ptr<ObjectGraph> graph_;
  std::vector<KObject> objects_;
  std::vector<KSlabCache> caches_;
  std::vector<KSlabTrack> tracks_;
  std::vector<KRoot> roots_;
  std::vector<GraphValue> values_;
  KRefStats stats_;
  std::vector<std::string> warnings_;
  RootModel model_;
};

// A kernel root range's kind in the root model: kernel data, modules and
// per-CPU areas are kGlobal, task stacks kStack (tid: the pid), other kernel
// pages kMapping, CPU registers kRegister.
RefFrom kernel_root_kind(const KRoot& r);
// "kernel .data", "module lrkleak", "task 93 (cat) kernel stack", ...
std::string kernel_root_what(const KRoot& r);
// The model of graph `g`, whose root tags index `kinds`; `reasons` are the
// scan's own (tasks not read, lists cut short), and the memory the graph
// could not read adds its own.
RootModel kernel_root_model(const ObjectGraph& g, const std::vector<KRoot>& kinds,
                            std::vector<std::string> reasons);

// A referring word named for people: "struct dentry.d_inode of
// 0xffff…", "lrk_list (module lrkleak, .bss)", "task 1234 (cat) kernel
// stack, frame vfs_read", "per-CPU area of CPU 0 (runqueues+0x10)".
struct KRefNamer {
  explicit KRefNamer(KernelTarget& k, const KRefIndex& ix);
  ~KRefNamer();
  std::string referrer(const GraphRef& r);
  // What holds root reference `r`, without the word's offset: "lrk_list
  // (module lrkleak, .bss)", "task 93 (cat) kernel stack, frame vfs_read",
  // "kernel page 0x…"; `key` (may be null) the same without what changes
  // between boots (pids, page addresses).
  std::string holder(const GraphRef& r, std::string* key);
  // A kernel or module text address: "lrk_new+0x2e [lrkleak]", "vfs_read+0x9".
  std::string symbol(uint64_t addr);
  // An object: "dentry 0xffff… (struct dentry)", "kmalloc-64 0xffff…".
  std::string object(size_t i);
  // The member at `off` in object `i` when its type is known (".d_inode",
  // ".payload[8]"); "" otherwise.
  std::string member(size_t i, uint64_t off);
  // The DWARF type of a cache's objects, when known (the profile's types
  // with allocation "slab:NAME", or struct NAME of the object's size).
  const Type* cache_type(uint32_t cache);
  // Says cache `name`'s objects are `t`s: kNotFound for a cache the index
  // has no object of, kInvalidArgument when `t` is larger than its objects.
  Result<void> set_cache_type(const std::string& name, const Type* t);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The kernel index as --reconcile asks it (walk, slab --type, profile): a
// word in an object is RefFrom::kChunk; in kernel or module data or a
// per-CPU area kGlobal; in a task's stack kStack (tid: the task's pid); in
// another kernel page kMapping.
class KRefSource final : public RefSource {
 public:
  explicit KRefSource(const KRefIndex& ix) : ix_(ix) {}
  Result<std::vector<Ref>> refs_into(uint64_t addr, uint64_t size) const override;
  const std::vector<std::string>& partial() const override { return ix_.partial(); }

 private:
  const KRefIndex& ix_;
};

// The unreferenced objects: allocated, and no chain from a root reaches
// them (cycles included).
struct KLeak {
  size_t object = 0;        // index in the KRefIndex
  bool referenced = false;  // something (another unreached object) points into it
};
std::vector<KLeak> kernel_leaks(const KRefIndex& ix);

}  // namespace lr
