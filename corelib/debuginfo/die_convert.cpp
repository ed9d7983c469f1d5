// DWARF DIEs converted to Types once each: base types, enums, bit-fields,
// arrays, structs and unions completed from their definitions, pointer
// targets converted after the types that point at them (types.hpp).
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "corelib/base/names.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/types.hpp"
#include "corelib/debuginfo/types_internal.hpp"

namespace lr {

using namespace dwarf_detail;

const Type* TypeRegistry::complete_struct(const Type* t, Module* self, uint64_t die_off,
                                          TypeKind kind) {
  (void)die_off;
  if (t->name.empty()) return t;
  std::string key = (kind == TypeKind::kUnion  ? "union "
                     : kind == TypeKind::kEnum ? "enum "
                                               : "struct ") +
                    t->name;
  for (const auto& m : mods_->modules()) {
    Index* idx = index_for(m.get());
    const std::vector<uint64_t>* v = idx->lookup(false, key, true);
    if (!v) continue;
    for (uint64_t off : *v) {
      Dwarf_Die d;
      if (!dwarf_offdie(m->dwarf(), off, &d) || is_decl(&d)) continue;
      if (m.get() == self && off == die_off) continue;
      return convert_one(m.get(), m->dwarf(), off);
    }
  }
  return t;
}

// Pointer targets are converted after the type that refers to them, from a
// work list: following them recursively goes as deep as the type graph
// (thousands of levels in a kernel), which a depth cap would cut, leaving a
// null target cached for good.
const Type* TypeRegistry::convert(Module* m, Dwarf* dw, uint64_t off) {
  const Type* r = convert_one(m, dw, off);
  drain_pending();
  return r;
}

const Type* TypeRegistry::from_die(Module* m, uint64_t die_off) {
  Dwarf* dw = m ? m->dwarf() : nullptr;
  return dw ? convert(m, dw, die_off) : nullptr;
}

void TypeRegistry::drain_pending() {
  if (draining_) return;
  draining_ = true;
  while (!pending_.empty()) {
    Pending p = pending_.back();
    pending_.pop_back();
    p.type->target = convert_one(p.m, p.dw, p.off);
  }
  draining_ = false;
}

const Type* TypeRegistry::resolve_declaration(const Type* t) {
  if (t->definition) return t->definition;
  t->registry = nullptr;  // resolving: a cycle back here sees the declaration
  const Type* full = complete_struct(t, t->decl_module, t->decl_off, t->kind);
  drain_pending();
  t->definition = full ? full : t;
  return t->definition;
}

namespace {

// The DIE offset of d's DW_AT_type; false when it has none.
bool type_ref(Dwarf_Die* d, uint64_t* to) {
  Dwarf_Attribute a;
  Dwarf_Die td;
  if (!dwarf_attr_integrate(d, DW_AT_type, &a) || !dwarf_formref_die(&a, &td)) return false;
  *to = dwarf_dieoffset(&td);
  return true;
}

void fill_base(Dwarf_Die* die, Type* t) {
  uint64_t enc = 0;
  attr_udata(die, DW_AT_encoding, &enc);
  t->kind = TypeKind::kInt;
  if (enc == DW_ATE_boolean) t->kind = TypeKind::kBool;
  if (enc == DW_ATE_float || enc == DW_ATE_complex_float) t->kind = TypeKind::kFloat;
  t->is_signed = enc == DW_ATE_signed || enc == DW_ATE_signed_char;
  t->is_char = enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char;
}

// Calls f(child) on each child of `die` tagged `tag` until f returns false.
// Bounded: DW_AT_sibling in corrupt DWARF may lead back into the list.
template <class F>
void for_each_child(Dwarf_Die* die, int tag, F f) {
  constexpr int kMaxChildren = 1 << 20;
  Dwarf_Die c;
  if (dwarf_child(die, &c) != 0) return;
  int steps = 0;
  do {
    if (dwarf_tag(&c) == tag && !f(&c)) return;
  } while (++steps < kMaxChildren && dwarf_siblingof(&c, &c) == 0);
}

void read_enumerators(Dwarf_Die* die, Type* t) {
  for_each_child(die, DW_TAG_enumerator, [t](Dwarf_Die* c) {
    Enumerator e;
    e.name = dwarf_diename(c) ? dwarf_diename(c) : "";
    Dwarf_Attribute a;
    if (dwarf_attr(c, DW_AT_const_value, &a)) {
      Dwarf_Sword sv;
      Dwarf_Word uv;
      if (dwarf_whatform(&a) == DW_FORM_sdata && dwarf_formsdata(&a, &sv) == 0)
        e.value = sv;
      else if (dwarf_formudata(&a, &uv) == 0)
        e.value = static_cast<int64_t>(uv);
    }
    t->enumerators.push_back(std::move(e));
    return t->enumerators.size() < 100000;
  });
}

// A bit-field member's byte and bit offset, from DWARF 5's data_bit_offset
// or DWARF 2-4's bit offset counted from the MSB of the storage unit.
void place_bitfield(Dwarf_Die* c, Member& mem) {
  int bits = dwarf_bitsize(c);
  if (bits <= 0 || bits > 64) return;
  mem.bit_size = static_cast<uint16_t>(bits);
  uint64_t dbo = 0;
  if (attr_udata(c, DW_AT_data_bit_offset, &dbo)) {
    mem.offset = dbo / 8;
    mem.bit_offset = dbo % 8;
    return;
  }
  int bo = dwarf_bitoffset(c);
  int64_t unit = dwarf_bytesize(c);
  if (unit <= 0 && mem.type) unit = static_cast<int64_t>(mem.type->strip()->size);
  if (bo >= 0 && unit > 0) {
    int64_t lsb = unit * 8 - bo - bits;
    if (lsb < 0) lsb = 0;
    mem.offset += static_cast<uint64_t>(lsb) / 8;
    mem.bit_offset = static_cast<uint16_t>(lsb % 8);
  }
}

// An array's dimensions, outermost first: (count, flexible).
std::vector<std::pair<uint64_t, bool>> array_dims(Dwarf_Die* die) {
  std::vector<std::pair<uint64_t, bool>> dims;
  for_each_child(die, DW_TAG_subrange_type, [&dims](Dwarf_Die* c) {
    uint64_t ub = 0, cnt = 0;
    Dwarf_Attribute a;
    Dwarf_Sword sv;
    if (attr_udata(c, DW_AT_count, &cnt))
      dims.emplace_back(cnt, false);
    else if (!dwarf_attr(c, DW_AT_upper_bound, &a))
      dims.emplace_back(0, true);
    else if (dwarf_formsdata(&a, &sv) == 0 && sv >= 0)
      dims.emplace_back(static_cast<uint64_t>(sv) + 1, false);
    else if (attr_udata(c, DW_AT_upper_bound, &ub) && ub != UINT64_MAX)
      dims.emplace_back(ub + 1, false);
    else
      dims.emplace_back(0, true);
    return dims.size() < 64;
  });
  if (dims.empty()) dims.emplace_back(0, true);
  return dims;
}

void set_array_shape(Type* t, const Type* elem, std::pair<uint64_t, bool> dim) {
  t->kind = TypeKind::kArray;
  t->target = elem;
  t->count = dim.first;
  t->flexible = dim.second;
  uint64_t es = elem && elem->strip() ? elem->strip()->size : 0;
  t->size = t->count && es <= UINT64_MAX / t->count ? es * t->count : 0;
}

}  // namespace

// convert_one's steps for one module's DWARF, with the registry's private
// cache, type storage and pending pointer targets.
struct DieReader {
  TypeRegistry& reg;
  Module* m;
  Dwarf* dw;

  const Type* target_of(Dwarf_Die* d) {
    uint64_t to;
    return type_ref(d, &to) ? reg.convert_one(m, dw, to) : nullptr;
  }

  // Qualifiers are transparent: the layout is the target's.
  const Type* qualifier(Dwarf_Die* die, uint64_t off) {
    auto key = std::make_pair(m, off);
    reg.cache_[key] = nullptr;  // breaks qualifier cycles in corrupt DWARF
    const Type* t = target_of(die);
    if (!t) {
      Type* v = reg.fresh();
      v->kind = TypeKind::kVoid;
      t = v;
    }
    reg.cache_[key] = t;
    return t;
  }

  // A declaration's definition is looked up on first use.
  void mark_declaration(Type* t, uint64_t off) {
    t->complete = false;
    t->registry = &reg;
    t->decl_module = m;
    t->decl_off = off;
  }

  void pointer(Dwarf_Die* die, Type* t) {
    t->kind = TypeKind::kPointer;
    if (!t->size) t->size = 8;
    // The target is converted later (drain_pending): pointers make cycles.
    if (uint64_t to; type_ref(die, &to)) reg.pending_.push_back({t, m, dw, to});
  }

  void members(Dwarf_Die* die, Type* t) {
    // C++ base classes first (they lead the layout): leaving them out printed
    // a derived object as complete without its bases' members.
    for_each_child(die, DW_TAG_inheritance, [this, t](Dwarf_Die* c) {
      Member mem;
      mem.is_base = true;
      mem.type = target_of(c);
      if (member_location(c, &mem.offset))
        t->members.push_back(std::move(mem));
      else
        t->omitted.push_back(fmt::format("virtual base {}", mem.type ? mem.type->name : "?"));
      return t->members.size() < 100000;
    });
    for_each_child(die, DW_TAG_template_type_parameter, [this, t](Dwarf_Die* c) {
      t->template_args.push_back(target_of(c));
      return t->template_args.size() < 64;
    });
    for_each_child(die, DW_TAG_member, [this, t](Dwarf_Die* c) {
      Member mem;
      mem.name = dwarf_diename(c) ? dwarf_diename(c) : "";
      if (member_location(c, &mem.offset)) {
        mem.type = target_of(c);
        place_bitfield(c, mem);
        t->members.push_back(std::move(mem));
      } else {
        t->omitted.push_back(mem.name.empty() ? "an anonymous member" : mem.name);
      }
      return t->members.size() < 100000;
    });
  }

  // int a[2][3]: an outer array of 2 elements, each an array of 3.
  void array(Dwarf_Die* die, Type* t) {
    const Type* inner = target_of(die);
    auto dims = array_dims(die);
    for (size_t i = dims.size(); i-- > 1;) {
      Type* sub = reg.fresh();
      set_array_shape(sub, inner, dims[i]);
      inner = sub;
    }
    set_array_shape(t, inner, dims[0]);
  }
};

const Type* TypeRegistry::convert_one(Module* m, Dwarf* dw, uint64_t off) {
  auto key = std::make_pair(m, off);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  Dwarf_Die die;
  if (!dw || !dwarf_offdie(dw, off, &die)) return nullptr;
  static thread_local int depth = 0;
  if (depth > kMaxDepth) return nullptr;
  struct DepthGuard {
    DepthGuard() { ++depth; }
    ~DepthGuard() { --depth; }
  } dg;

  DieReader rd{*this, m, dw};
  int tag = dwarf_tag(&die);
  if (tag == DW_TAG_const_type || tag == DW_TAG_volatile_type || tag == DW_TAG_restrict_type ||
      tag == DW_TAG_atomic_type)
    return rd.qualifier(&die, off);

  Type* t = fresh();
  cache_[key] = t;  // before the members, which may point back at t
  const char* nm = dwarf_diename(&die);
  t->name = nm ? nm : "";
  int64_t bs = dwarf_bytesize(&die);
  t->size = bs > 0 ? static_cast<uint64_t>(bs) : 0;
  if (uint64_t al = 0;
      attr_udata(&die, DW_AT_alignment, &al) && al && al <= 4096 && !(al & (al - 1)))
    t->align = al;
  switch (tag) {
    case DW_TAG_base_type:
      fill_base(&die, t);
      break;
    case DW_TAG_pointer_type:
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type:
    case DW_TAG_ptr_to_member_type:
      rd.pointer(&die, t);
      break;
    case DW_TAG_typedef: {
      t->kind = TypeKind::kTypedef;
      t->target = rd.target_of(&die);
      const Type* s = t->strip();
      t->size = s && s != t ? s->size : 0;
      break;
    }
    case DW_TAG_enumeration_type:
      t->kind = TypeKind::kEnum;
      if (const Type* u = rd.target_of(&die)) t->is_signed = u->strip() && u->strip()->is_signed;
      read_enumerators(&die, t);
      if (is_decl(&die)) rd.mark_declaration(t, off);
      break;
    case DW_TAG_structure_type:
    case DW_TAG_class_type:
    case DW_TAG_union_type:
      t->kind = tag == DW_TAG_union_type ? TypeKind::kUnion : TypeKind::kStruct;
      if (is_decl(&die))
        rd.mark_declaration(t, off);
      else
        rd.members(&die, t);
      break;
    case DW_TAG_array_type:
      rd.array(&die, t);
      break;
    case DW_TAG_subroutine_type:
      t->kind = TypeKind::kFunction;
      t->size = 1;
      break;
    default:
      t->kind = TypeKind::kVoid;
      break;
  }
  return t;
}

}  // namespace lr
