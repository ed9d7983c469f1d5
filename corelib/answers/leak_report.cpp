// leaks' report (leak_report.hpp).
#include "corelib/answers/leak_report.hpp"

#include <unordered_map>

namespace lr {

namespace {

// Who points at each leaked block: only other leaked blocks can (a live one
// would make it live), so their own rows say it, one entry per referring
// word, and the index's reverse rows (8 bytes a reference and one table a
// chunk) are never made.
std::unordered_map<uint32_t, std::vector<uint32_t>> leaked_referrers(const RefIndex& ix,
                                                                     const LeakStates& ls) {
  std::unordered_map<uint32_t, std::vector<uint32_t>> by;
  for (size_t i = 0; i < ls.state.size(); ++i)
    if (ls.state[i] & kLeaked)
      for (uint32_t t : ix.points_to(i))
        if (ls.state[t] & kLeaked) by[t].push_back(static_cast<uint32_t>(i));
  return by;
}

}  // namespace

LeakReport leak_report(const IndexedCore& core, RefNamer& names, const LeakStates& ls,
                       const LiveSites* sites, bool with_referrers) {
  LeakReport r;
  const RefIndex& ix = *core.ci.index;
  const auto& chunks = core.ci.heap->in_use;
  r.heap_blocks = ix.chunks();
  r.pool_free = ls.pool_free;
  r.partial = ix.partial();
  for (const auto& t : core.tags) r.pools += (r.pools.empty() ? "" : ", ") + t.target->pools();
  auto referrers = with_referrers ? leaked_referrers(ix, ls)
                                  : std::unordered_map<uint32_t, std::vector<uint32_t>>{};
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (!(ls.state[i] & kLeaked)) continue;
    const HeapChunk h = chunks[i];
    LeakedBlock b;
    b.ptr = h.user;
    b.size = h.usable();
    b.unreferenced = !(ls.state[i] & kRefd);
    if (const BlockType* bt = names.types().get(i)) {
      b.type = bt->name;
      b.type_from = bt->via;
      b.through_pointer = bt->through_pointer;
    }
    if (auto it = referrers.find(static_cast<uint32_t>(i)); it != referrers.end())
      for (uint32_t from : it->second) b.referenced_by.push_back(chunks[from].user);
    if (sites)
      if (auto s = sites->by_ptr.find(h.user); s != sites->by_ptr.end()) b.site = s->second;
    LeakGroup& g = r.groups[{b.type, b.size}];
    ++g.count;
    g.bytes += b.size;
    g.unreferenced += b.unreferenced;
    ++r.leaked;
    r.leaked_bytes += b.size;
    r.unreferenced += b.unreferenced;
    r.unreferenced_bytes += b.unreferenced ? b.size : 0;
    r.blocks.push_back(std::move(b));
  }
  r.cycles = find_leak_cycles(core, names, ls, LeakReport::kShownCycles);
  return r;
}

}  // namespace lr
