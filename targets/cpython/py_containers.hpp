// A CPython process's large containers (dicts and lists of at least a
// floor of items), each named by its path from a module's globals or a
// thread's frame (py_names): what a snapshot compares between two cores,
// so that `diff` says which cache grew ("module app.cache, global _CACHE
// (dict)") beside the class whose instances fill it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "corelib/answers/core_index.hpp"
#include "corelib/base/result.hpp"
#include "targets/cpython/py_objects.hpp"

namespace lr {

struct PyContainer {
  std::string name;  // its path, or "(dict at 0x...)" when nothing names it
  std::string type;  // tp_name
  uint64_t addr = 0;
  int64_t items = 0;  // a dict's ma_used, a list's ob_size
};

// The live dicts and lists of `c` of at least `floor` items, with their
// counts, largest first (the 256 largest): a snapshot asks this of its
// census before it indexes the core to name them.
std::vector<std::pair<const PyObj*, int64_t>> large_containers(const Memory& mem, const PyCensus& c,
                                                               int64_t floor);

// The containers of `core` (indexed with the CPython target's census) of at
// least `floor` items, largest first (the 256 largest: each is named by a
// search up the references).
Result<std::vector<PyContainer>> python_containers(const IndexedCore& core, int64_t floor);

}  // namespace lr
