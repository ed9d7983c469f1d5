// What the C++ container kinds share once a container's elements are
// found: what a walk's member names (the elements, or the objects a pointer
// in each reaches), node addresses turned into their elements with the
// recorded count checked, and a node container's own blocks. The kinds
// (GCC's and LLVM's libraries) differ in finding the nodes, not in this.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/walks/container_kinds.hpp"

namespace lr {

// The elements themselves ("." or ""), or the objects a pointer reaches:
// the element itself ("*": a vector<Conn*>) or a pointer member path in it
// ("second.px": a map's boost::intrusive_ptr).
struct ElementReach {
  bool deref = false;
  uint64_t offset = 0;           // the pointer's place in the element
  const Type* target = nullptr;  // what it points at
  const Type* objects(const Type* elem) const { return deref ? target : elem; }
};
// `container` names the container in errors.
Result<ElementReach> element_reach(const std::string& container, const Type* elem,
                                   const std::string& member);

// A kind's walk of the elements (`elem_size` bytes each) into `lim`'s sink.
using ElementWalk = std::function<Result<WalkResult>(const WalkLimits& lim)>;
// The walk a member names: the elements, or what their pointers reach
// (null ones skipped; an unreadable pointer is an issue, never a silent
// gap), each of `obj_size` bytes or refused.
Result<WalkResult> walk_reached(const Memory& mem, const std::string& container, const Type* elem,
                                const ElementReach& reach, uint64_t obj_size, const WalkLimits& lim,
                                const ElementWalk& walk_elements);

// Node addresses moved to their elements (`off` into each node), and the
// count the container records (`recorded`; UINT64_MAX: none) against the
// nodes walked: a difference is an issue naming the container at `addr`.
WalkResult node_elements(WalkResult nodes, uint64_t off, uint64_t recorded, uint64_t addr,
                         const std::string& container);

// A node container's own blocks: each node, its element at `off`; a walk
// that stopped early or a recorded count the nodes do not match is the
// blocks' warning.
void add_node_blocks(OwnBlocks* out, const WalkResult& nodes, const Type* elem, uint64_t off,
                     uint64_t recorded, uint64_t addr, const std::string& container);

// A walk of `count` elements refused whole when past the object limit:
// true, with `r` saying so.
bool over_limit(uint64_t count, const WalkLimits& lim, const std::string& container, WalkResult* r);

// A shared_ptr's blocks: its control block `cb`, and its object `obj`
// (make_shared's lies inside the block, just past its counts, within the
// few words an allocator may add; a separate one is a block of its own,
// maybe entered by the aliasing constructor). The object is typed `elem`
// only while an owner lives (`live`): after the last owner, its bytes are
// stale.
void add_shared_blocks(OwnBlocks* out, uint64_t cb, uint64_t obj, const Type* elem, bool live);

}  // namespace lr
