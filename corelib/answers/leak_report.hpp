// What `leaks` answers, as one value the front ends render as text or JSON:
// every leaked block (its type and how it is known, whether anything points
// into it, which leaked blocks point at it, its allocation site), the blocks
// grouped by type and size, and the totals.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "corelib/answers/alloc_sites.hpp"
#include "corelib/answers/core_index.hpp"
#include "corelib/answers/leak_cycles.hpp"
#include "corelib/answers/leak_states.hpp"

namespace lr {

struct LeakedBlock {
  uint64_t ptr = 0, size = 0;
  std::string type;       // "" unknown
  std::string type_from;  // how the type is known ("vtable", "Widget.part", a program's name); ""
  bool through_pointer = false;         // typed through another leaked block's member
  bool unreferenced = false;            // nothing at all points into it
  std::vector<uint64_t> referenced_by;  // the leaked blocks pointing at it (with_referrers)
  std::string site;                     // its allocation site ("" without a trace)
};

struct LeakGroup {
  uint64_t count = 0, bytes = 0, unreferenced = 0;
};

struct LeakReport {
  std::vector<LeakedBlock> blocks;                               // in address order
  std::map<std::pair<std::string, uint64_t>, LeakGroup> groups;  // (type, size)
  uint64_t heap_blocks = 0, leaked = 0, leaked_bytes = 0, unreferenced = 0, unreferenced_bytes = 0;
  uint64_t pool_free = 0;
  std::string pools;  // whose pools pool_free counts ("Foo's mem-pools")
  // Why the answer may be wrong (the index's root model); empty: whole.
  std::vector<std::string> partial;
  // Groups of leaked blocks that hold one another, one cycle of each of
  // the first kShownCycles.
  LeakCycles cycles;
  static constexpr size_t kShownCycles = 100;
};

// The report of `core`'s leak states (`names` typed them); `sites` (may be
// null) names each block's allocation site; `with_referrers`: each block's
// leaked referrers are listed (one entry per referring word).
LeakReport leak_report(const IndexedCore& core, RefNamer& names, const LeakStates& ls,
                       const LiveSites* sites, bool with_referrers);

}  // namespace lr
