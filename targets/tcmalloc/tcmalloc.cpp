#include "targets/tcmalloc/tcmalloc.hpp"

#include "corelib/blocks/heap.hpp"

namespace lr {

void register_tcmalloc() {
  // libtcmalloc.so.4, libtcmalloc_minimal.so.4 and their _debug and
  // _and_profiler variants; linked in statically, its tc_ entry points.
  register_allocator_signature({"tcmalloc", {"libtcmalloc"}, {"tc_malloc", "tc_mallopt"}});
}

}  // namespace lr
