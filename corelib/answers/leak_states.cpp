// Blocks' states and the account they feed (leak_states.hpp).
#include "corelib/answers/leak_states.hpp"

#include "corelib/answers/container_blocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "corelib/answers/block_keys.hpp"

namespace lr {

LeakStates find_leaks(const IndexedCore& core, RefNamer& names, TypedReach* reach) {
  LeakStates ls;
  const RefIndex& ix = *core.ci.index;
  const auto& chunks = ix.heap().in_use;
  TypedReach made;
  if (!reach) made = typed_reach(core, names.types()), reach = &made;
  ls.typed = reach->typed;
  ls.typing = std::move(reach->typing);
  ls.state = std::move(reach->reach);  // rewritten in place
  const std::vector<uint64_t> pooled = core.pooled_free();
  // The allocator's own structures (a thread's tcache) are its overhead,
  // never the program's leak: in a fork child the other threads' tcaches
  // are reached by nothing, and are still the allocator's bytes.
  const auto& own = ix.heap().own_chunks;
  for (size_t i = 0; i < chunks.size(); ++i) {
    uint8_t& st = ls.state[i];
    if (st & RefIndex::kReached || std::binary_search(own.begin(), own.end(), chunks[i].user)) {
      st = 0;
    } else if (std::binary_search(pooled.begin(), pooled.end(), chunks[i].user)) {
      st = kPoolFree;
      ++ls.pool_free;
    } else {
      // Unreferenced (chap's word): nothing at all points into it.
      st = kLeaked | (st & RefIndex::kReferenced ? kRefd : 0);
      if (names.types().from_vtable(i) || core.tags.empty()) continue;
      std::string via;
      std::string n = core.program_name(chunks[i], &via);
      if (!n.empty()) names.types().set(i, BlockType{nullptr, n, via});
    }
  }
  // Within the leaked blocks (bit 0): their typed pointers and containers.
  type_heap_blocks(core, names.types(), &ls.state);
  return ls;
}

// Objects put back on a program's pool are pooled (free) whether or not its
// lists reach them; the rest are live or leaked as find_leaks decided.
std::vector<ChunkClass> chunk_classes(const IndexedCore& core, const LeakStates& ls) {
  const std::vector<uint64_t> pooled = core.pooled_free();
  const auto& chunks = core.ci.heap->in_use;
  std::vector<ChunkClass> out;
  out.reserve(ls.state.size());
  auto p = pooled.begin();  // chunks are sorted by address too
  for (size_t i = 0; i < ls.state.size(); ++i) {
    while (p != pooled.end() && *p < chunks[i].user) ++p;
    const bool put_back = p != pooled.end() && *p == chunks[i].user;
    out.push_back(put_back || ls.state[i] & kPoolFree ? ChunkClass::kPooled
                  : ls.state[i] & kLeaked             ? ChunkClass::kLeaked
                                                      : ChunkClass::kLive);
  }
  return out;
}

AccountInput account_input(const IndexedCore& core, const LeakStates& ls,
                           std::vector<std::string>* warnings) {
  AccountInput in;
  in.core = core.prog->core();
  in.mods = &core.prog->modules();
  in.heap = core.ci.heap;
  in.residency = core.prog->residency();
  in.chunk_class = chunk_classes(core, ls);
  in.threads = &core.ci.threads;
  // What the root model could not read is memory the account lacks too.
  for (const auto& p : core.ci.index->partial()) warnings->push_back("partial: " + p);
  for (const auto& t : core.tags) {
    auto r = t.tagger->account_ranges(warnings);
    in.ranges.insert(in.ranges.end(), r.begin(), r.end());
  }
  return in;
}

namespace {

void tally_types(const IndexedCore& core, RefNamer& names, const LeakStates& ls, TypeTallies* out) {
  ContainerTyping ct = ls.typed ? ls.typing : type_heap_blocks(core, names.types());
  out->warnings = std::move(ct.warnings);
  if (ct.warning_count > out->warnings.size())
    out->warnings.push_back(fmt::format("... and {} more containers read in part",
                                        ct.warning_count - out->warnings.size()));
  KnownObjects none;
  BlockKeys keys(core, names, none, BlockKeyBy::kType);
  std::unordered_map<std::string, size_t> at;
  std::string key;  // reused: no string made per block
  const auto& chunks = core.ci.heap->in_use;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (ls.state[i] & kPoolFree) continue;
    const std::string_view k = keys(i);
    if (k.empty()) continue;
    key.assign(k);
    auto it = at.find(key);
    if (it == at.end()) {
      it = at.emplace(key, out->rows.size()).first;
      out->rows.push_back({key});
    }
    ++out->rows[it->second].blocks;
    out->rows[it->second].bytes += chunks[i].usable();
  }
}

}  // namespace

Result<Account> plain_account(Program& prog, const HeapWalk& heap, TypeTallies* types) {
  IndexedCore core;
  core.prog = &prog;
  core.tags = tag_program(prog, false, &core.warnings);
  const HeapWalk* own = nullptr;
  for (const auto& t : core.tags)
    if (!own) own = t.tagger->heap();
  LR_ASSIGN(core.ci, index_core(prog, own ? own : &heap, core.pooled_free()));
  KnownObjects none;
  RefNamer names(core, none);
  const LeakStates ls = find_leaks(core, names);
  if (types) tally_types(core, names, ls, types);
  std::vector<std::string> unread;  // the snapshot says what its account lacks
  return build_account(account_input(core, ls, &unread));
}

}  // namespace lr
