#include "corelib/walks/container_kinds.hpp"

#include <deque>
#include <mutex>

namespace lr {

namespace {
// A deque: find_container's pointers stay valid as kinds are added.
std::deque<ContainerKind>& kinds() {
  static std::deque<ContainerKind> k;
  return k;
}
std::mutex g_mu;
}  // namespace

void register_container(const ContainerKind& k) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (const auto& have : kinds())
    if (have.name == k.name) return;
  kinds().push_back(k);
}

const ContainerKind* find_container(const std::string& name) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (const auto& k : kinds())
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<std::string> container_names() {
  std::lock_guard<std::mutex> lk(g_mu);
  std::vector<std::string> n;
  for (const auto& k : kinds()) n.push_back(k.name);
  return n;
}

}  // namespace lr
