// The stack depot (lib/stackdepot.c): a handle names a pool (one of an array
// of 16 KiB pools) and a record's offset in it; the record holds the saved
// return addresses and its own handle. Which bits of a handle mean what, the
// pool array's name and the record's layout differ between kernels and come
// from linux-kernel.toml (types.handle_parts, types.stack_record,
// symbols.stack_pools). SLUB's slub_debug=U tracks keep their stacks here;
// so do page_owner, ref_tracker and kmemleak, which can reuse this.
#include <fmt/format.h>

#include <algorithm>

#include <cstring>

#include "kernel_internal.hpp"
#include "targets/linux/kernel_slab.hpp"

namespace lr {

namespace {
// DEPOT_POOL_SIZE / STACK_ALLOC_SIZE: PAGE_SIZE << 2 on every kernel with a
// depot; records never cross a pool.
constexpr uint64_t kPoolBytes = 4096 << 2;
constexpr uint64_t kMaxPools = 1u << 17;
constexpr uint64_t kMaxFrames = 256;
}  // namespace

struct StackDepot::Impl {
  const Memory* mem = nullptr;
  kint::Layout handle, record;
  std::unique_ptr<Expr> pool, valid, offset_bytes;
  uint64_t pools = 0, npools = 0;
  uint64_t r_size = 0, r_entries = 0, r_handle = 0;
  IntField r_size_f;
};

StackDepot::StackDepot(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StackDepot::~StackDepot() = default;

Result<std::unique_ptr<StackDepot>> StackDepot::open(KernelTarget& k) {
  auto d = std::make_unique<Impl>();
  d->mem = &k.mem();
  LR_ASSIGN(d->handle, kint::Layout::of(k, "handle_parts"));
  LR_ASSIGN(d->record, kint::Layout::of(k, "stack_record"));
  LR_ASSIGN(d->pool, d->handle.expr(k, "pool"));
  LR_ASSIGN(d->valid, d->handle.expr(k, "valid"));
  LR_ASSIGN(d->offset_bytes, d->handle.expr(k, "offset_bytes"));
  LR_ASSIGN(d->r_size, d->record.off("size"));
  LR_ASSIGN(d->r_size_f, d->record.field("size"));
  LR_ASSIGN(d->r_entries, d->record.off("entries"));
  LR_ASSIGN(d->r_handle, d->record.off("handle"));
  LR_ASSIGN(Variable pools, kint::kvariable(k, "stack_pools"));
  d->pools = pools.addr;
  // The pool array's length from its DWARF type (static void *stack_pools[N]).
  const Type* pt = pools.type ? pools.type->strip() : nullptr;
  d->npools = pt && pt->kind == TypeKind::kArray && pt->count ? pt->count : 8192;
  if (pt && pt->kind == TypeKind::kPointer) {
    // 7.x allocates the array at boot (void **stack_pools), pools_num long;
    // a handle's 17-bit pool index bounds it.
    uint64_t base = 0;
    if (!k.mem().read(pools.addr, &base, 8).ok() || !base)
      return make_error(Errc::kBadFormat,
                        fmt::format("the stack depot's pool array pointer at {:#x} is {}",
                                    pools.addr, base ? "not readable" : "NULL"));
    d->pools = base;
    auto n = kint::read_uint_var(k, "stack_pools_count");
    d->npools = std::min<uint64_t>(n.ok() ? n.value() : kMaxPools, kMaxPools);
  }
  if (d->handle.size != 4)
    return make_error(
        Errc::kBadFormat,
        fmt::format("union handle_parts is {} bytes, not a 32-bit handle", d->handle.size));
  return std::unique_ptr<StackDepot>(new StackDepot(std::move(d)));
}

Result<std::vector<uint64_t>> StackDepot::stack(uint32_t handle) const {
  const Impl& d = *impl_;
  if (handle == 0) return make_error(Errc::kInvalidArgument, "stack depot handle 0: no stack");
  uint8_t hb[4];
  std::memcpy(hb, &handle, 4);
  auto num = [&](const Expr& e) { return d.mem ? e.eval(*d.mem, hb, 0) : ExprValue{}; };
  ExprValue pool = num(*d.pool), valid = num(*d.valid), off = num(*d.offset_bytes);
  if (pool.kind != ExprValue::Kind::kInt || off.kind != ExprValue::Kind::kInt || !valid.truthy() ||
      pool.i < 0 || static_cast<uint64_t>(pool.i) >= d.npools)
    return make_error(Errc::kBadFormat,
                      fmt::format("stack depot handle {:#x}: not a valid handle (pool {}, {} "
                                  "pools)",
                                  handle, pool.i, d.npools));
  uint64_t base = 0;
  const uint64_t slot = d.pools + 8 * static_cast<uint64_t>(pool.i);
  if (!d.mem->read(slot, &base, 8).ok() || !base)
    return make_error(Errc::kBadFormat,
                      fmt::format("stack depot handle {:#x}: pool {} is {} (at {:#x})", handle,
                                  pool.i, base ? "not readable" : "not allocated", slot));
  const uint64_t rec = base + static_cast<uint64_t>(off.i);
  if (static_cast<uint64_t>(off.i) + d.r_entries > kPoolBytes)
    return make_error(
        Errc::kBadFormat,
        fmt::format("stack depot handle {:#x}: offset {} is outside its pool", handle, off.i));
  std::vector<uint8_t> rb(d.r_entries);
  if (!d.mem->read(rec, rb.data(), rb.size()).ok())
    return make_error(
        Errc::kBadFormat,
        fmt::format("stack depot handle {:#x}: record {:#x} is not readable", handle, rec));
  // The record names its own handle: one that names another is not this
  // handle's record (compare pool and offset; the extra bits are the user's).
  uint8_t own[4];
  std::memcpy(own, rb.data() + d.r_handle, 4);
  ExprValue opool = d.pool->eval(*d.mem, own, 0), ooff = d.offset_bytes->eval(*d.mem, own, 0);
  if (opool.i != pool.i || ooff.i != off.i)
    return make_error(Errc::kBadFormat,
                      fmt::format("stack depot handle {:#x}: the record at {:#x} belongs to "
                                  "another handle",
                                  handle, rec));
  const uint64_t n = static_cast<uint64_t>(d.r_size_f.load(rb.data())) & 0xffffffff;
  if (n == 0 || n > kMaxFrames || static_cast<uint64_t>(off.i) + d.r_entries + 8 * n > kPoolBytes)
    return make_error(
        Errc::kBadFormat,
        fmt::format("stack depot handle {:#x}: record {:#x} claims {} frames", handle, rec, n));
  std::vector<uint64_t> frames(n);
  if (!d.mem->read(rec + d.r_entries, frames.data(), 8 * n).ok())
    return make_error(Errc::kBadFormat,
                      fmt::format("stack depot handle {:#x}: frames at {:#x} are not readable",
                                  handle, rec + d.r_entries));
  return frames;
}

Result<std::vector<uint64_t>> track_stack(const KSlabTrack& t, const StackDepot* depot) {
  if (!t.frames.empty()) return t.frames;
  if (!t.handle) return make_error(Errc::kNotFound, "no stack recorded (handle 0)");
  if (!depot) return make_error(Errc::kNotFound, "this kernel's stack depot is not readable");
  return depot->stack(t.handle);
}

}  // namespace lr
