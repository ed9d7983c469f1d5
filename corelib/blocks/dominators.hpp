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

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace lr {

constexpr uint32_t kNoNode = UINT32_MAX;

// Depth first from the root along the kept edges: preorder numbers, the
// nodes in preorder, each one's parent number. Each stack entry is a node
// and how far through its successors the walk has gone.
template <class Succ, class Keep>
void dominator_dfs(uint32_t root, const Succ& succ, const Keep& keep, std::vector<uint32_t>* pre,
                   std::vector<uint32_t>* vertex, std::vector<uint32_t>* parent) {
  std::vector<std::pair<uint32_t, uint32_t>> stack;
  (*pre)[root] = 0, vertex->push_back(root), parent->push_back(0);
  stack.emplace_back(root, 0);
  while (!stack.empty()) {
    const uint32_t v = stack.back().first;
    uint32_t next = stack.back().second;
    const std::span<const uint32_t> s = succ(v);  // once per step, not per edge
    while (next < s.size() && ((*pre)[s[next]] != kNoNode || !keep(v, s[next]))) ++next;
    if (next == s.size()) {
      stack.pop_back();
      continue;
    }
    const uint32_t w = s[next];
    stack.back().second = next + 1;
    (*pre)[w] = static_cast<uint32_t>(vertex->size());
    parent->push_back((*pre)[v]);
    vertex->push_back(w);
    stack.emplace_back(w, 0);
  }
}

// Each reached node's predecessors along kept edges, as preorder numbers:
// counted, then placed from each list's end (no second offsets array).
template <class Succ, class Keep>
void dominator_preds(const Succ& succ, const Keep& keep, const std::vector<uint32_t>& pre,
                     const std::vector<uint32_t>& vertex, std::vector<uint32_t>* at,
                     std::vector<uint32_t>* pred) {
  const size_t m = vertex.size();
  at->assign(m + 1, 0);
  for (size_t i = 0; i < m; ++i)
    for (uint32_t w : succ(vertex[i]))
      if (keep(vertex[i], w)) ++(*at)[pre[w]];
  for (size_t j = 1; j <= m; ++j) (*at)[j] += (*at)[j - 1];
  pred->resize((*at)[m]);
  for (size_t i = 0; i < m; ++i)
    for (uint32_t w : succ(vertex[i]))
      if (keep(vertex[i], w)) (*pred)[--(*at)[pre[w]]] = static_cast<uint32_t>(i);
}

// The graph as the algorithm asks it: node count, successors as a span
// (`succ(v)`) and which of them count (`keep(v, w)`; repeated edges are
// harmless). Returns each node's immediate dominator (the root's is itself;
// kNoNode for a node the root does not reach) and, in `order` when given,
// the nodes the root reaches in DFS preorder (every node after its
// dominators). Predecessors are gathered here, in preorder numbers, and
// dropped on return: the caller needs no reverse index that outlives this.
template <class Succ, class Keep>
std::vector<uint32_t> immediate_dominators(size_t n, uint32_t root, const Succ& succ,
                                           const Keep& keep,
                                           std::vector<uint32_t>* order = nullptr) {
  std::vector<uint32_t> pre(n, kNoNode);  // node -> preorder number
  std::vector<uint32_t> vertex, parent;   // preorder number -> node, DFS parent's number
  vertex.reserve(n), parent.reserve(n);
  dominator_dfs(root, succ, keep, &pre, &vertex, &parent);
  const size_t m = vertex.size();
  std::vector<uint32_t> pred_at, pred;  // i's predecessors: pred[pred_at[i] .. pred_at[i + 1])
  dominator_preds(succ, keep, pre, vertex, &pred_at, &pred);
  std::vector<uint32_t>().swap(pre);  // not needed past here: the peak is the next arrays
  // Semidominators, last preorder number first. `ancestor` is the forest
  // linked so far (number j is linked once j > i, the one being done; it
  // starts as the DFS parent); `label` the number of least semidominator on
  // the compressed path above a number.
  std::vector<uint32_t> semi(m), label(m), ancestor(parent), path;
  for (uint32_t i = 0; i < m; ++i) semi[i] = label[i] = i;
  for (size_t i = m; i-- > 1;) {
    auto eval = [&](uint32_t v) {
      if (v <= i) return v;  // not linked yet
      // Compress the path above v: collect it, then relabel from the top.
      path.clear();
      for (uint32_t x = v; ancestor[x] > i; x = ancestor[x]) path.push_back(x);
      for (size_t k = path.size(); k-- > 0;) {
        const uint32_t x = path[k], a = ancestor[x];
        if (semi[label[a]] < semi[label[x]]) label[x] = label[a];
        ancestor[x] = ancestor[a];
      }
      return label[v];
    };
    for (uint32_t k = pred_at[i]; k < pred_at[i + 1]; ++k) {
      const uint32_t s = semi[eval(pred[k])];
      if (s < semi[i]) semi[i] = s;
    }
  }
  std::vector<uint32_t>().swap(pred), std::vector<uint32_t>().swap(pred_at);
  std::vector<uint32_t>().swap(label), std::vector<uint32_t>().swap(ancestor);
  // Each idom: climb from the parent while above the semidominator (in
  // place: `parent` becomes the idoms, in preorder numbers).
  for (size_t i = 1; i < m; ++i) {
    uint32_t d = parent[i];
    while (d > semi[i]) d = parent[d];
    parent[i] = d;
  }
  std::vector<uint32_t>().swap(semi);
  std::vector<uint32_t> idom(n, kNoNode);
  for (size_t i = 0; i < m; ++i) idom[vertex[i]] = vertex[parent[i]];
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
