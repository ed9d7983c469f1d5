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
  if (const ContainerKind* k = g_kinds.find(name)) return k;
  for (const auto& n : g_kinds.names())
    if (const ContainerKind* k = g_kinds.find(n); k->family == name) return k;
  return nullptr;
}

const ContainerKind* find_container_for(const std::string& name, const Type* head) {
  const Type* t = head ? head->strip() : nullptr;
  if (t && t->kind == TypeKind::kPointer && t->target) t = t->target->strip();
  const ContainerKind* first = nullptr;
  for (const auto& n : g_kinds.names()) {
    const ContainerKind* k = g_kinds.find(n);
    if (k->name != name && k->family != name) continue;
    if (!first) first = k;
    if (t && k->knows && k->knows(t)) return k;
  }
  return first;
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
