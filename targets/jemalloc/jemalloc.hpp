// jemalloc (5.x: Debian's libjemalloc2, or linked in statically as Redis
// and others do). Its heap is not walked yet; the allocator is told from
// the core itself, so a core of a jemalloc program is refused naming it,
// never read as glibc's.
#pragma once

namespace lr {

void register_jemalloc();

}  // namespace lr
