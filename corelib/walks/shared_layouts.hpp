// What a C++ standard library's shared_ptr control blocks look like, as
// the library's target registers it. The census (answers/shared_census)
// finds the blocks among the heap's by their vtables' classes and reads
// their counts and objects through this; GCC's and LLVM's libraries differ
// in names, count widths and what a stored count means, not in the census.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/program.hpp"

namespace lr {

// Where a block's counts lie and how they read: the use count is the
// stored value plus `bias` (LLVM's library stores one less than the owners), the
// weak count likewise.
struct SharedCounts {
  uint64_t use = 0, weak = 0;  // offsets into the block
  uint8_t width = 4;           // bytes of each (an int, or a long)
  int64_t bias = 0;
};

// Where a block class keeps its object: inside it (make_shared's), at
// `off`; or as a pointer it holds at `off` (a separate or deleter block).
// Not `known`: the class's DWARF does not say.
struct SharedObjectAt {
  bool known = false, inside = false;
  uint64_t off = 0;
};

struct SharedLayout {
  std::string name;  // the library, as its target calls it
  // Whether a class, as its vtable's symbol names it, is one of the
  // library's control blocks.
  bool (*block_class)(std::string_view cls) = nullptr;
  // Its counts, from the DWARF of the blocks' base class; an error names
  // what the DWARF lacks.
  Result<SharedCounts> (*counts)(Program& prog, const std::string& cls) = nullptr;
  SharedObjectAt (*object)(Program& prog, const std::string& cls) = nullptr;
  // The member of a shared_ptr and a weak_ptr that points at the block:
  // a word a type names so is an owner for certain.
  std::string owner_member;
};

void register_shared_layout(const SharedLayout& l);  // a name registered twice is kept once
std::vector<SharedLayout> shared_layouts();

}  // namespace lr
