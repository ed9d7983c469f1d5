// The opened-and-indexed core and the blocks' states (indexed.hpp).
#include "indexed.hpp"

#include <algorithm>

#include "cmd_profile.hpp"
#include "cmd_types.hpp"
#include "corelib/blocks/refindex.hpp"
#include "corelib/profiles/profile.hpp"

namespace lrcli {

lr::Result<Opened> open_indexed(const Common& c,
                                const std::function<lr::Result<void>(lr::Program&)>& before,
                                bool gluster_itables) {
  Opened o;
  LR_ASSIGN(o.prog, open_program(c));
  if (!o.prog->core())
    return lr::make_error(lr::Errc::kUnsupported,
                          "the reference index reads process cores, not kernel dumps");
  if (before) LR_TRY(before(*o.prog));
  o.gf = gluster_names(*o.prog, &o.warnings, gluster_itables);
  const lr::GlusterReport* gr = o.gf.report.get();
  LR_ASSIGN(o.ci, index_core(*o.prog, gr ? &gr->heap_walk : nullptr,
                             gr ? gr->dead_pooled : std::vector<uint64_t>{}));
  // What the answer stands on, said first: the core and its files (an
  // executable of another build), the heap walk (a chain that broke, a free
  // list dropped) and the index.
  std::vector<std::string> w = o.prog->warnings();
  w.insert(w.end(), o.ci.heap->warnings.begin(), o.ci.heap->warnings.end());
  w.insert(w.end(), o.ci.index->warnings().begin(), o.ci.index->warnings().end());
  o.warnings.insert(o.warnings.begin(), w.begin(), w.end());
  return o;
}

lr::Result<void> load_known_objects(lr::Program& prog, const std::string& profile,
                                    const std::vector<std::string>& sets, KnownObjects* known) {
  if (profile.empty()) return {};
  LR_ASSIGN(lr::Profile prof, lr::find_profile(profile, profile_dirs()));
  if (std::string why = lr::profile_mismatch(prog, prof, false); !why.empty())
    return lr::make_error(lr::Errc::kUnsupported, why);
  LR_TRY(ensure_profile_types(prog, prof, out_stderr()));
  return known->add_profile(prog, prof, sets);
}

LeakSet find_leaked(const lr::RefIndex& ix, const GlusterNames& gf, RefNamer& names) {
  LeakSet ls;
  const auto& chunks = ix.heap().in_use;
  ls.state = ix.reachable();  // rewritten in place
  std::vector<uint64_t> pooled = gf.report ? gf.report->dead_pooled : std::vector<uint64_t>{};
  std::sort(pooled.begin(), pooled.end());
  for (size_t i = 0; i < chunks.size(); ++i) {
    uint8_t& st = ls.state[i];
    if (st & lr::RefIndex::kReached) {
      st = 0;
    } else if (std::binary_search(pooled.begin(), pooled.end(), chunks[i].user)) {
      st = kPoolFree;
      ++ls.pool_free;
    } else {
      // Unreferenced (chap's word): nothing at all points into it.
      st = kLeaked | (st & lr::RefIndex::kReferenced ? kRefd : 0);
      if (names.types().from_vtable(i) || !gf.namer) continue;
      std::string n = gf.namer->name(chunks[i]);
      if (!n.empty()) names.types().set(i, lr::BlockType{nullptr, n, "GlusterFS"});
    }
  }
  names.types().propagate(ls.state);  // within the leaked blocks (bit 0)
  return ls;
}

// Each block's class: objects put back on a GlusterFS mem-pool's free lists
// are pooled (free) whether or not the lists reach them; the rest are live
// or leaked as leaks decided.
std::vector<lr::ChunkClass> chunk_classes(const Opened& o, const LeakSet& ls) {
  std::vector<uint64_t> pooled = o.gf.report ? o.gf.report->dead_pooled : std::vector<uint64_t>{};
  std::sort(pooled.begin(), pooled.end());
  const auto& chunks = o.ci.heap->in_use;
  std::vector<lr::ChunkClass> out;
  out.reserve(ls.state.size());
  auto p = pooled.begin();  // chunks are sorted by address too
  for (size_t i = 0; i < ls.state.size(); ++i) {
    while (p != pooled.end() && *p < chunks[i].user) ++p;
    const bool put_back = p != pooled.end() && *p == chunks[i].user;
    out.push_back(put_back || ls.state[i] & kPoolFree ? lr::ChunkClass::kPooled
                  : ls.state[i] & kLeaked             ? lr::ChunkClass::kLeaked
                                                      : lr::ChunkClass::kLive);
  }
  return out;
}

lr::Result<lr::Account> plain_account(lr::Program& prog, const lr::HeapWalk& heap) {
  Opened o;
  o.gf = gluster_names(prog, &o.warnings);
  const lr::GlusterReport* gr = o.gf.report.get();
  LR_ASSIGN(o.ci, index_core(prog, gr ? &gr->heap_walk : &heap,
                             gr ? gr->dead_pooled : std::vector<uint64_t>{}));
  KnownObjects none;
  RefNamer names(prog, *o.ci.index, none, o.gf);
  const LeakSet ls = find_leaked(*o.ci.index, o.gf, names);
  lr::AccountInput in;
  in.core = prog.core();
  in.mods = &prog.modules();
  in.heap = o.ci.heap;
  in.residency = prog.residency();
  in.chunk_class = chunk_classes(o, ls);
  if (gr) in.ranges = lr::gluster_iobuf_ranges(*gr);
  return lr::build_account(in);
}

}  // namespace lrcli
