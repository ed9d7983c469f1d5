// What holds the memory of a core or a vmcore: the dominator tree over its
// reference graph (a process core's reference index, a kernel's object
// graph: any RetainedGraph), each block's retained size, the
// shortest path from a root to each block, types for every node, and the
// answers built on them (the largest retainers, retained size by type,
// leak suspects, the growth since a baseline dump).
//
// The graph: one node above everything ("all roots"); below it one node per
// holder of root references (a global variable, a thread's stack frame, a
// thread's TLS or registers, a mapping), each pointing at the blocks its
// words point into; and one node "leaked" pointing at the blocks no root
// reaches that no other such block reaches (one per cycle of them), so that
// what a lost pointer costs is a retained size too. A block's retained size
// is its own usable size plus that of every block it dominates.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "corelib/answers/block_keys.hpp"
#include "corelib/answers/block_names.hpp"
#include "corelib/answers/core_index.hpp"
#include "corelib/base/result.hpp"

namespace lr {

struct Holder {
  std::string name;  // "global g_table [fx]", "thread 12 frame #1 handle() [fx]"
  std::string key;   // the same without what changes between runs (matching)
  RefFrom kind = RefFrom::kGlobal;
  // A weak holder (a thread's registers: a stopped thread's vector and
  // scratch registers keep copies of pointers it handled long ago) holds
  // only what no other holder reaches; see RetainedParts::all_roots.
  bool weak = false;
};

// The reference graph a tree is made over: blocks [0, blocks()), each with
// its address and own size and the blocks its words point into (one per
// word).
class RetainedGraph {
 public:
  virtual ~RetainedGraph() = default;
  virtual size_t blocks() const = 0;
  virtual uint64_t address(uint32_t b) const = 0;
  virtual uint64_t size(uint32_t b) const = 0;
  virtual std::span<const uint32_t> row(uint32_t b) const = 0;
  // The block holding `addr`; SIZE_MAX when none.
  virtual size_t find(uint64_t addr) const = 0;
};

// What a target adds to its graph: the holders of root references and the
// blocks each points into, which blocks a root reaches (empty: those the
// holders reach), each block's type ("" when none is known: named by its
// size) and whether it is the allocator's own, and why the tree may be
// partial.
struct RetainedParts {
  std::vector<Holder> holders;
  std::vector<std::pair<uint32_t, uint32_t>> holder_edges;  // (holder, block)
  std::vector<uint8_t> reached;
  // Per block (or empty): free memory the program keeps (a pool's put-back
  // objects), whose stale words hold nothing.
  std::vector<uint8_t> inert;
  std::function<std::string_view(uint32_t)> type;
  std::function<bool(uint32_t)> own;  // may be empty
  std::vector<std::string> partial;
  // Count weak holders' references like any other's. Else one that points
  // at a block other holders reach too is set aside: one stale copy of an
  // inode's address in a register would make the register, not the inode
  // table, the holder of every inode reachable from that one (a storage
  // client's xmm5), and the table would retain nothing. Leak verdicts never
  // change: a block only a weak holder reaches keeps its reference.
  bool all_roots = false;
};

class RetainedTree;
// How a tree's nodes are named beyond what the tree knows: the referring
// word between two nodes, and the address a place names.
class RetainedNamer {
 public:
  virtual ~RetainedNamer() = default;
  // How `from` points at `to` (an edge of the graph): the member of
  // `from`'s type holding the word (".slots[3]", "+0x18"), a root reference
  // named as refs names it; "" when there is nothing to add.
  virtual std::string edge(const RetainedTree& t, uint32_t from, uint32_t to) = 0;
  // The address a place that is no number names (a symbol): kNotFound
  // saying why.
  virtual Result<uint64_t> address_of(const std::string& place) = 0;
};

// Retained bytes a node in 4 bytes: the few nodes retaining 4 GiB or more
// (those near the top) are kept aside.
class NodeBytes {
 public:
  void assign(size_t n) { small_.assign(n, 0), big_.clear(); }
  uint64_t operator[](uint32_t v) const { return small_[v] != kBig ? small_[v] : big_.at(v); }
  void set(uint32_t v, uint64_t b) {
    if (b < kBig) {
      if (small_[v] == kBig) big_.erase(v);  // only a node kept aside has an entry
      small_[v] = static_cast<uint32_t>(b);
    } else {
      small_[v] = kBig, big_[v] = b;
    }
  }
  void add(uint32_t v, uint64_t b) { set(v, (*this)[v] + b); }
  bool fits(uint32_t v) const { return small_[v] != kBig; }  // under 4 GiB

 private:
  static constexpr uint32_t kBig = UINT32_MAX;
  std::vector<uint32_t> small_;
  std::unordered_map<uint32_t, uint64_t> big_;
};

// Which nodes dominate others (inner nodes of the dominator tree), and each
// one's rank among them: what a node retains beyond itself is kept only for
// those (a heap's strings and buffers are leaves, often most of it). A bit a
// node, and a count per 64.
class InnerNodes {
 public:
  void assign(size_t n) { bits_.assign((n + 63) / 64, 0), before_.clear(); }
  void mark(uint32_t v) { bits_[v >> 6] |= uint64_t{1} << (v & 63); }
  // After the last mark: the ranks.
  void rank() {
    before_.resize(bits_.size() + 1);
    uint32_t k = 0;
    for (size_t w = 0; w < bits_.size(); ++w) before_[w] = k, k += ones(bits_[w]);
    before_.back() = k;
  }
  bool has(uint32_t v) const { return bits_[v >> 6] >> (v & 63) & 1; }
  // Only for a node that has(): its number among them.
  uint32_t operator[](uint32_t v) const {
    return before_[v >> 6] + ones(bits_[v >> 6] & ((uint64_t{1} << (v & 63)) - 1));
  }
  size_t size() const { return before_.empty() ? 0 : before_.back(); }

 private:
  // The bits set, inline: std::popcount is a call into libgcc on the
  // x86-64 baseline (no POPCNT), a third of a whole tree's sizing.
  static uint32_t ones(uint64_t x) {
    x -= (x >> 1) & 0x5555555555555555u;
    x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fu;
    return static_cast<uint32_t>((x * 0x0101010101010101u) >> 56);
  }
  std::vector<uint64_t> bits_;
  std::vector<uint32_t> before_;
};

class RetainedTree {
 public:
  // Nodes [0, blocks()) are the heap's in-use blocks (the index's chunk
  // numbers), then the holders, then leaked(), then top().
  size_t blocks() const { return blocks_; }
  size_t nodes() const { return idom_.size(); }
  uint32_t top() const { return static_cast<uint32_t>(nodes() - 1); }
  uint32_t leaked() const { return static_cast<uint32_t>(nodes() - 2); }
  bool is_block(uint32_t v) const { return v < blocks_; }
  uint64_t block_address(uint32_t v) const { return g_->address(v); }
  const RetainedGraph& graph() const { return *g_; }
  const Holder& holder(uint32_t v) const { return holders_[v - blocks_]; }

  // Calls f(v, retained(v)) for every block in order: one pass with no
  // rank looked up per block.
  template <class F>
  void each_block_retained(const F& f) const {
    for (uint32_t v = 0, r = 0; v < blocks_; ++v) f(v, inner_.has(v) ? bytes_[r++] : g_->size(v));
  }
  // The immediate dominator (top's is top).
  uint32_t idom(uint32_t v) const { return idom_[v]; }
  // Own usable size (0 for the holders and the tops) and retained size.
  uint64_t shallow(uint32_t v) const { return is_block(v) ? g_->size(v) : 0; }
  uint64_t retained(uint32_t v) const { return inner_.has(v) ? bytes_[inner_[v]] : shallow(v); }
  uint64_t retained_blocks(uint32_t v) const {
    return inner_.has(v) ? count_[inner_[v]] : is_block(v);
  }
  // The graph's edges out of `v` (a block's: one per referring word)...
  std::span<const uint32_t> successors(uint32_t v) const;
  // ... of which these count: a leaked block's references into live
  // blocks do not (what is leaked holds nothing live).
  // Free memory the program keeps (RetainedParts::inert).
  bool is_free(uint32_t v) const { return v < blocks_ && !inert_.empty() && inert_[v]; }
  bool is_edge(uint32_t v, uint32_t w) const {
    if (v < blocks_ && !inert_.empty() && inert_[v]) return false;
    return !(v < blocks_ && w < blocks_ && !reached_[v] && reached_[w]);
  }
  // The nodes `v` dominates directly, largest retained size first (each
  // node's sorted on first use: most are never shown).
  std::span<const uint32_t> children(uint32_t v) const;
  // The same when only the first `k` are read in order: those are the k
  // largest, largest first, and the rest follow in no order (a list of
  // millions, the top's, is not sorted whole to show twenty).
  std::span<const uint32_t> children(uint32_t v, size_t k) const;
  // The same in no particular order, for a pass over the whole tree.
  std::span<const uint32_t> children_unsorted(uint32_t v) const {
    if (!inner_.has(v)) return {};
    const uint32_t r = inner_[v];
    return {child_.data() + child_begin_[r], child_.data() + child_begin_[r + 1]};
  }
  // top ... v along the dominator tree.
  std::vector<uint32_t> dominators(uint32_t v) const;
  // top ... v along one shortest chain of references (breadth first from
  // top, so from the nearest root).
  std::vector<uint32_t> shortest_path(uint32_t v) const;
  // The type name of block `v` ("(unknown, 48 bytes)" when none is known,
  // "(allocator's own, 648 bytes)" for a tcache), or the holder's name.
  const std::string& type(uint32_t v) const;
  // Calls f(v) for every node, each after its dominators (depth first
  // over the unsorted children lists: no order array kept per node).
  template <class F>
  void top_down(const F& f) const {
    std::vector<uint32_t> todo = {top()};
    while (!todo.empty()) {
      const uint32_t v = todo.back();
      todo.pop_back();
      f(v);
      const auto k = children_unsorted(v);
      todo.insert(todo.end(), k.begin(), k.end());
    }
  }
  // Every node breadth first from top (each after its shortest path; made
  // anew each call: only merged paths need it), and in `parent` when given
  // the node before each on that path.
  std::vector<uint32_t> bfs_order(std::vector<uint32_t>* parent = nullptr) const;
  // The node before `v` on its shortest path (kNoNode for top; made on
  // first use).
  uint32_t path_parent(uint32_t v) const { return paths().parent[v]; }
  // What the paths took to make; 0 until they are.
  uint64_t paths_ns() const { return paths_ ? paths_->ns : 0; }

  uint64_t heap_bytes() const { return retained(top()); }
  // Why the tree may be wrong (the root model's reasons), empty: whole.
  std::vector<std::string> partial;
  // What leaves some blocks' types unknown (a container read in part); the
  // tree itself is whole.
  std::vector<std::string> warnings;
  struct Stats {
    uint64_t graph_ns = 0, dominators_ns = 0, sizes_ns = 0, types_ns = 0, holders = 0,
             leak_entries = 0;
    // Weak holders' references set aside (blocks other holders reach).
    uint64_t weak_set_aside = 0;
  } stats;

 private:
  friend Result<RetainedTree> build_retained(std::unique_ptr<const RetainedGraph>, RetainedParts);
  std::unique_ptr<const RetainedGraph> g_;
  size_t blocks_ = 0;
  std::vector<Holder> holders_;
  // Edges out of the holders (per holder, into holder_edges_), of leaked
  // (its entries) and of top (the holders, then leaked).
  std::vector<uint32_t> holder_begin_, holder_edges_, entries_, top_edges_;
  std::vector<uint8_t> reached_;  // per block: a root reaches it
  std::vector<uint8_t> inert_;    // per block (or empty): RetainedParts::inert
  std::vector<uint32_t> idom_;
  struct Paths {
    std::vector<uint32_t> parent;  // breadth-first parents
    uint64_t ns = 0;               // the time they took
  };
  const Paths& paths() const;
  void bfs(std::vector<uint32_t>* parent, std::vector<uint32_t>* order) const;
  mutable std::unique_ptr<Paths> paths_;
  // Per inner node (by its rank): retained bytes and blocks, where its
  // children begin in child_, whether they are in order.
  InnerNodes inner_;
  NodeBytes bytes_;
  std::vector<uint32_t> count_;
  std::vector<uint32_t> child_begin_;
  mutable std::vector<uint32_t> child_;
  mutable std::vector<uint8_t> sorted_;
  mutable std::unordered_map<uint32_t, size_t> sorted_prefix_;  // else: how many first are
  // Per block: index into types_ (kWideType: in type_wide_, the rare
  // program with 65535 names or more).
  static constexpr uint16_t kWideType = UINT16_MAX;
  std::vector<uint16_t> type_of_;
  std::unordered_map<uint32_t, uint32_t> type_wide_;
  std::deque<std::string> types_;
  std::string none_;
};

// Builds the tree over graph `g` and what its target adds.
Result<RetainedTree> build_retained(std::unique_ptr<const RetainedGraph> g, RetainedParts parts);
// Builds the tree of `core` (its index and blocks), naming holders and
// block types through `names` (types found now are kept there); all_roots:
// RetainedParts::all_roots.
Result<RetainedTree> retained_tree(const IndexedCore& core, RefNamer& names, bool all_roots);
// A process core's namer: members of typed blocks, root references as refs
// names them, symbols of the program.
std::unique_ptr<RetainedNamer> retained_namer(const IndexedCore& core, RefNamer& names);

// A node as a line names it: "0x4052a0 struct table (4096 bytes)", a
// holder's name, "leaked (blocks no root reaches)", "all roots".
std::string node_text(const RetainedTree& t, uint32_t v);
// A node as JSON names it (unique in the tree): a block's address, a
// holder's name, "leaked", "top".
std::string node_id(const RetainedTree& t, uint32_t v);
// The node named by `place`: an address inside a block, a holder's name or
// key (or a global's: "g_table"), "leaked", "top", a symbol `namer` knows.
// kNotFound saying why.
Result<uint32_t> find_node(const RetainedTree& t, RetainedNamer& namer, const std::string& place);

// The shortest paths from the roots to every block of `type`, merged (MAT's
// "merge shortest paths to GC roots"): per node on any of them, how many
// blocks of the type lie at or below it, and the nodes after it on them
// (most blocks first).
struct MergedPaths {
  std::unordered_map<uint32_t, uint64_t> count;
  std::unordered_map<uint32_t, std::vector<uint32_t>> next;
  uint64_t blocks = 0;  // of the type
};
MergedPaths merged_paths(const RetainedTree& t, const std::string& type);

// The n blocks of most retained size, largest first (ties: lower node
// first): one pass keeping the n best in a heap.
std::vector<uint32_t> biggest_blocks(const RetainedTree& t, size_t n);

// Retained size by type, as MAT's "group by class": the blocks of a type,
// their own bytes, and what they retain together (a block dominated by
// another of its type counted once, in the outer one).
struct TypeRetained {
  std::string type;
  uint64_t count = 0, shallow = 0, retained = 0;
};
std::vector<TypeRetained> retained_by_type(const RetainedTree& t);

// What a group of blocks retains together (MAT's retained set of several
// objects): the group and every block reachable from it that no root
// reaches without passing through it; what would be freed if the whole
// group went. One block's retained size leaves out what it shares with its
// peers: an inode reached from the table's hash chain and from another
// inode's LRU link is no single inode's, but it is the inodes' together.
// Free blocks (a pool's put-back objects) are never in a group nor in its
// set. The blocks the set points at directly that are held from outside too
// are said by type, each with one example and its shortest path from a root
// around the group: why the set stops there (a second owner, a stale word in
// a buffer).
struct GroupRetained {
  uint64_t blocks = 0, shallow = 0;            // the group's own
  uint64_t retained = 0, retained_blocks = 0;  // the group's and what it holds alone
  std::vector<TypeRetained> by_type;           // the retained set by type (retained = shallow)
  struct Shared {
    std::string type;
    uint64_t count = 0, bytes = 0;
    uint32_t example = 0;
    std::vector<uint32_t> path;  // top ... example, around the group
  };
  std::vector<Shared> shared;  // pointed at by the set, held around it; most bytes first
};
// `group`: per block, whether it is in the group (blocks() entries).
GroupRetained group_retained(const RetainedTree& t, const std::vector<uint8_t>& group);

// A leak suspect: a node retaining at least `threshold` of the heap none of
// whose children does, with the accumulation point below it (the node
// reached by following the child that keeps most of its parent, while it
// keeps at least 80%; a list's head, where a chain of one type begins) and
// what that point holds, by type.
struct Suspect {
  uint32_t node = 0, accumulation = 0;
  uint64_t chain = 0;  // the point heads a chain of this many more blocks of its type
  struct Held {
    std::string type;
    uint64_t count = 0, retained = 0;
  };
  std::vector<Held> held;  // the accumulation point's children by type, largest first
};
std::vector<Suspect> leak_suspects(const RetainedTree& t, double threshold);

// A node's place for matching across dumps (addresses move): its holder's
// key and the types along its dominators, a run of one type (a list) said
// once ("global g_list [fx] > struct node"). Places are keyed by a hash of
// that text (the same in any tree of this process), so that matching costs
// no text; place_text() makes it for the few shown.
struct PlaceRetained {
  // Over the outermost nodes of the place (a run's inner nodes are in its
  // first): how many, and what they retain.
  uint64_t count = 0, retained = 0, retained_blocks = 0;
  uint32_t example = 0;  // one node of it
};
// The places retaining at least `min_bytes`, by key.
std::unordered_map<uint64_t, PlaceRetained> retained_by_place(const RetainedTree& t,
                                                              uint64_t min_bytes);
std::string place_text(const RetainedTree& t, uint32_t v);

}  // namespace lr
