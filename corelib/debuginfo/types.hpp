// C type layouts from DWARF (libdw). Every type is converted once
// and cached; member paths resolve to a FieldLoc (offset, bits, type) that
// walkers apply to raw object bytes without further lookups.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "corelib/base/result.hpp"

typedef struct Dwarf Dwarf;

namespace lr {

class Module;
class ModuleSet;
struct Symbol;

enum class TypeKind {
  kVoid,
  kInt,
  kBool,
  kFloat,
  kPointer,
  kStruct,
  kUnion,
  kEnum,
  kArray,
  kFunction,
  kTypedef
};

struct Type;
class TypeRegistry;

struct Member {
  std::string name;         // "" for an anonymous struct/union member
  uint64_t offset = 0;      // bytes from the start of the enclosing type
  uint16_t bit_offset = 0;  // bitfields: bits from `offset` (little-endian numbering)
  uint16_t bit_size = 0;    // 0 = not a bitfield
  const Type* type = nullptr;
  // A C++ base class subobject (DW_TAG_inheritance): nameless, so its
  // members are found as the derived class's (as anonymous members are).
  bool is_base = false;
};

struct Enumerator {
  std::string name;
  int64_t value = 0;
};

// What is asked of one type again and again, kept with it (a reader of
// millions of containers asks each container's type the same few member
// paths and its C++ name). Defined in member_paths.cpp. A copy of a Type
// (a caller's variant of it) starts with none: its answers may differ.
struct TypeMemo;
struct TypeMemoSlot {
  mutable std::shared_ptr<TypeMemo> memo;
  TypeMemoSlot() = default;
  TypeMemoSlot(const TypeMemoSlot&) {}
  TypeMemoSlot& operator=(const TypeMemoSlot&) {
    memo.reset();
    return *this;
  }
};

struct Type {
  TypeKind kind = TypeKind::kVoid;
  std::string name;  // bare name: "node", "int", "atomic_t"; "" if anonymous
  uint64_t size = 0;
  uint64_t align = 0;            // DW_AT_alignment (alignas); 0: the DWARF gives none
  bool is_signed = false;        // integers, enums (underlying), char
  bool is_char = false;          // char-like integer (arrays of it print as strings)
  bool complete = true;          // false for a struct only ever declared
  const Type* target = nullptr;  // pointer/typedef target, array element
  uint64_t count = 0;            // arrays; 0 with `flexible`
  bool flexible = false;
  std::vector<Member> members;
  // Members the DWARF gives no fixed offset for (a C++ virtual base, whose
  // place is read at run time from the vtable): left out of `members`, and
  // named here so no printed object passes for complete.
  std::vector<std::string> omitted;
  std::vector<Enumerator> enumerators;
  // A C++ class template instance's type parameters, in order
  // (DW_TAG_template_type_param: std::map<int, Node*>'s int, Node*, its
  // comparator and allocator): what its elements are.
  std::vector<const Type*> template_args;
  // A declaration (`struct foo;`) whose definition is looked up when it is
  // first used (strip()), not when a pointer to it is converted: following
  // every pointer eagerly reaches structs defined only in far compile units
  // (or nowhere), which makes the name index scan the whole module.
  mutable TypeRegistry* registry = nullptr;  // set while unresolved
  mutable const Type* definition = nullptr;  // once resolved (itself if none)
  Module* decl_module = nullptr;
  uint64_t decl_off = 0;
  TypeMemoSlot memo;  // resolve_path's and cxx_type_name's answers

  std::string display() const;  // "struct node", "struct node *", "int [4]"
  // Typedefs resolved, and a declaration replaced by its definition;
  // nullptr-safe.
  const Type* strip() const;
  bool is_integer_like() const;  // int, bool, enum, pointer (after strip)
  bool is_aggregate() const;     // struct or union (after strip)
};

// Path into an object: "a.b", "arr[3]", "a->b" (deref), anonymous members
// transparent; "." is the object itself.
struct PathStep {
  enum class Op { kMember, kIndex, kDeref } op = Op::kMember;
  std::string name;
  int64_t index = 0;
};
// Parses a member path; kInvalidArgument with a message pointing at the
// offending character. Never reads memory.
Result<std::vector<PathStep>> parse_member_path(std::string_view path);

// How a refcount type stores its count, when not as the count itself: some
// count from zero (one reference reads 0, so the count is the value + 1)
// and mark a released object by values from `released_from` up (unsigned,
// in the integer's width), whose count is 0.
struct RefEncoding {
  bool zero_based = false;
  uint64_t released_from = 0;
  // The count a stored value means (`width` bytes, sign-extended or not).
  int64_t decode(int64_t raw, unsigned width) const {
    if (!zero_based) return raw;
    const uint64_t mask = width >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1;
    const uint64_t u = static_cast<uint64_t>(raw) & mask;
    return u >= released_from ? 0 : static_cast<int64_t>(u + 1);
  }
};
// Registers the encoding of refcount type `type_name` (a typedef or struct
// name); a target that knows such a type calls it once, before any walk.
void register_refcount_encoding(const std::string& type_name, RefEncoding e);

struct FieldLoc {
  uint64_t offset = 0;
  uint16_t bit_offset = 0;
  uint16_t bit_size = 0;
  const Type* type = nullptr;
  RefEncoding enc;  // set by descend_refcount through a registered type
};

// The member path of the field holding byte `off` of `t`, as C writes it
// after an object: ".link.next", "[30]", ".slots[2].ptr" (anonymous
// members transparent; a char array is a leaf). "" when `off` is outside
// `t` or `t` is not an aggregate or array.
std::string member_path_at(const Type* t, uint64_t off, int depth = 0);

// Bytes a field occupies from loc.offset (bitfields: the bytes its bits span).
uint64_t field_bytes(const FieldLoc& loc);

// Resolves member/index steps within `t` (no "->"). kNotFound names the
// member and the type that lacks it; kBadFormat when the field lies outside
// `t` (corrupt DWARF, or an index past a flexible array).
Result<FieldLoc> resolve_path(const Type* t, const std::vector<PathStep>& steps);
Result<FieldLoc> resolve_path(const Type* t, std::string_view path);

// Like resolve_path, then descends through refcount wrappers to the integer
// inside: atomic_t.counter, refcount_t.refs, kref.refcount, lockref.count,
// gf_atomic_t.value, or a struct's only member. Through a type with a
// registered encoding, the result carries it (loc.enc).
Result<FieldLoc> resolve_refcount(const Type* t, std::string_view path);
// The same descent from an already resolved field `loc` of `t` (`path` only
// names it in messages). kInvalidArgument when no integer can be chosen.
Result<FieldLoc> descend_refcount(const Type* t, FieldLoc loc, std::string_view path);

// Finds a member by name in t, looking through anonymous members; returns its
// accumulated offset. nullptr if absent.
// The names of t's members, those of anonymous members included (for "did
// you mean" messages).
std::vector<std::string> member_names(const Type* t);
const Member* find_member(const Type* t, std::string_view name, uint64_t* offset);

struct Variable {
  std::string name;
  uint64_t addr = 0;
  const Type* type = nullptr;
  Module* module = nullptr;
  // A per-CPU variable (the host's Program::PerCpu says which) named
  // without a CPU: `addr` is its symbol's, no CPU's instance.
  // Program::resolve_place refuses it.
  bool per_cpu = false;
};

class TypeRegistry {
 public:
  // Types are looked up in the modules' DWARF in module order (executable
  // first). The registry borrows `mods`.
  explicit TypeRegistry(ModuleSet* mods);
  ~TypeRegistry();

  // "struct node", "union u", "enum e", "node_t", "unsigned int", with any
  // number of trailing '*'. kNotFound says which modules had DWARF to search.
  Result<const Type*> find(std::string_view name);
  // Types defined at the top level of `m`'s compile unit of source file
  // `unit` ("malloc.c", also as ".../malloc.c"): an allocator's layout must
  // come from its library's own source, not from a program that declares a
  // type of the same name, and one unit is a few thousand DIEs where an
  // index of the whole module (libc's) costs 150 ms. `names` are looked up
  // in one pass; each answer is in its name's place, nullptr when the unit
  // does not define it.
  std::vector<const Type*> find_in_unit(Module* m, std::string_view unit,
                                        const std::vector<std::string_view>& names);
  // The type DIE at `die_off` of `m`'s DWARF (a local variable's
  // DW_AT_type); nullptr when it is none.
  const Type* from_die(Module* m, uint64_t die_off);
  // A global variable: address from the symbol table, type from DWARF.
  Result<Variable> find_variable(std::string_view name);
  // A symbol by name (ModuleSet::lookup); when the program has none but a
  // types file declares a variable of that name, the error says the variable
  // exists but has no address the dump can give.
  Result<std::pair<Module*, const Symbol*>> lookup_symbol(const std::string& name);
  // Canonical built-in integer/pointer types for callers without DWARF.
  const Type* builtin_u64();
  const Type* void_ptr();
  // The definition of declaration `t` (t itself when no module defines it).
  const Type* resolve_declaration(const Type* t);
  // Appended to find()'s kNotFound message: where else such types may come
  // from (the kernel: "a module's types come from its .ko").
  void set_not_found_hint(std::string hint) { not_found_hint_ = std::move(hint); }

  struct Index;

 private:
  std::string not_found_hint_;
  Index* index_for(Module* m);
  // The first definition of `name` (normalized, tagged or not, no stars) in
  // a module's DWARF, as GCC or clang spells a template's arguments; null
  // when none. `searched` lists the modules read.
  const Type* find_defined(const std::string& name, std::string* searched);
  const Type* find_spelled(const std::string& name, std::string* searched);  // as written
  const Type* convert(Module* m, Dwarf* dw, uint64_t die_off);
  // One DIE to a Type (cached by module and offset); nullptr when the
  // offset is not a DIE or nesting is too deep.
  const Type* convert_one(Module* m, Dwarf* dw, uint64_t die_off);
  friend struct DieReader;  // convert_one's per-tag steps (types.cpp)
  void drain_pending();
  const Type* complete_struct(const Type* t, Module* m, uint64_t die_off, TypeKind kind);
  Type* fresh();

  ModuleSet* mods_;
  std::deque<Type> types_;
  std::map<std::pair<Module*, uint64_t>, const Type*> cache_;
  std::map<Module*, std::unique_ptr<Index>> indexes_;
  std::map<const Type*, const Type*> pointer_cache_;  // T -> T *
  struct Pending {
    Type* type;  // a pointer whose target is still to convert
    Module* m;
    Dwarf* dw;
    uint64_t off;
  };
  std::vector<Pending> pending_;
  bool draining_ = false;
  const Type* u64_ = nullptr;
  const Type* voidp_ = nullptr;
};

}  // namespace lr
