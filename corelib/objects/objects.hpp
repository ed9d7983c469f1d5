// Typed views of target memory. A FieldSpec is resolved once per
// walk (type lookups, offsets); evaluating it per object only reads bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/types.hpp"
#include "corelib/dump/memory.hpp"

namespace lr {

class ModuleSet;

struct FieldValue {
  enum class Kind {
    kSigned,
    kUnsigned,
    kBool,
    kPointer,
    kEnum,
    kString,
    kUuid,
    kFloat,
    kAggregate,
    kError
  };
  Kind kind = Kind::kError;
  int64_t s = 0;
  uint64_t u = 0;
  double f = 0;
  std::string text;        // enum name, string, uuid, error, aggregate type name
  bool truncated = false;  // strings cut short
  // As an integer when the value is integer-like (signed/unsigned/bool/enum/pointer).
  bool as_int(int64_t* out) const;
  std::string to_string() const;  // human form: 42, 0x7f.., "text", NAME(3), <error: ...>
};

// A member path from an object type, possibly crossing pointers ("a->b.c").
struct FieldSpec {
  std::string path;
  std::vector<FieldLoc> hops;  // hop i>0 starts at the pointer read at hop i-1
  const Type* type = nullptr;  // final field type
  bool is_refcount = false;
};

// Member name alternatives: (struct, name) -> the member to use instead, or
// "" to keep `name` (a profile's `d_children|d_subdirs`).
using MemberAlias = std::function<std::string(const Type*, std::string_view)>;

// Resolves `path` on `t`: "a.b", "a[3]", "a->b", and '.' through a pointer to
// a struct (as gdb and drgn allow), with `alias` (may be null) applied at
// every member step. `refcount` descends wrappers (atomic_t, kref, ...) to
// the integer. kNotFound names the member and the type that lacks it;
// kInvalidArgument a step that does not fit (indexing a non-array, '->' on a
// non-pointer); kBadFormat a field outside its type (corrupt DWARF).
Result<FieldSpec> make_field_spec(const Type* t, std::string_view path, bool refcount = false,
                                  const MemberAlias* alias = nullptr);

// An integer field compiled once from a FieldLoc (width, sign and bits
// resolved), so reading it per object is a load and a shift.
struct IntField {
  uint64_t offset = 0;
  uint16_t bit_offset = 0, bit_size = 0;
  uint8_t width = 8;  // bytes, for whole-byte fields (1..8)
  bool is_signed = false;
  RefEncoding enc;  // a count stored from zero is read as the count
  static IntField of(const FieldLoc& loc);
  // Sign- or zero-extended, and decoded (enc). Whole 4- and 8-byte fields
  // (nearly every refcount) take the inline path: walks read one per object.
  int64_t load(const uint8_t* obj) const {
    if (!bit_size && width == 4 && !enc.zero_based) {
      uint32_t v;
      std::memcpy(&v, obj + offset, 4);
      return is_signed ? int64_t{static_cast<int32_t>(v)} : int64_t{v};
    }
    if (!bit_size && width == 8 && !enc.zero_based) {
      int64_t v;
      std::memcpy(&v, obj + offset, 8);
      return v;
    }
    return enc.decode(load_any(obj), bit_size ? 8 : width);
  }
  int64_t load_any(const uint8_t* obj) const;  // every width and bitfield
};

// Raw integer at `loc` in `obj` (bitfields, sign extension, enums, bools).
// (A refcount field's encoding, loc.enc, applies: the count it means.)
inline uint64_t load_field_u(const uint8_t* obj, const FieldLoc& loc) {
  IntField f = IntField::of(loc);
  f.is_signed = false;
  return static_cast<uint64_t>(f.load(obj));
}
inline int64_t load_field_s(const uint8_t* obj, const FieldLoc& loc) {
  IntField f = IntField::of(loc);
  f.is_signed = true;
  return f.load(obj);
}

// Evaluates `spec` on an object whose bytes (type size) are `obj`; hops
// across pointers read `mem`.
FieldValue eval_field(const Memory& mem, const uint8_t* obj, const FieldSpec& spec);
// Whether eval_field gives a field of this (declared) type as text: char
// arrays, char pointers, uuid_t-like arrays.
bool field_is_text(const Type* declared);
// The address of the field `spec` names in the object at `addr` (bytes
// `obj`), following its pointer hops; kFault names a NULL or unreadable hop.
Result<uint64_t> field_address(const Memory& mem, const uint8_t* obj, uint64_t addr,
                               const FieldSpec& spec);

// Intrusive list shapes, whatever the structs are called: a list_head (next
// and prev pointing to its own type), an hlist_node (next to its own type,
// pprev to a pointer to it), an hlist_head (first, a pointer to an
// hlist_node shape).
bool is_list_head_shape(const Type* t);
bool is_hlist_node_shape(const Type* t);
bool is_hlist_head_shape(const Type* t);
// Whether `a` and `b` are one type: the same object, or the same kind, size
// and name (a struct seen from two compile units is two Type objects).
bool same_type(const Type* a, const Type* b);
// The value of the field at `loc` in object bytes `obj` (integers, enums,
// pointers, char arrays as strings, uuid_t; aggregates by type name).
FieldValue format_scalar(const uint8_t* obj, const FieldLoc& loc);

// An object's values as a tree: scalars at the leaves; struct, union and
// array nodes have children. Built by value_tree for every renderer.
struct ValueNode {
  std::string name;  // member name; "" for anonymous members and array elements
  const Type* type = nullptr;
  FieldValue value;  // kAggregate for nodes with children (or cut by depth)
  bool is_array = false;
  uint64_t more = 0;  // array elements not expanded (per-array cap)
  std::vector<ValueNode> children;
};

struct TreeLimits {
  int max_depth = 8;
  uint64_t max_array = 64;      // elements expanded per array
  uint64_t max_nodes = 100000;  // nodes in the whole tree (nested arrays multiply)
};

// The values of an object whose `size` bytes are `obj`. Members that lie
// outside those bytes (corrupt DWARF) become error values; past
// max_nodes the tree is cut with an error leaf.
ValueNode value_tree(const uint8_t* obj, uint64_t size, const Type* t, const TreeLimits& lim = {});

// Renders an object like crash's `struct` command (gdb pretty print):
//   struct node {
//     refcount = 2,
//     name = "a",
//     ...
//   }
// Pointers that hit a symbol are annotated when `mods` is given.
std::string format_object(const Memory& mem, uint64_t addr, const Type* t, ModuleSet* mods,
                          int max_depth = 8);

// Objects larger than this are refused (sizes come from DWARF, which may be corrupt).
constexpr uint64_t kMaxObjectSize = 64ull << 20;

// The object's bytes, via the fast path or a copy into `scratch`; nullptr if
// unreadable or larger than kMaxObjectSize.
const uint8_t* object_bytes(const Memory& mem, uint64_t addr, size_t size,
                            std::vector<uint8_t>& scratch);

}  // namespace lr
