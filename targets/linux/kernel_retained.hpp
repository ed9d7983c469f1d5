// What holds a kernel's memory: the retained-size tree over the kernel's
// reference index (kernel_retained.cpp).
#pragma once

#include <memory>

#include "corelib/answers/retained.hpp"
#include "targets/linux/kernel_refs.hpp"

namespace lr {

struct KernelRetained {
  RetainedTree tree;
  std::unique_ptr<RetainedNamer> namer;  // uses `names` and the index: keep them
};

// The tree of `ix` (built from `k`), holders and types named by `names`.
// all_roots: RetainedParts::all_roots.
Result<KernelRetained> kernel_retained(KernelTarget& k, const KRefIndex& ix, KRefNamer& names,
                                       bool all_roots);

}  // namespace lr
