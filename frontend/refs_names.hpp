// Names for referring words and heap blocks, for refs and leaks: a global
// and its member, a thread's stack frame, TLS, a register, a block and the
// member of the object it holds (a C++ class by its vtable, a profile's
// object, a GlusterFS pool or GF_MALLOC type).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "corelib/blocks/blocktypes.hpp"
#include "corelib/blocks/refindex.hpp"
#include "corelib/debuginfo/unwind.hpp"
#include "targets/glusterfs/gluster.hpp"

namespace lr {
struct Profile;
}

namespace lrcli {

// A GlusterFS process's blocks named by what made them (mem-pool objects,
// GF_MALLOC's accounted types); empty for other programs, or when the
// GlusterFS types cannot be had (a warning says why).
struct GlusterNames {
  std::unique_ptr<lr::GlusterReport> report;  // the namer borrows it: a stable address
  std::unique_ptr<lr::GfBlockNamer> namer;
};
// `itables`: the inode tables are read too (an account's inode LRU).
GlusterNames gluster_names(lr::Program& prog, std::vector<std::string>* warnings,
                           bool itables = false);

// The objects of a profile's sets, by address: a referring word inside one
// is named by the set and the member it lies in.
class KnownObjects {
 public:
  // Runs `p` (only `sets` when not empty) on `prog` and keeps each object's
  // address, size, type and set. The profile's errors (a type the target
  // lacks) are returned.
  lr::Result<void> add_profile(lr::Program& prog, const lr::Profile& p,
                               const std::vector<std::string>& sets);
  struct Object {
    uint64_t addr = 0, size = 0;
    const lr::Type* type = nullptr;
    std::string set;
  };
  // The innermost object holding byte `a`; nullptr when none does.
  const Object* at(uint64_t a) const;
  size_t size() const { return objs_.size(); }
  const std::vector<Object>& all() const { return objs_; }

 private:
  std::vector<Object> objs_;  // by address once add_profile returns
};

// Names referring words; unwinds each thread once, on first use.
class RefNamer {
 public:
  // Borrows all four (`known` and `gf` may be empty): keep them alive.
  RefNamer(lr::Program& prog, const lr::RefIndex& ix, const KnownObjects& known,
           const GlusterNames& gf)
      : prog_(prog), ix_(ix), known_(known), gf_(gf), types_(prog, ix) {}

  // "global g_list [fx_leaks]", "thread 12 stack at 0x... (sp+0x28), frame #1
  // holder_thread(void*)+0x2f [fx_leaks]", "struct obj.next of 0x... (set
  // objs)", "chunk 0x...+0x8 (48 bytes, Widget Widget.part)".
  std::string describe(const lr::Ref& r);
  // {"kind", "what", "value", "from" | "register", "tid"}
  nlohmann::json ref_json(const lr::Ref& r);
  // What chunk `c` holds ("Widget", "dict_t (pool, fuse)", "struct obj
  // (set objs)"); "" when not known.
  std::string block_type(size_t c);
  lr::BlockTypes& types() { return types_; }

 private:
  std::string frame_text(int tid, uint64_t addr);
  lr::Program& prog_;
  const lr::RefIndex& ix_;
  const KnownObjects& known_;
  const GlusterNames& gf_;
  lr::BlockTypes types_;
  std::map<int, std::vector<lr::StackFrame>> frames_;
};

// The word a reference read (registers: as recorded).
uint64_t ref_value(const lr::Program& prog, const lr::Ref& r);

}  // namespace lrcli
