// Big arrays on transparent huge pages where the system gives them on
// request (THP "madvise", Debian's default). A new array's every 4 KiB page
// is a page fault when first written, and on a virtual machine a fault
// costs microseconds: a census of 2 M shared_ptr control blocks took 70,000
// of them, most of its time beyond the reference index's.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lr {

// Asks for huge pages over the whole 2 MiB pages inside [p, p + bytes).
inline void advise_huge(const void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (b + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (b + bytes) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

// `v.reserve(n)`, its new block advised before any of it is written.
template <class T>
void reserve_huge(std::vector<T>& v, size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  advise_huge(v.data(), v.capacity() * sizeof(T));
}

}  // namespace lr
