#include "targets/targets.hpp"

#include <mutex>

#include "targets/glibc/glibc_heap.hpp"
#include "targets/nfs-ganesha/nfs_ganesha.hpp"

namespace lr {

void register_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_glibc_allocator();
    register_nfs_ganesha();
  });
}

}  // namespace lr
