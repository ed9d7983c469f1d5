// What `leakref heap` offers other commands: the heap, and the reference
// index built over it (refs, leaks, walk/profile --reconcile, correlate).
#pragma once

#include <memory>
#include <vector>

#include "common.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/blocks/refindex.hpp"

namespace lrcli {

// The core's glibc heap, with a progress line while it is read (on a
// terminal); the engine's error when no arena is found.
lr::Result<lr::HeapWalk> read_heap(lr::Program& prog);

// A process core's reference index and the heap it numbers.
struct CoreIndex {
  std::unique_ptr<lr::HeapWalk> own_heap;  // when index_core read the heap itself
  const lr::HeapWalk* heap = nullptr;      // the index borrows it
  std::unique_ptr<lr::RefIndex> index;
};

// Builds the index with a progress line (on a terminal). `heap` (null: the
// core's heap is read here) must outlive the result when given; the chunks
// in `skip` (objects put back in a pool: not live) are not scanned.
// kUnsupported for a kernel dump; the engine's errors otherwise.
lr::Result<CoreIndex> index_core(lr::Program& prog, const lr::HeapWalk* heap = nullptr,
                                 const std::vector<uint64_t>& skip = {});

// One referring word as --reconcile lists it: {"kind", "from" (or
// "register"), "tid" (threads' words)}.
nlohmann::json ref_brief_json(const lr::Ref& r);

}  // namespace lrcli
