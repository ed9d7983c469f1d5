// References into one object counted as a refcount counts them: holders.
// A list ring holds an object through two words (one neighbour's next, the
// other's prev), an hlist through two (the previous next or head, the next
// node's pprev), a tree through the parent's child pointer with the
// children's parent words pointing back; each of those is one membership,
// one reference. Shared by every command that sets references found against
// a refcount (walk --reconcile, profile --reconcile, correlate).
#pragma once

#include <cstdint>
#include <vector>

#include "corelib/blocks/refindex.hpp"
#include "corelib/dump/memory.hpp"

namespace lr {

struct HolderCount {
  uint64_t holders = 0;      // memberships, plus every other word
  uint64_t words = 0;        // the words given
  uint64_t memberships = 0;  // link nodes whose words count once
};

// `refs` point into one object (RefIndex::refs_into). The words pointing at
// one address X that X's own first three words point back at (at the word,
// or 8 or 16 bytes before it: a list_head's next/prev, an hlist_node's
// next/pprev, a tree node's parent/left/right) are link words of one
// membership: one holder, or none when another word there holds X already
// (a tree's root pointer besides its children's parent words).
HolderCount count_holders(const Memory& mem, const std::vector<Ref>& refs);

}  // namespace lr
