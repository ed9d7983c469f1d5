// A frame's variables in memory (frame_vars.hpp), from the concrete scopes
// around its pc: the function, its lexical blocks and the inlined calls in
// it, each found as the child whose ranges hold the pc. (dwarf_getscopes
// follows an inlined call to its abstract definition's scopes, which are
// the source's nesting, not the caller whose frame holds the locals.)
#include "corelib/debuginfo/frame_vars.hpp"

#include <dwarf.h>
#include <elfutils/libdw.h>

namespace lr {

namespace {

constexpr int kMaxNesting = 64;
constexpr size_t kMaxChildren = 200'000;  // DIEs looked at on one level

bool holds_scope(int tag) {
  return tag == DW_TAG_subprogram || tag == DW_TAG_lexical_block ||
         tag == DW_TAG_inlined_subroutine;
}

// Out-of-line functions are children of their unit, or of a namespace's
// or a class's DIE in it.
bool holds_functions(int tag) {
  return tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type;
}

// The child of `parent` whose ranges hold `pc`; false when none does. A
// namespace is looked into, breadth first by its own turn in the queue.
bool scope_at(Dwarf_Die* parent, uint64_t pc, Dwarf_Die* out) {
  std::vector<Dwarf_Die> levels{*parent};
  size_t seen = 0;
  for (size_t i = 0; i < levels.size() && i < 256; ++i) {
    Dwarf_Die c;
    if (dwarf_child(&levels[i], &c) != 0) continue;
    do {
      if (++seen > kMaxChildren) return false;
      const int tag = dwarf_tag(&c);
      if (holds_scope(tag) && dwarf_haspc(&c, pc) > 0) return *out = c, true;
      if (holds_functions(tag) && dwarf_tag(&levels[i]) != DW_TAG_subprogram) levels.push_back(c);
    } while (dwarf_siblingof(&c, &c) == 0);
  }
  return false;
}

// The scopes from the out-of-line function down to the innermost one
// holding `pc`; empty when the unit has no function there.
std::vector<Dwarf_Die> concrete_scopes(Dwarf_Die* cu, uint64_t pc) {
  std::vector<Dwarf_Die> chain;
  Dwarf_Die at = *cu, next;
  while (chain.size() < kMaxNesting && scope_at(&at, pc, &next)) {
    chain.push_back(next);
    at = next;
  }
  return chain;
}

std::string name_of(Dwarf_Die* d) {
  Dwarf_Attribute a;
  const char* s = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_name, &a));
  return s ? s : "";
}

// The address a location names, for the simple forms: a register plus an
// offset, the frame base plus one, the CFA; plus a constant after any.
bool place(const Dwarf_Op* ops, size_t n, const StackFrame& f, bool have_fb, uint64_t fb,
           uint64_t* out) {
  if (n == 0 || n > 2) return false;
  uint64_t v = 0;
  const uint8_t a = ops[0].atom;
  if (a == DW_OP_fbreg && have_fb) {
    v = fb + ops[0].number;
  } else if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
    if (!f.reg(a - DW_OP_breg0, &v)) return false;
    v += ops[0].number;
  } else if (a == DW_OP_call_frame_cfa && f.cfa > f.sp) {
    v = f.cfa;
  } else {
    return false;
  }
  if (n == 2 && ops[1].atom != DW_OP_plus_uconst) return false;
  *out = n == 2 ? v + ops[1].number : v;
  return true;
}

bool frame_base(Dwarf_Die* fn, uint64_t pc, const StackFrame& f, uint64_t* fb) {
  Dwarf_Attribute a;
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (!dwarf_attr_integrate(fn, DW_AT_frame_base, &a) ||
      dwarf_getlocation_addr(&a, pc, &ops, &n, 1) != 1)
    return false;
  return place(ops, n, f, false, 0, fb);
}

// A register's value as a location gives (DW_OP_regN, DW_OP_regx), when
// the frame knows the register.
bool register_value(const Dwarf_Op* ops, size_t n, const StackFrame& f, uint64_t* out) {
  if (n != 1) return false;
  const uint8_t a = ops[0].atom;
  if (a >= DW_OP_reg0 && a <= DW_OP_reg31) return f.reg(a - DW_OP_reg0, out);
  return a == DW_OP_regx && ops[0].number < 64 && f.reg(static_cast<int>(ops[0].number), out);
}

// One part of a variable's value and where it lies (DW_OP_piece).
struct Piece {
  uint64_t offset = 0, size = 0;  // in the variable
  uint64_t addr = 0;
  bool in_register = false;  // `addr` is a register's value (the whole variable only)
};

// Where `d`'s variable lies at `pc`: one place for the whole of it, or the
// parts of it in memory when the compiler split it (a shared_ptr whose
// pointer is optimized out while its control block pointer lives in the
// frame). Empty when none of it is in memory or a register.
std::vector<Piece> locate(Dwarf_Die* d, uint64_t pc, const StackFrame& f, bool have_fb,
                          uint64_t fb) {
  std::vector<Piece> out;
  Dwarf_Attribute a;
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (!dwarf_attr(d, DW_AT_location, &a) || dwarf_getlocation_addr(&a, pc, &ops, &n, 1) != 1)
    return out;
  Piece whole;
  if ((whole.in_register = register_value(ops, n, f, &whole.addr)) ||
      place(ops, n, f, have_fb, fb, &whole.addr))
    return {whole};
  uint64_t offset = 0;
  for (size_t i = 0, from = 0; i < n; ++i) {
    if (ops[i].atom != DW_OP_piece) continue;
    Piece p{offset, ops[i].number};
    if (i > from && place(ops + from, i - from, f, have_fb, fb, &p.addr)) out.push_back(p);
    offset += ops[i].number, from = i + 1;
  }
  return out;
}

// The member of `t` that is exactly bytes [off, off + size), and its path;
// null when no member is (a piece splitting a member).
const Type* member_exactly(const Type* t, uint64_t off, uint64_t size, std::string* path) {
  for (int depth = 0; t && depth < 16; ++depth) {
    const Type* s = t->strip();
    if (!s) return nullptr;
    if (off == 0 && s->size == size) return t;
    if (!s->is_aggregate()) return nullptr;
    const Member* in = nullptr;
    for (const Member& m : s->members)
      if (!m.bit_size && m.type && off >= m.offset && off - m.offset < m.type->strip()->size)
        in = &m;
    if (!in) return nullptr;
    if (!in->name.empty()) *path += "." + in->name;
    off -= in->offset;
    t = in->type;
  }
  return nullptr;
}

uint64_t type_die(Dwarf_Die* d) {
  Dwarf_Attribute ta;
  Dwarf_Die td;
  return dwarf_formref_die(dwarf_attr_integrate(d, DW_AT_type, &ta), &td) ? dwarf_dieoffset(&td)
                                                                          : 0;
}

// The type of the object a variable gives: its own, or (a pointer in a
// register) its pointee's; null when it has no size.
const Type* object_type(const Type* t, bool in_register) {
  const Type* s = t ? t->strip() : nullptr;
  if (s && in_register) t = s->kind == TypeKind::kPointer ? s->target : nullptr;
  s = t ? t->strip() : nullptr;
  return s && s->size ? t : nullptr;
}

}  // namespace

std::vector<FrameVariable> frame_variables(const ModuleSet& mods, TypeRegistry& types,
                                           const StackFrame& f, bool innermost, size_t max) {
  std::vector<FrameVariable> out;
  const uint64_t at = innermost ? f.pc : f.pc - 1;
  Module* m = mods.module_at(at);
  Dwarf* dw = m ? m->dwarf() : nullptr;
  Dwarf_Die cu;
  if (!dw || !dwarf_addrdie(dw, at - m->bias, &cu)) return out;
  const uint64_t pc = at - m->bias;
  std::vector<Dwarf_Die> chain = concrete_scopes(&cu, pc);
  if (chain.empty() || dwarf_tag(&chain[0]) != DW_TAG_subprogram) return out;
  uint64_t fb = 0;
  const bool have_fb = frame_base(&chain[0], pc, f, &fb);
  std::string function;
  for (Dwarf_Die& s : chain) {
    if (dwarf_tag(&s) != DW_TAG_lexical_block) function = name_of(&s);
    Dwarf_Die c;
    if (dwarf_child(&s, &c) != 0) continue;
    do {
      const int tag = dwarf_tag(&c);
      if (tag != DW_TAG_variable && tag != DW_TAG_formal_parameter) continue;
      const std::vector<Piece> pieces = locate(&c, pc, f, have_fb, fb);
      const uint64_t type_off = pieces.empty() ? 0 : type_die(&c);
      const Type* whole = type_off ? types.from_die(m, type_off) : nullptr;
      for (const Piece& p : pieces) {
        std::string path;
        const Type* t = p.size ? member_exactly(whole, p.offset, p.size, &path)
                               : object_type(whole, p.in_register);
        if (!t || !t->strip()->size || (p.in_register && !p.addr)) continue;
        out.push_back({p.addr, t, name_of(&c) + path, function, p.in_register});
        if (out.size() >= max) return out;
      }
    } while (dwarf_siblingof(&c, &c) == 0);
  }
  return out;
}

}  // namespace lr
