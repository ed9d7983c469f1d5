// The references to a Python object named as a Python user writes them:
// "module app.cache, global _CACHE['k42']", "frame handle() line 88, local
// req", "module __main__, global LEAVES[7].name". A word is named by the
// layout of what holds it: a dict's entries (its keys table, or a split
// table's values), a list's items, a tuple's, an instance's attributes
// (3.11's values before the object, named by its class's shared keys), a
// frame's local slots. Its path is the shortest chain of such words
// up from the object to a module's globals, a thread's frame, or (last) a
// C root, found by a bounded search over the reference index, without the
// GC's own links.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "corelib/answers/block_names.hpp"
#include "corelib/answers/core_index.hpp"
#include "targets/cpython/py_frames.hpp"
#include "targets/cpython/py_objects.hpp"
#include "targets/cpython/py_reconcile.hpp"
#include "targets/cpython/py_values.hpp"

namespace lr {

struct PyHolder {
  uint64_t from = 0;  // the word's address
  std::string name;   // the word, named from its anchor
  bool root = false;  // a root's word (a frame's slot, a C global, a stack)
};

class PyNamer {
 public:
  // Borrows all three: keep them alive.
  PyNamer(const IndexedCore& core, const PyCensus& census,
          const std::vector<PyThreadStack>& stacks);
  ~PyNamer();
  // Every live word holding object `o` (not the GC's links), named.
  std::vector<PyHolder> holders(const PyObj& o) const;
  // The object's own shortest name ("" when nothing names it).
  std::string path(const PyObj& o) const;

 private:
  struct Aux {
    PyOwnedBlock::Kind kind;
    uint32_t owner;  // census.objects
  };
  struct Parent {
    uint32_t to;    // the block the word points into
    uint64_t from;  // the word
  };
  void index_owners();
  // The name of the word at `from` in block `src` that points into `dst`,
  // appended to `out`; `mode` carries how the next key is written.
  enum class Mode { kPlain, kGlobal, kAttr };
  void step(uint32_t src, uint64_t from, Mode& mode, std::string& out) const;
  const char* closure_attr(const PyType& T, uint64_t off) const;
  void attribute(const PyObj& owner, uint64_t vals, uint64_t from, Mode& mode,
                 std::string& out) const;
  void dict_key(uint32_t dict, uint64_t from, bool values, Mode& mode, std::string& out) const;
  std::string key_text(uint64_t key, Mode& mode) const;
  // A root word's anchor: a frame's local ("" when not in a frame).
  std::string frame_slot(uint64_t from) const;
  std::string root_text(const Ref& r) const;
  struct Named {
    std::string text;
    Mode mode = Mode::kPlain;  // how a key of the block named is written
  };
  // Up from block `c`: its anchor and the chain of words down to `c`
  // (empty when nothing reaches it).
  Named search(uint32_t c) const;
  Named compose(std::string anchor, Mode mode, uint32_t from_block,
                const std::unordered_map<uint32_t, Parent>& parent, uint32_t target) const;
  std::string unnamed(uint32_t block) const;
  bool gc_link(const Ref& r) const;
  bool usable(Ref r, uint32_t dst) const;
  const PyObj* object(uint32_t chunk) const;

  const IndexedCore& core_;
  const RefIndex& ix_;
  const PyCensus& c_;
  const PyLayout& L_;
  PyValues v_;
  const std::vector<PyThreadStack>& stacks_;
  struct FrameRange {
    uint64_t begin, end;  // the frame's header to the end of its value stack
    const PyFrame* frame;
  };
  std::vector<FrameRange> frames_;                      // by address
  std::unordered_map<uint32_t, Aux> aux_;               // by block
  std::unordered_map<uint32_t, uint64_t> spare_;        // live_end of python_owned_blocks
  std::unordered_map<uint32_t, std::string> modules_;   // a module's dict block: its name
  std::unordered_map<uint64_t, uint32_t> instance_of_;  // an instance's dict: the instance
  std::vector<uint32_t> obj_of_;                        // block -> census.objects (or none)
  KnownObjects none_;
  std::unique_ptr<RefNamer> roots_;
  mutable size_t spent_ = 0;  // blocks the searches have visited
};

}  // namespace lr
