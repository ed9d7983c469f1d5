// Containers a target knows (a program's own hash table, say): each walks
// from its head to its objects and is registered under the name a profile's
// `link` and the walk command use. The engine's own links (lists, arrays,
// trees, xarrays) are not registered: they are WalkSpec's other modes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/walkers.hpp"

namespace lr {

struct ContainerKind {
  std::string name;  // "hashtable": a profile's link, the walk command's mode
  std::string mode;  // the walk's mode in reports ("hash:<program>")
  std::string what;  // the head it takes, for help and errors
  // The member names the walk takes (the first is the default); empty when
  // it takes none.
  std::vector<std::string> members;
  // Walks from `head` (the container or a pointer to it); `member` is one of
  // `members`; `obj_size` the size of the objects' type.
  Result<WalkResult> (*walk)(Program& prog, const Variable& head, const std::string& member,
                             uint64_t obj_size, const WalkLimits& lim) = nullptr;
  // The objects' type the head's own type says (a C++ container's element
  // type), for a walk given no type; null when the kind cannot tell.
  Result<const Type*> (*element)(Program& prog, const Variable& head) = nullptr;
};

void register_container(const ContainerKind& k);  // a name registered twice is kept once
// The registered kind named `name`; null when none is.
const ContainerKind* find_container(const std::string& name);
std::vector<std::string> container_names();

}  // namespace lr
