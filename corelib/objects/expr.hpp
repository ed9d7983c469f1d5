// The expression language shared by `--where` and profile files (holders,
// invariants, labels). C-like, compiled once against an object type, then
// evaluated per object on its bytes:
//
//   literals    42  0x2a  -1  "text"  ENUM_NAME (an enumerator of the type
//               compared with, of any enum member of the object type, or of
//               an enum the caller declares: ExprScope::constant)
//   fields      a.b  a[3]  a->b  (and '.' through a pointer, as gdb allows);
//               refcount wrappers (atomic_t, refcount_t, kref, lockref, ...)
//               read as their integer; other structs are refused
//   names       refcount (the walk's refcount field when the type has no such
//               member), $addr (the object's address), $NAME (a variable the
//               caller binds: a holder's count in a profile invariant)
//   operators   ! ~ -   * / %   + -   << >>   &  ^  |   < <= > >=   == !=
//               && ||   (bit operators bind tighter than comparisons, so
//               'flags & 4 == 0' means '(flags & 4) == 0')
//   functions   count(L)         entries of the list_head/hlist_head member L
//               count(L, PRED)   entries for which PRED holds (element scope,
//                                where $addr is the entry and $owner the object
//                                the list belongs to)
//               sum(L, EXPR)     EXPR summed over the entries (element scope)
//               (PRED/EXPR need L's element type: ElementTypes below)
//
// Evaluation never throws: a NULL or unreadable pointer on a path, a broken
// list or a division by zero yields an error value that says so; `&&`/`||`
// short-circuit, so 'p != 0 && p->x > 1' reads p->x only when p is set.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corelib/base/names.hpp"
#include "corelib/base/result.hpp"
#include "corelib/objects/objects.hpp"

namespace lr {

struct ExprValue {
  enum class Kind { kInt, kString, kError } kind = Kind::kInt;
  int64_t i = 0;
  bool is_unsigned = false;  // compare as unsigned (pointers, unsigned fields)
  std::string s;             // string value, or the error message
  bool truthy() const { return kind == Kind::kInt && i != 0; }
};

// What a list member's entries are: the element type and the offset of the
// link (list_head / hlist_node) inside each element.
struct ListElement {
  const Type* type = nullptr;
  uint64_t link_offset = 0;
  bool hlist = false;  // linked by an hlist_node (else a list_head)
};

// Compile-time knowledge a caller (a profile) adds to the object's DWARF.
struct ExprScope {
  const Type* type = nullptr;           // the object type; null: syntax only
  const FieldSpec* refcount = nullptr;  // what `refcount` names (optional)
  std::vector<std::string> vars;        // names usable as $NAME (bound at eval)
  bool in_list = false;                 // a list entry's scope: $owner is its list's object
  // Member name alternatives: (struct, name) -> the member to use instead;
  // returns "" to keep `name`. Lets one profile span versions.
  std::function<std::string(const Type*, std::string_view)> alias;
  // The element type of list member `path` of `owner`; kNotFound when the
  // caller does not know it (count(L) alone still works then).
  std::function<Result<ListElement>(const Type* owner, std::string_view path)> element;
  // A bare name that is neither a member nor an enumerator reachable in the
  // object type: a constant the caller knows (a profile's declared enums);
  // false when it does not know it either.
  std::function<bool(std::string_view name, int64_t* value)> constant;
  std::string what = "expression";  // names the expression in error messages
};

class Expr {
 public:
  // Parses and resolves `text` in `scope`. Errors are kInvalidArgument (syntax,
  // with the text and a caret under the bad token) or kNotFound (a member or
  // name the type lacks, with a suggestion when one is close).
  static Result<std::unique_ptr<Expr>> compile(std::string_view text, const ExprScope& scope);
  // Syntax only (no types): usage errors before a target is opened; fuzzing.
  // `what` names the expression in messages ("--where").
  static Result<void> check_syntax(std::string_view text, const std::string& what = "expression");
  ~Expr();

  // `obj` holds the object's bytes (the scope type's size), `addr` its
  // address; `vars` the values of scope.vars in order (may be null if none);
  // `owner` what $owner is in a list entry's scope.
  ExprValue eval(const Memory& mem, const uint8_t* obj, uint64_t addr,
                 const int64_t* vars = nullptr, uint64_t owner = 0) const;

  struct Node;

 private:
  std::unique_ptr<Node> root_;
};

// Resolves a member path on `t` like make_field_spec, with `alias` applied at
// every step and '.' allowed through pointers to structs (auto-dereference).
Result<FieldSpec> resolve_field(const Type* t, std::string_view path, bool refcount,
                                const ExprScope* scope);

}  // namespace lr
