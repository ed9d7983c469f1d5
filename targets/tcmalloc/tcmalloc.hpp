// tcmalloc (gperftools 2.x: Debian's libgoogle-perftools4 and
// libtcmalloc-minimal4). Its heap is not walked yet; the allocator is told
// from the core itself, so a core of a tcmalloc program is refused naming it,
// never read as glibc's.
#pragma once

namespace lr {

void register_tcmalloc();

}  // namespace lr
