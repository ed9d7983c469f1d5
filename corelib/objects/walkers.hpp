// Walkers over linked structures in target memory. Every walk is
// bounded (max_nodes), detects cycles (Brent, O(1) memory) and corrupt links,
// and reports exactly where and why it stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "corelib/dump/memory.hpp"

namespace lr {

enum class WalkStop {
  kEnd,          // reached the list head / NULL / end of array
  kCycle,        // links loop without returning to the head
  kFault,        // a link points to unreadable memory
  kCorrupt,      // a link is structurally impossible (NULL inside a ring, poison)
  kLimit,        // max_nodes reached
  kInterrupted,  // the host asked us to stop
};
const char* walk_stop_name(WalkStop s);

struct WalkIssue {
  uint64_t addr = 0;  // object (container) address the issue was found at
  std::string what;
};

struct WalkResult {
  std::vector<uint64_t> objects;  // container addresses, in walk order, each once
  WalkStop stop = WalkStop::kEnd;
  uint64_t stop_addr = 0;  // object at which a non-kEnd stop happened
  std::string stop_detail;
  uint64_t cycle_start = 0;  // kCycle: first object on the loop
  uint64_t cycle_length = 0;
  uint64_t issue_count = 0;       // non-fatal problems (broken back links), all counted
  std::vector<WalkIssue> issues;  // the first 100 of them
  uint64_t buckets = 0, empty_buckets = 0, faulted_buckets = 0;  // hash tables
  uint64_t longest_chain = 0;
  uint64_t skipped = 0;  // entries that are not objects (xarray value entries)
  bool ok() const { return stop == WalkStop::kEnd; }
};

// Receives each batch of newly found objects (container addresses, in walk
// order) while their memory is likely still in cache: after each hash bucket,
// or once at the end of a single list. Objects are final when passed (a cycle
// has already been cut to its distinct nodes).
struct ObjectSink {
  void (*fn)(void* ctx, const uint64_t* objs, size_t n) = nullptr;
  void* ctx = nullptr;
  void operator()(const uint64_t* objs, size_t n) const {
    if (fn && n) fn(ctx, objs, n);
  }
};

struct WalkLimits {
  uint64_t max_nodes = 100'000'000;
  // How the caller names max_nodes in a stop detail ("--limit" for the CLI).
  const char* max_nodes_name = "the object limit";
  const std::atomic<bool>* interrupted = nullptr;
  ObjectSink sink;
  // Objects evaluated so far, for a front end's progress display (relaxed
  // adds per block of objects); nullptr: not counted.
  std::atomic<uint64_t>* progress = nullptr;
};

// Intrusive list_head ring: `head` is the address of the struct list_head,
// containers hold their list_head at `member_off`. Checks prev links.
WalkResult walk_list(const Memory& mem, uint64_t head, uint64_t member_off,
                     const WalkLimits& lim = {});
// hlist_head at `head`; hlist_node at `member_off` in each container. Checks pprev.
WalkResult walk_hlist(const Memory& mem, uint64_t head, uint64_t member_off,
                      const WalkLimits& lim = {});
// NULL-terminated chain of containers: `first` is the first container, the
// next pointer (to the next container) is at `next_off`.
WalkResult walk_chain(const Memory& mem, uint64_t first, uint64_t next_off,
                      const WalkLimits& lim = {});
// `count` contiguous elements of `elem_size` bytes.
WalkResult walk_array(const Memory& mem, uint64_t base, uint64_t count, uint64_t elem_size,
                      const WalkLimits& lim = {});
// `count` pointers at `base`; non-NULL ones are the objects.
WalkResult walk_pointer_array(const Memory& mem, uint64_t base, uint64_t count,
                              const WalkLimits& lim = {});

// Objects found by something else (every object of a slab cache): walked
// in order, `lim.max_nodes` at most, each handed to the sink.
WalkResult walk_given(const std::vector<uint64_t>& objects, const WalkLimits& lim = {});

// Hash table: `nbuckets` buckets of `bucket_size` bytes at `base`.
enum class BucketKind {
  kHlist,     // each bucket is an hlist_head; member_off = hlist_node in container
  kListHead,  // each bucket is a list_head ring; member_off = list_head in container
  kChain,     // each bucket is a pointer to the first container; member_off = next field
};
WalkResult walk_buckets(const Memory& mem, uint64_t base, uint64_t nbuckets, uint64_t bucket_size,
                        BucketKind kind, uint64_t member_off, const WalkLimits& lim = {});

}  // namespace lr
