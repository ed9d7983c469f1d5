// Call frames of a core's thread (unwind.hpp): the CFI rules libdw decodes,
// evaluated here for the forms compilers emit on x86_64 (CFA = register +
// offset; a saved register at CFA + offset, or its value there).
#include "corelib/debuginfo/unwind.hpp"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cstdlib>

namespace lr {

namespace {

constexpr int kRegs = 17;  // DWARF rax..r15 and the return address (16)
constexpr int kRsp = 7, kRa = 16;
// DWARF register number -> index in the core's user_regs_struct.
constexpr int kUserIndex[kRegs] = {10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16};

struct Regs {
  uint64_t v[kRegs] = {};
  bool ok[kRegs] = {};
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
    } else if (a >= DW_OP_breg0 && a <= DW_OP_breg16) {
      const int reg = a - DW_OP_breg0;
      if (!r.ok[reg]) return false;
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

// One step: the caller's registers from `r` at `pc` (frame 0: exact pc;
// callers: pc - 1, inside the call). False with `why` when it cannot.
bool step(const Memory& mem, const ModuleSet& mods, Regs& r, bool first, uint64_t* cfa_out,
          std::string* why) {
  const uint64_t pc = r.v[kRa];
  Module* m = mods.module_at(pc);
  if (!m) return *why = "pc in no module", false;
  Dwarf_CFI* cfi = m->cfi();
  if (!cfi) return *why = "no CFI in " + m->basename(), false;
  Dwarf_Frame* f = nullptr;
  if (dwarf_cfi_addrframe(cfi, (first ? pc : pc - 1) - m->bias, &f) != 0 || !f)
    return *why = "no CFI entry for the pc in " + m->basename(), false;
  bool ok = false;
  Regs next;
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
  for (int reg = 0; reg < kRegs; ++reg) {
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
  std::free(f);
  next.v[kRsp] = cfa;  // x86_64: the CFA is the caller's stack pointer
  next.ok[kRsp] = true;
  if (!next.ok[kRa] || next.v[kRa] == 0) return *why = "outermost frame", false;
  r = next;
  *cfa_out = cfa;
  return true;
}

}  // namespace

std::vector<StackFrame> unwind_thread(const Memory& mem, const ModuleSet& mods, const ThreadInfo& t,
                                      size_t max, std::string* why) {
  std::vector<StackFrame> out;
  std::string stop;
  Regs r;
  for (int i = 0; i < kRegs; ++i) {
    r.v[i] = t.regs[kUserIndex[i]];
    r.ok[i] = true;
  }
  while (out.size() < max) {
    const uint64_t pc = r.v[kRa], sp = r.v[kRsp];
    uint64_t cfa = 0;
    const bool more = step(mem, mods, r, out.empty(), &cfa, &stop);
    if (!more) {
      // The last frame reaches as far as anything proves: its stack pointer.
      out.push_back({pc, sp, sp});
      break;
    }
    if (cfa <= sp) {
      stop = "the stack does not grow upwards";
      out.push_back({pc, sp, sp});
      break;
    }
    out.push_back({pc, sp, cfa});
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
