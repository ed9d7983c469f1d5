// libstdc++'s shared_ptr control blocks in a process core, each with its
// counts and the owners found in memory (shared_census.cpp). A control
// block is a heap block whose vtable is one of std::_Sp_counted_*
// (make_shared's in-place block, a separate pointer block, a custom
// deleter's); its _M_use_count and _M_weak_count are read through the
// program's DWARF of std::_Sp_counted_base. Its owners are the words that
// point at its start (every shared_ptr's and weak_ptr's _M_refcount._M_pi):
// there should be use_count + weak_count - 1 of them (libstdc++ counts the
// shared owners' one weak reference while any shared owner lives).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corelib/answers/block_names.hpp"
#include "corelib/answers/container_blocks.hpp"
#include "corelib/answers/core_index.hpp"
#include "corelib/base/result.hpp"

namespace lr {

struct SharedOwner {
  Ref ref;            // the word (ref.from: a shared_ptr's or weak_ptr's _M_pi)
  bool live = false;  // in memory a root reaches (a leaked block's word is not)
  // Past a container's elements (a vector's spare capacity, where an erased
  // shared_ptr left its words): shown, never counted.
  bool stale = false;
};

enum class SharedVerdict {
  kOk,           // the owners found are the count
  kLeakedOwner,  // counted references no live owner holds: a shared_ptr in a leaked block,
                 // or new'd and never deleted
  kExtraOwner,   // more owners than counted: one will outlive the object
  kLeaked,       // no root reaches the block: a cycle of shared_ptrs, or its last owner leaked
  kCorrupt,      // counts no program reaches (negative, or past 2^28): not a live block
};
const char* shared_verdict_name(SharedVerdict v);

struct ControlBlock {
  uint64_t addr = 0;
  uint64_t object = 0;  // the managed object (0: the block's DWARF does not say)
  uint64_t size = 0;    // the block's usable bytes
  std::string type;     // its class, from its vtable
  int64_t use = 0, weak = 0;
  bool reached = true;  // a root reaches the block
  std::vector<SharedOwner> owners;
  SharedVerdict verdict = SharedVerdict::kOk;
  // The owners the counts mean: every shared_ptr and weak_ptr.
  int64_t expected() const { return use + weak - (use > 0 ? 1 : 0); }
  uint64_t live_owners() const;
};

struct SharedCensus {
  std::vector<ControlBlock> blocks;  // by address
  std::vector<std::string> partial;  // the root model's reasons, when it is partial
  uint64_t stale_words = 0;          // words past containers' elements, not counted
};

// Every control block of `core` with its owners. kNotFound when the
// program's DWARF has no std::_Sp_counted_base.
Result<SharedCensus> shared_census(const IndexedCore& core, RefNamer& names);
// An owner's name, made only for the blocks shown (a core may hold
// millions): as refs names the word ("global g_sp._M_refcount._M_pi
// [fx]"), and a word inside another block's in-place object by that
// object's member ("Cyc 0x...90.next._M_refcount._M_pi (in control block
// 0x...80)"), so that a cycle reads member by member.
std::string shared_owner_name(const IndexedCore& core, RefNamer& names, const SharedCensus& s,
                              const SharedOwner& o);

}  // namespace lr
