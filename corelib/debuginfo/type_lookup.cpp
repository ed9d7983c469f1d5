// Types and variables found by name across a program's modules, with a
// suggestion when none is found (types.hpp).
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

namespace {

// A template's name as clang's DWARF spells it: "Point *" and "Point &"
// in its arguments, where GCC's DWARF and the demangler (a vtable's class)
// write "Point*" (LLVM 14's DW_AT_name of a class template instance).
std::string clang_spelling(const std::string& name) {
  const size_t lt = name.find('<');
  if (lt == std::string::npos) return name;
  std::string out = name.substr(0, lt);
  for (size_t i = lt; i < name.size(); ++i) {
    const char c = name[i];
    if ((c == '*' || c == '&') && !out.empty() && out.back() != ' ' && out.back() != '*' &&
        out.back() != '&')
      out.push_back(' ');
    out.push_back(c);
  }
  return out;
}

}  // namespace

const Type* TypeRegistry::find_defined(const std::string& name, std::string* searched) {
  if (const Type* t = find_spelled(name, searched)) return t;
  const std::string clang = clang_spelling(name);
  return clang == name ? nullptr : find_spelled(clang, nullptr);
}

const Type* TypeRegistry::find_spelled(const std::string& name, std::string* searched) {
  const bool tagged =
      name.rfind("struct ", 0) == 0 || name.rfind("union ", 0) == 0 || name.rfind("enum ", 0) == 0;
  for (const auto& m : mods_->modules()) {
    if (!m->dwarf()) continue;
    if (searched) *searched += (searched->empty() ? "" : ", ") + m->basename();
    const std::vector<uint64_t>* v = index_for(m.get())->lookup(false, name, tagged);
    for (uint64_t off : v ? *v : std::vector<uint64_t>{})
      if (const Type* t = convert(m.get(), m->dwarf(), off)) return t;
  }
  return nullptr;
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
  std::string searched;
  const Type* found = find_defined(name, &searched);
  const bool bare =
      name.rfind("struct ", 0) != 0 && name.rfind("union ", 0) != 0 && name.rfind("enum ", 0) != 0;
  if (!found && bare) {
    // crash and gdb users write bare struct names (`inode`): the one tagged
    // type of that name is it; two (struct and union x) are refused. (No
    // error is made for the tags that miss: its hint reads every type name.)
    std::vector<std::string> fits;
    for (const char* tag : {"struct ", "union ", "enum "}) {
      if (const Type* t = find_defined(tag + name, nullptr)) {
        found = t;
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
  // A C++ variable found by its source name (g_list for _Z6g_listB5cxx11)
  // keeps it: the DWARF names it so.
  v.name = name.find('@') == std::string::npos ? name : hit.second->name;
  v.addr = hit.second->addr;
  v.module = hit.first;
  // Type from the same module's DWARF (a definition with a location, or any).
  auto type_in = [&](Module* m, const std::string& dwarf_name) {
    Dwarf* dw = m->dwarf();
    Index* idx = dw ? index_for(m) : nullptr;
    const std::vector<uint64_t>* offs = idx ? idx->lookup(true, dwarf_name, true) : nullptr;
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
  type_in(hit.first, v.name);
  // Named by its mangled symbol (an address symbolized: _Z6g_listB5cxx11
  // for a global whose type carries the C++11 ABI tag): the DWARF names it
  // by its source name.
  if (!v.type && v.name.rfind("_Z", 0) == 0)
    if (std::string src = source_name(v.name); src != v.name) type_in(hit.first, src);
  // A static GCC renamed for its symbol table (an LTO build's
  // arenas.lto_priv.0, a function's static count.1): the DWARF keeps the
  // name the source gave it.
  if (const size_t dot = v.name.find('.'); !v.type && dot != std::string::npos && dot > 0)
    type_in(hit.first, v.name.substr(0, dot));
  // A module without DWARF: a types file's declaration of the variable
  // (`extern struct vcache *afs_vhashT[16];`) gives its type.
  for (const auto& m : mods_->modules()) {
    if (v.type || hit.first->has_dwarf()) break;
    if (m->types_only) type_in(m.get(), v.name);
  }
  return v;
}

}  // namespace lr
