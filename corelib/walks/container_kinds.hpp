// Containers a target knows (a program's own hash table, say): each walks
// from its head to its objects and is registered under the name a profile's
// `link` and the walk command use. The engine's own links (lists, arrays,
// trees, xarrays) are not registered: they are WalkSpec's other modes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/walkers.hpp"

namespace lr {

// A heap block a container allocated for itself: a node, its element
// array, its bucket array, a string's characters.
struct OwnBlock {
  uint64_t addr = 0;           // the block's start, as the allocator returned it
  const char* role = "";       // "node", "elements", "buckets", "characters"
  const Type* elem = nullptr;  // the elements in it (null: none, as buckets)
  uint64_t elem_offset = 0;    // where the first lies in the block
  uint64_t elem_count = 0;     // how many follow one another
  // The block holds nothing but its elements (a vector's array, a deque's
  // buffer): its words outside them (a vector's spare capacity) are stale.
  bool only_elements = false;
  // The container's pointer may point into a block rather than at its
  // start (a shared_ptr made by the aliasing constructor): then the block
  // is not typed, and that is no damage to warn of.
  bool maybe_inside = false;
};
// The container's own blocks, and its name as a C++ user writes it
// ("std::map<int, Node*>").
struct OwnBlocks {
  std::string_view container;  // kept with the type (cxx_type_name_kept)
  std::vector<OwnBlock> blocks;
  std::string warning;  // a container walked only in part says why
};

struct ContainerKind {
  std::string name;  // "hashtable": a profile's link, the walk command's mode
  // Kinds that answer to one link together ("std": GCC's and LLVM's
  // standard libraries' containers); `knows` tells which one reads a head's type.
  std::string family;
  bool (*knows)(const Type* t) = nullptr;
  std::string mode;  // the walk's mode in reports ("hash:<program>")
  std::string what;  // the head it takes, for help and errors
  // The member names the walk takes (the first is the default); empty when
  // it takes none.
  std::vector<std::string> members;
  // It takes a member path besides `members` (the C++ containers: a
  // pointer member inside each element, whose targets are the objects).
  bool member_paths = false;
  // Walks from `head` (the container or a pointer to it); `member` is one of
  // `members`; `obj_size` the size of the objects' type.
  Result<WalkResult> (*walk)(Program& prog, const Variable& head, const std::string& member,
                             uint64_t obj_size, const WalkLimits& lim) = nullptr;
  // The objects' type the head's own type says (a C++ container's element
  // type, or what `member` points at), for a walk given no type; null when
  // the kind cannot tell.
  Result<const Type*> (*element)(Program& prog, const Variable& head,
                                 const std::string& member) = nullptr;
  // Whether `t` (typedefs stripped) is one of this kind's containers, which
  // own_blocks reads: what a block holding one is found to hold by.
  bool (*holds)(const Type* t) = nullptr;
  // The heap blocks the container of type `t` at `addr` allocated itself.
  Result<OwnBlocks> (*own_blocks)(Program& prog, const Type* t, uint64_t addr,
                                  const WalkLimits& lim) = nullptr;
  // Whether `t` is one of these containers' links (a node's base part, an
  // iterator): a pointer to one points at a node own_blocks types whole,
  // which a pointer's static type would only half name.
  bool (*link)(const Type* t) = nullptr;
  // A symbol only a program that can hold these containers defines (its
  // C++ runtime's personality routine): typing a heap by its containers
  // reads every thread's frames and every typed block, which a program
  // whose modules define no kind's symbol is spared. Empty: any program.
  std::string runtime_symbol;
};
// Every registered kind, in registration order.
std::vector<const ContainerKind*> container_kinds();

void register_container(const ContainerKind& k);  // a name registered twice is kept once
// The registered kind named `name` (or the first of the family `name`);
// null when none is.
const ContainerKind* find_container(const std::string& name);
// The kind of link `name` that reads a head of type `head` (a pointer's
// target; typedefs stripped): of a family, the member whose `knows` takes
// it, else the first.
const ContainerKind* find_container_for(const std::string& name, const Type* head);
std::vector<std::string> container_names();
// Whether kind `k` takes `member` ("" takes its default).
bool takes_member(const ContainerKind& k, const std::string& member);

}  // namespace lr
