// What Type::memo keeps (types.hpp): answers computed from a type alone,
// which never change while its registry lives.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "corelib/debuginfo/types.hpp"

namespace lr {

struct TypeMemo {
  // resolve_path(type, path) by path: few per type, searched in order.
  std::vector<std::pair<std::string, FieldLoc>> paths;
  std::optional<std::string> cxx_name;  // cxx_type_name(type)
};

// The memo of `t`, made on first use.
inline TypeMemo& memo_of(const Type* t) {
  if (!t->memo.memo) t->memo.memo = std::make_shared<TypeMemo>();
  return *t->memo.memo;
}

}  // namespace lr
