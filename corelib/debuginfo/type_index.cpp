// The type registry's store and each module's name index: names to DIE
// offsets, one compile unit at a time as lookups need them (types.hpp).
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
        add(vars, "", scope, name, &child);
        continue;
      default:
        continue;
    }
    add(types, prefix, scope, name, &child);
  } while (++*steps < kMaxTopLevel && dwarf_siblingof(&child, &child) == 0);
}

void TypeRegistry::Index::add(Map& map, const char* prefix, const std::string& scope,
                              const char* name, Dwarf_Die* die) {
  key.assign(prefix);
  key += scope;
  key += name;
  auto it = map.find(key);
  if (it == map.end()) it = map.emplace(key, Entry{}).first;
  it->second.add(dwarf_dieoffset(die), is_decl(die));
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

const std::vector<uint64_t>* TypeRegistry::Index::lookup(bool var, const std::string& name,
                                                         bool need_def) {
  auto& map = var ? vars : types;
  for (;;) {
    auto it = map.find(name);
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

}  // namespace lr
