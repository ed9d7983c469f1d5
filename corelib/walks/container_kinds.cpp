#include "corelib/walks/container_kinds.hpp"

#include <algorithm>

#include "corelib/base/registry.hpp"

namespace lr {

namespace {
// find_container's pointers stay valid as kinds are added.
NamedRegistry<ContainerKind> g_kinds;
}  // namespace

void register_container(const ContainerKind& k) {
  g_kinds.add(k.name, k);
}

const ContainerKind* find_container(const std::string& name) {
  return g_kinds.find(name);
}

std::vector<std::string> container_names() {
  return g_kinds.names();
}

bool takes_member(const ContainerKind& k, const std::string& member) {
  if (member.empty()) return true;
  return k.member_paths || std::find(k.members.begin(), k.members.end(), member) != k.members.end();
}

std::vector<const ContainerKind*> container_kinds() {
  std::vector<const ContainerKind*> v;
  for (const auto& n : g_kinds.names()) v.push_back(g_kinds.find(n));
  return v;
}

}  // namespace lr
