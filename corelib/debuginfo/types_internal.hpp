// What the files of the DWARF type registry share (types.hpp): the name
// index of one module and the DIE attribute readers. Private to debuginfo.
#pragma once

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "corelib/debuginfo/types.hpp"

namespace lr {

// Names to DIE offsets, filled one compile unit at a time as lookups need
// them: most lookups are satisfied by the first CUs (a vmlinux's first unit
// includes the core headers), so a large module is rarely scanned whole.
struct TypeRegistry::Index {
  // A name's DIEs: definitions first (in DIE order), then declarations, at
  // most kKeep of each. A vmlinux repeats its core headers' types in each of
  // its ~3,000 units; every lookup takes the first definition that converts
  // (a later one only when a unit's DWARF is damaged), so keeping each copy
  // would grow the index by millions of offsets for nothing.
  struct Entry {
    static constexpr size_t kKeep = 8;
    std::vector<uint64_t> offs;
    size_t defs = 0;
    void add(uint64_t off, bool decl) {
      if (decl) {
        if (offs.size() - defs < kKeep) offs.push_back(off);
      } else if (defs < kKeep) {
        offs.insert(offs.begin() + static_cast<long>(defs), off);
        ++defs;
      }
    }
  };
  // Looked up by a reused buffer: a repeated name allocates nothing.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Map = std::unordered_map<std::string, Entry, Hash, std::equal_to<>>;
  Map types;  // "struct x", "x"
  Map vars;
  std::string key;  // the name being indexed
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
  const std::vector<uint64_t>* lookup(bool var, const std::string& name, bool need_def);
  // Records the DIE at `off` under prefix + scope + name.
  void add(Map& map, const char* prefix, const std::string& scope, const char* name,
           Dwarf_Die* die);
};

namespace dwarf_detail {

// How deep nested DIEs, types and member paths are followed (corrupt DWARF
// may nest without end).
constexpr int kMaxDepth = 256;

inline bool is_decl(Dwarf_Die* d) {
  Dwarf_Attribute a;
  bool f = false;
  return dwarf_attr(d, DW_AT_declaration, &a) && dwarf_formflag(&a, &f) == 0 && f;
}

inline bool attr_udata(Dwarf_Die* d, unsigned at, uint64_t* out) {
  Dwarf_Attribute a;
  Dwarf_Word w;
  if (!dwarf_attr_integrate(d, at, &a)) return false;
  if (dwarf_formudata(&a, &w) != 0) return false;
  *out = w;
  return true;
}

inline bool member_location(Dwarf_Die* d, uint64_t* out) {
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

// A type name with its spaces normalized ("struct  x" -> "struct x").
std::string normalize_name(std::string_view s);

}  // namespace dwarf_detail

}  // namespace lr
