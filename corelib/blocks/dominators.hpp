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

// How the walk found each node: the index of its tree edge among its
// parent's successors, a byte a node (indexes of 255 and more aside, by
// number). The preorder is made again from it after the semidominators:
// cheaper than keeping a number for every node through them.
struct DfsSteps {
  std::vector<uint8_t> step;
  std::vector<std::pair<uint32_t, uint32_t>> far;  // (number, index), by number
  void add(uint32_t number, uint32_t index) {
    step.push_back(static_cast<uint8_t>(std::min<uint32_t>(index, 255)));
    if (index >= 255) far.emplace_back(number, index);
  }
};

// Depth first from the root along the kept edges: preorder numbers, each
// number's parent number and step. Every other kept edge (v, w) goes to
// `cross` as w's number << 32 | v's number, unless it repeats w's tree
// edge or enters the root: those never lower a semidominator. Each stack
// entry is a node and how far through its successors the walk has gone.
template <class Succ, class Keep>
void dominator_dfs(uint32_t root, const Succ& succ, const Keep& keep, std::vector<uint32_t>* pre,
                   std::vector<uint32_t>* parent, std::vector<uint64_t>* cross, DfsSteps* steps) {
  std::vector<std::pair<uint32_t, uint32_t>> stack;
  (*pre)[root] = 0, parent->push_back(0), steps->add(0, 0);
  stack.emplace_back(root, 0);
  while (!stack.empty()) {
    const uint32_t v = stack.back().first, pv = (*pre)[v];
    const std::span<const uint32_t> s = succ(v);  // once per step, not per edge
    uint32_t next = stack.back().second;
    for (; next < s.size(); ++next) {
      const uint32_t w = s[next];
      if (!keep(v, w)) continue;
      const uint32_t pw = (*pre)[w];
      if (pw == kNoNode) break;
      if (pw != 0 && (*parent)[pw] != pv) cross->push_back(uint64_t{pw} << 32 | pv);
    }
    if (next == s.size()) {
      stack.pop_back();
      continue;
    }
    const uint32_t w = s[next], pw = static_cast<uint32_t>(parent->size());
    stack.back().second = next + 1;
    (*pre)[w] = pw;
    parent->push_back(pv), steps->add(pw, next);
    stack.emplace_back(w, 0);
  }
}

// The nodes in preorder, from the parents and the steps: each is its
// parent's successor at the step's index.
template <class Succ>
std::vector<uint32_t> dominator_preorder(uint32_t root, const Succ& succ,
                                         const std::vector<uint32_t>& parent,
                                         const DfsSteps& steps) {
  std::vector<uint32_t> vertex(parent.size());
  vertex[0] = root;
  for (size_t i = 1, f = 0; i < parent.size(); ++i) {
    const uint32_t k = steps.step[i] < 255 ? steps.step[i] : steps.far[f++].second;
    vertex[i] = succ(vertex[parent[i]])[k];
  }
  return vertex;
}

// Sorts words by their high 32 bits (two 16-bit radix passes).
inline void sort_by_high_word(std::vector<uint64_t>* a) {
  std::vector<uint64_t> tmp(a->size());
  for (unsigned shift : {32u, 48u}) {
    std::vector<size_t> at(65537, 0);
    for (uint64_t x : *a) ++at[(x >> shift & 0xffff) + 1];
    for (size_t d = 1; d < at.size(); ++d) at[d] += at[d - 1];
    for (uint64_t x : *a) tmp[at[x >> shift & 0xffff]++] = x;
    a->swap(tmp);
  }
}

// Semidominators, last preorder number first, from each number's parent
// and its other kept in-edges (`cross`, sorted by target). `ancestor` is
// the forest linked so far (number j is linked once j > i, the one being
// done; it starts as the DFS parent) and `best` the least semidominator on
// the compressed path above a linked number: the least is all semi-NCA
// needs, not which node has it.
inline std::vector<uint32_t> semidominators(const std::vector<uint32_t>& parent,
                                            std::vector<uint64_t> cross) {
  const size_t m = parent.size();
  std::vector<uint32_t> semi(parent), best(m), ancestor(parent), path;
  size_t k = cross.size();
  for (size_t i = m; i-- > 1;) {
    auto eval = [&](uint32_t v) {
      if (v <= i) return v;  // not linked yet: itself
      // Compress the path above v: collect it, then carry the least down.
      path.clear();
      for (uint32_t x = v; ancestor[x] > i; x = ancestor[x]) path.push_back(x);
      for (size_t p = path.size(); p-- > 0;) {
        const uint32_t x = path[p], a = ancestor[x];
        if (best[a] < best[x]) best[x] = best[a];
        ancestor[x] = ancestor[a];
      }
      return best[v];
    };
    uint32_t s = semi[i];  // the parent's number
    for (; k > 0 && (cross[k - 1] >> 32) == i; --k)
      s = std::min(s, eval(static_cast<uint32_t>(cross[k - 1])));
    semi[i] = best[i] = s;
  }
  return semi;
}

// The graph as the algorithm asks it: node count, successors as a span
// (`succ(v)`) and which of them count (`keep(v, w)`; repeated edges are
// harmless). Returns each node's immediate dominator (the root's is itself;
// kNoNode for a node the root does not reach) and, in `order` when given,
// the nodes the root reaches in DFS preorder (every node after its
// dominators). The semidominator pass keeps four arrays of 4 bytes a node,
// the steps' byte and 8 bytes for each in-edge that is no tree edge; no
// array by node.
template <class Succ, class Keep>
std::vector<uint32_t> immediate_dominators(size_t n, uint32_t root, const Succ& succ,
                                           const Keep& keep,
                                           std::vector<uint32_t>* order = nullptr) {
  std::vector<uint32_t> parent;  // preorder number -> DFS parent's number
  std::vector<uint64_t> cross;
  DfsSteps steps;
  {
    std::vector<uint32_t> pre(n, kNoNode);  // node -> preorder number
    dominator_dfs(root, succ, keep, &pre, &parent, &cross, &steps);
  }
  const size_t m = parent.size();
  sort_by_high_word(&cross);
  std::vector<uint32_t> semi = semidominators(parent, std::move(cross));
  std::vector<uint32_t> vertex = dominator_preorder(root, succ, parent, steps);
  DfsSteps().step.swap(steps.step), steps.far.clear();
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
