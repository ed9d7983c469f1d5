// Which nodes of a reference graph a chain from a root reaches,
// shared by the process core's reference index and the object graph (both
// keep each node's outgoing references as a compressed row).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace lr {

// Per node of `n`: kReachMark when a chain of references from a root reaches
// it, kReferencedMark when anything (a root or a node) points into it.
constexpr uint8_t kReachMark = 1, kReferencedMark = 2;

// A reached node's reference seen, for a caller that counts them in the
// same pass: none here.
struct NoEdgeSeen {
  void operator()(uint32_t, uint32_t) const {}
};

// `root_targets` iterates the node each root reference points into;
// node c's references are targets[row(c).first .. row(c).second).
// `edge(e, t)` sees each reference e (into node t) of every reached node,
// once.
template <class RootTargets, class Row, class Targets, class Edge = NoEdgeSeen>
std::vector<uint8_t> mark_reachable_rows(size_t n, const RootTargets& root_targets, const Row& row,
                                         const Targets& targets, Edge edge = {}) {
  std::vector<uint8_t> seen(n, 0);
  for (uint32_t t : targets) seen[t] = kReferencedMark;
  std::vector<uint32_t> todo;
  for (uint32_t t : root_targets)
    if (!(seen[t] & kReachMark)) {
      seen[t] |= kReachMark | kReferencedMark;
      todo.push_back(t);
    }
  while (!todo.empty()) {
    const uint32_t c = todo.back();
    todo.pop_back();
    for (auto [e, end] = row(c); e < end; ++e) {
      const uint32_t t = targets[e];
      edge(e, t);
      if (!(seen[t] & kReachMark)) {
        seen[t] |= kReachMark;
        todo.push_back(t);
      }
    }
  }
  return seen;
}

// The same with node c's references targets[row_begin(c) .. row_begin(c + 1)).
template <class RootTargets, class RowBegin, class Targets, class Edge = NoEdgeSeen>
std::vector<uint8_t> mark_reachable(size_t n, const RootTargets& root_targets,
                                    const RowBegin& row_begin, const Targets& targets,
                                    Edge edge = {}) {
  return mark_reachable_rows(
      n, root_targets,
      [&](size_t c) { return std::pair<uint32_t, uint32_t>(row_begin(c), row_begin(c + 1)); },
      targets, edge);
}

}  // namespace lr
