#include "targets/jemalloc/jemalloc.hpp"

#include "corelib/blocks/heap.hpp"

namespace lr {

void register_jemalloc() {
  // Its own library, or, linked in statically, its public API: mallctl
  // (unprefixed builds) or je_mallctl (builds with the je_ prefix).
  register_allocator_signature(
      {"jemalloc", {"libjemalloc.so"}, {"mallctl", "je_mallctl", "je_malloc_conf"}});
}

}  // namespace lr
