// The shared_ptr control blocks in a process core, each with its counts
// and the owners found in memory (shared_census.cpp). A control block is a
// heap block whose vtable's class a registered C++ library calls one of
// its own (walks/shared_layouts: GCC's std::_Sp_counted_*, LLVM's
// __shared_ptr_emplace and __shared_ptr_pointer); its use and weak counts
// are read as that library lays them out. Its owners are the words that
// point at its start (every shared_ptr's and weak_ptr's pointer to its
// block): there should be use_count + weak_count - 1 of them (both
// libraries count the shared owners' one weak reference while any shared
// owner lives).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "corelib/answers/block_names.hpp"
#include "corelib/answers/container_blocks.hpp"
#include "corelib/answers/core_index.hpp"
#include "corelib/base/result.hpp"
#include "corelib/walks/shared_layouts.hpp"

namespace lr {

// A word that points at a control block's start. 16 bytes: a core may hold
// millions (its value is the block's address, its target the block's chunk).
struct SharedOwner {
  uint64_t from = 0;  // the word's address (kRegister: the register's index)
  int32_t tid = 0;    // kStack, kTls, kRegister: the thread
  RefFrom kind = RefFrom::kChunk;
  bool live = false;  // in memory a root reaches (a leaked block's word is not)
  // Past a container's elements (a vector's spare capacity, where an erased
  // shared_ptr left its words): shown, never counted.
  bool stale = false;
  // Of a block with more owners than counted: a word no type says is a
  // shared_ptr's or weak_ptr's (a stack slot, a block of unknown type), so
  // maybe a stale copy, and not taken for proof of an extra owner.
  bool unsure = false;
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
  uint64_t object = 0;        // the managed object (0: the block's DWARF does not say)
  uint64_t size = 0;          // the block's usable bytes
  int32_t use = 0, weak = 0;  // as the library means them (-1: unreadable or past an int)
  uint32_t chunk = 0;         // its heap block's number in the index
  uint32_t cls = 0;           // its class, from its vtable: SharedCensus::classes
  // Its owners, when kept: SharedCensus::owners[owners_begin, owners_end),
  // the roots' first, then by address. `live` of them are, kept or not.
  uint32_t owners_begin = 0, owners_end = 0, live = 0;
  uint32_t unsure = 0;  // live owners of them marked unsure
  bool reached = true;  // a root reaches the block
  SharedVerdict verdict = SharedVerdict::kOk;
  // The owners the counts mean: every shared_ptr and weak_ptr.
  int64_t expected() const { return int64_t{use} + weak - (use > 0 ? 1 : 0); }
};

// One array of owners and one of class names for all the blocks: a core
// may hold millions of blocks, and a vector and a string per block would
// cost more than finding them. Only the blocks listed are kept whole (most
// are ok, and 2 M whole blocks' fresh pages cost more than counting them).
struct SharedCensus {
  // Every block found, as its chunk (ascending: by address) and its counts
  // as judging needs them (found_counts, alike; shared_census.cpp packs
  // them in 32 bits, read once while the block's first line is in cache):
  // what the verdicts are made of, and what names an owner inside another
  // block's object. Two arrays, not one of pairs: the chunks alone are what
  // the index counts owners into, with no copy.
  std::vector<uint32_t> found;
  std::vector<int32_t> found_counts;
  // Each control block's vtable address and its class (classes): a
  // block's class, read again from its first word when it is listed.
  std::unordered_map<uint64_t, int32_t> vtables;
  std::vector<ControlBlock> blocks;     // the listed ones: not ok, or all of them; by address
  std::array<uint64_t, 5> verdicts{};   // every block's, by SharedVerdict
  std::vector<SharedOwner> owners;      // the listed blocks' owners, by block
  std::vector<std::string> classes;     // the blocks' classes
  std::vector<SharedObjectAt> objects;  // where each class keeps its object
  std::vector<std::string> partial;     // the root model's reasons, when it is partial
  uint64_t stale_words = 0;             // words past containers' elements, not counted
  // Blocks with more owners than counted only through unsure words: ok.
  uint64_t unsure_blocks = 0;
  uint64_t count(SharedVerdict v) const { return verdicts[static_cast<size_t>(v)]; }
  std::span<const SharedOwner> owners_of(const ControlBlock& b) const {
    return {owners.data() + b.owners_begin, owners.data() + b.owners_end};
  }
  const std::string& type(const ControlBlock& b) const { return classes[b.cls]; }
  // The owner as the reference index has it, for naming.
  static Ref ref(const ControlBlock& b, const SharedOwner& o);
};

// Every control block of `core` with its owners; an error when a block
// class's counts cannot be read (its library's DWARF lacks their base
// class).
// Every block's owners are counted; the blocks and their owners are kept
// (SharedCensus::blocks, owners) for the blocks that are not ok, or with
// `all_owners` for every block.
Result<SharedCensus> shared_census(const IndexedCore& core, RefNamer& names,
                                   bool all_owners = false);
// An owner's name, made only for the blocks shown (a core may hold
// millions): as refs names the word ("global g_sp._M_refcount._M_pi
// [fx]", "global g_sp.__cntrl_ [fx]"), and a word inside another block's in-place object by that
// object's member ("Cyc 0x...90.next._M_refcount._M_pi (in control block
// 0x...80)"), so that a cycle reads member by member.
std::string shared_owner_name(const IndexedCore& core, RefNamer& names, const SharedCensus& s,
                              const ControlBlock& b, const SharedOwner& o);

}  // namespace lr
