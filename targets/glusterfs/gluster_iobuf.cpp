// GlusterFS's iobuf arenas: mmapped regions outside the heap, cut into
// fixed-size I/O buffers. The report keeps each arena's region and which of
// its buffers are in use, so that an account can place those bytes (a
// statedump's [arena.N] sections give the same counters).
#include <fmt/format.h>

#include <algorithm>

#include "targets/glusterfs/gluster_internal.hpp"

namespace lr::gf {

namespace {

// Bounds a hostile core cannot push past: arenas per pool, buffers per
// arena, bytes per arena (GlusterFS's largest is 2 x 1 MiB).
constexpr uint64_t kMaxArenas = 4096, kMaxPages = 1u << 16, kMaxArenaBytes = uint64_t{1} << 30;

// Which buffers are in use, from the arena's iobufs array: each iobuf's
// ptr must be its buffer's address (mem_base + i * page_size), else the
// array does not describe this region and nothing is said of it.
void read_buffers(Ctx& c, GfIobufArena& a, uint64_t iobufs) {
  const uint64_t isz = c.L.size(T::iobuf);
  View v = view(c.mem, iobufs, a.page_count * isz);
  if (!v) {
    a.why = fmt::format("its iobufs array {:#x} is unreadable", iobufs);
    return;
  }
  std::vector<bool> active(a.page_count);
  for (uint64_t i = 0; i < a.page_count; ++i) {
    if (v.u64(i * isz + c.L[F::iobuf_ptr]) != a.mem_base + i * a.page_size) {
      a.why = fmt::format("iobuf {} of its array does not point at buffer {}", i, i);
      return;
    }
    active[i] = v.i64(i * isz + c.L[F::iobuf_ref]) > 0;
  }
  a.active = std::move(active);
}

GfIobufArena read_arena(Ctx& c, uint64_t addr) {
  GfIobufArena a;
  a.addr = addr;
  View v = view(c.mem, addr, c.L.size(T::iobuf_arena));
  if (!v) {
    a.why = "the arena is unreadable";
    return a;
  }
  a.mem_base = v.u64(c.L[F::iobuf_arena_mem_base]);
  a.arena_size = v.u64(c.L[F::iobuf_arena_arena_size]);
  a.page_size = v.u64(c.L[F::iobuf_arena_page_size]);
  a.page_count = v.u64(c.L[F::iobuf_arena_page_count]);
  a.active_cnt = v.i32(c.L[F::iobuf_arena_active_cnt]);
  a.passive_cnt = v.i32(c.L[F::iobuf_arena_passive_cnt]);
  // Each bound first, so that the product below cannot wrap.
  if (!a.mem_base || !a.page_size || !a.page_count || a.page_count > kMaxPages ||
      a.arena_size > kMaxArenaBytes || a.page_size > a.arena_size ||
      a.mem_base > UINT64_MAX - a.arena_size || a.page_size * a.page_count != a.arena_size)
    a.why = fmt::format("its region ({:#x}, {} bytes as {} buffers of {}) does not add up",
                        a.mem_base, a.arena_size, a.page_count, a.page_size);
  else
    a.region = true, read_buffers(c, a, v.u64(c.L[F::iobuf_arena_iobufs]));
  return a;
}

}  // namespace

void read_iobufs(Ctx& c) {
  std::vector<uint64_t> pools;  // gfapi's ctxs each have one; never read one twice
  for (uint64_t ctx : c.r.ctxs) {
    auto pool = c.mem.read_u64(ctx + c.L[F::ctx_iobuf_pool]);
    if (!pool.ok() || !pool.value()) continue;  // a ctx without one (gfapi's before init)
    if (std::find(pools.begin(), pools.end(), pool.value()) != pools.end()) continue;
    pools.push_back(pool.value());
    std::string stop;
    for (uint64_t a : c.list(pool.value() + c.L[F::iobuf_pool_all_arenas],
                             c.L[F::iobuf_arena_all_list], kMaxArenas, &stop)) {
      GfIobufArena arena = read_arena(c, a);
      if (!arena.why.empty())
        c.r.warnings.push_back(fmt::format("iobuf arena {:#x}: {}", a, arena.why));
      c.r.iobuf_arenas.push_back(std::move(arena));
    }
    if (!stop.empty())
      c.r.warnings.push_back(fmt::format("iobuf pool {:#x} all_arenas: {}", pool.value(), stop));
  }
}

}  // namespace lr::gf
