// SLUB: caches from slab_caches, their slabs from one pass over the struct
// page array, free objects from each slab's freelist and its CPU's lockless
// freelist. Members, expressions (which page heads a slab, which caches
// store tracks) and symbols come from linux-kernel.toml; what is here is
// SLUB's algorithm, which no layout describes:
//  - kmem_cache.oo packs (order << 16) | objects per slab;
//  - a hardened free pointer is stored as ptr ^ random ^ swab(its address);
//  - object i of a slab is at slab_address + red_left_pad + i * size, and a
//    free pointer points at an object (past its left red zone);
//  - a CPU's active slab holds its free objects in that CPU's freelist (and
//    remote frees in slab->freelist); every other slab keeps them in
//    slab->freelist and counts the rest in slab->inuse;
//  - with SLAB_STORE_USER an object's alloc and free tracks follow its
//    metadata: at inuse (+ a pointer when the free pointer is stored outside
//    the object, offset >= inuse);
//  - a sheaf (6.18+; the only per-CPU cache since 7.0) holds objects taken
//    from slabs, which count them in inuse: they are free to the cache's
//    users, so they count as free here, not allocated.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "corelib/base/names.hpp"
#include "kernel_internal.hpp"
#include "targets/linux/kernel_slab.hpp"

namespace lr {

const char* slab_where_name(KSlabWhere w) {
  switch (w) {
    case KSlabWhere::kCpu:
      return "cpu";
    case KSlabWhere::kCpuPartial:
      return "cpu-partial";
    case KSlabWhere::kNodePartial:
      return "node-partial";
    case KSlabWhere::kFull:
      return "full";
    case KSlabWhere::kOther:
      break;
  }
  return "other";
}

namespace {

using kint::Layout;
using kint::read_uint_var;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxCpus = 8192, kMaxNodes = 1024;
constexpr uint64_t kMaxPartialChain = 1u << 20;
// More objects than any sheaf SLUB sizes (its capacities are tens to a few
// hundred): a corrupt sheaf_capacity cannot make a read of gigabytes.
constexpr uint64_t kMaxSheafObjects = 1u << 16;
constexpr size_t kMaxWarnings = 1000;
// Struct pages in a row the scan may find unreadable before it stops: the
// struct pages of 1 TiB of RAM, more than any hole between a real machine's
// memory ranges, while a corrupt max_pfn (up to 2^40) would otherwise mean
// billions of failed reads.
constexpr uint64_t kMaxHolePages = uint64_t{1} << 28;

// Offsets and expressions, resolved once per call.
struct SlubLayout {
  Layout cache, cpu, node, slab, page, track;
  uint64_t c_list, c_name;
  std::optional<uint64_t> c_cpu_slab;  // until 7.0
  // Node i's kmem_cache_node pointer at c_node + i * node_stride, its barn
  // (sheaves) pointer, when there is one, at c_barn + i * node_stride.
  uint64_t c_node = 0, node_stride = 8;
  std::optional<uint64_t> c_barn, n_barn;  // in per_node[] (7.0+), in kmem_cache_node (6.18)
  // Sheaves (6.18+): a CPU's, a sheaf's objects, a barn's lists.
  std::optional<uint64_t> c_cpu_sheaves;
  Layout pcs, sheaf, barn;
  std::vector<uint64_t> pcs_ptrs;  // main, spare, rcu_free
  uint64_t sh_cache = 0, sh_objects = 0, sh_list = 0, b_full = 0, b_empty = 0;
  IntField sh_size, c_sheaf_capacity;
  bool has_sheaf_capacity = false;
  IntField c_size, c_object_size, c_offset, c_inuse, c_flags, c_red_left_pad, c_oo, c_random;
  bool has_random = false;
  std::unique_ptr<Expr> store_user, red_zone, no_leak_trace, slab_head;
  uint64_t cpu_freelist = 0, cpu_slab = 0;
  std::optional<uint64_t> cpu_partial;
  uint64_t n_partial;
  IntField n_nr_partial, n_nr_slabs, n_total_objects;
  bool has_counters = false;
  std::optional<uint64_t> n_full;
  uint64_t s_cache, s_freelist, s_list;
  std::optional<uint64_t> s_next;
  IntField s_inuse, s_objects, s_frozen;
  uint64_t t_addr, t_cpu, t_pid, t_when;
  std::optional<uint64_t> t_handle;
  uint64_t t_addrs = 0, t_naddrs = 0;  // addrs[] (before 5.17): where, how many
  IntField t_cpu_f, t_pid_f;
};

Result<std::optional<uint64_t>> optional_off(const Layout& l, const char* m) {
  if (l.bound->missing.count(m)) return std::optional<uint64_t>{};
  LR_ASSIGN(uint64_t o, l.off(m));
  return std::optional<uint64_t>{o};
}

// Where a cache keeps its nodes' lists: node[] of pointers until 6.19,
// per_node[] of {barn, node} since 7.0.
Result<void> node_layout(KernelTarget& k, SlubLayout& L) {
  const Layout& c = L.cache;
  LR_ASSIGN(L.n_barn, optional_off(L.node, "barn"));
  if (!c.bound->missing.count("node")) {
    LR_ASSIGN(L.c_node, c.off("node"));
    return {};
  }
  if (c.bound->missing.count("per_node"))
    return make_error(Errc::kNotFound,
                      fmt::format("{} has neither node nor per_node: this kernel keeps its slab "
                                  "lists in a way linux-kernel.toml does not describe",
                                  c.type->display()));
  LR_ASSIGN(Layout pn, Layout::of(k, "kmem_cache_per_node_ptrs"));
  LR_ASSIGN(uint64_t base, c.off("per_node"));
  LR_ASSIGN(uint64_t node, pn.off("node"));
  LR_ASSIGN(uint64_t barn, pn.off("barn"));
  L.c_node = base + node;
  L.c_barn = base + barn;
  L.node_stride = pn.size;
  return {};
}

// A CPU's slab (until 7.0) and its sheaves (6.18+): one of them at least.
Result<void> cpu_layout(KernelTarget& k, SlubLayout& L) {
  const Layout& c = L.cache;
  LR_ASSIGN(L.c_cpu_slab, optional_off(c, "cpu_slab"));
  LR_ASSIGN(L.c_cpu_sheaves, optional_off(c, "cpu_sheaves"));
  if (!L.c_cpu_slab && !L.c_cpu_sheaves)
    return make_error(Errc::kNotFound,
                      fmt::format("{} has neither cpu_slab nor cpu_sheaves: this kernel keeps "
                                  "its per-CPU objects in a way linux-kernel.toml does not "
                                  "describe",
                                  c.type->display()));
  if (L.c_cpu_slab) {
    LR_ASSIGN(L.cpu, Layout::of(k, "kmem_cache_cpu"));
    LR_ASSIGN(L.cpu_freelist, L.cpu.off("freelist"));
    LR_ASSIGN(L.cpu_slab, L.cpu.off("slab"));
    LR_ASSIGN(L.cpu_partial, optional_off(L.cpu, "partial"));
  }
  if (!L.c_cpu_sheaves) return {};
  LR_ASSIGN(L.pcs, Layout::of(k, "slub_percpu_sheaves"));
  LR_ASSIGN(L.sheaf, Layout::of(k, "slab_sheaf"));
  LR_ASSIGN(L.barn, Layout::of(k, "node_barn"));
  for (const char* m : {"main", "spare", "rcu_free"}) {
    LR_ASSIGN(auto o, optional_off(L.pcs, m));
    if (o) L.pcs_ptrs.push_back(*o);
  }
  LR_ASSIGN(L.sh_cache, L.sheaf.off("cache"));
  LR_ASSIGN(L.sh_objects, L.sheaf.off("objects"));
  LR_ASSIGN(L.sh_list, L.sheaf.off("barn_list"));
  LR_ASSIGN(L.sh_size, L.sheaf.field("size"));
  LR_ASSIGN(L.b_full, L.barn.off("sheaves_full"));
  LR_ASSIGN(L.b_empty, L.barn.off("sheaves_empty"));
  L.has_sheaf_capacity = !c.bound->missing.count("sheaf_capacity");
  if (L.has_sheaf_capacity) {
    LR_ASSIGN(L.c_sheaf_capacity, c.field("sheaf_capacity"));
  }
  return {};
}

Result<SlubLayout> slub_layout(KernelTarget& k) {
  SlubLayout L;
  LR_ASSIGN(L.cache, Layout::of(k, "kmem_cache"));
  LR_ASSIGN(L.node, Layout::of(k, "kmem_cache_node"));
  LR_ASSIGN(L.slab, Layout::of(k, "slab"));
  LR_ASSIGN(L.page, Layout::of(k, "page"));
  LR_ASSIGN(L.track, Layout::of(k, "track"));
  const Layout& c = L.cache;
  LR_ASSIGN(L.c_list, c.off("list"));
  LR_ASSIGN(L.c_name, c.off("name"));
  LR_TRY(node_layout(k, L));
  LR_TRY(cpu_layout(k, L));
  LR_ASSIGN(L.c_size, c.field("size"));
  LR_ASSIGN(L.c_object_size, c.field("object_size"));
  LR_ASSIGN(L.c_offset, c.field("offset"));
  LR_ASSIGN(L.c_inuse, c.field("inuse"));
  LR_ASSIGN(L.c_flags, c.field("flags"));
  LR_ASSIGN(L.c_red_left_pad, c.field("red_left_pad"));
  LR_ASSIGN(L.c_oo, c.field("oo.x"));
  L.has_random = !c.bound->missing.count("random");
  if (L.has_random) {
    LR_ASSIGN(L.c_random, c.field("random"));
  }
  LR_ASSIGN(L.store_user, c.expr(k, "store_user"));
  LR_ASSIGN(L.red_zone, c.expr(k, "red_zone"));
  LR_ASSIGN(L.no_leak_trace, c.expr(k, "no_leak_trace"));
  LR_ASSIGN(L.n_partial, L.node.off("partial"));
  LR_ASSIGN(L.n_nr_partial, L.node.field("nr_partial"));
  L.has_counters =
      !L.node.bound->missing.count("nr_slabs") && !L.node.bound->missing.count("total_objects");
  if (L.has_counters) {
    LR_ASSIGN(L.n_nr_slabs, L.node.field("nr_slabs", true));
    LR_ASSIGN(L.n_total_objects, L.node.field("total_objects", true));
  }
  LR_ASSIGN(L.n_full, optional_off(L.node, "full"));
  LR_ASSIGN(L.s_cache, L.slab.off("slab_cache"));
  LR_ASSIGN(L.s_freelist, L.slab.off("freelist"));
  LR_ASSIGN(L.s_list, L.slab.off("slab_list"));
  LR_ASSIGN(L.s_next, optional_off(L.slab, "next"));
  LR_ASSIGN(L.s_inuse, L.slab.field("inuse"));
  LR_ASSIGN(L.s_objects, L.slab.field("objects"));
  LR_ASSIGN(L.s_frozen, L.slab.field("frozen"));
  LR_ASSIGN(L.slab_head, L.page.expr(k, "slab_head"));
  LR_ASSIGN(L.t_addr, L.track.off("addr"));
  LR_ASSIGN(L.t_cpu, L.track.off("cpu"));
  LR_ASSIGN(L.t_pid, L.track.off("pid"));
  LR_ASSIGN(L.t_when, L.track.off("when"));
  LR_ASSIGN(L.t_cpu_f, L.track.field("cpu"));
  LR_ASSIGN(L.t_pid_f, L.track.field("pid"));
  LR_ASSIGN(L.t_handle, optional_off(L.track, "handle"));
  if (!L.track.bound->missing.count("addrs")) {
    LR_ASSIGN(auto ab, L.track.bytes("addrs"));
    // Within the track, whatever the DWARF claims: the frames are read
    // from a copy of it.
    if (ab.first > L.track.size || ab.second > L.track.size - ab.first)
      return make_error(Errc::kBadFormat,
                        fmt::format("struct track.addrs ({} bytes at {}) lies outside the {}-byte "
                                    "struct",
                                    ab.second, ab.first, L.track.size));
    L.t_addrs = ab.first;
    L.t_naddrs = ab.second / 8;
  }
  return L;
}

uint64_t swab64(uint64_t v) {
  return __builtin_bswap64(v);
}

struct CacheState {
  KSlabCache info;
  uint64_t random = 0;
  uint64_t track_off = 0;  // tracks: object + track_off
  bool selected = false;
  bool usable = true;                   // sizes SLUB could have made (its slabs are decoded)
  std::vector<uint64_t> sheaf_objects;  // free objects in its sheaves, sorted
  uint64_t sheaf_matched = 0;           // of them, those found in a decoded slab
};

struct SlabPlace {
  KSlabWhere where = KSlabWhere::kOther;
  int cpu = -1;
  uint64_t cpu_freelist = 0;          // kCpu: that CPU's lockless freelist
  const CacheState* cache = nullptr;  // whose list held it
};

class Scanner {
 public:
  Scanner(KernelTarget& k, const SlubLayout& L, const KSlabFilter& f,
          const std::function<void(const KSlabObject&)>& sink, const KernelLimits& lim,
          KSlabReport& rep, std::optional<KernelKnowledge::SlabPages>* index)
      : k_(k), mem_(k.mem()), L_(L), f_(f), sink_(sink), lim_(lim), rep_(rep), index_(index) {}

  Result<void> run();

 private:
  void warn(std::string w) {
    if (rep_.warnings.size() < kMaxWarnings)
      rep_.warnings.push_back(std::move(w));
    else
      ++rep_.warnings_dropped;
  }
  Result<void> read_caches();
  void read_places(CacheState& c, const std::vector<uint64_t>& pcpu, uint64_t nr_nodes);
  void cpu_slabs(CacheState& c, const uint8_t* cb, const std::vector<uint64_t>& pcpu);
  void read_sheaves(CacheState& c, const uint8_t* cb, const std::vector<uint64_t>& pcpu,
                    const std::vector<uint64_t>& barns);
  void one_sheaf(CacheState& c, uint64_t s, uint64_t capacity, std::unordered_set<uint64_t>& seen,
                 const std::string& what);
  uint64_t sheaf_free(CacheState& c, uint64_t base, uint64_t objects, uint64_t slab);
  void node_list(CacheState& c, uint64_t head, KSlabWhere where, uint64_t expect, const char* what);
  Result<void> read_bases();
  bool lists_hold_all() const;
  void from_lists();
  Result<void> scan_pages();
  void slab_head(const uint8_t* pb, uint64_t page, uint64_t pfn);
  void one_slab(CacheState& c, uint64_t page, uint64_t pfn, const uint8_t* sb);
  uint64_t walk_freelist(const CacheState& c, uint64_t base, uint64_t objects, uint64_t first,
                         std::vector<uint8_t>& is_free, uint64_t slab, const char* which);
  void emit(const CacheState& c, uint64_t obj, uint64_t slab, const SlabPlace& p);
  // The slab's memory is read once (or mapped) when a slab is decoded; reads
  // inside it come from there, others from the dump.
  void slab_memory(uint64_t base, uint64_t size);
  bool slab_read(uint64_t a, void* out, size_t n) const {
    if (sm_ && a >= sm_base_ && a - sm_base_ <= sm_size_ && sm_size_ - (a - sm_base_) >= n) {
      std::memcpy(out, sm_ + (a - sm_base_), n);
      return true;
    }
    return mem_.read(a, out, n).ok();
  }

  KernelTarget& k_;
  const Memory& mem_;
  const SlubLayout& L_;
  const KSlabFilter& f_;
  const std::function<void(const KSlabObject&)>& sink_;
  const KernelLimits& lim_;
  KSlabReport& rep_;
  std::optional<KernelKnowledge::SlabPages>* index_;  // null: no session to keep it in
  std::vector<CacheState> caches_;
  std::unordered_map<uint64_t, size_t> by_addr_;  // kmem_cache -> index in caches_
  std::unordered_map<uint64_t, SlabPlace> places_;
  uint64_t page_offset_ = 0, vmemmap_ = 0, max_pfn_ = 0, min_pfn_ = 0;
  const uint8_t* sm_ = nullptr;  // the slab being decoded (slab_memory)
  uint64_t sm_base_ = 0, sm_size_ = 0;
  std::vector<uint8_t> sm_copy_;
  std::vector<uint8_t> scratch_, is_free_;
};

Result<void> Scanner::read_caches() {
  LR_ASSIGN(uint64_t head, kint::ksymbol(k_, "slab_caches"));
  LR_ASSIGN(std::vector<uint64_t> list, kint::root_objects(mem_, head, L_.c_list, lim_,
                                                           "slab_caches", &rep_.warnings, nullptr));
  std::vector<std::string> names;
  for (uint64_t a : list) {
    const uint8_t* cb = object_bytes(mem_, a, L_.cache.size, scratch_);
    if (!cb) {
      warn(fmt::format("kmem_cache {:#x}: not readable", a));
      continue;
    }
    CacheState c;
    KSlabCache& i = c.info;
    i.addr = a;
    uint64_t np = kint::ptr_at(cb, L_.c_name);
    auto n = np ? mem_.read_cstring(np, 64) : Result<std::string>(std::string());
    i.name = n.ok() && !n.value().empty() ? n.value() : fmt::format("{:#x}", a);
    i.size = static_cast<uint64_t>(L_.c_size.load(cb)) & 0xffffffff;
    i.object_size = static_cast<uint64_t>(L_.c_object_size.load(cb)) & 0xffffffff;
    i.offset = static_cast<uint64_t>(L_.c_offset.load(cb)) & 0xffffffff;
    i.inuse = static_cast<uint64_t>(L_.c_inuse.load(cb)) & 0xffffffff;
    i.flags = static_cast<uint64_t>(L_.c_flags.load(cb));
    i.red_left_pad = static_cast<uint64_t>(L_.c_red_left_pad.load(cb)) & 0xffffffff;
    uint64_t oo = static_cast<uint64_t>(L_.c_oo.load(cb)) & 0xffffffff;
    i.objects_per_slab = oo & 0xffff;
    i.order = oo >> 16;
    i.hardened = L_.has_random;
    if (L_.has_random) c.random = static_cast<uint64_t>(L_.c_random.load(cb));
    i.store_user = L_.store_user->eval(mem_, cb, a).truthy();
    i.no_leak_trace = L_.no_leak_trace->eval(mem_, cb, a).truthy();
    if (!L_.red_zone->eval(mem_, cb, a).truthy()) i.red_left_pad = 0;
    c.track_off = i.inuse + (i.offset >= i.inuse ? 8 : 0);
    if (i.size == 0 || i.size > (kPage << 10) || i.order > 10 || i.offset + 8 > i.size ||
        i.red_left_pad >= i.size) {
      c.usable = false;
      warn(
          fmt::format("kmem_cache {:#x} ({}): size {} order {} offset {}: not a cache SLUB "
                      "could make (corrupt?); its slabs are skipped",
                      a, i.name, i.size, i.order, i.offset));
    }
    names.push_back(i.name);
    by_addr_[a] = caches_.size();
    caches_.push_back(std::move(c));
  }
  for (const auto& want : f_.caches) {
    bool found = false;
    for (auto& c : caches_)
      if (c.info.name == want) c.selected = found = true;
    if (!found) {
      std::string near = closest_name(want, names);
      return make_error(Errc::kNotFound,
                        fmt::format("no slab cache '{}'{}", want,
                                    near.empty() ? "" : "; did you mean '" + near + "'?"));
    }
  }
  if (f_.caches.empty())
    for (auto& c : caches_) c.selected = true;
  return {};
}

// A node list of slabs (partial, or full when tracked): each one's place.
void Scanner::node_list(CacheState& c, uint64_t head, KSlabWhere where, uint64_t expect,
                        const char* what) {
  WalkLimits wl;
  wl.max_nodes = std::min<uint64_t>(lim_.max_objects, 4 * expect + 1024);
  wl.interrupted = lim_.interrupted;
  WalkResult r = walk_list(mem_, head, L_.s_list, wl);
  if (!r.ok())
    warn(fmt::format("{}: {} list walk stopped ({}) at {:#x}{}{}", c.info.name, what,
                     walk_stop_name(r.stop), r.stop_addr, r.stop_detail.empty() ? "" : ": ",
                     r.stop_detail));
  if (where == KSlabWhere::kNodePartial && r.ok() && r.objects.size() != expect)
    warn(fmt::format("{}: node partial list holds {} slabs, nr_partial says {}", c.info.name,
                     r.objects.size(), expect));
  for (uint64_t s : r.objects) places_.emplace(s, SlabPlace{where, -1, 0, &c});
}

// Each CPU's active slab and partial slabs (kmem_cache_cpu, until 7.0).
void Scanner::cpu_slabs(CacheState& c, const uint8_t* cb, const std::vector<uint64_t>& pcpu) {
  const uint64_t cpu_slab = L_.c_cpu_slab ? kint::ptr_at(cb, *L_.c_cpu_slab) : 0;
  for (size_t cpu = 0; cpu < pcpu.size() && cpu_slab; ++cpu) {
    std::vector<uint8_t> cc(L_.cpu.size);
    uint64_t at = cpu_slab + pcpu[cpu];
    if (!mem_.read(at, cc.data(), cc.size()).ok()) {
      warn(fmt::format("{}: kmem_cache_cpu of cpu {} at {:#x} not readable", c.info.name, cpu, at));
      continue;
    }
    uint64_t s = kint::ptr_at(cc.data(), L_.cpu_slab);
    if (s)
      places_[s] = SlabPlace{KSlabWhere::kCpu, static_cast<int>(cpu),
                             kint::ptr_at(cc.data(), L_.cpu_freelist), &c};
    std::unordered_set<uint64_t> seen;
    for (uint64_t p = L_.cpu_partial && L_.s_next ? kint::ptr_at(cc.data(), *L_.cpu_partial) : 0;
         p;) {
      if (!seen.insert(p).second || seen.size() > kMaxPartialChain) {
        warn(fmt::format("{}: cpu {} partial list loops at {:#x}", c.info.name, cpu, p));
        break;
      }
      places_.emplace(p, SlabPlace{KSlabWhere::kCpuPartial, static_cast<int>(cpu), 0, &c});
      if (!mem_.read(p + *L_.s_next, &p, 8).ok()) {
        warn(fmt::format("{}: cpu {} partial slab {:#x} not readable", c.info.name, cpu, p));
        break;
      }
    }
  }
}

void Scanner::read_places(CacheState& c, const std::vector<uint64_t>& pcpu, uint64_t nr_nodes) {
  std::vector<uint8_t> cb(L_.cache.size);
  if (!mem_.read(c.info.addr, cb.data(), cb.size()).ok()) return;
  cpu_slabs(c, cb.data(), pcpu);
  int64_t slabs = 0, objs = 0, partial = 0;
  std::vector<uint8_t> nb(L_.node.size);
  std::vector<uint64_t> barns;
  for (uint64_t n = 0; n < nr_nodes; ++n) {
    // A node past the cache's own array (a corrupt nr_node_ids) is not read.
    const uint64_t last = std::max(L_.c_node, L_.c_barn.value_or(0)) + L_.node_stride * n + 8;
    if (last > cb.size()) {
      warn(
          fmt::format("{}: node {} lies past struct kmem_cache's node array; nodes from it on "
                      "are not read",
                      c.info.name, n));
      break;
    }
    uint64_t np = kint::ptr_at(cb.data(), L_.c_node + L_.node_stride * n);
    if (L_.c_barn) barns.push_back(kint::ptr_at(cb.data(), *L_.c_barn + L_.node_stride * n));
    if (!np) continue;
    if (!mem_.read(np, nb.data(), nb.size()).ok()) {
      warn(fmt::format("{}: kmem_cache_node {} at {:#x} not readable", c.info.name, n, np));
      continue;
    }
    if (L_.n_barn) barns.push_back(kint::ptr_at(nb.data(), *L_.n_barn));
    int64_t nr_partial = L_.n_nr_partial.load(nb.data());
    partial += nr_partial;
    if (L_.has_counters) {
      slabs += L_.n_nr_slabs.load(nb.data());
      objs += L_.n_total_objects.load(nb.data());
    }
    node_list(c, np + L_.n_partial, KSlabWhere::kNodePartial,
              static_cast<uint64_t>(std::max<int64_t>(nr_partial, 0)), "node partial");
    if (L_.n_full && c.info.store_user)
      node_list(c, np + *L_.n_full, KSlabWhere::kFull, lim_.max_objects / 4, "node full");
  }
  c.info.nr_partial = partial;
  if (L_.has_counters) {
    c.info.nr_slabs = slabs;
    c.info.total_objects = objs;
  }
  read_sheaves(c, cb.data(), pcpu, barns);
}

// The objects of every sheaf of the cache: each CPU's (main, spare,
// rcu_free) and each node barn's full and empty ones.
void Scanner::read_sheaves(CacheState& c, const uint8_t* cb, const std::vector<uint64_t>& pcpu,
                           const std::vector<uint64_t>& barns) {
  if (!L_.c_cpu_sheaves) return;
  // A sheaf holds at most the cache's sheaf_capacity objects (SLUB sizes
  // them so); without that member, a bound no real sheaf reaches.
  const uint64_t cap = L_.has_sheaf_capacity
                           ? static_cast<uint64_t>(L_.c_sheaf_capacity.load(cb)) & 0xffffffff
                           : kMaxSheafObjects;
  const uint64_t pcs = kint::ptr_at(cb, *L_.c_cpu_sheaves);
  std::unordered_set<uint64_t> seen;
  std::vector<uint8_t> pb(L_.pcs.size);
  for (size_t cpu = 0; cpu < pcpu.size() && pcs; ++cpu) {
    if (!mem_.read(pcs + pcpu[cpu], pb.data(), pb.size()).ok()) {
      warn(fmt::format("{}: cpu {}'s sheaves at {:#x} not readable", c.info.name, cpu,
                       pcs + pcpu[cpu]));
      continue;
    }
    for (uint64_t o : L_.pcs_ptrs)
      one_sheaf(c, kint::ptr_at(pb.data(), o), cap, seen, fmt::format("cpu {}", cpu));
  }
  for (uint64_t b : barns) {
    if (!b) continue;
    for (uint64_t head : {b + L_.b_full, b + L_.b_empty}) {
      WalkLimits wl;
      wl.max_nodes = std::min<uint64_t>(lim_.max_objects, 1u << 20);
      wl.interrupted = lim_.interrupted;
      WalkResult r = walk_list(mem_, head, L_.sh_list, wl);
      if (!r.ok())
        warn(fmt::format("{}: barn {:#x}: sheaf list walk stopped ({}) at {:#x}", c.info.name, b,
                         walk_stop_name(r.stop), r.stop_addr));
      for (uint64_t s : r.objects) one_sheaf(c, s, cap, seen, fmt::format("barn {:#x}", b));
    }
  }
  std::sort(c.sheaf_objects.begin(), c.sheaf_objects.end());
}

void Scanner::one_sheaf(CacheState& c, uint64_t s, uint64_t capacity,
                        std::unordered_set<uint64_t>& seen, const std::string& what) {
  if (!s || !seen.insert(s).second) return;
  std::vector<uint8_t> sb(L_.sheaf.size);
  if (!mem_.read(s, sb.data(), sb.size()).ok()) {
    warn(fmt::format("{}: {}'s sheaf {:#x} not readable", c.info.name, what, s));
    return;
  }
  const uint64_t owner = kint::ptr_at(sb.data(), L_.sh_cache);
  const uint64_t n = static_cast<uint64_t>(L_.sh_size.load(sb.data())) & 0xffffffff;
  // An empty sheaf holds nothing to count: a cache without sheaves points
  // every CPU at one static empty sheaf of no cache (7.x's bootstrap sheaf).
  if (n == 0) return;
  if (owner != c.info.addr || n > capacity || n > kMaxSheafObjects) {
    warn(
        fmt::format("{}: {}'s sheaf {:#x} names cache {:#x} and holds {} objects (capacity {}): "
                    "not this cache's sheaf (corrupt?); skipped",
                    c.info.name, what, s, owner, n, capacity));
    return;
  }
  std::vector<uint64_t> objs(n);
  if (n && !mem_.read(s + L_.sh_objects, objs.data(), n * 8).ok()) {
    warn(fmt::format("{}: {}'s sheaf {:#x}: its {} objects are not readable", c.info.name, what, s,
                     n));
    return;
  }
  c.sheaf_objects.insert(c.sheaf_objects.end(), objs.begin(), objs.end());
}

// Marks the sheaf objects inside the slab at `base` free; how many.
uint64_t Scanner::sheaf_free(CacheState& c, uint64_t base, uint64_t objects, uint64_t slab) {
  const KSlabCache& i = c.info;
  const uint64_t end = base + (kPage << i.order);
  uint64_t n = 0;
  auto it = std::lower_bound(c.sheaf_objects.begin(), c.sheaf_objects.end(), base);
  for (; it != c.sheaf_objects.end() && *it < end; ++it) {
    const uint64_t rel = *it - base - i.red_left_pad;
    if (*it < base + i.red_left_pad || rel % i.size || rel / i.size >= objects) {
      warn(fmt::format("{}: slab {:#x}: sheaf object {:#x} is not one of its objects (corrupt?)",
                       i.name, slab, *it));
      continue;
    }
    ++c.sheaf_matched;
    if (is_free_[rel / i.size]) {
      warn(fmt::format("{}: slab {:#x}: object {:#x} is both on a freelist and in a sheaf", i.name,
                       slab, *it));
      continue;
    }
    is_free_[rel / i.size] = 1;
    ++n;
  }
  return n;
}

uint64_t Scanner::walk_freelist(const CacheState& c, uint64_t base, uint64_t objects,
                                uint64_t first, std::vector<uint8_t>& is_free, uint64_t slab,
                                const char* which) {
  const KSlabCache& i = c.info;
  uint64_t n = 0;
  for (uint64_t q = first; q;) {
    uint64_t rel = q - base - i.red_left_pad;
    if (q < base + i.red_left_pad || rel % i.size || rel / i.size >= objects) {
      warn(
          fmt::format("{}: slab {:#x}: {} freelist reaches {:#x}, not an object of the slab "
                      "(corrupt); the objects after it count as allocated",
                      i.name, slab, which, q));
      break;
    }
    uint64_t idx = rel / i.size;
    if (is_free[idx]) {
      warn(fmt::format("{}: slab {:#x}: {} freelist loops back to {:#x}", i.name, slab, which, q));
      break;
    }
    is_free[idx] = 1;
    ++n;
    uint64_t raw = 0;
    if (!slab_read(q + i.offset, &raw, 8)) {
      warn(fmt::format("{}: slab {:#x}: free object {:#x} not readable", i.name, slab, q));
      break;
    }
    q = i.hardened ? raw ^ c.random ^ swab64(q + i.offset) : raw;
  }
  return n;
}

void Scanner::emit(const CacheState& c, uint64_t obj, uint64_t slab, const SlabPlace& p) {
  KSlabObject o;
  o.addr = obj;
  o.slab = slab;
  o.cache = &c.info;
  o.where = p.where;
  o.cpu = p.cpu;
  if (f_.tracks && c.info.store_user) {
    uint8_t t[512] = {};
    const uint64_t ts = L_.track.size;
    if (ts * 2 <= sizeof t && slab_read(obj + c.track_off, t, ts * 2)) {
      o.has_tracks = true;
      for (int w = 0; w < 2; ++w) {
        const uint8_t* tb = t + w * ts;
        KSlabTrack& x = w ? o.free : o.alloc;
        x.addr = kint::ptr_at(tb, L_.t_addr);
        x.handle = L_.t_handle ? static_cast<uint32_t>(load_uint(tb + *L_.t_handle, 4)) : 0;
        x.cpu = static_cast<int>(L_.t_cpu_f.load(tb));
        x.pid = static_cast<int>(L_.t_pid_f.load(tb));
        x.when = kint::ptr_at(tb, L_.t_when);
        // addrs[] ends at its first 0 (a stack shorter than the array).
        for (uint64_t i = 0; i < L_.t_naddrs; ++i) {
          const uint64_t f = kint::ptr_at(tb, L_.t_addrs + i * 8);
          if (!f) break;
          x.frames.push_back(f);
        }
      }
    }
  }
  sink_(o);
}

void Scanner::slab_memory(uint64_t base, uint64_t size) {
  sm_base_ = base;
  sm_size_ = size;
  sm_ = mem_.span(base, size);
  if (!sm_) {
    sm_copy_.resize(size);
    sm_ = mem_.read(base, sm_copy_.data(), size).ok() ? sm_copy_.data() : nullptr;
  }
}

void Scanner::one_slab(CacheState& c, uint64_t page, uint64_t pfn, const uint8_t* sb) {
  KSlabCache& i = c.info;
  const uint64_t objects = static_cast<uint64_t>(L_.s_objects.load(sb));
  const uint64_t inuse = static_cast<uint64_t>(L_.s_inuse.load(sb));
  const uint64_t base = page_offset_ + pfn * kPage;
  if (objects == 0 || objects > ((kPage << i.order) / i.size) + 1) {
    warn(fmt::format("{}: slab {:#x} claims {} objects of {} bytes (corrupt); skipped", i.name,
                     page, objects, i.size));
    return;
  }
  SlabPlace place;
  if (auto it = places_.find(page); it != places_.end()) place = it->second;
  slab_memory(base, kPage << i.order);
  is_free_.assign(objects, 0);
  uint64_t nfree =
      walk_freelist(c, base, objects, kint::ptr_at(sb, L_.s_freelist), is_free_, page, "slab");
  if (place.where == KSlabWhere::kCpu) {
    nfree += walk_freelist(c, base, objects, place.cpu_freelist, is_free_, page,
                           fmt::format("cpu {}", place.cpu).c_str());
  } else if (inuse != objects - nfree) {
    warn(fmt::format("{}: slab {:#x}: inuse {} but {} of {} objects are on its freelist", i.name,
                     page, inuse, nfree, objects));
  }
  // Sheaf objects: in use to the slab (so after the inuse check), free to users.
  const uint64_t nsheaf = c.sheaf_objects.empty() ? 0 : sheaf_free(c, base, objects, page);
  nfree += nsheaf;
  i.sheaf_free += nsheaf;
  ++i.slabs;
  i.objects += objects;
  i.free += nfree;
  i.allocated += objects - nfree;
  switch (place.where) {
    case KSlabWhere::kCpu:
      ++i.cpu_slabs;
      break;
    case KSlabWhere::kCpuPartial:
      ++i.cpu_partial_slabs;
      break;
    case KSlabWhere::kNodePartial:
      ++i.node_partial_slabs;
      i.node_partial_free += objects - inuse;  // SLUB's count_partial()
      break;
    case KSlabWhere::kFull:
      ++i.full_slabs;
      break;
    case KSlabWhere::kOther:
      ++i.other_slabs;
      break;
  }
  if (!f_.objects || !sink_) return;
  for (uint64_t x = 0; x < objects; ++x)
    if (!is_free_[x]) emit(c, base + i.red_left_pad + x * i.size, page, place);
}

Result<void> Scanner::read_bases() {
  LR_ASSIGN(kint::MemoryBases mb, kint::memory_bases(k_));
  vmemmap_ = mb.vmemmap;
  page_offset_ = mb.page_offset;
  min_pfn_ = mb.min_pfn;
  LR_ASSIGN(max_pfn_, read_uint_var(k_, "max_pfn"));
  const uint64_t ps = L_.page.size;
  if (ps == 0 || kPage % ps || max_pfn_ > (1ull << 40))
    return make_error(Errc::kBadFormat,
                      fmt::format("struct page is {} bytes and max_pfn {}: cannot scan the page "
                                  "array",
                                  ps, max_pfn_));
  return {};
}

// Whether SLUB's lists (CPU, partial, full) hold every slab of every chosen
// cache, by its own count: then no full slab is on no list, and the page
// array need not be scanned to find them.
bool Scanner::lists_hold_all() const {
  if (f_.scan_pages || f_.caches.empty()) return false;
  std::unordered_map<const CacheState*, uint64_t> n;
  for (const auto& [a, p] : places_) ++n[p.cache];
  for (const auto& c : caches_)
    if (c.selected &&
        (c.info.nr_slabs < 0 || n[&c] != static_cast<uint64_t>(c.info.nr_slabs) || !c.usable))
      return false;
  return true;
}

// Each listed slab, in address (page) order as the scan would meet them.
void Scanner::from_lists() {
  std::vector<std::pair<uint64_t, const CacheState*>> slabs;
  for (const auto& [a, p] : places_) slabs.emplace_back(a, p.cache);
  std::sort(slabs.begin(), slabs.end());
  const uint64_t ps = L_.page.size;
  std::vector<uint8_t> sb(ps);
  for (const auto& [a, c] : slabs) {
    if (a < vmemmap_ || (a - vmemmap_) % ps || (a - vmemmap_) / ps >= max_pfn_ ||
        !mem_.read(a, sb.data(), ps).ok()) {
      warn(fmt::format("{}: listed slab {:#x} is not a readable struct page", c->info.name, a));
      continue;
    }
    if (kint::ptr_at(sb.data(), L_.s_cache) != c->info.addr) {
      warn(fmt::format("{}: listed slab {:#x} belongs to cache {:#x}", c->info.name, a,
                       kint::ptr_at(sb.data(), L_.s_cache)));
      continue;
    }
    ++rep_.slab_pages;
    one_slab(caches_[by_addr_.at(c->info.addr)], a, (a - vmemmap_) / ps, sb.data());
  }
}

// A struct page the scan found to be a slab head: its cache's slab.
void Scanner::slab_head(const uint8_t* pb, uint64_t page, uint64_t pfn) {
  ++rep_.slab_pages;
  auto it = by_addr_.find(kint::ptr_at(pb, L_.s_cache));
  if (it == by_addr_.end()) {
    warn(fmt::format("slab page {:#x} (pfn {:#x}) belongs to {:#x}, no cache on slab_caches", page,
                     pfn, kint::ptr_at(pb, L_.s_cache)));
    return;
  }
  CacheState& c = caches_[it->second];
  if (c.selected && c.usable) one_slab(c, page, pfn, pb);
}

Result<void> Scanner::scan_pages() {
  const uint64_t vmemmap = vmemmap_, max_pfn = max_pfn_, ps = L_.page.size;
  rep_.scanned = true;
  if (index_ && index_->has_value()) {
    // An earlier scan of this image: only its slab heads, read again.
    const auto& ix = **index_;
    rep_.pages = ix.pages;
    rep_.unreadable_pages = ix.unreadable;
    std::vector<uint8_t> pb(ps);
    for (const auto& [page, cache] : ix.heads) {
      if (kint::interrupted(lim_)) return make_error(Errc::kInterrupted, "interrupted");
      auto it = by_addr_.find(cache);
      if (it != by_addr_.end() && !caches_[it->second].selected) {
        ++rep_.slab_pages;  // another cache's slab: counted, not read again
        continue;
      }
      if (mem_.read(page, pb.data(), ps).ok()) slab_head(pb.data(), page, (page - vmemmap) / ps);
    }
    return {};
  }
  KernelKnowledge::SlabPages found;
  const uint64_t per = kPage / ps;
  std::vector<uint8_t> buf(kPage);
  uint64_t hole = 0;  // unreadable struct pages in a row
  // Frames below the first RAM has (arm64's PHYS_OFFSET) have no struct page.
  for (uint64_t pfn = min_pfn_ - min_pfn_ % per; pfn < max_pfn; pfn += per) {
    if (kint::interrupted(lim_)) return make_error(Errc::kInterrupted, "interrupted");
    const uint64_t at = vmemmap + pfn * ps;
    const uint64_t n = std::min(per, max_pfn - pfn);
    rep_.pages += n;
    if (!mem_.read(at, buf.data(), n * ps).ok()) {
      rep_.unreadable_pages += n;
      if ((hole += n) >= kMaxHolePages && pfn + n < max_pfn) {
        // Not kept for the session: each command says this again.
        warn(
            fmt::format("struct page array: the {} struct pages from pfn {:#x} are not in the "
                        "dump; the scan stopped there, {} pages before max_pfn {:#x} (corrupt?)",
                        hole, pfn + n - hole, max_pfn - pfn - n, max_pfn));
        return {};
      }
      continue;
    }
    hole = 0;
    for (uint64_t j = 0; j < n; ++j) {
      const uint8_t* pb = buf.data() + j * ps;
      if (!L_.slab_head->eval(mem_, pb, at + j * ps).truthy()) continue;
      found.heads.emplace_back(at + j * ps, kint::ptr_at(pb, L_.s_cache));
      slab_head(pb, at + j * ps, pfn + j);
    }
  }
  found.pages = rep_.pages;
  found.unreadable = rep_.unreadable_pages;
  if (index_) *index_ = std::move(found);
  return {};
}

Result<void> Scanner::run() {
  LR_TRY(read_caches());
  LR_ASSIGN(uint64_t ncpu, read_uint_var(k_, "nr_cpu_ids"));
  // Without CONFIG_NUMA nr_node_ids is the constant 1, not a variable.
  auto nn = read_uint_var(k_, "nr_node_ids");
  if (!nn.ok() && nn.error().code != Errc::kNotFound) return nn.error();
  const uint64_t nnodes = nn.ok() ? nn.value() : 1;
  if (ncpu == 0 || ncpu > kMaxCpus || nnodes == 0 || nnodes > kMaxNodes)
    return make_error(
        Errc::kBadFormat,
        fmt::format("nr_cpu_ids {} and nr_node_ids {}: not a kernel's (corrupt?)", ncpu, nnodes));
  LR_ASSIGN(uint64_t pco, kint::ksymbol(k_, "per_cpu_offset"));
  std::vector<uint64_t> pcpu(ncpu);
  if (auto r = mem_.read(pco, pcpu.data(), ncpu * 8); !r.ok())
    return make_error(Errc::kFault, fmt::format("__per_cpu_offset at {:#x} is not readable: {}",
                                                pco, mem_.why_unreadable(pco)));
  for (auto& c : caches_)
    if (c.selected) read_places(c, pcpu, nnodes);
  LR_TRY(read_bases());
  if (lists_hold_all())
    from_lists();
  else
    LR_TRY(scan_pages());
  if (rep_.scanned && rep_.slab_pages == 0 && !caches_.empty())
    return make_error(Errc::kBadFormat,
                      fmt::format("no struct page is a slab head, yet slab_caches lists caches: "
                                  "either the struct pages are not at {:#x} (where this dump "
                                  "puts the first frame's) or this kernel marks slab pages in a "
                                  "way linux-kernel.toml's page.slab_head does not describe",
                                  vmemmap_ + min_pfn_ * L_.page.size));
  for (auto& c : caches_) {
    if (!c.selected) continue;
    const KSlabCache& i = c.info;
    if (i.nr_slabs >= 0 && static_cast<uint64_t>(i.nr_slabs) != i.slabs)
      warn(fmt::format("{}: SLUB counts {} slabs, the page array holds {}", i.name, i.nr_slabs,
                       i.slabs));
    if (c.usable && c.sheaf_matched != c.sheaf_objects.size())
      warn(fmt::format("{}: {} of its {} sheaf objects lie in none of its slabs", i.name,
                       c.sheaf_objects.size() - c.sheaf_matched, c.sheaf_objects.size()));
    rep_.caches.push_back(i);
  }
  return {};
}

}  // namespace

Result<KSlabReport> kernel_slab(KernelTarget& k, const KSlabFilter& f,
                                const std::function<void(const KSlabObject&)>& on_object,
                                const KernelLimits& lim) {
  auto t0 = std::chrono::steady_clock::now();
  LR_ASSIGN(SlubLayout L, slub_layout(k));
  KSlabReport rep;
  LR_ASSIGN(KernelKnowledge * kn, kint::knowledge(k));
  Scanner s(k, L, f, on_object, lim, rep, &kn->slab_pages);
  LR_TRY(s.run());
  rep.walk_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return rep;
}

}  // namespace lr
