// Every Python object of a CPython process core (py_objects.cpp): each
// heap block (pymalloc's and the system allocator's, heap.hpp) that holds
// one, found by its ob_type: a type object whose own type is `type` or a
// subclass of it, ready, with a readable name and sane sizes, whose
// pre-header (the GC head, the managed dict) puts the object where it lies
// in the block, and whose size fits the block. The GC's generation lists
// then mark which of them the GC tracks, and each list entry that is no
// such object is a warning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"
#include "targets/cpython/cpython_layout.hpp"

namespace lr {

struct HeapWalk;
class Memory;
class Program;

struct PyType {
  uint64_t addr = 0;
  std::string name;  // tp_name
  uint64_t basicsize = 0, itemsize = 0, flags = 0;
};

// Whether objects of type `T` hold no reference past their header (a str's,
// a bytes', an int's or a float's words are characters and digits; a
// subclass with a __dict__ is a GC type): a word there that equals an
// address is data, or the allocator's rounding past the object's end.
inline bool holds_no_references(const PyType& T) {
  constexpr uint64_t kLeaf = kTpUnicodeSubclass | kTpBytesSubclass | kTpLongSubclass;
  return !(T.flags & kTpHaveGc) && ((T.flags & kLeaf) || T.name == "float");
}

struct PyObj {
  enum Flag : uint8_t {
    kTracked = 1,   // on a GC generation's list
    kFreeList = 2,  // refcount 0: kept on a free list for reuse, not live
    kInterned = 4,  // a str in the interned dict
    kImmortal = 8,  // 3.12+: its count never changes (PyLayout::immortal)
  };
  uint64_t addr = 0;   // the PyObject*
  uint32_t chunk = 0;  // its block's number in the heap walk
  uint32_t type = 0;   // PyCensus::types
  int64_t refcnt = 0;  // ob_refcnt
  uint32_t bytes = 0;  // its block's usable bytes
  uint8_t flags = 0;
  uint8_t generation = 0;  // the GC generation listing it (3: permanent), when tracked
  bool live() const { return !(flags & kFreeList); }
};

struct PyCensus {
  PyLayout layout;
  std::vector<PyType> types;
  std::vector<PyObj> objects;  // by address (so by block)
  uint64_t tracked = 0;        // objects on the GC's lists
  uint64_t gc_listed = 0;      // entries of the GC's lists
  uint64_t interpreters = 0;
  uint64_t arenas = 0, pymalloc_blocks = 0;  // pymalloc's, and its blocks in use
  // Its requests past 512 bytes, passed on to malloc and not yet freed (its
  // own count; -1 unread): with pymalloc_blocks, sys.getallocatedblocks().
  int64_t raw_blocks = -1;
  std::vector<std::string> warnings;
  // The object at `addr` (the PyObject*); null when none is.
  const PyObj* find(uint64_t addr) const;
  // The object in block number `chunk`; null when none is.
  const PyObj* in_chunk(uint32_t chunk) const;
  const PyType& type(const PyObj& o) const { return types[o.type]; }
  // Per type (as `types`): whether it is `module` (its objects hold a
  // module's dict, name and state). Asked of a type, not of each object's
  // name.
  std::vector<uint8_t> modules() const {
    std::vector<uint8_t> m(types.size());
    for (size_t t = 0; t < types.size(); ++t) m[t] = types[t].name == "module";
    return m;
  }
};

// A block an object keeps apart from itself (a list's items, a dict's keys
// table or split values, 3.11's managed dict values), by its user address,
// with the object (census index) and how far its words are live: a list's
// items past ob_size and a keys table past its dk_nentries entries keep
// older words (list.pop() and del shrink ob_size, not the slots:
// Objects/listobject.c; a table reused from the free list, or the
// allocator's rounding, keeps what was there). `live_end` is the address
// the stale part begins at, UINT64_MAX when all is live.
struct PyOwnedBlock {
  enum Kind : uint8_t { kListItems, kDictKeys, kDictValues, kInstanceValues };
  uint64_t user = 0;
  uint32_t owner = 0;
  Kind kind = kListItems;
  uint64_t live_end = UINT64_MAX;
};
// Every such block among `heap`'s in-use blocks that is no object itself,
// by address (a block two objects name, a shared keys table, once).
std::vector<PyOwnedBlock> python_owned_blocks(const HeapWalk& heap, const Memory& mem,
                                              const PyCensus& c);
// What account calls such a block: "Python list (items)".
std::string python_owned_name(const PyCensus& c, const PyOwnedBlock& b);

// What holds a census already made (the CPython target's block tagger,
// over the heap walk the reference index numbers): asked before one is
// made again.
class CensusHolder {
 public:
  virtual ~CensusHolder() = default;
  virtual const PyCensus& census() const = 0;
};

// The census of `prog`'s objects in `heap` (a walk with pymalloc's layer).
// kNotFound when the process runs no CPython; the layout's refusals
// (python_layout) otherwise.
Result<PyCensus> python_census(const Program& prog, const HeapWalk& heap);

}  // namespace lr
