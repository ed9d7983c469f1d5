#include "corelib/debuginfo/types.hpp"
#include "corelib/base/names.hpp"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "corelib/debuginfo/modules.hpp"

namespace lr {

// Names to DIE offsets, filled one compile unit at a time as lookups need
// them: most lookups are satisfied by the first CUs (a vmlinux's first unit
// includes the core headers), so a large module is rarely scanned whole.
struct TypeRegistry::Index {
  struct Entry {
    std::vector<uint64_t> offs;  // definitions first (in DIE order), then declarations
    size_t defs = 0;
    void add(uint64_t off, bool decl) {
      if (decl) {
        offs.push_back(off);
      } else {
        offs.insert(offs.begin() + static_cast<long>(defs), off);
        ++defs;
      }
    }
  };
  std::unordered_map<std::string, Entry> types;  // "struct x", "x"
  std::unordered_map<std::string, Entry> vars;
  Dwarf* dw = nullptr;
  Dwarf_CU* cu = nullptr;
  bool done = false;
  size_t units = 0;
  // Indexes the next compile unit; false once all are done.
  bool scan_next();
  void scan_level(Dwarf_Die* first, const std::string& scope, int depth, int* steps);
  // The DIEs named `key` (types or vars), scanning on until one that is a
  // definition is known (`need_def`) or any is (`!need_def`); nullptr when
  // the module has none.
  const std::vector<uint64_t>* lookup(bool var, const std::string& key, bool need_def);
};

namespace {

constexpr int kMaxDepth = 256;

bool is_decl(Dwarf_Die* d) {
  Dwarf_Attribute a;
  bool f = false;
  return dwarf_attr(d, DW_AT_declaration, &a) && dwarf_formflag(&a, &f) == 0 && f;
}

bool attr_udata(Dwarf_Die* d, unsigned at, uint64_t* out) {
  Dwarf_Attribute a;
  Dwarf_Word w;
  if (!dwarf_attr_integrate(d, at, &a)) return false;
  if (dwarf_formudata(&a, &w) != 0) return false;
  *out = w;
  return true;
}

bool member_location(Dwarf_Die* d, uint64_t* out) {
  Dwarf_Attribute a;
  if (!dwarf_attr(d, DW_AT_data_member_location, &a)) {
    *out = 0;  // union members have none
    return true;
  }
  Dwarf_Word w;
  switch (dwarf_whatform(&a)) {
    case DW_FORM_data1:
    case DW_FORM_data2:
    case DW_FORM_data4:
    case DW_FORM_data8:
    case DW_FORM_udata:
    case DW_FORM_sdata:
    case DW_FORM_implicit_const:
      if (dwarf_formudata(&a, &w) != 0) return false;
      *out = w;
      return true;
    default: {
      Dwarf_Op* ops;
      size_t n;
      if (dwarf_getlocation(&a, &ops, &n) != 0 || n != 1 || ops[0].atom != DW_OP_plus_uconst)
        return false;
      *out = ops[0].number;
      return true;
    }
  }
}

std::string normalize_name(std::string_view s) {
  std::string out;
  bool sp = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      sp = !out.empty();
      continue;
    }
    if (sp) out.push_back(' ');
    sp = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string Type::display() const {
  switch (kind) {
    case TypeKind::kStruct:
      return "struct " + (name.empty() ? std::string("<anonymous>") : name);
    case TypeKind::kUnion:
      return "union " + (name.empty() ? std::string("<anonymous>") : name);
    case TypeKind::kEnum:
      return "enum " + (name.empty() ? std::string("<anonymous>") : name);
    case TypeKind::kPointer: {
      std::string t = target ? target->display() : "void";
      return t + (t.back() == '*' ? "*" : " *");
    }
    case TypeKind::kArray:
      return (target ? target->display() : "?") +
             (flexible ? std::string(" []") : fmt::format(" [{}]", count));
    case TypeKind::kFunction:
      return "function";
    case TypeKind::kVoid:
      return "void";
    default:
      return name.empty() ? "?" : name;
  }
}

const Type* Type::strip() const {
  const Type* t = this;
  for (int i = 0; t && t->kind == TypeKind::kTypedef && i < kMaxDepth; ++i) t = t->target;
  if (t && t->definition) return t->definition;
  if (t && t->registry) return t->registry->resolve_declaration(t);
  return t;
}

bool Type::is_integer_like() const {
  const Type* t = strip();
  return t && (t->kind == TypeKind::kInt || t->kind == TypeKind::kBool ||
               t->kind == TypeKind::kEnum || t->kind == TypeKind::kPointer);
}

bool Type::is_aggregate() const {
  const Type* t = strip();
  return t && (t->kind == TypeKind::kStruct || t->kind == TypeKind::kUnion);
}

Result<std::vector<PathStep>> parse_member_path(std::string_view p) {
  std::vector<PathStep> out;
  size_t i = 0;
  auto bad = [&](const char* what) {
    return make_error(Errc::kInvalidArgument,
                      fmt::format("bad member path '{}': {} at position {}", p, what, i));
  };
  auto ident = [&]() -> std::string {
    size_t s = i;
    while (i < p.size() && (std::isalnum(static_cast<unsigned char>(p[i])) || p[i] == '_')) ++i;
    return std::string(p.substr(s, i - s));
  };
  if (p.empty()) return bad("empty path");
  if (p.size() > 4096) return bad("path too long");
  bool need_ident = true;
  while (i < p.size()) {
    char c = p[i];
    if (need_ident) {
      if (std::isspace(static_cast<unsigned char>(c))) return bad("unexpected space");
      if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '_'))
        return bad("expected a member name");
      out.push_back({PathStep::Op::kMember, ident(), 0});
      need_ident = false;
      continue;
    }
    if (c == '.') {
      ++i;
      need_ident = true;
    } else if (c == '-' && i + 1 < p.size() && p[i + 1] == '>') {
      i += 2;
      out.push_back({PathStep::Op::kDeref, "", 0});
      need_ident = true;
    } else if (c == '[') {
      ++i;
      size_t s = i;
      bool neg = i < p.size() && p[i] == '-';
      if (neg) ++i;
      int64_t v = 0;
      if (i >= p.size() || !std::isdigit(static_cast<unsigned char>(p[i])))
        return bad("expected an index");
      while (i < p.size() && std::isdigit(static_cast<unsigned char>(p[i]))) {
        if (v > (INT64_MAX - 9) / 10) return bad("index too large");
        v = v * 10 + (p[i] - '0');
        ++i;
      }
      (void)s;
      if (i >= p.size() || p[i] != ']') return bad("expected ']'");
      ++i;
      out.push_back({PathStep::Op::kIndex, "", neg ? -v : v});
    } else {
      return bad("unexpected character");
    }
  }
  if (need_ident) return bad("path ends after a separator");
  return out;
}

std::vector<std::string> member_names(const Type* t) {
  std::vector<std::string> out;
  t = t ? t->strip() : nullptr;
  if (!t) return out;
  for (const auto& m : t->members) {
    if (!m.name.empty()) {
      out.push_back(m.name);
    } else {  // an anonymous struct or union's members are the parent's
      auto inner = member_names(m.type);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  }
  return out;
}

const Member* find_member(const Type* t, std::string_view name, uint64_t* offset) {
  t = t ? t->strip() : nullptr;
  if (!t || (t->kind != TypeKind::kStruct && t->kind != TypeKind::kUnion)) return nullptr;
  for (const auto& m : t->members) {
    if (m.name == name) {
      *offset = m.offset;
      return &m;
    }
  }
  // Anonymous members are searched after named ones, depth-first.
  for (const auto& m : t->members) {
    if (!m.name.empty() || !m.type) continue;
    uint64_t inner = 0;
    if (const Member* r = find_member(m.type, name, &inner)) {
      *offset = m.offset + inner;
      return r;
    }
  }
  return nullptr;
}

std::string member_path_at(const Type* t, uint64_t off, int depth) {
  t = t ? t->strip() : nullptr;
  if (!t || off >= t->size || depth > 16) return "";
  if (t->kind == TypeKind::kArray) {
    const Type* e = t->target ? t->target->strip() : nullptr;
    if (!e || !e->size || e->is_char) return "";
    return fmt::format("[{}]{}", off / e->size, member_path_at(e, off % e->size, depth + 1));
  }
  if (t->kind != TypeKind::kStruct && t->kind != TypeKind::kUnion) return "";
  // The member whose bytes hold `off`: in a union the first that does.
  for (const auto& m : t->members) {
    const Type* mt = m.type ? m.type->strip() : nullptr;
    if (m.bit_size || !mt || off < m.offset || off - m.offset >= mt->size) continue;
    std::string inner = member_path_at(mt, off - m.offset, depth + 1);
    if (m.name.empty()) return inner;  // anonymous: its members are the parent's
    return "." + m.name + inner;
  }
  return "";
}

uint64_t field_bytes(const FieldLoc& loc) {
  if (loc.bit_size) return (uint64_t{loc.bit_offset} + loc.bit_size + 7) / 8;
  const Type* t = loc.type ? loc.type->strip() : nullptr;
  return t ? t->size : 0;
}

namespace {
// Walkers read exactly sizeof(root) bytes per object; a field must lie inside.
Result<FieldLoc> within(const Type* root, const FieldLoc& loc) {
  const Type* r = root ? root->strip() : nullptr;
  uint64_t size = r ? r->size : 0;
  uint64_t need = field_bytes(loc);
  if (loc.offset > size || need > size - loc.offset)
    return make_error(Errc::kBadFormat,
                      fmt::format("field at offset {} ({} bytes) lies outside {} ({} bytes): "
                                  "corrupt DWARF, or an index past a flexible array",
                                  loc.offset, need, root ? root->display() : "?", size));
  return loc;
}
}  // namespace

Result<FieldLoc> resolve_path(const Type* t, const std::vector<PathStep>& steps) {
  FieldLoc loc;
  loc.type = t;
  for (const auto& s : steps) {
    const Type* cur = loc.type ? loc.type->strip() : nullptr;
    if (!cur) return make_error(Errc::kNotFound, "path steps into an unknown type");
    if (s.op == PathStep::Op::kDeref)
      return make_error(Errc::kInvalidArgument,
                        "'->' needs memory; this path must stay inside one object");
    if (s.op == PathStep::Op::kIndex) {
      if (cur->kind != TypeKind::kArray)
        return make_error(Errc::kInvalidArgument,
                          fmt::format("cannot index '{}': not an array", cur->display()));
      if (s.index < 0 || (!cur->flexible && static_cast<uint64_t>(s.index) >= cur->count))
        return make_error(Errc::kInvalidArgument,
                          fmt::format("index {} out of range for {}", s.index, cur->display()));
      uint64_t esz = cur->target ? cur->target->strip()->size : 0;
      loc.offset += esz * static_cast<uint64_t>(s.index);
      loc.type = cur->target;
      loc.bit_offset = loc.bit_size = 0;
      continue;
    }
    uint64_t off = 0;
    const Member* m = find_member(cur, s.name, &off);
    if (!m)
      return make_error(Errc::kNotFound,
                        fmt::format("{} has no member '{}'{}", cur->display(), s.name,
                                    did_you_mean(s.name, member_names(cur))));
    loc.offset += off;
    loc.bit_offset = m->bit_offset;
    loc.bit_size = m->bit_size;
    loc.type = m->type;
  }
  return within(t, loc);
}

Result<FieldLoc> resolve_path(const Type* t, std::string_view path) {
  LR_ASSIGN(auto steps, parse_member_path(path));
  return resolve_path(t, steps);
}

Result<FieldLoc> resolve_refcount(const Type* t, std::string_view path) {
  LR_ASSIGN(FieldLoc loc, resolve_path(t, path));
  return descend_refcount(t, loc, path);
}

namespace {
std::map<std::string, RefEncoding, std::less<>>& encodings() {
  static std::map<std::string, RefEncoding, std::less<>> m;
  return m;
}
// The encoding `t` or a typedef on the way to its struct was registered with.
const RefEncoding* encoding_of(const Type* t) {
  const auto& m = encodings();
  for (int i = 0; t && i < 16 && !m.empty(); ++i, t = t->target) {
    if (auto it = m.find(t->name); it != m.end() && !t->name.empty()) return &it->second;
    if (t->kind != TypeKind::kTypedef) break;
  }
  return nullptr;
}
}  // namespace

void register_refcount_encoding(const std::string& type_name, RefEncoding e) {
  encodings()[type_name] = e;
}

Result<FieldLoc> descend_refcount(const Type* t, FieldLoc loc, std::string_view path) {
  static const char* kNames[] = {"counter", "refs", "refcount", "count", "value",
                                 "ref",     "val",  "usage",    "_count"};
  for (int depth = 0; depth < 16; ++depth) {
    const Type* cur = loc.type ? loc.type->strip() : nullptr;
    if (!cur) return make_error(Errc::kNotFound, "refcount field has no type");
    if (const RefEncoding* e = encoding_of(loc.type)) loc.enc = *e;
    if (cur->is_integer_like() && cur->kind != TypeKind::kPointer) return within(t, loc);
    if (cur->kind != TypeKind::kStruct && cur->kind != TypeKind::kUnion)
      return make_error(
          Errc::kInvalidArgument,
          fmt::format("refcount field '{}' has type {}, not an integer", path, cur->display()));
    const Member* pick = nullptr;
    uint64_t off = 0;
    for (const char* n : kNames)
      if ((pick = find_member(cur, n, &off))) break;
    if (!pick && cur->members.size() == 1) {
      pick = &cur->members[0];
      off = pick->offset;
    }
    if (!pick)
      return make_error(Errc::kInvalidArgument,
                        fmt::format("refcount field '{}' is {}; name the integer inside it "
                                    "(e.g. {}.<member>)",
                                    path, cur->display(), path));
    loc.offset += off;
    loc.bit_offset = pick->bit_offset;
    loc.bit_size = pick->bit_size;
    loc.type = pick->type;
  }
  return make_error(Errc::kInvalidArgument, "refcount field nests too deeply");
}

TypeRegistry::TypeRegistry(ModuleSet* mods) : mods_(mods) {}
TypeRegistry::~TypeRegistry() = default;

Type* TypeRegistry::fresh() {
  types_.emplace_back();
  return &types_.back();
}

const Type* TypeRegistry::builtin_u64() {
  if (!u64_) {
    Type* t = fresh();
    t->kind = TypeKind::kInt;
    t->name = "unsigned long";
    t->size = 8;
    u64_ = t;
  }
  return u64_;
}

const Type* TypeRegistry::void_ptr() {
  if (!voidp_) {
    Type* t = fresh();
    t->kind = TypeKind::kPointer;
    t->size = 8;
    voidp_ = t;
  }
  return voidp_;
}

// The types and variables among `first` and its siblings, named with
// `scope` ("ns::" inside C++ namespaces, whose members are indexed by their
// qualified names: "struct ns::Span"). Bounded like every child loop
// (corrupt DW_AT_sibling may loop); a real unit has far fewer DIEs.
void TypeRegistry::Index::scan_level(Dwarf_Die* first, const std::string& scope, int depth,
                                     int* steps) {
  constexpr int kMaxTopLevel = 1 << 24, kMaxNamespaceDepth = 16;
  Dwarf_Die child = *first;
  do {
    int tag = dwarf_tag(&child);
    const char* name = dwarf_diename(&child);
    if (tag == DW_TAG_namespace) {
      Dwarf_Die inner;
      if (depth < kMaxNamespaceDepth && dwarf_child(&child, &inner) == 0)
        scan_level(&inner, scope + (name ? name : "(anonymous namespace)") + "::", depth + 1,
                   steps);
      continue;
    }
    if (!name) continue;
    const char* prefix = nullptr;
    switch (tag) {
      case DW_TAG_structure_type:
      case DW_TAG_class_type:
        prefix = "struct ";
        break;
      case DW_TAG_union_type:
        prefix = "union ";
        break;
      case DW_TAG_enumeration_type:
        prefix = "enum ";
        break;
      case DW_TAG_typedef:
      case DW_TAG_base_type:
        prefix = "";
        break;
      case DW_TAG_variable:
        vars[scope + name].add(dwarf_dieoffset(&child), is_decl(&child));
        continue;
      default:
        continue;
    }
    types[std::string(prefix) + scope + name].add(dwarf_dieoffset(&child), is_decl(&child));
  } while (++*steps < kMaxTopLevel && dwarf_siblingof(&child, &child) == 0);
}

bool TypeRegistry::Index::scan_next() {
  if (done || !dw) return false;
  Dwarf_Die cudie, sub;
  Dwarf_Half version;
  uint8_t unit_type;
  if (++units > 10'000'000 ||
      dwarf_get_units(dw, cu, &cu, &version, &unit_type, &cudie, &sub) != 0) {
    done = true;
    return false;
  }
  Dwarf_Die child;
  if (dwarf_child(&cudie, &child) != 0) return true;
  int steps = 0;
  scan_level(&child, "", 0, &steps);
  return true;
}

const std::vector<uint64_t>* TypeRegistry::Index::lookup(bool var, const std::string& key,
                                                         bool need_def) {
  auto& map = var ? vars : types;
  for (;;) {
    auto it = map.find(key);
    if (it != map.end() && (!need_def || it->second.defs > 0)) return &it->second.offs;
    if (!scan_next()) return it == map.end() ? nullptr : &it->second.offs;
  }
}

TypeRegistry::Index* TypeRegistry::index_for(Module* m) {
  auto& slot = indexes_[m];
  if (slot) return slot.get();
  slot = std::make_unique<Index>();
  slot->dw = m->dwarf();
  slot->done = slot->dw == nullptr;
  return slot.get();
}

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
    for_each_child(die, DW_TAG_member, [this, t](Dwarf_Die* c) {
      Member mem;
      mem.name = dwarf_diename(c) ? dwarf_diename(c) : "";
      if (member_location(c, &mem.offset)) {
        mem.type = target_of(c);
        place_bitfield(c, mem);
        t->members.push_back(std::move(mem));
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

namespace {
// "; did you mean 'struct inode'?" from tag-less candidate names.
std::string type_hint(const std::string& name, const std::vector<std::string>& names, bool bare) {
  std::string tag = bare ? "" : name.substr(0, name.find(' ') + 1);
  std::string near = closest_name(bare ? name : name.substr(tag.size()), names);
  return near.empty() ? "" : "; did you mean '" + tag + near + "'?";
}
}  // namespace

namespace {

// A unit named `file` ("malloc.c", or ".../malloc.c" when built with a path).
bool unit_is(std::string_view s, std::string_view file) {
  return s == file || (s.size() > file.size() && s.substr(s.size() - file.size()) == file &&
                       s[s.size() - file.size() - 1] == '/');
}

// A name as a DIE tag and the bare name: "struct x" -> (structure_type, x).
std::pair<int, std::string_view> tagged_name(std::string_view name) {
  for (auto [tag, prefix] : {std::pair{DW_TAG_structure_type, std::string_view("struct ")},
                             std::pair{DW_TAG_union_type, std::string_view("union ")},
                             std::pair{DW_TAG_enumeration_type, std::string_view("enum ")}})
    if (name.rfind(prefix, 0) == 0) return {tag, name.substr(prefix.size())};
  return {DW_TAG_typedef, name};
}

// The DIE offsets of top-level definitions of `names` in the first unit
// named `unit`, in one pass over its children; 0 for a name not defined.
std::vector<uint64_t> unit_type_offsets(Dwarf* dw, std::string_view unit,
                                        const std::vector<std::string>& names) {
  std::vector<uint64_t> offs(names.size(), 0);
  std::vector<std::pair<int, std::string_view>> want;
  for (const auto& n : names) want.push_back(tagged_name(n));
  Dwarf_CU* cu = nullptr;
  Dwarf_Die cudie, sub, child;
  Dwarf_Half version;
  uint8_t unit_type;
  for (int units = 0;
       units < 1'000'000 && dwarf_get_units(dw, cu, &cu, &version, &unit_type, &cudie, &sub) == 0;
       ++units) {
    const char* un = dwarf_diename(&cudie);
    if (!un || !unit_is(un, unit)) continue;
    if (dwarf_child(&cudie, &child) != 0) break;
    int steps = 0;  // bounded: a corrupt DW_AT_sibling may loop
    do {
      const char* n = dwarf_diename(&child);
      if (!n || is_decl(&child)) continue;
      for (size_t i = 0; i < want.size(); ++i)
        if (!offs[i] && dwarf_tag(&child) == want[i].first && want[i].second == n)
          offs[i] = dwarf_dieoffset(&child);
    } while (++steps < (1 << 24) && dwarf_siblingof(&child, &child) == 0);
    break;
  }
  return offs;
}

}  // namespace

std::vector<const Type*> TypeRegistry::find_in_unit(Module* m, std::string_view unit,
                                                    const std::vector<std::string_view>& names) {
  std::vector<const Type*> out(names.size(), nullptr);
  if (!m || !m->dwarf()) return out;
  std::vector<std::string> norm;
  for (auto n : names) norm.push_back(normalize_name(n));
  const std::vector<uint64_t> offs = unit_type_offsets(m->dwarf(), unit, norm);
  for (size_t i = 0; i < offs.size(); ++i)
    if (offs[i]) out[i] = convert(m, m->dwarf(), offs[i]);
  return out;
}

Result<const Type*> TypeRegistry::find(std::string_view raw) {
  std::string name = normalize_name(raw);
  // C++'s class is a struct with another default access: one index for both.
  if (name.rfind("class ", 0) == 0) name = "struct " + name.substr(6);
  int stars = 0;
  while (!name.empty() && (name.back() == '*' || name.back() == ' ')) {
    if (name.back() == '*') ++stars;
    name.pop_back();
  }
  if (name.empty()) return make_error(Errc::kInvalidArgument, "empty type name");
  const Type* found = nullptr;
  std::string searched;
  for (const auto& m : mods_->modules()) {
    if (!m->dwarf()) continue;
    searched += (searched.empty() ? "" : ", ") + m->basename();
    Index* idx = index_for(m.get());
    bool tagged = name.rfind("struct ", 0) == 0 || name.rfind("union ", 0) == 0 ||
                  name.rfind("enum ", 0) == 0;
    const std::vector<uint64_t>* v = idx->lookup(false, name, tagged);
    if (!v) continue;
    for (uint64_t off : *v) {
      found = convert(m.get(), m->dwarf(), off);
      if (found) break;
    }
    if (found) break;
  }
  const bool bare =
      name.rfind("struct ", 0) != 0 && name.rfind("union ", 0) != 0 && name.rfind("enum ", 0) != 0;
  if (!found && bare) {
    // crash and gdb users write bare struct names (`inode`): the one tagged
    // type of that name is it; two (struct and union x) are refused.
    std::vector<std::string> fits;
    for (const char* tag : {"struct ", "union ", "enum "}) {
      auto r = find(tag + name);
      if (r.ok()) {
        found = r.value();
        fits.push_back(tag + name);
      }
    }
    if (fits.size() > 1)
      return make_error(Errc::kInvalidArgument, fmt::format("type '{}' is ambiguous: {}; name one",
                                                            name, fmt::join(fits, " and ")));
  }
  if (!found) {
    // Say why the executable could not help: that is where users expect types.
    std::string why;
    if (Module* exe = mods_->exe(); exe && !exe->has_dwarf()) why = "; " + exe->debug_missing;
    if (!not_found_hint_.empty()) why += "; " + not_found_hint_;
    if (searched.empty())
      return make_error(
          Errc::kNotFound,
          fmt::format("type '{}': no module has DWARF debuginfo to search{}", name, why));
    // The nearest type name any searched module defines, with the same tag.
    std::vector<std::string> names;
    for (const auto& m : mods_->modules())
      if (m->dwarf())
        for (const auto& [n, e] : index_for(m.get())->types) {
          if (!e.defs) continue;
          // Names are compared without their tag (a shared "struct " would
          // make far names look near), and a tagged name only with the same tag.
          size_t sp = n.find(' ');
          if (bare)
            names.push_back(sp != std::string::npos ? n.substr(sp + 1) : n);
          else if (sp != std::string::npos && n.compare(0, sp + 1, name, 0, sp + 1) == 0)
            names.push_back(n.substr(sp + 1));
        }
    return make_error(Errc::kNotFound,
                      fmt::format("type '{}' not found in the DWARF of {}{}{}", name, searched, why,
                                  type_hint(name, names, bare)));
  }
  for (int i = 0; i < stars; ++i) {
    auto& slot = pointer_cache_[found];
    if (!slot) {
      Type* p = fresh();
      p->kind = TypeKind::kPointer;
      p->size = 8;
      p->target = found;
      slot = p;
    }
    found = slot;
  }
  return found;
}

Result<std::pair<Module*, const Symbol*>> TypeRegistry::lookup_symbol(const std::string& name) {
  auto hit = mods_->lookup(name);
  if (hit.ok() || hit.error().code != Errc::kNotFound) return hit;
  for (const auto& m : mods_->modules()) {
    if (!m->types_only || !m->dwarf()) continue;
    if (!index_for(m.get())->lookup(true, name, false)) continue;
    return make_error(
        Errc::kNotFound,
        fmt::format("'{}' has no address: the program does not export it (types file {} "
                    "declares it, but a types file has no addresses); give its address, or "
                    "locate it by its contents",
                    name, m->path));
  }
  return hit;
}

Result<Variable> TypeRegistry::find_variable(std::string_view raw) {
  std::string name(raw);
  LR_ASSIGN(auto hit, lookup_symbol(name));
  Variable v;
  v.name = hit.second->name;
  v.addr = hit.second->addr;
  v.module = hit.first;
  // Type from the same module's DWARF (a definition with a location, or any).
  auto type_in = [&](Module* m) {
    Dwarf* dw = m->dwarf();
    Index* idx = dw ? index_for(m) : nullptr;
    const std::vector<uint64_t>* offs = idx ? idx->lookup(true, v.name, true) : nullptr;
    for (uint64_t off : offs ? *offs : std::vector<uint64_t>{}) {
      Dwarf_Die d;
      if (!dwarf_offdie(dw, off, &d)) continue;
      Dwarf_Attribute a;
      Dwarf_Die td;
      if (!dwarf_attr_integrate(&d, DW_AT_type, &a) || !dwarf_formref_die(&a, &td)) continue;
      v.type = convert(m, dw, dwarf_dieoffset(&td));
      if (v.type && !is_decl(&d)) break;
    }
  };
  type_in(hit.first);
  // A module without DWARF: a types file's declaration of the variable
  // (`extern struct vcache *afs_vhashT[16];`) gives its type.
  for (const auto& m : mods_->modules()) {
    if (v.type || hit.first->has_dwarf()) break;
    if (m->types_only) type_in(m.get());
  }
  return v;
}

}  // namespace lr
