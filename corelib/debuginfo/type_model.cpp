// Types as the engine sees them (types.hpp): their names as a user writes
// them, stripped of typedefs and qualifiers.
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

namespace dwarf_detail {

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

}  // namespace dwarf_detail

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

}  // namespace lr
