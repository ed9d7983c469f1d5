// What a heap block holds, as far as the core itself says. A C++
// object names its class through its vtable; a caller names what it knows
// (a profile's objects, a target's pools and accounted types); and a block
// whose type is known names the blocks its typed pointer members point at
// (`struct part *part` pointing at a block's start makes that block a
// `struct part`), transitively. leaks groups unreachable blocks by it; refs
// names a referring word by the member it lies in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "corelib/blocks/refindex.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/debuginfo/types.hpp"

namespace lr {

struct BlockType {
  const Type* type = nullptr;  // the DWARF type at `offset` (null: a name only)
  // Kept by the BlockTypes it is set in (one copy of each distinct name: a
  // million nodes of one map share theirs).
  std::string_view name;         // "Widget", "struct part", "dict_t (pool, fuse)"
  std::string_view via;          // how it is known: "vtable", "Widget.part", a program's name
  bool through_pointer = false;  // from a typed pointer of another block (`via` its member)
  // Where `type` lies in the block, and how many of it follow one another:
  // a std::map node's element is past the node's links, a vector's array
  // holds its size's worth.
  uint64_t offset = 0;
  uint64_t count = 1;
  // A container's array (OwnBlock::only_elements): its live words are
  // [offset, live_end), the elements; the others are stale. UINT64_MAX:
  // every word is live.
  uint64_t live_end = UINT64_MAX;
  // A container's own block (a node, an element array): the container's
  // address, which holds it though no word there need point at it (a
  // tree's nodes hang from one another); 0 for any other block.
  uint64_t holder = 0;
  // How many of the `count` elements are live: a vector's size, not its
  // capacity (an empty vector's array still has one for its name).
  uint64_t live_count() const;
  // Byte `off` of the block as a member path of `type` ("[3].next"); ""
  // outside the elements or without a type.
  std::string member_at(uint64_t off) const;
};

class BlockTypes {
 public:
  // Borrows `prog` and `ix` (and the heap `ix` numbers): keep them alive.
  BlockTypes(Program& prog, const RefIndex& ix) : prog_(prog), ix_(ix) {}

  // Chunk `c`'s type; the first one given stays. False when it had one.
  // `t`'s name and via are copied (views of the caller's strings will do).
  bool set(size_t c, BlockType t);
  // Types chunk `c` by its vtable pointer (its first word) when that points
  // into a `_ZTV` symbol; the class's DWARF type when the modules have it.
  // False when the block is not a C++ object with a vtable leakref can name.
  bool from_vtable(size_t c);
  // From each typed chunk whose flag in `within` has bit 0 set, types the
  // chunks (also flagged, untyped) that its pointer members point at the start of,
  // then theirs, breadth first, at most `max_blocks` new types. Pointers to
  // void, char or incomplete types say nothing and are not followed.
  // Returns how many chunks it typed.
  size_t propagate(const std::vector<uint8_t>& within, size_t max_blocks = 10'000'000);
  // Types the chunks that a global's typed pointer (a pointer member of a
  // variable the modules' DWARF describes) points at the start of, as
  // "struct table" via "g_tables[3]". Returns how many it typed.
  size_t from_globals();
  // Types the chunks that the typed pointers of the object of type `t` at
  // `addr` (a stack frame's local, say) point at the start of, as their
  // pointee via `name` and the member. Returns how many it typed.
  size_t from_object(uint64_t addr, const Type* t, const std::string& name);
  // Types the chunk starting at `v` as `pointee` via `name` (a pointer
  // known outside memory: a register's); false when `v` starts no untyped
  // chunk that can hold one.
  bool point_at(uint64_t v, const Type* pointee, const std::string& name);
  // Chunk `c`'s type; nullptr when none is known.
  const BlockType* get(size_t c) const;
  // Each typed chunk's number and type, in no order (f must not type more).
  template <class F>
  void each(F&& f) const {
    for (const auto& [c, t] : types_) f(c, t);
  }
  // Every DWARF type some chunk has, once: a caller looking for one kind
  // of type asks here before visiting every typed chunk.
  const std::unordered_set<const Type*>& distinct_types() const { return distinct_; }
  // Types whose pointer members are not followed by propagate and
  // from_globals: a container's own links (a std::map's node base), whose
  // blocks the container's reader types whole.
  // `link`: the types of a container's links (a list's node base, an
  // iterator), neither looked into nor followed when pointed at (a
  // std::list iterator's node is the list's to type).
  void set_opaque(bool (*opaque)(const Type*), bool (*link)(const Type*) = nullptr) {
    if (opaque_ != opaque || link_ != link) slots_.clear();  // slots found before followed them
    opaque_ = opaque, link_ = link;
  }
  // "Widget" from a vtable symbol "_ZTV6Widget" (demangled); "" when the
  // word is not a pointer into a vtable.
  std::string vtable_class(uint64_t vptr) const;

 private:
  // A pointer member of a type: where it lies and what it points to.
  struct PtrSlot {
    uint64_t offset;
    const Type* pointee;
    std::string path;  // ".part", ".kids[2]"
  };
  const std::vector<PtrSlot>& slots(const Type* t);
  // Whether objects of `t` start with a vtable pointer (g++'s `_vptr.X`
  // member, its own or a first base's): then the block's vtable names its
  // dynamic type, which a pointer's static type may not be.
  bool polymorphic(const Type* t);
  // Types chunk `d`, which a typed pointer of `pointee` points at: by its
  // vtable when the class has one, else as `pointee` via `path`.
  bool type_pointee(size_t d, const Type* pointee, std::string path);

  Program& prog_;
  const RefIndex& ix_;
  std::unordered_map<uint32_t, BlockType> types_;
  // The names and vias types_ views (node-based: a kept string never moves).
  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_set<std::string, ViewHash, std::equal_to<>> kept_;
  std::string_view keep(std::string_view s);
  std::unordered_map<const Type*, std::vector<PtrSlot>> slots_;
  std::unordered_map<const Type*, bool> polymorphic_;
  std::unordered_set<const Type*> distinct_;
  const Type* last_type_ = nullptr;  // the last one added to distinct_ (runs of one type)
  bool (*opaque_)(const Type*) = nullptr;
  bool (*link_)(const Type*) = nullptr;
};

}  // namespace lr
