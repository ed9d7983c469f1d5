// A call frame's variables that live in memory, from the DWARF of the code
// at its pc (the scopes of inlined functions included): where each lies
// and its type. What the stack holds is then as typed as what globals hold:
// a daemon's state is often a local of main() or of its serve loop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/types.hpp"
#include "corelib/debuginfo/unwind.hpp"

namespace lr {

struct FrameVariable {
  uint64_t addr = 0;
  const Type* type = nullptr;
  std::string name;      // "terminal"
  std::string function;  // "run_server": the function whose scope declares it (inlined or not)
  // What a pointer or reference points at (serve(Terminal&)'s parameter
  // kept in rbx): `addr` and `type` are the object's, not the variable's.
  bool pointed_to = false;
  // "run_server()::terminal": named as C++ names a function's static.
  std::string qualified() const { return (function.empty() ? "?" : function) + "()::" + name; }
};

// The variables and parameters in scope at frame `f`'s pc whose location
// there is an address: DW_OP_fbreg off the function's frame base, a
// register plus an offset (DW_OP_bregN, the register known in `f`), or the
// CFA. A caller's pc is a return address: it is looked up one byte back,
// in the call (`innermost` false). Values kept in registers, in pieces or
// computed, and variables a location list says are dead at the pc, are not
// objects in memory and are left out, except a pointer or reference whole
// in a register the frame knows: the object it points at is given; so are static locals
// (DW_OP_addr), which are globals. At most `max`; none when the module has no DWARF.
std::vector<FrameVariable> frame_variables(const ModuleSet& mods, TypeRegistry& types,
                                           const StackFrame& f, bool innermost, size_t max = 4096);

}  // namespace lr
