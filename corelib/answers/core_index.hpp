// A process core ready for the questions refs, leaks, account and correlate
// ask: its heap walked, the program targets that know the process asked what
// its blocks are (block taggers), and the reference index built over the
// heap, numbering the same blocks. What the answer stands on (the core and
// its files, the heap walk, the index, the program's own reading) is said in
// `warnings`, in that order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "corelib/base/progress.hpp"
#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/blocks/refindex.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/registry/process_target.hpp"

namespace lr {

// The core's heap, walked by the allocator that recognises it (counted for
// `show` as "reading the heap").
Result<HeapWalk> read_heap(const Program& prog, ProgressDisplay* show = nullptr);

// A process core's reference index and the heap it numbers.
struct CoreIndex {
  std::unique_ptr<HeapWalk> own_heap;  // when index_core read the heap itself
  const HeapWalk* heap = nullptr;      // the index borrows it
  std::unique_ptr<RefIndex> index;
  ThreadMemory threads;  // the C library's word on its threads' memory
};

// Builds the index over `heap` (null: the core's heap is read here; given,
// it must outlive the result); the chunks in `skip` (objects put back in a
// pool: not live) are not scanned. kUnsupported for a kernel dump.
Result<CoreIndex> index_core(Program& prog, const HeapWalk* heap = nullptr,
                             const std::vector<uint64_t>& skip = {},
                             ProgressDisplay* show = nullptr);

// A program target that knows the process, with what it said of the blocks.
struct ProgramTags {
  ProcessTarget* target = nullptr;
  std::unique_ptr<BlockTagger> tagger;
};

struct IndexedCore {
  Program* prog = nullptr;
  std::unique_ptr<Program> owned;  // when the core was handed over
  std::vector<ProgramTags> tags;   // every program target that knows the process
  CoreIndex ci;
  std::vector<std::string> warnings;
  // The first tagger's name for block `c`, its target's name in `via`; "".
  std::string program_name(const HeapChunk& c, std::string* via = nullptr) const;
  // The first tagger's owner of block `c`; "".
  std::string program_owner(const HeapChunk& c) const;
  // Every tagger's pooled-free blocks, sorted.
  std::vector<uint64_t> pooled_free() const;
};

// The program targets' taggers for `prog` (`caches`: what their caches keep
// is read too); a target that cannot read the process is left out with a
// warning ("<program> blocks are not named: ..."). Types built now are
// noted on `show`.
std::vector<ProgramTags> tag_program(Program& prog, bool caches, std::vector<std::string>* warnings,
                                     ProgressDisplay* show = nullptr);

// Tags and indexes `prog`: a target's own heap walk when it made one (the
// index then numbers the blocks it named), else the allocator's.
Result<IndexedCore> index_program(Program& prog, bool caches, ProgressDisplay* show = nullptr);
// The same, keeping the program.
Result<IndexedCore> index_program(std::unique_ptr<Program> prog, bool caches,
                                  ProgressDisplay* show = nullptr);

}  // namespace lr
