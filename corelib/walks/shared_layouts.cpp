#include "corelib/walks/shared_layouts.hpp"

#include "corelib/base/registry.hpp"

namespace lr {

namespace {
NamedRegistry<SharedLayout> g_layouts;
}  // namespace

void register_shared_layout(const SharedLayout& l) {
  g_layouts.add(l.name, l);
}

std::vector<SharedLayout> shared_layouts() {
  return g_layouts.all();
}

}  // namespace lr
