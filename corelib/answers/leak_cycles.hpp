// Leaked blocks that hold one another: a cycle of shared_ptrs, a doubly
// linked list dropped whole, a parent and child that point at each other.
// Nothing live reaches them, and each still has a reference, so a refcount
// never reaches zero. leaks prints one cycle of each such group, word by
// word, so that what keeps it alive reads as the program's members.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corelib/answers/block_names.hpp"
#include "corelib/answers/core_index.hpp"
#include "corelib/answers/leak_states.hpp"

namespace lr {

struct LeakCycle {
  // One shortest cycle of the group, from its lowest block: blocks[i]'s
  // word links[i] points into blocks[i + 1] (the last one's into blocks[0]).
  std::vector<uint64_t> blocks;
  std::vector<std::string> links;  // the word, named as refs names it
  uint64_t group_blocks = 0;       // the group (strongly connected) it is a cycle of
};

struct LeakCycles {
  std::vector<LeakCycle> shown;  // of the first `max` groups, lowest block first
  uint64_t groups = 0;           // every group of two or more leaked blocks
};

// The groups of leaked blocks (ls: kLeaked) that reach one another through
// their words, from the index's rows (iteratively: a dropped list of a
// million nodes is one group).
LeakCycles find_leak_cycles(const IndexedCore& core, RefNamer& names, const LeakStates& ls,
                            size_t max);

}  // namespace lr
