// A thread's call frames in a process core (x86_64, aarch64), from its registers and
// the modules' call frame information (.eh_frame): which frame a stack word
// belongs to, for the reference index's "who points here".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corelib/debuginfo/modules.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/dump/memory.hpp"

namespace lr {

struct StackFrame {
  uint64_t pc = 0;   // frame 0: where the thread stopped; then return addresses
  uint64_t sp = 0;   // the frame's lowest live address (frame 0: the stack pointer)
  uint64_t cfa = 0;  // one past its highest: the caller's stack pointer after return
  // The frame's registers as far as the unwind recovered them (by DWARF
  // number; bit n of `regs_ok` says regs[n] is known): frame 0 has all of
  // them, a caller the ones its callees' CFI saved or left alone. Its
  // variables' locations (DW_OP_breg6, rbp + 16) are read with them.
  static constexpr int kRegs = 33;
  uint64_t regs[kRegs] = {};
  uint64_t regs_ok = 0;
  bool reg(int n, uint64_t* v) const {
    if (n < 0 || n >= kRegs || !(regs_ok >> n & 1)) return false;
    *v = regs[n];
    return true;
  }
};

// The frames of `t`, innermost first, at most `max` of them. The unwind
// stops (the frames found so far are kept) where a pc is in no module, a
// module has no CFI for it, a rule is one this unwinder does not evaluate
// (a DWARF expression), or the stack does not grow upwards; `why` (may be
// null) says which. Never fails otherwise.
std::vector<StackFrame> unwind_thread(const Memory& mem, const ModuleSet& mods, const ThreadInfo& t,
                                      size_t max = 256, std::string* why = nullptr);

// The frame holding stack address `a`: its index in `frames`, or -1 when
// `a` lies above the last frame found (or below the stack pointer).
int frame_of(const std::vector<StackFrame>& frames, uint64_t a);

}  // namespace lr
