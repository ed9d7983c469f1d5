// GlusterFS profile, part 3: operations in flight. A core taken while the
// process works (a normal moment for a gcore) catches fops between wind and
// unwind: their call stacks sit in the ctx's call pool, and the references
// they took (a loc's inode, an fd) are held by blocks that belong to them —
// the request state, a frame's local, or a block that points at one of
// their frames (a call stub open-behind keeps for a deferred open). Those
// references are "in flight", not leaked: they are named as such and never
// flagged.
#include <fmt/format.h>

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "corelib/blocks/refindex.hpp"
#include "gluster_internal.hpp"

namespace lr::gf {

namespace {

constexpr uint64_t kMaxStacks = 1 << 16, kMaxFrames = 4096;

// "OPEN" for GF_FOP_OPEN, from the types' glusterfs_fop_t; the number when
// the enum is not there.
std::string fop_name(Program& prog, int32_t op) {
  if (auto t = prog.types().find("glusterfs_fop_t"); t.ok())
    if (const Type* e = t.value()->strip(); e && e->kind == TypeKind::kEnum)
      for (const auto& en : e->enumerators)
        if (en.value == op) return en.name.rfind("GF_FOP_", 0) == 0 ? en.name.substr(7) : en.name;
  return std::to_string(op);
}

std::string xlator_name(const Ctx& c, uint64_t xl) {
  auto it = c.xl_index.find(xl);
  return it == c.xl_index.end() ? std::string("?") : c.r.xlators[it->second].name;
}

}  // namespace

void read_stacks(Ctx& c) {
  for (uint64_t ctx : c.r.ctxs) {
    auto pool = c.mem.read_u64(ctx + c.L[F::ctx_pool]);
    if (!pool.ok() || !pool.value()) continue;
    std::string stop;
    auto stacks = c.list(pool.value() + c.L[F::call_pool_all_frames], c.L[F::call_stack_all_frames],
                         kMaxStacks, &stop);
    if (!stop.empty())
      c.r.warnings.push_back(fmt::format("call pool {:#x}: stack list: {}", pool.value(), stop));
    for (uint64_t sa : stacks) {
      View v = view(c.mem, sa, c.L.size(T::call_stack));
      if (!v) continue;
      GfStack s;
      s.addr = sa;
      s.unique = v.u64(c.L[F::call_stack_unique]);
      s.state = v.u64(c.L[F::call_stack_state]);
      s.op = v.i32(c.L[F::call_stack_op]);
      s.pid = v.i32(c.L[F::call_stack_pid]);
      s.op_name = fop_name(c.prog, s.op);
      s.frames =
          c.list(sa + c.L[F::call_stack_myframes], c.L[F::call_frame_frames], kMaxFrames, &stop);
      if (!stop.empty())
        c.r.warnings.push_back(fmt::format("call stack {:#x}: frame list: {}", sa, stop));
      for (uint64_t f : s.frames) {
        auto xl = c.mem.read_u64(f + c.L[F::call_frame_this]);
        s.frame_xlators.push_back(xl.ok() ? xlator_name(c, xl.value()) : "?");
      }
      c.r.stacks.push_back(std::move(s));
    }
  }
}

namespace {

// The heap blocks each stack owns, by chunk index: what it is, and whose.
struct Owned {
  size_t stack;
  std::string what;
};

std::unordered_map<uint32_t, Owned> owned_blocks(Ctx& c, const RefIndex& ix) {
  const auto& chunks = ix.heap().in_use;
  GfBlockNamer names(c.r, c.mem);
  std::unordered_set<uint32_t> skeleton;  // the stacks and frames themselves
  auto chunk = [&](uint64_t a) { return a ? ix.chunk_at(a) : SIZE_MAX; };
  for (const auto& s : c.r.stacks) {
    if (size_t k = chunk(s.addr); k != SIZE_MAX) skeleton.insert(static_cast<uint32_t>(k));
    for (uint64_t f : s.frames)
      if (size_t k = chunk(f); k != SIZE_MAX) skeleton.insert(static_cast<uint32_t>(k));
  }
  std::unordered_map<uint32_t, Owned> out;
  // "gf_ob_mt_inode_t (GF_MALLOC, gv0-open-behind) at 0x... (the local of frame gv0-open-behind)"
  auto own = [&](size_t k, size_t si, const std::string& role) {
    if (k == SIZE_MAX || skeleton.count(static_cast<uint32_t>(k))) return;
    std::string n = names.name(chunks[k]);
    out.emplace(static_cast<uint32_t>(k),
                Owned{si, fmt::format("{} at {:#x} ({})", n.empty() ? "a block" : n, chunks[k].user,
                                      role)});
  };
  for (size_t si = 0; si < c.r.stacks.size(); ++si) {
    const GfStack& s = c.r.stacks[si];
    own(chunk(s.state), si, "the request state");
    for (size_t fi = 0; fi < s.frames.size(); ++fi) {
      auto local = c.mem.read_u64(s.frames[fi] + c.L[F::call_frame_local]);
      if (local.ok()) own(chunk(local.value()), si, "the local of frame " + s.frame_xlators[fi]);
      // Blocks that point at the frame: a call stub waiting to resume it.
      auto refs = ix.refs_into(s.frames[fi], c.L.size(T::call_frame));
      if (!refs.ok()) continue;
      for (const Ref& r : refs.value()) {
        if (r.kind != RefFrom::kChunk) continue;
        size_t k = ix.chunk_at(r.from);
        if (k != SIZE_MAX && !out.count(static_cast<uint32_t>(k)))
          own(k, si, "waiting on frame " + s.frame_xlators[fi]);
      }
    }
  }
  return out;
}

bool is_root(const GfInode& in) {
  static const Gfid kRoot = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return in.gfid == kRoot;
}

}  // namespace

void attribute_in_flight(Ctx& c) {
  if (c.r.stacks.empty() || !c.prog.core()) return;
  std::vector<GfInode*> todo;
  for (auto& t : c.r.itables)
    for (auto& l : t.lists)
      for (auto& in : l)
        if (!is_root(in) && in.ref > in.fds.size() + in.child_dentries) todo.push_back(&in);
  if (todo.empty()) return;
  RefIndexOptions o;
  o.skip_chunks = c.r.dead_pooled;
  auto ix = RefIndex::build(*c.prog.core(), c.prog.modules(), c.r.heap_walk, o);
  if (!ix.ok()) {
    c.r.warnings.push_back("operations in flight not attributed: " + ix.error().message);
    return;
  }
  const auto owned = owned_blocks(c, *ix.value());
  // One reference per operation: its blocks may each point at the inode
  // (a frame's local and the stub that will resume it), but counting them
  // all could explain away a leaked reference; counting one may leave a
  // reference an operation really holds twice unexplained, which is seen.
  for (GfInode* in : todo) {
    auto refs = ix.value()->refs_into(in->addr, c.L.size(T::inode));
    if (!refs.ok()) continue;
    std::map<size_t, GfInflightRef> by_stack;
    for (const Ref& r : refs.value()) {
      if (r.kind != RefFrom::kChunk || r.value != in->addr) continue;  // loc.inode, fd->inode
      size_t k = ix.value()->chunk_at(r.from);
      auto it = k == SIZE_MAX ? owned.end() : owned.find(static_cast<uint32_t>(k));
      if (it == owned.end()) continue;
      const uint64_t block = ix.value()->heap().in_use[k].user;
      auto [f, fresh] = by_stack.try_emplace(it->second.stack);
      const std::string& what = it->second.what;
      if (fresh) {
        f->second = {it->second.stack, block, what};
      } else if (f->second.what.find(what) == std::string::npos) {
        f->second.what += " and " + what;
      }
    }
    for (auto& [si, f] : by_stack) in->in_flight.push_back(std::move(f));
  }
}

}  // namespace lr::gf
