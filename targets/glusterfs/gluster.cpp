// GlusterFS profile, part 1: layouts, roots (ctx, graphs, xlators), the
// self-validation of the layouts against the core, mem-pools and memory
// accounting from one pass over the in-use heap chunks.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_set>

#include "corelib/debuginfo/unwind.hpp"
#include "gluster_internal.hpp"

namespace lr {

std::string format_gfid(const Gfid& g) {
  std::string s = hex_bytes(g.data(), 16);
  return s.substr(0, 8) + "-" + s.substr(8, 4) + "-" + s.substr(12, 4) + "-" + s.substr(16, 4) +
         "-" + s.substr(20);
}

const char* itable_list_name(int list) {
  static const char* names[] = {"active", "lru", "purge", "invalidate"};
  return list >= 0 && list < 4 ? names[list] : "?";
}

namespace gf {

View view(const Memory& m, uint64_t addr, uint64_t size) {
  View v;
  if (size == 0) return v;
  v.p = object_bytes(m, addr, size, v.own);
  v.size = v.p ? size : 0;
  return v;
}

std::string cstr(const Memory& m, uint64_t addr, size_t max) {
  if (addr == 0) return "";
  auto s = m.read_cstring(addr, max);
  return s.ok() ? s.value() : fmt::format("<unreadable {:#x}>", addr);
}

bool gf_header(const Memory& m, Memory::Window& w, uint64_t chunk, uint64_t room,
               const GfHeaderLayout& L, GfHeader* out) {
  constexpr uint64_t kTrailer = 4;
  // resolve_layout checked every field lies inside L.size bytes.
  if (L.size == 0 || room < L.size + kTrailer) return false;
  const uint8_t* h = m.direct(w, chunk, L.size);
  if (!h) return false;
  uint32_t magic;
  std::memcpy(&magic, h + L.magic, 4);
  if (magic != kHeaderMagic) return false;
  std::memcpy(&out->acct, h + L.acct, 8);
  std::memcpy(&out->size, h + L.bytes, 8);
  std::memcpy(&out->type, h + L.type, 4);
  if (out->size > room - L.size - kTrailer) return false;
  uint64_t at = chunk + L.size + out->size;
  const uint8_t* t = m.direct(w, at, kTrailer);
  uint8_t copy[kTrailer];
  if (!t && m.read(at, copy, kTrailer).ok()) t = copy;
  return t && t[0] == 0xBA && t[1] == 0xAD && t[2] == 0xF0 && t[3] == 0x0D;
}

namespace {

std::vector<uint64_t> finish_walk(Ctx& c, WalkResult w, uint64_t asked, std::string* stop) {
  c.budget -= std::min<uint64_t>(c.budget, w.objects.size());
  stop->clear();
  if (w.stop == WalkStop::kLimit && asked < w.objects.size() + 1 && c.budget == 0)
    *stop = "the analysis' node budget is exhausted";
  else if (!w.ok())
    *stop = fmt::format("{} after {} nodes{}{}", walk_stop_name(w.stop), w.objects.size(),
                        w.stop_detail.empty() ? "" : ": ", w.stop_detail);
  else if (w.issue_count)
    *stop = fmt::format("{} broken back link(s), first: {}", w.issue_count, w.issues.front().what);
  return std::move(w.objects);
}

WalkLimits limits(const Ctx& c, uint64_t limit) {
  WalkLimits lim;
  lim.max_nodes = std::min(limit, c.budget);
  return lim;
}

}  // namespace

std::vector<uint64_t> Ctx::list(uint64_t head, uint64_t member_off, uint64_t limit,
                                std::string* stop) {
  WalkLimits lim = limits(*this, limit);
  return finish_walk(*this, walk_list(mem, head, member_off, lim), lim.max_nodes, stop);
}

std::vector<uint64_t> Ctx::chain(uint64_t first, uint64_t next_off, uint64_t limit,
                                 std::string* stop) {
  stop->clear();
  if (!first) return {};
  WalkLimits lim = limits(*this, limit);
  return finish_walk(*this, walk_chain(mem, first, next_off, lim), lim.max_nodes, stop);
}

namespace {

// Types and members by the names glusterfs.toml declares, bound to the
// target's types through the profile (member alternatives, required
// members checked once); the first thing missing is kept as the error.
struct Resolver {
  ProfileBinder& bind;
  std::string error;
  struct T {
    const Type* type = nullptr;
    const BoundType* bound = nullptr;
  };
  T type(const char* name) {
    if (!error.empty()) return {};
    auto b = bind.bind(name);
    if (!b.ok()) {
      error = b.error().message;
      return {};
    }
    return {b.value()->type, b.value()};
  }
  uint64_t size(const T& t) { return t.type ? t.type->strip()->size : 0; }
  // The member at `path` directly inside `t` (crossing no pointer); null
  // with `error` set otherwise.
  const FieldLoc* field(const T& t, const char* path, FieldSpec* f) {
    if (!t.type || !error.empty()) return nullptr;
    ExprScope scope = bind.scope(t.bound, "glusterfs");
    auto r = resolve_field(t.type, path, false, &scope);
    if (!r.ok()) {
      error = r.error().message;
      return nullptr;
    }
    *f = std::move(r).value();
    if (f->hops.size() != 1) {
      error = fmt::format("{}.{} crosses a pointer", t.bound->c, path);
      return nullptr;
    }
    return &f->hops[0];
  }
  uint64_t off(const T& t, const char* path) {
    FieldSpec f;
    const FieldLoc* l = field(t, path, &f);
    return l ? l->offset : 0;
  }
  // A member the code reads as a `width`-byte integer or pointer: anything
  // else in a (hostile) types file is an error, not a misread.
  uint64_t off(const T& t, const char* path, uint64_t width) {
    FieldSpec f;
    const FieldLoc* l = field(t, path, &f);
    if (!l) return 0;
    const Type* ft = f.type ? f.type->strip() : nullptr;
    if (!ft || ft->size != width || l->offset + width > size(t))
      error =
          fmt::format("{}.{} is not a {}-byte field inside the struct", t.bound->c, path, width);
    return l->offset;
  }
  // A named expression of the type that is a constant (an enumerator the
  // types declare), as a 32-bit value.
  uint32_t constant(const T& t, const char* name) {
    if (!t.type || !error.empty()) return 0;
    auto v = bind.constant(t.bound, name);
    if (!v.ok()) {
      error = v.error().message;
      return 0;
    }
    if (v.value() < 0 || v.value() > UINT32_MAX)
      error = fmt::format("types.{} expression '{}' is not a 32-bit constant", t.bound->c, name);
    return static_cast<uint32_t>(v.value());
  }
};

}  // namespace

namespace {

// Every type and member the TOML declares, in its order; the headers'
// fields are also checked to be the width gf_header() reads them as.
void resolve_all(Resolver& R, Layout& L) {
  Resolver::T types[fields::kTCount];
  for (int i = 0; i < fields::kTCount; ++i) {
    types[i] = R.type(fields::kTypeNames[i]);
    L.sizes[i] = R.size(types[i]);
  }
  for (int i = 0; i < fields::kFCount; ++i) {
    const auto& m = fields::kFieldNames[i];
    L.offs[i] = R.off(types[static_cast<int>(m.type)], m.path);
  }
  for (int i = 0; i < fields::kKCount; ++i) {
    const auto& m = fields::kConstNames[i];
    if (m.path) L.consts[i] = R.constant(types[static_cast<int>(m.type)], m.path);
  }
}

// The headers GlusterFS puts before its blocks, read as fixed-width
// integers by gf_header(): a (hostile) types file giving them another width
// is an error, not a misread.
void resolve_headers(Resolver& R, Layout& L) {
  const Resolver::T h = R.type(fields::kTypeNames[static_cast<int>(T::mem_header)]);
  const Resolver::T p = R.type(fields::kTypeNames[static_cast<int>(T::pooled)]);
  auto checked = [&](const Resolver::T& t, F f, uint64_t width) {
    return R.off(t, fields::kFieldNames[static_cast<int>(f)].path, width);
  };
  GfHeaderLayout& H = L.hdr;
  H.size = L.size(T::mem_header);
  H.acct = checked(h, F::mem_header_mem_acct, 8);
  H.bytes = checked(h, F::mem_header_size, 8);
  H.type = checked(h, F::mem_header_type, 4);
  H.magic = checked(h, F::mem_header_magic, 4);
  H.pooled_size = L.size(T::pooled);
  H.pooled_magic = checked(p, F::pooled_magic, 8);
  H.pooled_p2 = checked(p, F::pooled_power_of_two, 4);
  H.pooled_pool = checked(p, F::pooled_pool, 8);
}

}  // namespace

Result<Layout> resolve_layout(ProfileBinder& bind) {
  Resolver R{bind, {}};
  Layout L{};
  resolve_all(R, L);
  resolve_headers(R, L);
  if (!R.error.empty())
    return make_error(
        Errc::kNotFound,
        "GlusterFS types: " + R.error +
            " (no debuginfo for GlusterFS? 'leakref types gluster' synthesizes them)");
  return L;
}

namespace {

constexpr uint64_t kMaxXlators = 4096, kMaxPools = 4096, kMaxGraphs = 1024;

// Adds the xlator at `a` (and, for graph members, what hangs below it).
size_t add_xlator(Ctx& c, uint64_t a, uint64_t graph_hint) {
  if (auto it = c.xl_index.find(a); it != c.xl_index.end()) return it->second;
  View v = view(c.mem, a, c.L.size(T::xlator));
  GfXlator x;
  x.addr = a;
  if (v) {
    x.name = cstr(c.mem, v.u64(c.L[F::xlator_name]));
    x.type = cstr(c.mem, v.u64(c.L[F::xlator_type]));
    x.ctx = v.u64(c.L[F::xlator_ctx]);
    x.graph = v.u64(c.L[F::xlator_graph]);
    x.itable = v.u64(c.L[F::xlator_itable]);
    x.mem_acct = v.u64(c.L[F::xlator_mem_acct]);
    x.priv = v.u64(c.L[F::xlator_private]);
    x.xl_id = v.i32(c.L[F::xlator_xl_id]);
  } else {
    c.r.warnings.push_back(
        fmt::format("xlator {:#x} is unreadable: {}", a, c.mem.why_unreadable(a)));
  }
  if (!x.graph) x.graph = graph_hint;
  c.r.xlators.push_back(std::move(x));
  c.xl_index[a] = c.r.xlators.size() - 1;
  return c.r.xlators.size() - 1;
}

void read_graphs(Ctx& c, uint64_t ctx) {
  View cv = view(c.mem, ctx, c.L.size(T::ctx));
  if (!cv) {
    c.r.warnings.push_back(
        fmt::format("ctx {:#x} is unreadable: {}", ctx, c.mem.why_unreadable(ctx)));
    return;
  }
  uint64_t active = cv.u64(c.L[F::ctx_active]);
  std::string stop, xstop;
  for (uint64_t ga : c.list(ctx + c.L[F::ctx_graphs], c.L[F::graph_list], kMaxGraphs, &stop)) {
    View gv = view(c.mem, ga, c.L.size(T::graph));
    if (!gv) continue;
    GfGraph G;
    G.addr = ga;
    G.ctx = ctx;
    G.id = gv.i32(c.L[F::graph_id]);
    G.xl_count = gv.i32(c.L[F::graph_xl_count]);
    G.active = ga == active;
    // Top-down through ->next, then every xlator_list of children (brick
    // multiplexing hangs extra bricks there).
    std::vector<uint64_t> todo =
        c.chain(gv.u64(c.L[F::graph_first]), c.L[F::xlator_next], kMaxXlators, &xstop);
    if (!xstop.empty())
      c.r.warnings.push_back(fmt::format("graph {:#x} xlator chain: {}", ga, xstop));
    std::unordered_set<uint64_t> seen(todo.begin(), todo.end());
    for (size_t i = 0; i < todo.size() && todo.size() < kMaxXlators; ++i) {
      auto l = c.mem.read_u64(todo[i] + c.L[F::xlator_children]);
      for (uint64_t li :
           c.chain(l.ok() ? l.value() : 0, c.L[F::xlator_list_next], kMaxXlators, &xstop)) {
        View lv = view(c.mem, li, c.L.size(T::xlator_list));
        uint64_t child = lv.u64(c.L[F::xlator_list_xlator]);
        if (child && seen.insert(child).second) todo.push_back(child);
      }
    }
    for (uint64_t x : todo) G.xlators.push_back(add_xlator(c, x, ga));
    c.r.graphs.push_back(std::move(G));
  }
  if (!stop.empty()) c.r.warnings.push_back(fmt::format("ctx {:#x} graphs list: {}", ctx, stop));
  if (uint64_t root = cv.u64(c.L[F::ctx_root])) c.r.xlators[add_xlator(c, root, 0)].is_root = true;
}

// Every pool on the ctx's mempool_list.
void read_pools(Ctx& c, uint64_t ctx) {
  std::string stop;
  for (uint64_t pa :
       c.list(ctx + c.L[F::ctx_mempool_list], c.L[F::mem_pool_owner], kMaxPools, &stop)) {
    View v = view(c.mem, pa, c.L.size(T::mem_pool));
    if (!v) continue;
    GfPool p;
    p.addr = pa;
    p.ctx = v.u64(c.L[F::mem_pool_ctx]);
    p.sizeof_type = v.u64(c.L[F::mem_pool_sizeof_type]);
    p.name = cstr(c.mem, v.u64(c.L[F::mem_pool_name]));
    p.xl_name = cstr(c.mem, v.u64(c.L[F::mem_pool_xl_name]));
    p.active = v.i64(c.L[F::mem_pool_active]);
    p.shared = v.u64(c.L[F::mem_pool_pool]);
    auto p2 = c.mem.read_as<uint32_t>(p.shared + c.L[F::mem_pool_shared_power_of_two]);
    p.padded = p2.ok() && p2.value() < 32 ? (1ull << p2.value()) : 0;
    c.r.pools.push_back(std::move(p));
  }
  if (!stop.empty()) c.r.warnings.push_back(fmt::format("ctx {:#x} mempool_list: {}", ctx, stop));
}

// The layouts must describe this core: every pool whose name is a type we
// know records that type's size, and GF_MALLOC'd mem_pool structs record
// sizeof(struct mem_pool). A wrong define (no atomic builtins) moves every
// field silently, so this refuses rather than print plausible garbage.
Result<void> validate(Ctx& c, const std::map<uint64_t, uint64_t>& mem_pool_sizes) {
  uint64_t most = 0, votes = 0;
  for (auto [sz, n] : mem_pool_sizes)
    if (n > votes) most = sz, votes = n;
  if (votes && most != c.L.size(T::mem_pool))
    return make_error(
        Errc::kBadFormat,
        fmt::format(
            "the GlusterFS types do not match this core: {} GF_MALLOC'd mem_pool "
            "blocks record size {}, the types say sizeof(struct mem_pool) = {}{}",
            votes, most, c.L.size(T::mem_pool),
            c.L.size(T::mem_pool) > most ? " (types built without HAVE_ATOMIC_BUILTINS?)" : ""));
  size_t matched = 0;
  for (auto& p : c.r.pools) {
    auto t = c.prog.types().find(p.name);
    if (!t.ok()) continue;
    p.type_size = static_cast<int64_t>(t.value()->strip()->size);
    if (static_cast<uint64_t>(p.type_size) != p.sizeof_type)
      return make_error(
          Errc::kBadFormat,
          fmt::format("the GlusterFS types do not match this core: mem-pool '{}' records "
                      "sizeof-type {}, the types say {}{}",
                      p.name, p.sizeof_type, p.type_size,
                      static_cast<uint64_t>(p.type_size) > p.sizeof_type
                          ? " (types built without HAVE_ATOMIC_BUILTINS?)"
                          : ""));
    std::string v = fmt::format("{} {} == {}", p.name, p.sizeof_type, p.type_size);
    if (std::find(c.r.validated.begin(), c.r.validated.end(), v) == c.r.validated.end())
      c.r.validated.push_back(std::move(v));
    ++matched;
  }
  if (votes)
    c.r.validated.push_back(fmt::format("struct mem_pool {} == {}", most, c.L.size(T::mem_pool)));
  if (!c.r.pools.empty() && matched == 0)
    return make_error(
        Errc::kBadFormat,
        "the GlusterFS types cannot be validated: no mem-pool names a type they define");
  return {};
}

}  // namespace
}  // namespace gf

namespace {

using namespace gf;

// Each xlator's memory accounting: its records by type, read once per
// mem_acct (xlators may share one); the index of each by address.
std::unordered_map<uint64_t, size_t> read_memacct(Ctx& c) {
  const Memory& mem = c.mem;
  const Layout& L = c.L;
  GlusterReport& r = c.r;
  std::unordered_map<uint64_t, size_t> acct_at;
  for (size_t i = 0; i < r.xlators.size(); ++i) {
    uint64_t a = r.xlators[i].mem_acct;
    if (!a || acct_at.count(a)) continue;
    View av = view(mem, a, L[F::mem_acct_rec]);
    if (!av) continue;
    GfMemAcct ma;
    ma.xlator = i;
    ma.addr = a;
    ma.num_types = std::min<uint32_t>(av.u32(L[F::mem_acct_num_types]), 1u << 16);
    ma.refcnt = av.i64(L[F::mem_acct_refcnt]);
    ma.types.resize(ma.num_types);
    View recs = view(mem, a + L[F::mem_acct_rec], ma.num_types * L.size(T::mem_acct_rec));
    for (uint32_t t = 0; t < ma.num_types; ++t) {
      ma.types[t].type = t;
      if (!recs) continue;
      ma.types[t].num_allocs =
          recs.i64(t * L.size(T::mem_acct_rec) + L[F::mem_acct_rec_num_allocs]);
      uint64_t ts = recs.u64(t * L.size(T::mem_acct_rec) + L[F::mem_acct_rec_typestr]);
      if (ts) ma.types[t].typestr = cstr(mem, ts, 128);
    }
    acct_at[a] = r.memacct.size();
    r.memacct.push_back(std::move(ma));
  }
  return acct_at;
}

// One pass over the heap's in-use chunks: a pooled object of a known pool
// is live in it, one mem_put() marked waits on a free list, and a GF_MALLOC
// block counts for its xlator's type.
void classify_blocks(Ctx& c, const HeapWalk& hw,
                     const std::unordered_map<uint64_t, size_t>& pool_at,
                     const std::vector<uint32_t>& pool_p2,
                     const std::unordered_map<uint64_t, size_t>& acct_at) {
  const Memory& mem = c.mem;
  const Layout& L = c.L;
  GlusterReport& r = c.r;
  Memory::Window win;
  GfHeader gh;
  const GfHeaderLayout& H = L.hdr;
  for (const auto& ch : hw.in_use) {
    const uint8_t* h = mem.direct(win, ch.user, H.pooled_size);
    if (!h) continue;
    uint64_t magic, pool;
    std::memcpy(&magic, h + H.pooled_magic, 8);
    if (magic == kPoolMagic && ch.usable() >= H.pooled_size) {
      std::memcpy(&pool, h + H.pooled_pool, 8);
      auto it = pool_at.find(pool);
      uint32_t p2;
      std::memcpy(&p2, h + H.pooled_p2, 4);
      if (it != pool_at.end() && p2 == pool_p2[it->second]) {
        r.pools[it->second].live.push_back(ch.user + H.pooled_size);
        ++r.pooled_live;
        continue;
      }
    }
    if (magic == kPoolInvalidMagic && ch.usable() >= H.pooled_size) {
      // mem_put() marks the header; the chunk waits on a pool free list.
      std::memcpy(&pool, h + H.pooled_pool, 8);
      if (auto pit = pool_at.find(pool); pit != pool_at.end()) {
        r.dead_pooled.push_back(ch.user);
        r.dead_pool.push_back(static_cast<uint32_t>(pit->second));
        continue;
      }
    }
    if (!gf_header(mem, win, ch.user, ch.usable(), L.hdr, &gh)) continue;
    auto it = acct_at.find(gh.acct);
    if (it == acct_at.end()) continue;
    GfMemAcct& ma = r.memacct[it->second];
    if (gh.type >= ma.num_types) continue;
    ma.types[gh.type].live_blocks++;
    ma.types[gh.type].live_bytes += gh.size;
    ++r.gf_blocks;
  }
}

// The threads stopped inside GlusterFS's allocator ("thread 812 in
// __gf_free"). __gf_calloc counts a block in two steps (mem-pool.c,
// gf_mem_set_acct_info, inlined: num_allocs++ under the record's lock,
// then the header written), __gf_free and mem_put undo them in two more:
// a core taken between them has a counter one away from the heap, and
// that is the process's state, not a leak.
std::vector<std::string> threads_in_allocator(Program& prog) {
  static constexpr std::string_view kFns[] = {"__gf_calloc", "__gf_malloc", "__gf_realloc",
                                              "__gf_free",   "mem_get",     "mem_get0",
                                              "mem_put",     "gf_vasprintf"};
  std::vector<std::string> out;
  const CoreFile* core = prog.core();
  if (!core) return out;
  for (const ThreadInfo& t : core->threads()) {
    const auto frames = unwind_thread(prog.mem(), prog.modules(), t, 12);
    for (size_t i = 0; i < frames.size(); ++i) {
      SymbolHit h = prog.modules().symbolize(i ? frames[i].pc - 1 : frames[i].pc);
      if (!h.sym || std::find(std::begin(kFns), std::end(kFns), h.sym->name) == std::end(kFns))
        continue;
      out.push_back(fmt::format("thread {} in {}", t.tid, h.sym->name));
      break;
    }
  }
  return out;
}

// A counter against what the heap holds: a mismatch, or one the threads
// inside the allocator may account for (each moves a count by one).
void counter_finding(GlusterReport& r, const std::vector<std::string>& busy, uint64_t addr,
                     int64_t counted, uint64_t found, std::string what) {
  const uint64_t off = static_cast<uint64_t>(counted) > found ? counted - found : found - counted;
  if (off == 0) return;
  if (off <= busy.size())
    r.findings.push_back({"counter-in-flux", addr,
                          fmt::format("{}; {} at the dump (a count moves in two steps there)", what,
                                      fmt::join(busy, ", "))});
  else
    r.findings.push_back({"counter-mismatch", addr, std::move(what)});
}

// Counters GlusterFS keeps against what the heap holds.
void counter_findings(GlusterReport& r, const std::vector<std::string>& busy) {
  for (auto& ma : r.memacct) {
    std::erase_if(ma.types,
                  [](const GfMemType& t) { return t.num_allocs == 0 && t.live_blocks == 0; });
    for (const auto& t : ma.types)
      if (t.num_allocs >= 0)
        counter_finding(
            r, busy, ma.addr, t.num_allocs, t.live_blocks,
            fmt::format("{}: {} num_allocs={} but {} live blocks in the heap",
                        r.xlators[ma.xlator].name, t.typestr, t.num_allocs, t.live_blocks));
  }
  for (const auto& p : r.pools)
    if (p.active >= 0)
      counter_finding(r, busy, p.addr, p.active, p.live.size(),
                      fmt::format("mem-pool {} ({}): active-count={} but {} live objects in "
                                  "the heap",
                                  p.name, p.xl_name, p.active, p.live.size()));
}

}  // namespace

Result<GlusterReport> analyze_gluster(Program& prog, const GlusterSections& sec) {
  using namespace gf;
  auto t0 = std::chrono::steady_clock::now();
  GlusterReport r;
  const Memory& mem = prog.mem();
  Module* lib = prog.modules().by_name("libglusterfs.so.0");
  if (!lib)
    return make_error(Errc::kNotFound, "libglusterfs.so.0 is not mapped: not a GlusterFS process");
  LR_ASSIGN(const Profile* prof, builtin_profile());
  ProfileBinder bind(prog, *prof);
  auto gctx = bind.symbol("global_ctx");
  auto gxl = bind.symbol("global_xlator");
  if (!gctx.ok() && !gxl.ok())
    return make_error(Errc::kNotFound, "libglusterfs exports neither global_ctx nor global_xlator");
  LR_ASSIGN(Layout L, resolve_layout(bind));
  Ctx c{mem, prog, L, r, {}};
  c.bind = &bind;

  auto add_ctx = [&](uint64_t a) {
    if (a && std::find(r.ctxs.begin(), r.ctxs.end(), a) == r.ctxs.end()) r.ctxs.push_back(a);
  };
  if (gctx.ok())
    if (auto v = mem.read_u64(gctx.value()); v.ok()) add_ctx(v.value());
  if (gxl.ok()) {
    uint64_t a = gxl.value();
    size_t gi = add_xlator(c, a, 0);
    r.xlators[gi].is_global = true;
    add_ctx(r.xlators[gi].ctx);
  }

  // One heap pass finds GF_MALLOC'd mem_pool structs (more ctxs in gfapi,
  // and a layout check) before the pool and accounting scans need them.
  auto th = std::chrono::steady_clock::now();
  auto hw_r = walk_heap(prog);
  if (!hw_r.ok()) return make_error(hw_r.error().code, "glibc heap: " + hw_r.error().message);
  HeapWalk& hw = hw_r.value();
  r.heap = hw.stats;
  for (auto& w : hw.warnings) r.warnings.push_back("heap: " + w);
  std::map<uint64_t, uint64_t> mem_pool_sizes;
  Memory::Window win;
  GfHeader gh;
  for (const auto& ch : hw.in_use) {
    if (!gf_header(mem, win, ch.user, ch.usable(), L.hdr, &gh) ||
        gh.type != L.constant(K::mem_header_mt_mem_pool))
      continue;
    mem_pool_sizes[gh.size]++;
    if (gh.size == L.size(T::mem_pool))
      if (auto ctx = mem.read_u64(ch.user + L.hdr.size + L[F::mem_pool_ctx]); ctx.ok())
        add_ctx(ctx.value());
  }
  if (r.ctxs.empty()) return make_error(Errc::kNotFound, "no glusterfs_ctx_t: global_ctx is NULL");

  for (uint64_t ctx : r.ctxs) read_pools(c, ctx);
  LR_TRY(validate(c, mem_pool_sizes));
  for (uint64_t ctx : r.ctxs) read_graphs(c, ctx);

  // Pools and accounting records by address, then one classifying pass.
  std::unordered_map<uint64_t, size_t> pool_at;
  std::vector<uint32_t> pool_p2(r.pools.size());
  for (size_t i = 0; i < r.pools.size(); ++i) {
    pool_at[r.pools[i].addr] = i;
    pool_p2[i] = r.pools[i].padded ? __builtin_ctzll(r.pools[i].padded) : 0;
  }
  std::unordered_map<uint64_t, size_t> acct_at = read_memacct(c);
  classify_blocks(c, hw, pool_at, pool_p2, acct_at);
  r.heap_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - th).count();
  counter_findings(r, threads_in_allocator(prog));

  if (sec.itable) read_itables(c);
  read_iobufs(c);
  if (sec.dicts) read_dicts(c);
  uint64_t root_priv = 0;
  for (const auto& x : r.xlators)
    if (x.is_root) root_priv = x.priv;
  if (sec.clients || sec.fds) read_clients(c, root_priv);
  r.heap_walk = std::move(hw);
  r.headers = L.hdr;
  r.dict_size = L.size(T::dict);
  r.fd_size = L.size(T::fd);
  read_stacks(c);
  if (sec.itable) attribute_in_flight(c);
  if (sec.itable) check_invariants(c);
  r.total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

GfBlockNamer::GfBlockNamer(const GlusterReport& r, const Memory& mem) : r_(r), mem_(mem) {
  for (size_t i = 0; i < r.pools.size(); ++i)
    for (uint64_t o : r.pools[i].live) pooled_[o] = i;
  for (size_t i = 0; i < r.memacct.size(); ++i) acct_[r.memacct[i].addr] = i;
  for (size_t i = 0; i < r.dead_pooled.size() && i < r.dead_pool.size(); ++i)
    dead_[r.dead_pooled[i]] = r.dead_pool[i];
}

std::string GfBlockNamer::name(const HeapChunk& c) const {
  Parts p = parts(c);
  return p.type.empty() ? "" : fmt::format("{} ({}, {})", p.type, p.how, p.xlator);
}

GfBlockNamer::Parts GfBlockNamer::parts(const HeapChunk& c) const {
  // A pooled object, in use or put back on its pool's free lists: its pool.
  auto pool = [this](size_t i) { return Parts{r_.pools[i].name, "pool", r_.pools[i].xl_name}; };
  if (auto it = pooled_.find(c.user + r_.headers.pooled_size); it != pooled_.end())
    return pool(it->second);
  if (auto it = dead_.find(c.user); it != dead_.end()) return pool(it->second);
  Memory::Window w;
  gf::GfHeader gh;
  if (!gf::gf_header(mem_, w, c.user, c.usable(), r_.headers, &gh)) return {};
  auto it = acct_.find(gh.acct);
  if (it == acct_.end()) return {};
  const GfMemAcct& ma = r_.memacct[it->second];
  // Types with no counter and no live block were dropped from the report.
  for (const auto& t : ma.types)
    if (t.type == gh.type && !t.typestr.empty())
      return {t.typestr, "GF_MALLOC", r_.xlators[ma.xlator].name};
  return {fmt::format("type {}", gh.type), "GF_MALLOC", r_.xlators[ma.xlator].name};
}

}  // namespace lr
