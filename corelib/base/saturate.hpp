// Sums of sizes read from inputs (traces, cores) that may be hostile: they
// stop at the largest value instead of wrapping to a small plausible one.
#pragma once

#include <cstdint>
#include <limits>

namespace lr {

inline uint64_t sat_add(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

// No allocation is larger than an address space (57 bits with five-level
// paging): a size past it in a trace is damage.
constexpr uint64_t kMaxAllocationSize = uint64_t{1} << 57;

}  // namespace lr
