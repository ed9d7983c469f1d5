// The retained-size tree of a process core (retained.hpp).
#include "corelib/answers/retained.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>

#include "corelib/answers/container_blocks.hpp"
#include "corelib/answers/leak_states.hpp"
#include "corelib/blocks/dominators.hpp"

namespace lr {

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The graph around the index's blocks: holders, "leaked" and the top, with
// the edges they add (the blocks' own are the index's rows).
struct Graph {
  explicit Graph(const RetainedGraph& i) : ix(i), nb(i.blocks()) {}
  const RetainedGraph& ix;
  size_t nb = 0;
  std::vector<uint32_t> holder_begin, holder_edges;  // per holder: its blocks
  std::vector<uint32_t> entries;                     // the leaked part's entry blocks
  std::vector<uint32_t> top_edges;                   // the holders, then leaked
  // Per block: a root reaches it. A leaked block's references into live
  // blocks are no edges: what is leaked holds nothing live (else a live
  // block a leaked one points at would be dominated by the top alone).
  std::vector<uint8_t> reached;
  std::vector<uint8_t> inert;  // RetainedParts::inert: no edges out
  bool is_inert(uint32_t v) const { return v < nb && !inert.empty() && inert[v]; }
  bool edge(uint32_t v, uint32_t w) const {
    return !is_inert(v) && !(v < nb && w < nb && !reached[v] && reached[w]);
  }

  uint32_t leaked() const { return static_cast<uint32_t>(top_edges.size() - 1 + nb); }
  uint32_t top() const { return leaked() + 1; }
  size_t nodes() const { return top() + 1; }

  std::span<const uint32_t> succ(uint32_t v) const {
    if (is_inert(v)) return {};
    if (v < nb) return ix.row(v);
    if (v == leaked()) return entries;
    if (v == top()) return top_edges;
    const size_t h = v - nb;
    return {holder_edges.data() + holder_begin[h], holder_edges.data() + holder_begin[h + 1]};
  }
};

// The holders' edges.
void add_holders(std::vector<std::pair<uint32_t, uint32_t>> edges, size_t holders, Graph* g) {
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  g->holder_begin.assign(holders + 1, 0);
  for (const auto& [h, b] : edges) {
    ++g->holder_begin[h + 1];
    g->holder_edges.push_back(b);
  }
  for (size_t h = 0; h < holders; ++h) g->holder_begin[h + 1] += g->holder_begin[h];
}

// Per block: whether one of `from` reaches it (breadth first, no recursion).
std::vector<uint8_t> reached_from(const Graph& g, std::span<const uint32_t> from) {
  std::vector<uint8_t> seen(g.nb, 0);
  std::vector<uint32_t> todo;
  for (uint32_t b : from)
    if (!seen[b]) seen[b] = 1, todo.push_back(b);
  while (!todo.empty()) {
    const uint32_t v = todo.back();
    todo.pop_back();
    for (uint32_t w : g.succ(v))
      if (!seen[w]) seen[w] = 1, todo.push_back(w);
  }
  return seen;
}

void add_leaked(Graph* g, std::vector<uint8_t> reached) {
  g->reached = reached.empty() ? reached_from(*g, g->holder_edges) : std::move(reached);
  g->entries = entry_nodes(g->nb, g->reached, [&](uint32_t v) { return g->ix.row(v); });
  for (size_t h = 0; h + 1 < g->holder_begin.size(); ++h)
    g->top_edges.push_back(static_cast<uint32_t>(g->nb + h));
  g->top_edges.push_back(0);  // leaked's number, set once the holders are counted
  g->top_edges.back() = g->leaked();
}

// Weak holders' edges into blocks the other holders reach, left out
// (RetainedParts::all_roots); how many.
uint64_t set_weak_aside(const std::vector<Holder>& holders,
                        std::vector<std::pair<uint32_t, uint32_t>>* edges, const Graph& g) {
  auto weak = [&](const std::pair<uint32_t, uint32_t>& e) { return holders[e.first].weak; };
  if (std::none_of(edges->begin(), edges->end(), weak)) return 0;
  std::vector<uint32_t> strong;
  for (const auto& e : *edges)
    if (!weak(e)) strong.push_back(e.second);
  const std::vector<uint8_t> held = reached_from(g, strong);
  const size_t before = edges->size();
  std::erase_if(*edges, [&](const auto& e) { return weak(e) && held[e.second]; });
  return before - edges->size();
}

// A process core's graph: the heap's in-use blocks as the index has them.
class IndexGraph final : public RetainedGraph {
 public:
  // `rows`: the index's rows cut to containers' live extents.
  IndexGraph(const RefIndex& ix, RefIndex::LiveRows rows) : ix_(ix), rows_(std::move(rows)) {}
  size_t blocks() const override { return ix_.chunks(); }
  uint64_t address(uint32_t b) const override { return ix_.heap().in_use[b].user; }
  uint64_t size(uint32_t b) const override { return ix_.heap().in_use[b].usable(); }
  std::span<const uint32_t> row(uint32_t b) const override { return rows_.row(ix_, b); }
  size_t find(uint64_t addr) const override { return ix_.chunk_at(addr); }

 private:
  const RefIndex& ix_;
  RefIndex::LiveRows rows_;
};

}  // namespace

std::span<const uint32_t> RetainedTree::successors(uint32_t v) const {
  if (v < blocks_ && !inert_.empty() && inert_[v]) return {};
  if (v < blocks_) return g_->row(v);
  if (v == leaked()) return entries_;
  if (v == top()) return top_edges_;
  const size_t h = v - blocks_;
  return {holder_edges_.data() + holder_begin_[h], holder_edges_.data() + holder_begin_[h + 1]};
}

namespace {

// Children largest retained size first. A long list is sorted as (size,
// node) pairs gathered once: comparing through the sizes arrays is a cache
// miss per comparison (the top has millions of children in a heap full of
// cross links).
void sort_by_size(const RetainedTree& t, uint32_t* a, uint32_t* b) {
  if (b - a < 64) {
    std::sort(a, b, [&](uint32_t x, uint32_t y) {
      return t.retained(x) != t.retained(y) ? t.retained(x) > t.retained(y) : x < y;
    });
    return;
  }
  std::vector<std::pair<uint64_t, uint32_t>> keyed;
  keyed.reserve(b - a);
  for (auto it = a; it != b; ++it) keyed.emplace_back(~t.retained(*it), *it);  // largest first
  std::sort(keyed.begin(), keyed.end());
  for (size_t k = 0; k < keyed.size(); ++k) a[k] = keyed[k].second;
}

}  // namespace

std::span<const uint32_t> RetainedTree::children(uint32_t v) const {
  if (!inner_.has(v)) return {};
  const uint32_t r = inner_[v];
  uint32_t *a = child_.data() + child_begin_[r], *b = child_.data() + child_begin_[r + 1];
  if (!sorted_[r]) sort_by_size(*this, a, b), sorted_[r] = 1;
  return {a, b};
}

std::span<const uint32_t> RetainedTree::children(uint32_t v, size_t k) const {
  const std::span<const uint32_t> all = children_unsorted(v);
  const size_t n = all.size();
  if (n < 2 || sorted_[inner_[v]] || k >= n / 8) return children(v);
  uint32_t *a = child_.data() + (all.data() - child_.data()), *b = a + n;
  size_t& done = sorted_prefix_[v];
  if (done < k) {
    // In place, one comparison for most of the list: no keyed copy of it.
    std::partial_sort(a, a + k, b, [&](uint32_t x, uint32_t y) {
      return retained(x) != retained(y) ? retained(x) > retained(y) : x < y;
    });
    done = k;
  }
  return {a, b};
}

std::vector<uint32_t> RetainedTree::dominators(uint32_t v) const {
  std::vector<uint32_t> out = {v};
  while (v != top()) out.push_back(v = idom_[v]);
  std::reverse(out.begin(), out.end());
  return out;
}

// Breadth first from the top, over the edges that count: each node's
// parent on its shortest path, and in `order` when given the nodes in
// that order. The queue gives back what it has passed (a whole tree's
// order is kept only when asked for).
void RetainedTree::bfs(std::vector<uint32_t>* parent, std::vector<uint32_t>* order) const {
  parent->assign(nodes(), kNoNode);
  std::deque<uint32_t> todo = {top()};
  (*parent)[top()] = top();
  while (!todo.empty()) {
    const uint32_t v = todo.front();
    todo.pop_front();
    if (order) order->push_back(v);
    for (uint32_t w : successors(v))
      if ((*parent)[w] == kNoNode && is_edge(v, w)) (*parent)[w] = v, todo.push_back(w);
  }
  (*parent)[top()] = kNoNode;
}

std::vector<uint32_t> RetainedTree::bfs_order(std::vector<uint32_t>* parent) const {
  std::vector<uint32_t> local, order;
  order.reserve(nodes());
  bfs(parent ? parent : &local, &order);
  return order;
}

const RetainedTree::Paths& RetainedTree::paths() const {
  if (paths_) return *paths_;
  const uint64_t t0 = now_ns();
  auto p = std::make_unique<Paths>();
  bfs(&p->parent, nullptr);
  p->ns = now_ns() - t0;
  paths_ = std::move(p);
  return *paths_;
}

std::vector<uint32_t> RetainedTree::shortest_path(uint32_t v) const {
  const auto& parent = paths().parent;
  std::vector<uint32_t> out = {v};
  while (v != top() && parent[v] != kNoNode) out.push_back(v = parent[v]);
  std::reverse(out.begin(), out.end());
  return out;
}

const std::string& RetainedTree::type(uint32_t v) const {
  if (is_block(v)) return types_[type_of_[v] != kWideType ? type_of_[v] : type_wide_.at(v)];
  if (v < leaked()) return holders_[v - blocks_].name;
  return none_;
}

namespace {

// Sizes up the dominator tree, and each inner node's children (sorted on
// use). Every pass but one goes through the nodes in order, reading idom
// and the blocks' sizes one after another; only the inner nodes' sums go up
// the tree in `order` (each node after its dominators, read backwards).
// `shallow(v)`: a node's own bytes.
template <class Shallow>
void sizes_and_children(const Graph& g, const Shallow& shallow, const std::vector<uint32_t>& idom,
                        const std::vector<uint32_t>& order, InnerNodes* inner, NodeBytes* bytes,
                        std::vector<uint32_t>* count, std::vector<uint32_t>* child_begin,
                        std::vector<uint32_t>* child) {
  const uint32_t n = static_cast<uint32_t>(g.nodes()), top = g.top();
  auto below = [&](uint32_t v) { return v != top && idom[v] != kNoNode; };
  inner->assign(n);
  for (uint32_t v = 0; v < n; ++v)
    if (below(v)) inner->mark(idom[v]);
  inner->rank();
  const size_t ni = inner->size();
  bytes->assign(ni), count->assign(ni, 0);
  // Own sizes: an inner node's its own, a leaf's its dominator's.
  for (uint32_t v = 0, r = 0; v < n; ++v) {
    if (inner->has(v)) {
      bytes->add(r, shallow(v)), (*count)[r++] += v < g.nb;
    } else if (below(v)) {
      const uint32_t p = (*inner)[idom[v]];
      bytes->add(p, shallow(v)), (*count)[p] += v < g.nb;
    }
  }
  for (size_t k = order.size(); k-- > 1;)
    if (const uint32_t v = order[k]; inner->has(v)) {
      const uint32_t r = (*inner)[v], p = (*inner)[idom[v]];
      bytes->add(p, (*bytes)[r]), (*count)[p] += (*count)[r];
    }
  // Counted, then placed from each list's end: no second offsets array.
  child_begin->assign(ni + 1, 0);
  for (uint32_t v = 0; v < n; ++v)
    if (below(v)) ++(*child_begin)[(*inner)[idom[v]]];
  for (size_t r = 1; r <= ni; ++r) (*child_begin)[r] += (*child_begin)[r - 1];
  child->resize((*child_begin)[ni]);
  for (uint32_t v = n; v-- > 0;)
    if (below(v)) (*child)[--(*child_begin)[(*inner)[idom[v]]]] = v;
}

// Type names numbered once each: most blocks repeat the name before them,
// and an untyped block's name is made once per size.
class TypeIds {
 public:
  explicit TypeIds(std::deque<std::string>* names) : names_(names) {}
  uint32_t named(std::string_view k) {
    if (last_ != kNoNode && k == (*names_)[last_]) return last_;
    auto it = ids_.find(k);
    if (it == ids_.end()) {
      names_->emplace_back(k);
      it = ids_.emplace(names_->back(), static_cast<uint32_t>(names_->size() - 1)).first;
    }
    return last_ = it->second;
  }
  // "(unknown, 48 bytes)"; `own`: "(allocator's own, 648 bytes)".
  uint32_t untyped(bool own, uint64_t size) {
    // Most sizes are small: looked up in an array by size, not hashed
    // (every block of a program without types passes here).
    auto& small = own ? own_small_ : unknown_small_;
    if (size < kSmall && small.empty()) small.assign(kSmall, kNoNode);
    if (size < kSmall && small[size] != kNoNode) return small[size];
    auto& by = own ? own_ : unknown_;
    auto it = by.find(size);
    if (it == by.end())
      it = by.emplace(size, named(fmt::format("({}, {} bytes)", own ? "allocator's own" : "unknown",
                                              size)))
               .first;
    if (size < kSmall) small[size] = it->second;
    return it->second;
  }

 private:
  static constexpr uint64_t kSmall = 1 << 16;
  std::vector<uint32_t> own_small_, unknown_small_;
  std::deque<std::string>* names_;  // stable: the map's keys view them
  std::unordered_map<std::string_view, uint32_t> ids_;
  std::unordered_map<uint64_t, uint32_t> own_, unknown_;
  uint32_t last_ = kNoNode;
};

}  // namespace

Result<RetainedTree> build_retained(std::unique_ptr<const RetainedGraph> gr, RetainedParts parts) {
  const size_t nb = gr->blocks();
  if (nb + 2 + parts.holders.size() >= kNoNode)
    return make_error(Errc::kUnsupported, "too many blocks for a retained-size tree");
  RetainedTree t;
  t.blocks_ = nb;
  t.partial = std::move(parts.partial);
  uint64_t t0 = now_ns();
  Graph g(*gr);
  g.inert = std::move(parts.inert);
  if (!parts.all_roots)
    t.stats.weak_set_aside = set_weak_aside(parts.holders, &parts.holder_edges, g);
  add_holders(std::move(parts.holder_edges), parts.holders.size(), &g);
  t.holders_ = std::move(parts.holders);
  add_leaked(&g, std::move(parts.reached));
  t.stats.holders = t.holders_.size();
  t.stats.leak_entries = g.entries.size();
  uint64_t t1 = now_ns();
  t.stats.graph_ns = t1 - t0;
  std::vector<uint32_t> order;  // DFS preorder: dominators first; dropped once sized
  t.idom_ = immediate_dominators(
      g.nodes(), g.top(), [&](uint32_t v) { return g.succ(v); },
      [&](uint32_t v, uint32_t w) { return g.edge(v, w); }, &order);
  if (order.size() != g.nodes())
    return make_error(Errc::kBadFormat, fmt::format("{} of {} nodes not reached from the roots",
                                                    g.nodes() - order.size(), g.nodes()));
  uint64_t t2 = now_ns();
  t.stats.dominators_ns = t2 - t1;
  t.g_ = std::move(gr);
  sizes_and_children(
      g, [&](uint32_t v) { return t.shallow(v); }, t.idom_, order, &t.inner_, &t.bytes_, &t.count_,
      &t.child_begin_, &t.child_);
  std::vector<uint32_t>().swap(order);
  t.sorted_.assign(t.inner_.size(), 0);
  for (size_t r = 0; r < t.inner_.size(); ++r)
    t.sorted_[r] = t.child_begin_[r + 1] - t.child_begin_[r] < 2;
  uint64_t t3 = now_ns();
  t.stats.sizes_ns = t3 - t2;
  // Untyped blocks by size; the allocator's own (a tcache) said so.
  t.type_of_.resize(nb);
  TypeIds ids(&t.types_);
  for (uint32_t c = 0; c < nb; ++c) {
    uint32_t id;
    if (parts.own && parts.own(c))
      id = ids.untyped(true, t.g_->size(c));
    else if (std::string_view k = parts.type ? parts.type(c) : ""; !k.empty())
      id = ids.named(k);
    else
      id = ids.untyped(false, t.g_->size(c));
    t.type_of_[c] = static_cast<uint16_t>(std::min<uint32_t>(id, RetainedTree::kWideType));
    if (id >= RetainedTree::kWideType) t.type_wide_[c] = id;
  }
  t.stats.types_ns = now_ns() - t3;
  t.holder_begin_ = std::move(g.holder_begin), t.holder_edges_ = std::move(g.holder_edges);
  t.entries_ = std::move(g.entries), t.top_edges_ = std::move(g.top_edges);
  t.reached_ = std::move(g.reached);
  t.inert_ = std::move(g.inert);
  return t;
}

namespace {

// Blocks no root reaches that are no leak, as `leaks` says: objects put back
// on a program's pools (a target's pooled_free) and the allocator's own (a
// dead thread's tcache). Each kind hangs below a holder of its own, so that
// "leaked" means what `leaks` calls leaked. Put-back objects hold nothing
// (their words are what they held when they were live).
void hold_unreached_free(const IndexedCore& core, RetainedParts* parts) {
  const RefIndex& ix = *core.ci.index;
  const auto& chunks = ix.heap().in_use;
  const std::vector<uint64_t> pooled = core.pooled_free();
  const auto& own = ix.heap().own_chunks;
  std::string pools;
  for (const auto& t : core.tags) pools += (pools.empty() ? "" : ", ") + t.target->pools();
  uint32_t pool_holder = kNoNode, own_holder = kNoNode;
  auto holder = [&](uint32_t* id, std::string name, std::string key) {
    if (*id == kNoNode) {
      *id = static_cast<uint32_t>(parts->holders.size());
      parts->holders.push_back({std::move(name), std::move(key), RefFrom::kChunk});
    }
    return *id;
  };
  if (!pooled.empty()) parts->inert.assign(chunks.size(), 0);
  for (uint32_t c = 0; c < chunks.size(); ++c) {
    const bool put_back = std::binary_search(pooled.begin(), pooled.end(), chunks[c].user);
    if (put_back) parts->inert[c] = 1;  // free, whether the pool's lists reach it or not
    if (parts->reached[c]) continue;
    uint32_t h;
    if (put_back)
      h = holder(&pool_holder, "free objects of " + pools + " (not live)", "pooled free");
    else if (std::binary_search(own.begin(), own.end(), chunks[c].user))
      h = holder(&own_holder, "the allocator's own blocks (not live)", "allocator's own");
    else
      continue;
    parts->holder_edges.emplace_back(h, c);
    parts->reached[c] = 1;
  }
}

}  // namespace

Result<RetainedTree> retained_tree(const IndexedCore& core, RefNamer& names, bool all_roots) {
  const RefIndex& ix = *core.ci.index;
  RetainedParts parts;
  parts.all_roots = all_roots;
  parts.partial = ix.partial();
  // One holder per name; the root references grouped by it.
  std::unordered_map<std::string, uint32_t> ids;
  for (size_t i = 0; i < ix.root_count(); ++i) {
    const Ref r = ix.root_ref(i);
    std::string key;
    std::string name = names.holder(r, &key);
    auto [it, added] = ids.emplace(name, static_cast<uint32_t>(parts.holders.size()));
    if (added)
      parts.holders.push_back(
          {std::move(name), std::move(key), r.kind, r.kind == RefFrom::kRegister});
    parts.holder_edges.emplace_back(it->second, r.target);
  }
  // Reachability and the graph leave out the words past a container's
  // elements (typed_reach): the heap is typed first.
  uint64_t t0 = now_ns();
  TypedReach reach = typed_reach(core, names.types());  // for find_leaks too, below
  uint64_t typed_ns = now_ns() - t0;
  parts.reached = reach.reach;
  for (uint8_t& r : parts.reached) r &= RefIndex::kReached;
  hold_unreached_free(core, &parts);
  RefIndex::LiveRows rows = ix.live_rows(reach.live);
  // Types: the leak analysis's, the containers', the globals' typed
  // pointers, then typed pointers from every typed block; else what the
  // account names.
  t0 = now_ns();
  const LeakStates ls = find_leaks(core, names, &reach);
  ContainerTyping ct = ls.typed ? ls.typing : type_heap_blocks(core, names.types());
  KnownObjects none;
  BlockKeys keys(core, names, none, BlockKeyBy::kType);
  const auto& chunks = ix.heap().in_use;
  const auto& own = ix.heap().own_chunks;
  parts.type = [&](uint32_t c) { return keys(c); };
  // The allocator's own blocks as bits, found in one merge of two sorted
  // lists (not a search per block).
  std::vector<uint64_t> own_bits((chunks.size() + 63) / 64, 0);
  for (size_t c = 0, o = 0; c < chunks.size() && o < own.size(); ++c) {
    const uint64_t user = chunks[c].user;
    while (o < own.size() && own[o] < user) ++o;
    if (o < own.size() && own[o] == user) own_bits[c >> 6] |= uint64_t{1} << (c & 63);
  }
  parts.own = [&](uint32_t c) { return own_bits[c >> 6] >> (c & 63) & 1; };
  typed_ns += now_ns() - t0;
  auto t = build_retained(std::make_unique<IndexGraph>(ix, std::move(rows)), std::move(parts));
  if (t.ok()) {
    t.value().stats.types_ns += typed_ns;
    t.value().warnings = std::move(ct.warnings);
    if (ct.warning_count > t.value().warnings.size())
      t.value().warnings.push_back(fmt::format("... and {} more containers read in part",
                                               ct.warning_count - t.value().warnings.size()));
  }
  return t;
}

std::vector<uint32_t> biggest_blocks(const RetainedTree& t, size_t n) {
  using Kept = std::pair<uint64_t, uint32_t>;  // retained, block
  auto before = [](const Kept& x, const Kept& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  };
  std::vector<Kept> b;  // a heap whose front is the least of the n kept
  if (n == 0) return {};
  t.each_block_retained([&](uint32_t v, uint64_t r) {
    if (b.size() == n && !before({r, v}, b.front())) return;
    if (b.size() == n) std::pop_heap(b.begin(), b.end(), before), b.pop_back();
    b.emplace_back(r, v), std::push_heap(b.begin(), b.end(), before);
  });
  std::sort_heap(b.begin(), b.end(), before);
  std::vector<uint32_t> out;
  for (const auto& k : b) out.push_back(k.second);
  return out;
}

MergedPaths merged_paths(const RetainedTree& t, const std::string& type) {
  MergedPaths m;
  std::vector<uint64_t> below(t.nodes(), 0);
  std::vector<uint32_t> parent;  // this BFS's own: no second one for path_parent()
  const auto bfs = t.bfs_order(&parent);
  for (size_t k = bfs.size(); k-- > 1;) {
    const uint32_t v = bfs[k];
    if (t.is_block(v) && t.type(v) == type) ++below[v], ++m.blocks;
    below[parent[v]] += below[v];
  }
  for (uint32_t v : bfs)
    if (below[v]) {
      m.count[v] = below[v];
      if (v != t.top()) m.next[parent[v]].push_back(v);
    }
  for (auto& [v, kids] : m.next)
    std::sort(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) {
      return below[a] != below[b] ? below[a] > below[b] : a < b;
    });
  return m;
}

std::vector<TypeRetained> retained_by_type(const RetainedTree& t) {
  std::unordered_map<std::string_view, TypeRetained> rows;
  std::unordered_map<std::string_view, uint32_t> active;  // open dominators of the type
  // Down the dominator tree, entering and leaving each node.
  std::vector<std::pair<uint32_t, uint32_t>> stack = {{t.top(), 0}};
  while (!stack.empty()) {
    auto& [v, next] = stack.back();
    const auto kids = t.children_unsorted(v);
    if (next == kids.size()) {
      if (t.is_block(v)) --active[t.type(v)];
      stack.pop_back();
      continue;
    }
    const uint32_t w = kids[next++];
    if (t.is_block(w)) {
      const std::string& ty = t.type(w);
      TypeRetained& r = rows[ty];
      ++r.count;
      r.shallow += t.shallow(w);
      if (active[ty]++ == 0) r.retained += t.retained(w);
    }
    stack.emplace_back(w, 0);
  }
  std::vector<TypeRetained> out;
  out.reserve(rows.size());
  for (auto& [k, r] : rows) {
    r.type = std::string(k);
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const TypeRetained& a, const TypeRetained& b) {
    return a.retained != b.retained ? a.retained > b.retained : a.type < b.type;
  });
  return out;
}

namespace {

// Every node reached from `from` along the tree's edges, never entering a
// block `stop` marks (breadth first, no recursion): per node, the node it
// was reached from (kNoNode: not reached; itself: one of `from`).
std::vector<uint32_t> reach_avoiding(const RetainedTree& t, std::span<const uint32_t> from,
                                     const std::vector<uint8_t>& stop) {
  std::vector<uint32_t> parent(t.nodes(), kNoNode);
  std::deque<uint32_t> todo(from.begin(), from.end());
  for (uint32_t v : todo) parent[v] = v;
  while (!todo.empty()) {
    const uint32_t v = todo.front();
    todo.pop_front();
    for (uint32_t w : t.successors(v)) {
      if (parent[w] != kNoNode || !t.is_edge(v, w) || (t.is_block(w) && stop[w])) continue;
      parent[w] = v;
      todo.push_back(w);
    }
  }
  return parent;
}

// top ... v along `parent` (reach_avoiding's, from top).
std::vector<uint32_t> path_to(const std::vector<uint32_t>& parent, uint32_t v) {
  std::vector<uint32_t> p = {v};
  while (parent[p.back()] != p.back()) p.push_back(parent[p.back()]);
  std::reverse(p.begin(), p.end());
  return p;
}

// The group's live members, and its set by type.
std::vector<uint32_t> members(const RetainedTree& t, const std::vector<uint8_t>& group,
                              GroupRetained* g) {
  std::vector<uint32_t> m;
  for (uint32_t b = 0; b < t.blocks(); ++b)
    if (group[b] && !t.is_free(b)) m.push_back(b), ++g->blocks, g->shallow += t.shallow(b);
  return m;
}

}  // namespace

GroupRetained group_retained(const RetainedTree& t, const std::vector<uint8_t>& group) {
  GroupRetained g;
  const uint32_t top = t.top();
  const auto outside = reach_avoiding(t, {&top, 1}, group);
  const auto held = reach_avoiding(t, members(t, group, &g), std::vector<uint8_t>(t.blocks(), 0));
  std::vector<uint8_t> in_set(t.blocks(), 0);  // per block: in the retained set
  std::unordered_map<std::string_view, TypeRetained> rows;
  for (uint32_t b = 0; b < t.blocks(); ++b) {
    if (held[b] == kNoNode || t.is_free(b) || outside[b] != kNoNode) continue;
    in_set[b] = 1;
    ++g.retained_blocks, g.retained += t.shallow(b);
    TypeRetained& r = rows[t.type(b)];
    ++r.count, r.shallow += t.shallow(b), r.retained += t.shallow(b);
  }
  // The set's edge: blocks the set points at directly that are held
  // around it (everything beyond them is no more the group's).
  std::unordered_map<std::string_view, GroupRetained::Shared> shared;
  std::vector<uint8_t> said(t.blocks(), 0);
  for (uint32_t b = 0; b < t.blocks(); ++b) {
    if (!in_set[b]) continue;
    for (uint32_t w : t.successors(b)) {
      if (!t.is_block(w) || in_set[w] || said[w] || t.is_free(w) || !t.is_edge(b, w)) continue;
      said[w] = 1;
      auto& s = shared[t.type(w)];
      if (!s.count++) s.example = w;
      s.bytes += t.shallow(w);
    }
  }
  for (auto& [k, r] : rows) g.by_type.push_back(std::move(r)), g.by_type.back().type = k;
  std::sort(g.by_type.begin(), g.by_type.end(), [](const TypeRetained& a, const TypeRetained& b) {
    return a.shallow != b.shallow ? a.shallow > b.shallow : a.type < b.type;
  });
  for (auto& [k, s] : shared) {
    s.type = k, s.path = path_to(outside, s.example);
    g.shared.push_back(std::move(s));
  }
  std::sort(g.shared.begin(), g.shared.end(), [](const auto& a, const auto& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.type < b.type;
  });
  return g;
}

namespace {

// The child of `v` keeping at least 80% of it; kNoNode.
uint32_t keeps_most(const RetainedTree& t, uint32_t v) {
  const auto kids = t.children(v, 1);
  return kids.empty() || t.retained(kids[0]) * 5 < t.retained(v) * 4 ? kNoNode : kids[0];
}

// Below `v`, the child keeping most of it while it keeps at least 80%; a
// block whose such child is of its own type heads a chain (a list) and is
// the point itself. `chain` gets the chain's length past it (following the
// largest child of the type, however small).
uint32_t accumulation_point(const RetainedTree& t, uint32_t v, uint64_t* chain) {
  *chain = 0;
  for (uint32_t k; (k = keeps_most(t, v)) != kNoNode; v = k)
    if (t.is_block(v) && t.is_block(k) && t.type(k) == t.type(v)) break;
  // The chain: the largest child of each link while it is of the type.
  for (uint32_t u = v; t.is_block(u) && !t.children_unsorted(u).empty();) {
    const uint32_t k = t.children(u, 1)[0];
    if (!t.is_block(k) || t.type(k) != t.type(v)) break;
    ++*chain, u = k;
  }
  return v;
}

}  // namespace

std::vector<Suspect> leak_suspects(const RetainedTree& t, double threshold) {
  const double limit = threshold * static_cast<double>(t.heap_bytes());
  std::vector<Suspect> out;
  // A node's children over the limit are at most 1 / threshold: its largest
  // that many and one more, in order, say where they end.
  const size_t over =
      threshold > 0 && threshold <= 1 ? static_cast<size_t>(1 / threshold) + 1 : SIZE_MAX;
  // The highest nodes over the limit: below the top, and below a holder
  // node only when the holder is not itself over it.
  std::vector<uint32_t> todo = {t.top()};
  while (!todo.empty()) {
    const uint32_t v = todo.back();
    todo.pop_back();
    for (uint32_t w : t.children(v, over)) {
      if (static_cast<double>(t.retained(w)) < limit) break;  // children by size
      if (w != t.leaked() && t.retained(w) > 0) {
        Suspect s;
        s.node = w;
        s.accumulation = accumulation_point(t, w, &s.chain);
        std::unordered_map<std::string, Suspect::Held> by;
        for (uint32_t k : t.children_unsorted(s.accumulation)) {
          auto& h = by[t.type(k)];
          ++h.count;
          h.retained += t.retained(k);
        }
        for (auto& [ty, h] : by) {
          h.type = ty;
          s.held.push_back(std::move(h));
        }
        std::sort(s.held.begin(), s.held.end(), [](const auto& a, const auto& b) {
          return a.retained != b.retained ? a.retained > b.retained : a.type < b.type;
        });
        out.push_back(std::move(s));
      } else {
        todo.push_back(w);  // the leaked blocks: each of them on its own
      }
    }
  }
  std::sort(out.begin(), out.end(), [&](const Suspect& a, const Suspect& b) {
    return t.retained(a.node) != t.retained(b.node) ? t.retained(a.node) > t.retained(b.node)
                                                    : a.node < b.node;
  });
  return out;
}

namespace {

uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

// "global g_list [fx] > struct node > (48 bytes)": the holder's key and the
// types down to `v`, a run of one type (a list) said once.
std::string place_text(const RetainedTree& t, uint32_t v) {
  std::string out, last;
  for (uint32_t d : t.dominators(v)) {
    if (d == t.top()) continue;
    const std::string& ty = d == t.leaked() ? std::string("leaked")
                            : t.is_block(d) ? t.type(d)
                                            : t.holder(d).key;
    if (t.is_block(d) && ty == last) continue;
    out += out.empty() ? ty : " > " + ty;
    last = ty;
  }
  return out;
}

std::unordered_map<uint64_t, PlaceRetained> retained_by_place(const RetainedTree& t,
                                                              uint64_t min_bytes) {
  // Each node's place as a hash, top down (dominators come first).
  std::vector<uint64_t> h(t.nodes(), 0);
  std::hash<std::string_view> hs;
  std::unordered_map<uint64_t, PlaceRetained> acc;
  t.top_down([&](uint32_t v) {
    if (v == t.top()) return;
    const uint32_t d = t.idom(v);
    if (!t.is_block(v)) {
      h[v] = mix(1, hs(v == t.leaked() ? std::string_view("leaked") : t.holder(v).key));
    } else if (t.is_block(d) && t.type(d) == t.type(v)) {
      h[v] = h[d];
      return;  // inside its dominator's run: counted there
    } else {
      h[v] = mix(h[d], hs(t.type(v)));
    }
    PlaceRetained& a = acc[h[v]];
    if (a.count++ == 0) a.example = v;
    a.retained += t.retained(v);
    a.retained_blocks += t.retained_blocks(v);
  });
  std::erase_if(acc, [&](const auto& kv) { return kv.second.retained < min_bytes; });
  return acc;
}

std::string node_text(const RetainedTree& t, uint32_t v) {
  if (v == t.top()) return "all roots";
  if (v == t.leaked()) return "leaked (blocks no root reaches)";
  if (!t.is_block(v)) return t.holder(v).name;
  const std::string& ty = t.type(v);
  if (ty.rfind("(", 0) == 0) return fmt::format("{:#x} {}", t.block_address(v), ty);  // has a size
  return fmt::format("{:#x} {} ({} bytes)", t.block_address(v), ty, t.shallow(v));
}

std::string node_id(const RetainedTree& t, uint32_t v) {
  if (v == t.top()) return "top";
  if (v == t.leaked()) return "leaked";
  if (!t.is_block(v)) return t.holder(v).name;
  return fmt::format("{:#x}", t.block_address(v));
}

namespace {

class ProcessNamer final : public RetainedNamer {
 public:
  ProcessNamer(const IndexedCore& core, RefNamer& names) : core_(core), names_(names) {}

  std::string edge(const RetainedTree& t, uint32_t from, uint32_t to) override {
    if (!t.is_block(to) || from == t.top() || from == t.leaked()) return "";
    const RefIndex& ix = *core_.ci.index;
    if (!t.is_block(from)) {
      for (const Ref& r : ix.root_refs_to(to))
        if (names_.holder(r, nullptr) == t.holder(from).name) {
          // Said only when it says more than the holder (a member, an offset).
          std::string d = names_.describe(r);
          return d == t.holder(from).name ? "" : d;
        }
      return "";
    }
    const std::vector<uint64_t> words = ix.words_from(from, to);
    if (words.empty()) return "";
    const uint64_t off = words.front() - t.block_address(from);
    const BlockType* bt = names_.types().get(from);
    std::string m = bt ? bt->member_at(off) : "";
    return m.empty() ? fmt::format("+{:#x}", off) : m;
  }

  Result<uint64_t> address_of(const std::string& place) override {
    return core_.prog->resolve_address(place);
  }

 private:
  const IndexedCore& core_;
  RefNamer& names_;
};

}  // namespace

std::unique_ptr<RetainedNamer> retained_namer(const IndexedCore& core, RefNamer& names) {
  return std::make_unique<ProcessNamer>(core, names);
}

Result<uint32_t> find_node(const RetainedTree& t, RetainedNamer& namer, const std::string& place) {
  if (place == "top" || place == "all") return t.top();
  if (place == "leaked") return t.leaked();
  for (uint32_t v = static_cast<uint32_t>(t.blocks()); v < t.leaked(); ++v) {
    const Holder& h = t.holder(v);
    if (h.name == place || h.key == place || h.name.rfind("global " + place + " [", 0) == 0 ||
        h.name.rfind(place + " (", 0) == 0)
      return v;
  }
  uint64_t a = 0;
  if (!parse_u64(place, &a)) {
    auto r = namer.address_of(place);
    if (!r.ok())
      return make_error(Errc::kNotFound, place + ": no holder of root references has that name, " +
                                             "and " + r.error().message);
    a = r.value();
  }
  const size_t c = t.graph().find(a);
  if (c == SIZE_MAX)
    return make_error(Errc::kNotFound, fmt::format("{:#x} is inside no block of the graph", a));
  return static_cast<uint32_t>(c);
}

}  // namespace lr
