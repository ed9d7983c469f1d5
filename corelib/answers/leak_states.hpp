// Each heap block's state, as leaks, account and the snapshots decide it
// alike: live (a root reaches it), leaked (nothing live does: unreferenced
// when nothing at all points into it, else referenced only by leaked
// blocks), or free in the program's own pool (neither). Leaked blocks are
// typed as far as the core says: by vtable, by what the program's target
// says it made them as, then through typed pointers among leaked blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "corelib/analyses/account.hpp"
#include "corelib/answers/block_names.hpp"
#include "corelib/answers/container_blocks.hpp"
#include "corelib/answers/core_index.hpp"

namespace lr {

// Per block: leaked (bit 0), referenced by something (bit 1), or free in a
// program's pool (4: neither live nor leaked); 0 for a live block. One byte
// per block.
constexpr uint8_t kLeaked = 1, kRefd = 2, kPoolFree = 4;
struct LeakStates {
  std::vector<uint8_t> state;
  uint64_t pool_free = 0;
  // Whether the whole heap was typed by its containers first (typed_reach),
  // and what that said of containers read in part: a caller that wants
  // the heap typed has it in `names` already.
  bool typed = false;
  ContainerTyping typing;
};
// Reachability leaves out the words past a container's elements (a
// vector's spare capacity), so a cycle erased from a vector is leaked.
// `reach`: typed_reach(core, names.types()) when the caller made it
// (taken from); null: made here.
LeakStates find_leaks(const IndexedCore& core, RefNamer& names, TypedReach* reach = nullptr);

// Each in-use block's class for the account (pooled, leaked, live).
std::vector<ChunkClass> chunk_classes(const IndexedCore& core, const LeakStates& ls);

// The account's input for `core` with its blocks classed by `ls`, and the
// memory its program manages outside the heap (with what of it could not
// be read in `warnings`). No breakdown: the caller sets key_of.
AccountInput account_input(const IndexedCore& core, const LeakStates& ls,
                           std::vector<std::string>* warnings);

// The blocks of each type, as `account --by type` names them: containers'
// blocks by what holds them ("node of std::map<int, Point*> g_owned"), typed
// pointers' targets, vtables' classes. Only typed blocks (the rest are in
// the heap's size classes); a pool's free objects are no type's.
struct TypeTally {
  std::string type;
  uint64_t blocks = 0, bytes = 0;
};
struct TypeTallies {
  std::vector<TypeTally> rows;
  std::vector<std::string> warnings;  // containers read in part: their blocks may be untyped
};

// The core's account without a breakdown (the categories' sums), for the
// snapshots diff, trend and batch compare: `heap` indexed (leaks'
// reachability), or a program target's own walk when it made one. With
// `types`, also the blocks by type, from the same index.
Result<Account> plain_account(Program& prog, const HeapWalk& heap, TypeTallies* types = nullptr);

}  // namespace lr
