// The root model of a process core: which memory holds references that keep
// a heap block alive by themselves, which memory looks live but is not (the
// stacks of threads that no longer exist), and which could hold roots but is
// not in the core. Every leak, path and retained size rests on it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/dump/elfcore.hpp"

namespace lr {

// Where a referring word lies.
enum class RefFrom : uint8_t {
  kChunk,     // inside an in-use heap chunk
  kGlobal,    // a module's writable data or .bss
  kStack,     // a thread's stack, at or above its stack pointer
  kTls,       // a thread's static TLS and thread control block
  kRegister,  // a thread's register (the address is its index)
  kMapping,   // another writable mapping (not heap, module, stack or TLS)
  kReadOnly,  // a read-only mapping (a table the program filled, then protected)
};
constexpr size_t kRefFromKinds = 7;
const char* ref_from_name(RefFrom k);
// Whether references from `k` keep a chunk alive by themselves.
inline bool is_root(RefFrom k) {
  return k != RefFrom::kChunk;
}

// A memory range of the model.
struct RootRange {
  uint64_t start = 0, end = 0;
  RefFrom kind = RefFrom::kGlobal;
  int tid = 0;
  std::string what;  // module name, "thread 123 stack", ...
};

struct RootModel {
  // Scanned as roots: disjoint, in address order.
  std::vector<RootRange> roots;
  // Memory that is mapped and readable but dead: the stacks of threads that
  // no longer exist (kStack, tid 0). Never roots; `refs` names them.
  std::vector<RootRange> stale;
  // Writable memory the core does not hold (cut off, or not dumped): roots
  // nobody could read, so an answer that a block is unreachable is partial.
  std::vector<RootRange> unread;
  // A read-only mapping of a data file the core leaves out (a locale file:
  // never written, its bytes are the file's) holds what the file on disk
  // holds: its words that point into the heap, as (address, value), are
  // roots read from the file. Its range is in `roots` too (named by it;
  // the core has none of its bytes to scan).
  std::vector<std::pair<uint64_t, uint64_t>> file_words;
  // Why an answer that a block is (un)reachable may be wrong, each said
  // once: roots not read, heap chains cut short, dead stacks not told from
  // live ones. Empty when the model is whole. Answers built on it say
  // "partial".
  std::vector<std::string> partial;
  std::vector<std::string> warnings;
};

// The model for `core`, its modules and its heap. `threads` (may be null)
// is what the C library knows of its threads' memory (thread_memory()).
RootModel find_roots(const CoreFile& core, const ModuleSet& mods, const HeapWalk& heap,
                     const ThreadMemory* threads);

}  // namespace lr
