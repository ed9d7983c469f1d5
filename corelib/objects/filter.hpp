// Object filters for --where: an expression of the language in expr.hpp,
// true for the objects to keep. `refcount` names the walk's refcount field
// when the type has no member of that name.
//   refcount>1 && name!="root" || (flags & 4) == 0 && state == OBJ_DEAD
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/objects/expr.hpp"
#include "corelib/objects/objects.hpp"

namespace lr {

class Filter {
 public:
  // Compiles `expr` against type `t`; `refcount` (may be null) is the spec the
  // name "refcount" refers to when the type has no such member. `scope`
  // (may be null) adds a profile's aliases and list element types. `what`
  // names the expression in messages (the CLI's "--where").
  static Result<std::unique_ptr<Filter>> parse(std::string_view expr, const Type* t,
                                               const FieldSpec* refcount,
                                               const ExprScope* scope = nullptr,
                                               const std::string& what = "where");
  // Syntax-only parse (no types); used by the fuzzer and for early errors.
  static Result<void> check_syntax(std::string_view expr, const std::string& what = "where");
  ~Filter();

  // An object whose condition cannot be evaluated (a NULL pointer on a path,
  // an unreadable list) does not match; errors() counts those and
  // first_error() says why, so the caller can warn instead of hiding them.
  bool matches(const Memory& mem, const uint8_t* obj, uint64_t addr = 0) const;
  uint64_t errors() const { return errors_; }
  const std::string& first_error() const { return first_error_; }
  uint64_t first_error_addr() const { return first_error_addr_; }

 private:
  std::unique_ptr<Expr> expr_;
  mutable uint64_t errors_ = 0;
  mutable std::string first_error_;
  mutable uint64_t first_error_addr_ = 0;
};

}  // namespace lr
