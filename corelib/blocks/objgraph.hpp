// References among objects of exact bounds (a kernel's slab
// objects and vmalloc areas, say), found by one pass over the objects and
// over root ranges the caller names. A word points into an object when its
// value lies inside [start, start + size): interior pointers count, and so
// do tagged pointers whose tag bits stay inside the object; a word pointing
// into its own object is not a reference. The caller decides what is an
// object, what is a root and which objects' contents are not live (free,
// or waiting to be freed): those are objects nothing is found in.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "corelib/base/podarray.hpp"
#include "corelib/base/result.hpp"
#include "corelib/blocks/reach.hpp"
#include "corelib/dump/memory.hpp"

namespace lr {

struct GraphObject {
  uint64_t start = 0, size = 0;
  bool scan = true;  // false: its contents are not live (never scanned)
};

// A range scanned as roots; `tag` is the caller's (what the range is).
struct GraphRoot {
  uint64_t start = 0, end = 0;
  uint32_t tag = 0;
};

// A value held outside memory (a CPU's register) that counts as a root.
struct GraphValue {
  uint64_t value = 0;
  uint32_t tag = 0;
  uint32_t index = 0;  // the caller's (which register)
};

struct ObjectGraphOptions {
  const std::atomic<bool>* interrupted = nullptr;
  uint64_t max_refs = 1ull << 31;  // references kept; past it the build fails
};

struct ObjectGraphStats {
  uint64_t objects = 0, bytes_scanned = 0, words = 0, refs = 0, root_refs = 0;
  uint64_t unreadable_bytes = 0;  // of objects and roots, not in the dump
  // Of those, in objects (what they point at is unknown) and in root ranges
  // (what they hold is unknown); objects with any byte unread.
  uint64_t unreadable_object_bytes = 0, unreadable_root_bytes = 0, unreadable_objects = 0;
  uint64_t memory_bytes = 0;  // what the graph holds
  uint64_t build_ns = 0;
};

// Memory the scan needed and the dump does not hold: a run of pages of
// one object or one root range.
struct GraphUnread {
  static constexpr uint32_t kNone = UINT32_MAX;
  uint64_t start = 0, end = 0;
  uint32_t object = kNone;  // the object it lies in, or kNone
  uint32_t root = kNone;    // else the root range (index into roots())
};

// One referring word (or value).
struct GraphRef {
  static constexpr uint32_t kNone = UINT32_MAX;
  uint64_t from = 0;            // the word's address (a value: its GraphValue::index)
  uint64_t value = 0;           // the word
  uint32_t object = kNone;      // the object it lies in; kNone for a root
  uint32_t root = kNone;        // a root: index into roots() (ranges), else kNone
  uint32_t value_root = kNone;  // a value root: index into the values given
  uint32_t target = 0;          // the object pointed into
};

class ObjectGraph {
 public:
  // `objects` sorted by start and disjoint (else kInvalidArgument naming the
  // first pair that is not); root ranges may overlap objects (the parts
  // inside objects are cut out of them). kInterrupted when asked to stop.
  static Result<std::unique_ptr<ObjectGraph>> build(const Memory& mem,
                                                    std::vector<GraphObject> objects,
                                                    std::vector<GraphRoot> roots,
                                                    std::vector<GraphValue> values,
                                                    const ObjectGraphOptions& o = {});
  ~ObjectGraph();

  size_t size() const;
  const GraphObject& object(size_t i) const;
  // The object holding `addr`; SIZE_MAX when none.
  size_t find(uint64_t addr) const;
  const std::vector<GraphRoot>& roots() const;
  // What the build could not read, in address order, adjacent pages of one
  // object or range joined; at most kMaxUnread runs (the stats count all).
  static constexpr size_t kMaxUnread = 65536;
  const std::vector<GraphUnread>& unread() const;

  static constexpr uint8_t kReached = kReachMark, kReferenced = kReferencedMark;
  // Per object: kReached when a chain from a root reaches it, kReferenced
  // when anything points into it.
  std::vector<uint8_t> reachable() const;
  // Who points into object `i`: roots first (by address), then objects.
  std::vector<GraphRef> referrers(size_t i) const;
  // One shortest chain from a root to object `i` (the root's reference
  // first); empty when none within `max_depth` steps.
  std::vector<GraphRef> chain(size_t i, size_t max_depth) const;
  // How many references point into object `i` (roots and objects).
  uint32_t ref_count(size_t i) const;
  // The objects object `i`'s words point into, one per word (zero copy).
  std::span<const uint32_t> row(size_t i) const;
  // The objects whose words point into object `i`, one per word, in order
  // (made on first use).
  std::span<const uint32_t> sources(size_t i) const;
  // Every reference from a root (range or value): the object it points into
  // and the root (as GraphRef's root or value_root); no word read.
  size_t root_count() const;
  GraphRef root_ref(size_t k) const;
  // The addresses of the words of object `src` that point into `dst`.
  std::vector<uint64_t> words_from(size_t src, size_t dst) const;

  const ObjectGraphStats& stats() const;

  struct Impl;

 private:
  explicit ObjectGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lr
