// Object filters for --where: comparisons of fields with integer or string
// literals, joined by && and || (&& binds tighter), with parentheses.
//   refcount>1 && name!="root" || (flags&4)==0   -- '&' masks are not supported;
// fields are member paths of the object type; `refcount` names the walk's
// refcount field.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "leakref/objects.hpp"
#include "leakref/result.hpp"

namespace lr {

class Filter {
 public:
  // Parses `expr` against type `t`. `refcount` (may be null) is the spec the
  // name "refcount" refers to when the type has no such member.
  static Result<std::unique_ptr<Filter>> parse(std::string_view expr, const Type* t,
                                               const FieldSpec* refcount);
  // Syntax-only parse (no types); used by the fuzzer and for early errors.
  static Result<void> check_syntax(std::string_view expr);
  ~Filter();

  bool matches(const Memory& mem, const uint8_t* obj) const;

  struct Node;

 private:
  std::unique_ptr<Node> root_;
};

}  // namespace lr
