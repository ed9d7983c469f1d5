// Groups of leaked blocks that hold one another (leak_cycles.hpp).
#include "corelib/answers/leak_cycles.hpp"

#include <algorithm>
#include <deque>
#include <unordered_map>

namespace lr {

namespace {

constexpr uint32_t kUnset = UINT32_MAX;

// Tarjan's strongly connected groups over the leaked blocks, with an
// explicit stack of frames (no recursion over data). Each group of two or
// more blocks, as chunk numbers.
class Groups {
 public:
  Groups(const RefIndex& ix, const std::vector<uint8_t>& state) : ix_(ix), state_(state) {
    index_.assign(state.size(), kUnset);
  }

  std::vector<std::vector<uint32_t>> run() {
    for (uint32_t s = 0; s < state_.size(); ++s)
      if (leaked(s) && index_[s] == kUnset) from(s);
    return std::move(out_);
  }

 private:
  struct Frame {
    uint32_t v;
    uint32_t next = 0;  // the next entry of v's row to look at
  };
  bool leaked(uint32_t c) const { return c < state_.size() && (state_[c] & kLeaked); }

  void enter(uint32_t v) {
    index_[v] = low_[v] = counter_++;
    stack_.push_back(v);
    on_[v] = 1;
    frames_.push_back({v});
  }

  void from(uint32_t s) {
    if (low_.empty()) low_.assign(state_.size(), 0), on_.assign(state_.size(), 0);
    enter(s);
    while (!frames_.empty()) {
      Frame& f = frames_.back();
      const std::span<const uint32_t> row = ix_.row(f.v);
      bool down = false;
      while (!down && f.next < row.size()) {
        const uint32_t w = row[f.next++];
        if (w == f.v || !leaked(w)) continue;
        if (index_[w] == kUnset) {
          enter(w);  // frames_ grows: f is not used again
          down = true;
        } else if (on_[w]) {
          low_[f.v] = std::min(low_[f.v], index_[w]);
        }
      }
      if (down) continue;
      const uint32_t v = f.v;
      frames_.pop_back();
      if (!frames_.empty()) low_[frames_.back().v] = std::min(low_[frames_.back().v], low_[v]);
      if (low_[v] == index_[v]) pop_group(v);
    }
  }

  void pop_group(uint32_t v) {
    std::vector<uint32_t> g;
    uint32_t w;
    do {
      w = stack_.back();
      stack_.pop_back();
      on_[w] = 0;
      g.push_back(w);
    } while (w != v);
    if (g.size() > 1) out_.push_back(std::move(g));
  }

  const RefIndex& ix_;
  const std::vector<uint8_t>& state_;
  std::vector<uint32_t> index_, low_, stack_;
  std::vector<uint8_t> on_;
  std::vector<Frame> frames_;
  uint32_t counter_ = 0;
  std::vector<std::vector<uint32_t>> out_;
};

// A shortest cycle through the group's lowest block `s` (breadth first
// inside the group); its blocks from `s`. `group` is sorted.
std::vector<uint32_t> shortest_cycle(const RefIndex& ix, const std::vector<uint32_t>& group) {
  const uint32_t s = group.front();
  std::unordered_map<uint32_t, uint32_t> parent;  // block -> the block it was reached from
  for (uint32_t c : group) parent.emplace(c, kUnset);
  std::deque<uint32_t> todo = {s};
  parent[s] = s;
  while (!todo.empty()) {
    const uint32_t u = todo.front();
    todo.pop_front();
    for (uint32_t w : ix.row(u)) {
      auto it = parent.find(w);
      if (it == parent.end() || w == u) continue;  // outside the group, or itself
      if (w == s) {
        std::vector<uint32_t> path;
        for (uint32_t at = u; at != s; at = parent[at]) path.push_back(at);
        path.push_back(s);
        std::reverse(path.begin(), path.end());
        return path;
      }
      if (it->second == kUnset) it->second = u, todo.push_back(w);
    }
  }
  return {s};  // a group's members reach one another: never here
}

// The word of `from` that points into `to`, named.
std::string link(const IndexedCore& core, RefNamer& names, uint32_t from, uint32_t to) {
  const RefIndex& ix = *core.ci.index;
  const std::vector<uint64_t> words = ix.words_from(from, to);
  if (words.empty()) return "";
  Ref r;
  r.from = words[0];
  r.target = to;
  r.kind = RefFrom::kChunk;
  return names.describe(r);
}

}  // namespace

LeakCycles find_leak_cycles(const IndexedCore& core, RefNamer& names, const LeakStates& ls,
                            size_t max) {
  const RefIndex& ix = *core.ci.index;
  auto groups = Groups(ix, ls.state).run();
  LeakCycles out;
  out.groups = groups.size();
  // Lowest block first (chunk numbers are in address order).
  for (auto& g : groups) std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end(),
            [](const auto& a, const auto& b) { return a.front() < b.front(); });
  const auto& chunks = ix.heap().in_use;
  for (size_t i = 0; i < groups.size() && i < max; ++i) {
    LeakCycle c;
    c.group_blocks = groups[i].size();
    const std::vector<uint32_t> path = shortest_cycle(ix, groups[i]);
    for (size_t k = 0; k < path.size(); ++k) {
      c.blocks.push_back(chunks[path[k]].user);
      c.links.push_back(link(core, names, path[k], path[(k + 1) % path.size()]));
    }
    out.shown.push_back(std::move(c));
  }
  return out;
}

}  // namespace lr
