// Call frames of a core's thread (unwind.hpp): the CFI rules libdw decodes,
// evaluated here for the forms compilers emit on x86_64 and aarch64 (CFA =
// register + offset; a saved register at CFA + offset, or its value there).
#include "corelib/debuginfo/unwind.hpp"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cstdlib>

namespace lr {

namespace {

constexpr int kRegs = StackFrame::kRegs;  // DWARF numbers up to aarch64's sp (31), x86_64's RA (16)

// How a machine's DWARF registers sit in its core's registers.
struct Arch {
  int nregs;         // DWARF registers tracked: 0 .. nregs-1
  int sp;            // DWARF number of the stack pointer
  int ra;            // the return address column (the caller's pc)
  const int* user;   // DWARF number -> index in ThreadInfo::regs
  int pc_index;      // index of the pc in ThreadInfo::regs
  uint64_t ra_mask;  // bits a return address keeps (aarch64: no pointer signature)
};
// x86_64: rax..r15 and the return address column (16), which holds the pc.
constexpr int kX86User[17] = {10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16};
// aarch64: x0..x30, sp. A return address signed by pointer authentication
// (-mbranch-protection) carries its signature above bit 47; user addresses
// lie below 2^48, so those bits are cleared.
constexpr int kArmUser[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                              16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
constexpr Arch kX86{17, 7, 16, kX86User, 16, ~uint64_t{0}};
constexpr Arch kArm{32, 31, 30, kArmUser, 32, (uint64_t{1} << 48) - 1};

struct Regs {
  uint64_t v[kRegs] = {};
  bool ok[kRegs] = {};
  uint64_t pc = 0;
};

// Evaluates a rule's operations (`cfa` for DW_OP_call_frame_cfa); false for
// an operation outside the simple forms.
bool eval(const Dwarf_Op* ops, size_t n, const Regs& r, uint64_t cfa, const Memory& mem,
          uint64_t* out) {
  uint64_t st[8];
  size_t sp = 0;
  bool value = false;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t a = ops[i].atom;
    if (sp >= 8) return false;
    if (a == DW_OP_call_frame_cfa) {
      st[sp++] = cfa;
    } else if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
      const int reg = a - DW_OP_breg0;
      if (reg >= kRegs || !r.ok[reg]) return false;
      st[sp++] = r.v[reg] + ops[i].number;
    } else if (a == DW_OP_bregx) {
      if (ops[i].number >= kRegs || !r.ok[ops[i].number]) return false;
      st[sp++] = r.v[ops[i].number] + ops[i].number2;
    } else if (a == DW_OP_consts || a == DW_OP_constu || (a >= DW_OP_lit0 && a <= DW_OP_lit31)) {
      st[sp++] = a >= DW_OP_lit0 && a <= DW_OP_lit31 ? a - DW_OP_lit0 : ops[i].number;
    } else if (a == DW_OP_plus_uconst && sp >= 1) {
      st[sp - 1] += ops[i].number;
    } else if ((a == DW_OP_plus || a == DW_OP_minus) && sp >= 2) {
      --sp;
      st[sp - 1] = a == DW_OP_plus ? st[sp - 1] + st[sp] : st[sp - 1] - st[sp];
    } else if (a == DW_OP_stack_value && i + 1 == n) {
      value = true;
    } else {
      return false;
    }
  }
  if (sp != 1) return false;
  if (value) {
    *out = st[0];
    return true;
  }
  return mem.read(st[0], out, 8).ok();
}

// The caller's registers from `f`'s rules (`cfa` already evaluated).
Regs caller_regs(const Arch& A, Dwarf_Frame* f, const Regs& r, uint64_t cfa, const Memory& mem) {
  Regs next;
  for (int reg = 0; reg < A.nregs; ++reg) {
    Dwarf_Op mem_ops[3];
    Dwarf_Op* rops = nullptr;
    size_t rn = 0;
    if (dwarf_frame_register(f, reg, mem_ops, &rops, &rn) != 0) continue;
    if (rn == 0 && rops == nullptr) {  // same value
      next.v[reg] = r.v[reg];
      next.ok[reg] = r.ok[reg];
    } else if (rn > 0) {
      next.ok[reg] = eval(rops, rn, r, cfa, mem, &next.v[reg]);
    }  // else undefined
  }
  next.v[A.sp] = cfa;  // the CFA is the caller's stack pointer
  next.ok[A.sp] = true;
  next.pc = next.v[A.ra] & A.ra_mask;
  return next;
}

// One step: the caller's registers from `r` at its pc (frame 0: exact pc;
// callers: pc - 1, inside the call). False with `why` when it cannot.
bool step(const Arch& A, const Memory& mem, const ModuleSet& mods, Regs& r, bool first,
          uint64_t* cfa_out, std::string* why) {
  const uint64_t pc = r.pc;
  Module* m = mods.module_at(pc);
  if (!m) return *why = "pc in no module", false;
  Dwarf_CFI* cfi = m->cfi();
  if (!cfi) return *why = "no CFI in " + m->basename(), false;
  Dwarf_Frame* f = nullptr;
  if (dwarf_cfi_addrframe(cfi, (first ? pc : pc - 1) - m->bias, &f) != 0 || !f)
    return *why = "no CFI entry for the pc in " + m->basename(), false;
  bool ok = false;
  Dwarf_Op* ops = nullptr;
  size_t nops = 0;
  uint64_t cfa = 0;
  // The CFA is a value: its expression (register + offset) evaluated as one.
  if (dwarf_frame_cfa(f, &ops, &nops) == 0 && nops > 0 && nops < 4) {
    Dwarf_Op as_value[4];
    for (size_t i = 0; i < nops; ++i) as_value[i] = ops[i];
    as_value[nops] = Dwarf_Op{DW_OP_stack_value, 0, 0, 0};
    ok = eval(as_value, nops + 1, r, 0, mem, &cfa);
  }
  if (!ok) {
    std::free(f);
    return *why = "a CFA rule this unwinder does not evaluate", false;
  }
  Regs next = caller_regs(A, f, r, cfa, mem);
  std::free(f);
  if (!next.ok[A.ra] || next.pc == 0) return *why = "outermost frame", false;
  r = next;
  *cfa_out = cfa;
  return true;
}

StackFrame frame(uint64_t pc, uint64_t sp, uint64_t cfa, const Regs& r) {
  StackFrame f{pc, sp, cfa};
  for (int i = 0; i < kRegs; ++i) {
    f.regs[i] = r.v[i];
    if (r.ok[i]) f.regs_ok |= uint64_t{1} << i;
  }
  return f;
}

}  // namespace

std::vector<StackFrame> unwind_thread(const Memory& mem, const ModuleSet& mods, const ThreadInfo& t,
                                      size_t max, std::string* why) {
  std::vector<StackFrame> out;
  std::string stop;
  const Arch& A = t.machine == EM_AARCH64 ? kArm : kX86;
  Regs r;
  for (int i = 0; i < A.nregs; ++i) {
    r.v[i] = t.regs[A.user[i]];
    r.ok[i] = true;
  }
  r.pc = t.regs[A.pc_index];
  while (out.size() < max) {
    const uint64_t pc = r.pc, sp = r.v[A.sp];
    const Regs here = r;
    uint64_t cfa = 0;
    const bool more = step(A, mem, mods, r, out.empty(), &cfa, &stop);
    if (!more) {
      // The last frame reaches as far as anything proves: its stack pointer.
      out.push_back(frame(pc, sp, sp, here));
      break;
    }
    // An aarch64 leaf function may keep no frame (CFA = sp, the return
    // address in x30): an empty frame, allowed once the pc moves on.
    if (cfa < sp || (cfa == sp && r.pc == pc)) {
      stop = "the stack does not grow upwards";
      out.push_back(frame(pc, sp, sp, here));
      break;
    }
    out.push_back(frame(pc, sp, cfa, here));
  }
  if (why) *why = out.size() >= max ? "frame limit" : stop;
  return out;
}

int frame_of(const std::vector<StackFrame>& frames, uint64_t a) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (a >= frames[i].sp && a < frames[i].cfa) return static_cast<int>(i);
  return -1;
}

}  // namespace lr
