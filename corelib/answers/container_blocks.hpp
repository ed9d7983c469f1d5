// The heap blocks C++ containers allocated for themselves (a std::map's
// nodes, a vector's array, a hash table's buckets, a string's characters),
// named by the container and what holds it: "node of std::map<int, Node*>
// g_map", "elements of std::vector<long> Registry.items". The account, the
// retained-size tree and leaks then group C++ memory by what holds it
// instead of filing it as unknown. The container kinds targets register
// say which types are containers and which blocks each one owns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corelib/answers/core_index.hpp"
#include "corelib/blocks/blocktypes.hpp"

namespace lr {

struct ContainerTyping {
  uint64_t containers = 0;  // containers read
  uint64_t blocks = 0;      // blocks typed by them
  // A container read in part (a damaged tree, a count its nodes do not
  // match) or not at all: its blocks may be left untyped. The first few.
  std::vector<std::string> warnings;
  uint64_t warning_count = 0;
};

// Whether some registered container kind holds objects of type `t`.
bool is_container_type(const Type* t);
// Whether `t` is a registered container kind's link (ContainerKind::link).
bool is_container_link(const Type* t);

// The heap's types as far as the core says (for the tree and the account):
// the containers held by globals, the globals' typed pointers, then typed
// pointers from every typed block and the containers inside typed blocks,
// round after round until nothing more is typed. Breadth first with
// queues, never recursion over data; at most `max_blocks` typed by
// containers. Blocks already typed keep their type. With `within`, only
// blocks flagged there (bit 0) are typed, from the typed ones among them
// (leaks: the leaked blocks), and globals are not read.
ContainerTyping type_heap_blocks(const IndexedCore& core, BlockTypes& types,
                                 const std::vector<uint8_t>* within = nullptr,
                                 uint64_t max_blocks = 100'000'000);

// Whether `prog` may hold some registered kind's containers (its modules
// define a kind's runtime symbol, or a kind names none).
bool may_hold_containers(Program& prog);

// Reachability with the heap typed by its containers first, when the
// program may hold any (else plain reachable()): the words past a
// container's elements hold nothing. `types` keeps the typing.
struct TypedReach {
  std::vector<uint8_t> reach;              // as RefIndex::reachable
  std::vector<RefIndex::LiveExtent> live;  // the extents it kept to; empty: none
  bool typed = false;                      // the whole heap was typed
  ContainerTyping typing;                  // when typed
};
TypedReach typed_reach(const IndexedCore& core, BlockTypes& types);

// The typed blocks whose words are live only in part (a vector's array:
// its elements, not its spare capacity, where erased elements' words
// stay), sorted by chunk: for RefIndex::reachable and live_rows, so that
// such words hold nothing (a cycle of shared_ptrs erased from a vector is
// still leaked). Empty when no container has such words.
std::vector<RefIndex::LiveExtent> live_extents(const BlockTypes& types);
// The program targets' live spans (BlockTagger::live_spans: a Python
// list's items past its length) added to `live`, which stays sorted by
// chunk; a chunk the typing bounded keeps its extent.
void add_tagger_spans(const IndexedCore& core, std::vector<RefIndex::LiveExtent>& live);
// Whether the word at `at`, in chunk `c` starting at `user`, lies outside
// its extent in `live` (sorted by chunk): past a container's elements, so
// stale.
bool past_live_extent(const std::vector<RefIndex::LiveExtent>& live, size_t c, uint64_t user,
                      uint64_t at);
// The words of `refs` (a block's referrers) past a container's elements,
// moved to `stale`: no reference, as leaks has them.
void set_past_extents_aside(const RefIndex& ix, const std::vector<RefIndex::LiveExtent>& live,
                            std::vector<Ref>* refs, std::vector<Ref>* stale);

}  // namespace lr
