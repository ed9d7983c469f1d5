#include "targets/targets.hpp"

#include <mutex>

#include "corelib/analyses/snapshot_io.hpp"
#include "corelib/dump/dump_kind.hpp"
#include "targets/glibc/glibc_heap.hpp"
#include "targets/glusterfs/statedump.hpp"
#include "targets/jemalloc/jemalloc.hpp"
#include "targets/linux/kernel.hpp"
#include "targets/nfs-ganesha/nfs_ganesha.hpp"
#include "targets/tcmalloc/tcmalloc.hpp"

namespace lr {

void register_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    // jemalloc and tcmalloc first: a program on one still maps libc (see
    // jemalloc.hpp).
    register_jemalloc();
    register_tcmalloc();
    register_glibc_allocator();
    register_glibc_threads();
    register_linux_refcounts();
    register_nfs_ganesha();
    register_text_dump("statedump", &looks_like_statedump);
    register_snapshot_reader("statedump", &snapshot_from_statedump);
  });
}

}  // namespace lr
