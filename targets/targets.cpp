#include "targets/targets.hpp"

#include <mutex>

#include "corelib/registry/target.hpp"
#include "targets/cpython/cpython.hpp"
#include "targets/glibc/glibc_heap.hpp"
#include "targets/glusterfs/gluster_target.hpp"
#include "targets/jemalloc/jemalloc.hpp"
#include "targets/libcxx/libcxx.hpp"
#include "targets/libstdcxx/libstdcxx.hpp"
#include "targets/linux/kernel.hpp"
#include "targets/nfs-ganesha/nfs_ganesha.hpp"
#include "targets/tcmalloc/tcmalloc.hpp"

namespace lr {

void register_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    // jemalloc and tcmalloc first: a program on one still maps libc (see
    // jemalloc.hpp), and allocator walks are tried in registration order.
    register_target(jemalloc_target());
    register_target(tcmalloc_target());
    register_target(glibc_target());
    register_target(linux_target());
    register_target(nfs_ganesha_target());
    register_target(glusterfs_target());
    register_target(libstdcxx_target());
    register_target(libcxx_target());
    register_target(cpython_target());
  });
}

}  // namespace lr
