// Dominators of a reference graph: node d dominates node v when every chain
// of references from the root to v passes through d, so freeing d (dropping
// the references it holds) frees v too. The immediate dominator of v is its
// closest strict dominator; they form a tree whose subtree sizes are the
// retained sizes (what MAT calls them). Computed by semi-NCA (Georgiadis,
// Tarjan and Werneck, "Finding dominators in practice", 2006): Lengauer and
// Tarjan's semidominators with path compression, then each idom as the
// nearest common ancestor of its parent and semidominator in the tree made
// so far. Every walk is iterative (a 20 M-node chain is one deep path) and
// the arrays are 4 bytes a node, indexed by DFS preorder.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace lr {

constexpr uint32_t kNoNode = UINT32_MAX;

// The graph as the algorithm asks it: node count, successors as a span
// (`succ(v)`), predecessors as a callback (`each_pred(v, f)` calls f(u) for
// every u with an edge u -> v; extra or repeated entries are harmless).
// Returns each node's immediate dominator (the root's is itself; kNoNode for
// a node the root does not reach) and, in `order` when given, the nodes the
// root reaches in DFS preorder (every node after its dominators).
template <class Succ, class EachPred>
std::vector<uint32_t> immediate_dominators(size_t n, uint32_t root, const Succ& succ,
                                           const EachPred& each_pred,
                                           std::vector<uint32_t>* order = nullptr) {
  std::vector<uint32_t> pre(n, kNoNode);  // node -> preorder number
  std::vector<uint32_t> vertex, parent;   // preorder number -> node, DFS parent's number
  vertex.reserve(n), parent.reserve(n);
  {
    // Depth first from the root; each stack entry is a node and how far
    // through its successors the walk has gone.
    std::vector<std::pair<uint32_t, uint32_t>> stack;
    pre[root] = 0, vertex.push_back(root), parent.push_back(0);
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const std::span<const uint32_t> s = succ(v);
      if (next == s.size()) {
        stack.pop_back();
        continue;
      }
      const uint32_t w = s[next++];
      if (pre[w] != kNoNode) continue;
      pre[w] = static_cast<uint32_t>(vertex.size());
      parent.push_back(pre[v]);
      vertex.push_back(w);
      stack.emplace_back(w, 0);
    }
  }
  const size_t m = vertex.size();
  // Semidominators, last preorder number first. `ancestor` is the forest
  // linked so far; `label` the node of least semidominator on the
  // compressed path above a node.
  std::vector<uint32_t> semi(m), label(m), ancestor(m, kNoNode), path;
  for (uint32_t i = 0; i < m; ++i) semi[i] = label[i] = i;
  auto eval = [&](uint32_t v) {
    if (ancestor[v] == kNoNode) return v;
    // Compress the path above v: collect it, then relabel from the top.
    path.clear();
    for (uint32_t x = v; ancestor[ancestor[x]] != kNoNode; x = ancestor[x]) path.push_back(x);
    for (size_t k = path.size(); k-- > 0;) {
      const uint32_t x = path[k], a = ancestor[x];
      if (semi[label[a]] < semi[label[x]]) label[x] = label[a];
      ancestor[x] = ancestor[a];
    }
    return label[v];
  };
  for (size_t i = m; i-- > 1;) {
    each_pred(vertex[i], [&](uint32_t u) {
      if (pre[u] == kNoNode) return;  // not reached from the root
      const uint32_t s = semi[eval(pre[u])];
      if (s < semi[i]) semi[i] = s;
    });
    ancestor[i] = parent[i];
  }
  // Each idom: climb from the parent while above the semidominator.
  std::vector<uint32_t> idom_pre(m, 0);
  for (size_t i = 1; i < m; ++i) {
    uint32_t d = parent[i];
    while (d > semi[i]) d = idom_pre[d];
    idom_pre[i] = d;
  }
  std::vector<uint32_t> idom(n, kNoNode);
  for (size_t i = 0; i < m; ++i) idom[vertex[i]] = vertex[idom_pre[i]];
  if (order) *order = std::move(vertex);
  return idom;
}

// The nodes of `n` outside `reached` (nonzero: reached) that no other such
// node reaches, one for each group of them that reach one another (a cycle
// nothing outside points into): entering the unreached part from these
// reaches all of it, each node from the one the most nodes lie above. In
// order of decreasing DFS finish time (Kosaraju's first pass: the node that
// finishes last lies in a component no other component points into).
template <class Succ>
std::vector<uint32_t> entry_nodes(size_t n, const std::vector<uint8_t>& reached, const Succ& succ) {
  std::vector<uint8_t> seen(n, 0);
  std::vector<uint32_t> finished;
  std::vector<std::pair<uint32_t, uint32_t>> stack;
  for (uint32_t r = 0; r < n; ++r) {
    if (reached[r] || seen[r]) continue;
    seen[r] = 1;
    stack.emplace_back(r, 0);
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const std::span<const uint32_t> s = succ(v);
      if (next == s.size()) {
        finished.push_back(v);
        stack.pop_back();
        continue;
      }
      const uint32_t w = s[next++];
      if (reached[w] || seen[w]) continue;
      seen[w] = 1;
      stack.emplace_back(w, 0);
    }
  }
  // Last finished first: each not yet covered starts a new entry and covers
  // what it reaches.
  std::vector<uint32_t> entries, todo;
  std::fill(seen.begin(), seen.end(), 0);
  for (size_t k = finished.size(); k-- > 0;) {
    const uint32_t e = finished[k];
    if (seen[e]) continue;
    entries.push_back(e);
    seen[e] = 1;
    todo.push_back(e);
    while (!todo.empty()) {
      const uint32_t v = todo.back();
      todo.pop_back();
      for (uint32_t w : succ(v))
        if (!reached[w] && !seen[w]) seen[w] = 1, todo.push_back(w);
    }
  }
  return entries;
}

}  // namespace lr
