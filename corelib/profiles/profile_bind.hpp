// Binding a profile's names to a target's DWARF: declared types, member
// alternatives and optional members, list element types. Shared by the
// profile runner's phases.
#pragma once

#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "corelib/objects/expr.hpp"
#include "corelib/profiles/profile.hpp"

namespace lr {

struct BoundType {
  const ProfileType* decl = nullptr;  // null: a C type named directly by a set
  std::string c;                      // the C type's name
  const Type* type = nullptr;
  std::map<std::string, std::string> alias;  // name -> the member present
  std::set<std::string> missing;             // optional members the target lacks
  std::map<std::string, int64_t> constants;  // enumerators of the declared `enums` present
  bool fallback = false;                     // decl's `c` fell back to another declaration's struct
};

class ProfileBinder {
 public:
  ProfileBinder(Program& prog, const Profile& p);
  // The bound type of a [types] name or a C type; kNotFound names what the
  // target lacks (a type, or every alternative of a required member).
  Result<BoundType*> bind(const std::string& name);
  // The scope expressions of `bt` compile in (aliases, list element types,
  // declared enums' constants).
  ExprScope scope(const BoundType* bt, const std::string& what) const;
  // Named expression `name` of `bt`'s declaration (its `exprs`): the first
  // alternative that compiles on the target. kNotFound when the type
  // declares no such expression or none of its alternatives compiles (each
  // one's error is named).
  Result<std::unique_ptr<Expr>> named_expr(const BoundType* bt, const std::string& name) const;
  // A named expression that is a constant (a literal, or an enumerator the
  // type's `enums` declare), evaluated on no object: kInvalidArgument when it
  // reads the object or is not an integer.
  Result<int64_t> constant(const BoundType* bt, const std::string& name) const;
  // A [symbols] name's address: the first alternative the target has
  // (a name not in [symbols] is looked up as it is). kNotFound names each.
  Result<uint64_t> symbol(const std::string& name) const;
  // The same with its DWARF type when known (null type otherwise).
  Result<Variable> variable(const std::string& name) const;
  const MemberAlias& alias() const { return alias_; }
  // The optional member of `bt` that `text` names and the target lacks, or
  // "": what uses it is skipped with a note instead of failing. Names
  // followed by '(' (functions) and string literals are not members.
  static std::string uses_missing(const BoundType* bt, const std::string& text);

 private:
  Error fail(Errc c, const std::string& what) const;
  Result<void> share(BoundType& b, const ProfileType& decl);
  Result<void> require(BoundType& bt);
  Result<ListElement> element(const Type* owner, std::string_view path);

  Program& prog_;
  const Profile& p_;
  std::deque<BoundType> store_;              // stable addresses
  std::map<std::string, BoundType*> bound_;  // by [types] name or C name
  std::unordered_map<const Type*, BoundType*> by_type_;
  MemberAlias alias_;
  std::function<Result<ListElement>(const Type*, std::string_view)> element_;
};

// A root found by content (ProfileSet::find_*): the one object of `bt`'s
// type in the module's writable data that the set's find rule picks.
// kNotFound when nothing (or no such module), kBadFormat when several
// places satisfy it (named), kUnsupported without a process core. Messages
// name the set.
Result<Variable> find_object(Program& prog, const ProfileBinder& bind, const BoundType* bt,
                             const ProfileSet& s);

}  // namespace lr
