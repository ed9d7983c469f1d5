// Names for referring words and heap blocks, for refs, leaks and account: a
// global and its member, a thread's stack frame, TLS, a register, a block and
// the member of the object it holds (a C++ class by its vtable, a profile's
// object, what the program's target says it made the block as).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "corelib/answers/container_blocks.hpp"
#include "corelib/answers/core_index.hpp"
#include "corelib/base/names.hpp"
#include "corelib/blocks/blocktypes.hpp"
#include "corelib/blocks/refindex.hpp"
#include "corelib/debuginfo/frame_vars.hpp"
#include "corelib/debuginfo/unwind.hpp"
#include "corelib/profiles/profile.hpp"

namespace lr {

// The objects of a profile's sets, by address: a referring word inside one
// is named by the set and the member it lies in.
class KnownObjects {
 public:
  // Runs `p` (only `sets` when not empty) on `prog` and keeps each object's
  // address, size, type and set. The profile's errors (a type the target
  // lacks) are returned.
  Result<void> add_profile(Program& prog, const Profile& p, const std::vector<std::string>& sets);
  struct Object {
    uint64_t addr = 0, size = 0;
    const Type* type = nullptr;
    std::string set;
  };
  // The innermost object holding byte `a`; nullptr when none does.
  const Object* at(uint64_t a) const;
  // The first object starting inside chunk `c`; nullptr when none does.
  const Object* in_block(const HeapChunk& c) const;
  size_t size() const { return objs_.size(); }
  const std::vector<Object>& all() const { return objs_; }

 private:
  std::vector<Object> objs_;  // by address once add_profile returns
};

// Names referring words; unwinds each thread once, on first use.
class RefNamer {
 public:
  // Borrows both (`known` may be empty): keep them alive.
  RefNamer(const IndexedCore& core, const KnownObjects& known)
      : core_(core), known_(known), types_(*core.prog, *core.ci.index) {
    // A container's own links are not typed pointers: its reader types
    // its blocks (container_blocks.hpp).
    types_.set_opaque(&is_container_type);
  }

  // "global g_list [fx_leaks]", "thread 12 stack at 0x... (sp+0x28), frame #1
  // holder_thread(void*)+0x2f [fx_leaks]", "struct obj.next of 0x... (set
  // objs)", "chunk 0x...+0x8 (48 bytes, Widget Widget.part)".
  std::string describe(const Ref& r);
  // What holds root reference `r`, as one node of a retained-size tree:
  // "global g_table [fx]", "thread 12 frame #1 handle(req*) [fx]", "thread
  // 12 TLS", "thread 12 registers", "writable mapping 0x...-0x...". `key`
  // (may be null) gets the same without what changes from run to run (the
  // thread id, a frame's number, a mapping's address): "stack handle(req*)
  // [fx]", to match holders across dumps.
  std::string holder(const Ref& r, std::string* key);
  // What chunk `c` holds ("Widget", "dict_t (pool, fuse)", "struct obj
  // (set objs)"); "" when not known.
  std::string block_type(size_t c);
  // Types the containers' blocks (type_heap_blocks over the whole heap),
  // once; block_type and describe then name them.
  void type_containers();
  // The container that allocated chunk `c` (its address), for a chain
  // from a root that takes a container's nodes as one step; 0: none (or
  // the containers not typed).
  uint64_t container_of(size_t c) const;
  uint64_t block_start(size_t c) const { return core_.ci.index->heap().in_use[c].user; }
  BlockTypes& types() { return types_; }

 private:
  std::string frame_text(int tid, uint64_t addr);
  std::string frame_function(int tid, uint64_t addr, int* number);
  // "local run_server()::terminal.fb.rows._M_impl._M_start": the frame
  // variable (and its member) holding stack word `addr`; "" when none does.
  std::string local_text(int tid, uint64_t addr);
  const std::vector<StackFrame>& frames(int tid);
  std::string describe_in_block(const Ref& r);
  std::string describe_whole(const Ref& r);
  const IndexedCore& core_;
  bool containers_typed_ = false;
  const KnownObjects& known_;
  BlockTypes types_;
  std::map<int, std::vector<StackFrame>> frames_;
  std::map<std::pair<int, int>, std::vector<FrameVariable>> locals_;  // (tid, frame)
};

// The word a reference read (registers: as recorded).
uint64_t ref_value(const Program& prog, const Ref& r);

}  // namespace lr
