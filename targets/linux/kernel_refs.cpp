// The kernel's reference index (kernel_refs.hpp): what is an object, what
// is a root, gathered from the dump; the scan itself is the engine's
// ObjectGraph.
#include "targets/linux/kernel_refs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "corelib/dump/elfcore.hpp"
#include "targets/linux/kernel_internal.hpp"

namespace lr {

namespace {

constexpr uint64_t kPage = 4096;
// THREAD_SIZE (x86-64's, and arm64's with 4 KiB pages) for stacks that are
// not vmalloc areas (a vmalloc'd stack's size is its area's).
constexpr uint64_t kThreadSize = 16384;
constexpr uint64_t kMaxAreas = 1u << 22;
constexpr size_t kMaxWarnings = 200;
constexpr uint64_t kMaxHolePages = uint64_t{1} << 28;

struct Area {
  uint64_t addr = 0, size = 0, caller = 0, vm = 0;
  bool stack = false, module = false, cached_stack = false;
};

}  // namespace

// What build() gathers before the graph is made.
struct KRefIndex::Parts {
  KernelTarget& k;
  const KernelLimits& lim;
  KRefIndex& ix;
  uint64_t page_offset = 0, vmemmap = 0, max_pfn = 0, min_pfn = 0;
  // Pages scanned otherwise or not at all (vmalloc's, stacks, per-CPU
  // units, the kernel image): a list, sorted before the page pass, so a
  // corrupt max_pfn costs no memory.
  std::vector<uint64_t> skip_pfn;
  std::vector<Area> areas;
  std::vector<GraphObject> objs;
  std::vector<GraphRoot> roots;
  std::vector<GraphValue> values;  // CPU registers

  Parts(KernelTarget& kt, const KernelLimits& l, KRefIndex& x) : k(kt), lim(l), ix(x) {}
  // Why the scan itself is partial (roots it could not find), each once.
  std::vector<std::string> partial;
  uint64_t tasks_unread = 0;
  bool rcu_cut = false;

  void warn(std::string w) {
    if (ix.warnings_.size() < kMaxWarnings) ix.warnings_.push_back(std::move(w));
  }
  uint32_t root(KRoot r) {
    ix.roots_.push_back(std::move(r));
    return static_cast<uint32_t>(ix.roots_.size() - 1);
  }
  // Pages of the direct map the range covers are not scanned as kernel pages.
  void skip_direct(uint64_t a, uint64_t b) {
    if (a < page_offset || b <= a) return;
    const uint64_t last = std::min((b - page_offset + kPage - 1) / kPage, max_pfn);
    for (uint64_t p = (a - page_offset) / kPage; p < last; ++p) skip_pfn.push_back(p);
  }
  Result<void> bases();
  Result<void> slab();
  Result<void> vmalloc();
  Result<std::vector<uint64_t>> threads(const std::vector<uint64_t>& leaders,
                                        const kint::Layout& T);
  Result<void> tasks();
  void modules();
  Result<void> percpu();
  Result<void> kernel_data();
  Result<void> pages();
  void registers();
  KObject* object_at(uint64_t a);
  void rcu_chain(uint64_t head, uint64_t o_next, const char* what);
  void kmemleak();
  Result<void> rcu_pending();
};

Result<void> KRefIndex::Parts::bases() {
  LR_ASSIGN(kint::MemoryBases mb, kint::memory_bases(k));
  page_offset = mb.page_offset;
  vmemmap = mb.vmemmap;
  min_pfn = mb.min_pfn;
  LR_ASSIGN(max_pfn, kint::read_uint_var(k, "max_pfn"));
  if (max_pfn > (1ull << 36))
    return make_error(Errc::kBadFormat,
                      fmt::format("max_pfn {:#x}: not a machine's (corrupt?)", max_pfn));
  return {};
}

// Every allocated slab object, with its allocation track when kept.
Result<void> KRefIndex::Parts::slab() {
  KSlabFilter f;
  f.objects = true;
  f.tracks = true;
  std::unordered_map<uint64_t, uint32_t> cache_of;
  std::vector<uint64_t> order;
  auto rep = kernel_slab(
      k, f,
      [&](const KSlabObject& o) {
        auto [it, fresh] = cache_of.emplace(o.cache->addr, static_cast<uint32_t>(order.size()));
        if (fresh) order.push_back(o.cache->addr);
        KObject ko;
        ko.addr = o.addr;
        ko.size = o.cache->object_size;
        ko.cache = it->second;
        ko.untracked = o.cache->no_leak_trace;
        ix.stats_.untracked += ko.untracked;
        if (o.has_tracks) {
          ko.track = static_cast<int32_t>(ix.tracks_.size());
          ix.tracks_.push_back(o.alloc);
        }
        ix.objects_.push_back(ko);
      },
      lim);
  if (!rep.ok()) return rep.error();
  ix.caches_.resize(order.size());
  for (const auto& c : rep.value().caches)
    if (auto it = cache_of.find(c.addr); it != cache_of.end()) ix.caches_[it->second] = c;
  for (auto& w : rep.value().warnings) warn("slab: " + w);
  ix.stats_.slab_objects = ix.objects_.size();
  return {};
}

// vm_struct's members the scan reads.
struct VmLayout {
  uint64_t size = 0, addr = 0, pages = 0, nr_pages = 0, caller = 0, page_size = 0;
  std::unique_ptr<Expr> vm_alloc;
};

// One busy vmalloc area: its vm_struct, if it allocated memory (VM_ALLOC);
// its pages are then not scanned as kernel pages.
static void vm_area(KRefIndex::Parts& P, uint64_t vm, const VmLayout& V, std::vector<uint8_t>& b) {
  if (!P.k.mem().read(vm, b.data(), b.size()).ok()) {
    P.warn(fmt::format("vm_struct {:#x}: not readable", vm));
    return;
  }
  if (!V.vm_alloc->eval(P.k.mem(), b.data(), vm).truthy()) return;
  Area a;
  a.vm = vm;
  a.addr = kint::ptr_at(b.data(), V.addr);
  const uint64_t pages = kint::ptr_at(b.data(), V.pages);
  uint32_t n = 0;
  std::memcpy(&n, b.data() + V.nr_pages, 4);
  a.size = uint64_t{n} * kPage;
  a.caller = kint::ptr_at(b.data(), V.caller);
  if (a.size == 0 || a.size > (uint64_t{1} << 36) || (a.addr & (kPage - 1))) return;
  std::vector<uint64_t> pg(n);
  if (!pages || !P.k.mem().read(pages, pg.data(), pg.size() * 8).ok()) {
    P.warn(fmt::format("vmalloc area {:#x}: its page array is not readable", a.addr));
  } else {
    for (uint64_t p : pg) {
      const uint64_t pfn = (p - P.vmemmap) / V.page_size;
      if (p >= P.vmemmap && pfn < P.max_pfn) P.skip_pfn.push_back(pfn);
    }
  }
  P.areas.push_back(a);
}

// Busy vmalloc areas: one list until 6.8, a list per vmap node since 6.9.
Result<void> KRefIndex::Parts::vmalloc() {
  LR_ASSIGN(kint::Layout L, kint::Layout::of(k, "vmap_area"));
  LR_ASSIGN(uint64_t o_list, L.off("list"));
  LR_ASSIGN(uint64_t o_vm, L.off("vm"));
  LR_ASSIGN(kint::Layout VL, kint::Layout::of(k, "vm_struct"));
  LR_ASSIGN(kint::Layout PL, kint::Layout::of(k, "page"));
  VmLayout V;
  V.size = VL.size;
  V.page_size = PL.size;
  LR_ASSIGN(V.addr, VL.off("addr"));
  LR_ASSIGN(V.pages, VL.off("pages"));
  LR_ASSIGN(V.nr_pages, VL.off("nr_pages"));
  LR_ASSIGN(V.caller, VL.off("caller"));
  LR_ASSIGN(V.vm_alloc, VL.expr(k, "vm_alloc"));
  KernelLimits l = lim;
  l.max_objects = kMaxAreas;
  std::vector<uint64_t> heads;
  if (auto h = kint::ksymbol(k, "vmap_area_list"); h.ok()) {
    heads.push_back(h.value());
  } else {
    LR_ASSIGN(uint64_t nodes, kint::read_uint_var(k, "vmap_nodes"));
    LR_ASSIGN(uint64_t n, kint::read_uint_var(k, "nr_vmap_nodes"));
    LR_ASSIGN(kint::Layout N, kint::Layout::of(k, "vmap_node"));
    LR_ASSIGN(uint64_t o_busy, N.off("busy.head"));
    for (uint64_t i = 0; i < std::min<uint64_t>(n, 4096); ++i)
      heads.push_back(nodes + i * N.size + o_busy);
  }
  std::vector<uint8_t> b(V.size);
  for (uint64_t h : heads) {
    std::vector<std::string> w;
    auto vas = kint::list_objects(k.mem(), h, o_list, l, "vmalloc areas", &w, nullptr);
    for (auto& s : w) warn(s);
    for (uint64_t va : vas) {
      uint64_t vm = 0;
      if (k.mem().read(va + o_vm, &vm, 8).ok() && vm) lr::vm_area(*this, vm, V, b);
    }
  }
  std::sort(areas.begin(), areas.end(),
            [](const Area& a, const Area& b) { return a.addr < b.addr; });
  ix.stats_.vmalloc_areas = areas.size();
  return {};
}

namespace {

Area* area_at(std::vector<Area>& areas, uint64_t a) {
  auto it = std::upper_bound(areas.begin(), areas.end(), a,
                             [](uint64_t v, const Area& x) { return v < x.addr; });
  if (it == areas.begin()) return nullptr;
  --it;
  return a - it->addr < it->size ? &*it : nullptr;
}

}  // namespace

// Every thread of the leaders (init_task.tasks lists thread group leaders):
// each one's signal->thread_head list, the leader included.
Result<std::vector<uint64_t>> KRefIndex::Parts::threads(const std::vector<uint64_t>& leaders,
                                                        const kint::Layout& T) {
  LR_ASSIGN(uint64_t o_signal, T.off("signal"));
  LR_ASSIGN(uint64_t o_node, T.off("thread_node"));
  LR_ASSIGN(kint::Layout S, kint::Layout::of(k, "signal"));
  LR_ASSIGN(uint64_t o_head, S.off("thread_head"));
  std::vector<uint64_t> out;
  std::unordered_set<uint64_t> seen;
  for (uint64_t t : leaders) {
    if (seen.insert(t).second) out.push_back(t);
    uint64_t sig = 0;
    if (!k.mem().read(t + o_signal, &sig, 8).ok() || !sig) continue;
    std::vector<std::string> w;
    for (uint64_t th :
         kint::list_objects(k.mem(), sig + o_head, o_node, lim, "thread_head", &w, nullptr))
      if (seen.insert(th).second) out.push_back(th);
    for (auto& s : w) warn(fmt::format("task {:#x}: {}", t, s));
  }
  return out;
}

// Each task's kernel stack, from its saved stack pointer up (a task on a
// CPU when the dump was taken: all of it, its pointer being in the CPU).
// Spare stacks a CPU keeps for reuse are areas from the same call site that
// no task has: objects whose contents are dead.
Result<void> KRefIndex::Parts::tasks() {
  LR_ASSIGN(kint::Layout T, kint::Layout::of(k, "task"));
  LR_ASSIGN(uint64_t o_tasks, T.off("tasks"));
  LR_ASSIGN(uint64_t o_stack, T.off("stack"));
  LR_ASSIGN(auto saved_sp, T.expr(k, "saved_sp"));
  LR_ASSIGN(IntField f_pid, T.field("pid"));
  LR_ASSIGN(auto f_comm, T.bytes("comm"));
  auto f_on_cpu = T.field("on_cpu");
  LR_ASSIGN(uint64_t init_task, kint::ksymbol(k, "init_task"));
  std::vector<std::string> w;
  auto listed = kint::list_objects(k.mem(), init_task + o_tasks, o_tasks, lim, "init_task.tasks",
                                   &w, nullptr);
  if (!w.empty())
    partial.push_back("the task list was cut short (" + w.front() +
                      "): the kernel stacks of tasks past it were not scanned");
  for (auto& s : w) warn(s);
  std::vector<uint64_t> leaders = {init_task};
  for (uint64_t t : listed)
    if (t != init_task) leaders.push_back(t);
  LR_ASSIGN(std::vector<uint64_t> all, threads(leaders, T));
  std::unordered_set<uint64_t> callers;
  std::vector<uint8_t> tb(T.size);
  for (uint64_t t : all) {
    if (!k.mem().read(t, tb.data(), tb.size()).ok()) {
      warn(fmt::format("task {:#x}: not readable", t));
      ++tasks_unread;
      continue;
    }
    KRoot r;
    r.kind = KRoot::Kind::kStack;
    r.pid = static_cast<int>(f_pid.load(tb.data()));
    r.comm = kint::cstr_at(tb.data(), f_comm.first, f_comm.second);
    r.base = kint::ptr_at(tb.data(), o_stack);
    uint64_t size = kThreadSize;
    if (Area* a = area_at(areas, r.base)) {
      a->stack = true;
      size = a->size;
      callers.insert(a->caller);
    } else {
      skip_direct(r.base, r.base + size);
    }
    const uint64_t sp = static_cast<uint64_t>(saved_sp->eval(k.mem(), tb.data(), t).i);
    const bool running = f_on_cpu.ok() && f_on_cpu.value().load(tb.data()) != 0;
    r.sp = r.base;
    if (!running && sp - r.base < size) r.sp = sp & ~uint64_t{7};
    if (!running && sp - r.base >= size)
      warn(
          fmt::format("task {} ({}): saved stack pointer {:#x} is outside its stack {:#x}; the "
                      "whole stack was scanned",
                      r.pid, r.comm, sp, r.base));
    const uint64_t a = r.sp, e = r.base + size;
    roots.push_back({a, e, root(std::move(r))});
    ++ix.stats_.stacks;
  }
  for (Area& a : areas) a.cached_stack = !a.stack && callers.count(a.caller);
  return {};
}

// Loaded modules' memory: every area holding the struct module or one of
// its symbols is scanned as a root (modules' data and .bss are roots, as
// for kmemleak; their text and read-only data hold no pointers to objects).
void KRefIndex::Parts::modules() {
  auto mods = k.loaded_modules();
  if (!mods.ok()) {
    warn("modules: " + mods.error().message);
    partial.push_back("the loaded modules could not be listed (" + mods.error().message +
                      "): their data and .bss were not scanned");
    return;
  }
  for (const auto& [name, m] : mods.value()) {
    std::vector<uint64_t> at = {m};
    if (auto syms = k.module_symbols(name, m, nullptr); syms.ok())
      for (const auto& s : syms.value()) at.push_back(s.addr);
    for (uint64_t a : at)
      if (Area* ar = area_at(areas, a); ar && !ar->module) {
        ar->module = true;
        KRoot r;
        r.kind = KRoot::Kind::kModule;
        r.module = name;
        r.base = ar->addr;
        roots.push_back({ar->addr, ar->addr + ar->size, root(std::move(r))});
        ++ix.stats_.module_areas;
      }
  }
}

// Each CPU's unit of the first per-CPU chunk (static per-CPU variables and
// the first dynamic allocations; later chunks are vmalloc areas): at
// pcpu_base_addr + pcpu_unit_offsets[cpu], pcpu_unit_size bytes.
Result<void> KRefIndex::Parts::percpu() {
  LR_ASSIGN(uint64_t ncpu, kint::read_uint_var(k, "nr_cpu_ids"));
  LR_ASSIGN(uint64_t unit, kint::read_uint_var(k, "pcpu_unit_size"));
  LR_ASSIGN(uint64_t base, kint::read_uint_var(k, "pcpu_base_addr"));
  LR_ASSIGN(uint64_t unit_offs, kint::read_uint_var(k, "pcpu_unit_offsets"));
  LR_ASSIGN(uint64_t offs, kint::ksymbol(k, "per_cpu_offset"));
  if (ncpu > 8192 || unit > (1u << 30))
    return make_error(Errc::kBadFormat, fmt::format("nr_cpu_ids {} and pcpu_unit_size {:#x}: not "
                                                    "a machine's (corrupt?)",
                                                    ncpu, unit));
  for (uint64_t c = 0; c < ncpu; ++c) {
    uint64_t uo = 0, off = 0;
    LR_TRY(k.mem().read(unit_offs + c * 8, &uo, 8));
    LR_TRY(k.mem().read(offs + c * 8, &off, 8));
    KRoot r;
    r.kind = KRoot::Kind::kPerCpu;
    r.cpu = static_cast<int>(c);
    r.base = off;  // a per-CPU variable's vmlinux value plus this is its address
    const uint64_t a = base + uo;
    skip_direct(a, a + unit);
    roots.push_back({a, a + unit, root(std::move(r))});
  }
  return {};
}

// The kernel image's writable data; its pages in the direct map are not
// scanned again as kernel pages (nor its text and read-only data). A page
// of the image the kernel gave back to the page allocator after boot (the
// unused part of .bss..decrypted without memory encryption, 5.10's 2 MiB
// of .bss) is no longer PG_reserved: it is no root, and the page pass
// treats it as any other page.
Result<void> KRefIndex::Parts::kernel_data() {
  static const char* kSections[][3] = {
      {"_sdata", "_edata", ".data"},
      {"__start_ro_after_init", "__end_ro_after_init", ".data..ro_after_init"},
      {"__bss_start", "__bss_stop", ".bss"}};
  // __pa_symbol: a runtime image address less the image's offset from
  // where it was loaded.
  LR_ASSIGN(uint64_t voffset, kint::image_voffset(k));
  auto direct = [&](uint64_t v) { return v - voffset + page_offset; };
  LR_ASSIGN(kint::Layout P, kint::Layout::of(k, "page"));
  LR_ASSIGN(auto reserved, P.expr(k, "reserved"));
  std::vector<uint8_t> pb(P.size);
  // Whether the image page at `v` is still the image's (unreadable: kept).
  auto kept = [&](uint64_t v) {
    const uint64_t pg = vmemmap + (direct(v) - page_offset) / kPage * P.size;
    return !k.mem().read(pg, pb.data(), pb.size()).ok() ||
           reserved->eval(k.mem(), pb.data(), pg).truthy();
  };
  for (const auto& s : kSections) {
    LR_ASSIGN(uint64_t a, k.symbol(s[0]));
    LR_ASSIGN(uint64_t b, k.symbol(s[1]));
    KRoot r;
    r.kind = KRoot::Kind::kKernelData;
    r.section = s[2];
    const uint32_t tag = root(std::move(r));
    for (uint64_t v = a, run = a; v < b; v = run) {
      run = std::min(b, (v & ~(kPage - 1)) + kPage);
      if (!kept(v)) continue;
      while (run < b && kept(run)) run = std::min(b, run + kPage);
      roots.push_back({v, run, tag});
      skip_direct(direct(v), direct(run));
    }
  }
  LR_ASSIGN(uint64_t text, k.symbol("_text"));
  LR_ASSIGN(uint64_t init, k.symbol("__init_begin"));
  skip_direct(direct(text), direct(init));
  return {};
}

// Every other page of kernel memory: in use (_refcount above 0), no slab,
// no file or anonymous data (mapping), not scanned as something else. Runs
// of such pages become root ranges; a compound page's tails go with its head.
Result<void> KRefIndex::Parts::pages() {
  LR_ASSIGN(kint::Layout P, kint::Layout::of(k, "page"));
  LR_ASSIGN(IntField f_ref, P.field("_refcount", true));
  LR_ASSIGN(uint64_t o_mapping, P.off("mapping"));
  LR_ASSIGN(uint64_t o_head, P.off("compound_head"));
  LR_ASSIGN(auto slab_head, P.expr(k, "slab_head"));
  KRoot pr;
  pr.kind = KRoot::Kind::kPage;
  const uint32_t tag = root(pr);
  const uint64_t ps = P.size, per = kPage / ps;
  std::vector<uint8_t> buf(kPage);
  std::sort(skip_pfn.begin(), skip_pfn.end());
  auto skip = skip_pfn.begin();  // the next skipped pfn at or past the page
  uint64_t hole = 0;             // unreadable struct pages in a row
  enum Kind : uint8_t { kSkip, kKernel };
  uint64_t head = 0, run = UINT64_MAX;
  Kind head_kind = kSkip;
  auto close = [&](uint64_t pfn) {
    if (run != UINT64_MAX)
      roots.push_back({page_offset + run * kPage, page_offset + pfn * kPage, tag});
    run = UINT64_MAX;
  };
  for (uint64_t pfn = min_pfn - min_pfn % per; pfn < max_pfn; pfn += per) {
    if (kint::interrupted(lim)) return make_error(Errc::kInterrupted, "interrupted");
    const uint64_t at = vmemmap + pfn * ps, n = std::min(per, max_pfn - pfn);
    ix.stats_.pages += n;
    if (!k.mem().read(at, buf.data(), n * ps).ok()) {
      close(pfn);
      // As the slab pass: 2^28 missing struct pages in a row (1 TiB of
      // RAM) end the pass, so a corrupt max_pfn costs seconds.
      if ((hole += n) >= kMaxHolePages && pfn + n < max_pfn) {
        warn(
            fmt::format("struct page array: the {} struct pages from pfn {:#x} are not in the "
                        "dump; the page pass stopped there",
                        hole, pfn + n - hole));
        partial.push_back(fmt::format(
            "the page pass stopped at pfn {:#x} (struct pages not in the dump): kernel pages "
            "past it were not scanned as roots",
            pfn + n - hole));
        return {};
      }
      continue;
    }
    hole = 0;
    for (uint64_t j = 0; j < n; ++j) {
      const uint8_t* pb = buf.data() + j * ps;
      const uint64_t ch = kint::ptr_at(pb, o_head), page = at + j * ps;
      Kind kind = kSkip;
      if (ch & 1) {
        kind = ch - 1 == head ? head_kind : kSkip;
      } else {
        head = page;
        if (f_ref.load(pb) == 0) {
          ++ix.stats_.free_pages;
        } else if (kint::ptr_at(pb, o_mapping) != 0) {
          ++ix.stats_.data_pages;
        } else if (!slab_head->eval(k.mem(), pb, page).truthy()) {
          kind = kKernel;
        }
        head_kind = kind;
      }
      while (skip != skip_pfn.end() && *skip < pfn + j) ++skip;
      if (kind == kKernel && skip != skip_pfn.end() && *skip == pfn + j) kind = kSkip;
      if (kind == kKernel) {
        ++ix.stats_.kernel_pages;
        if (run == UINT64_MAX) run = pfn + j;
      } else {
        close(pfn + j);
      }
    }
  }
  close(max_pfn);
  return {};
}

// The CPUs' registers when the dump was taken: an ELF dump's NT_PRSTATUS
// notes, one per CPU (kdump files and crash's memory have none here: a
// running task's whole stack is scanned instead).
void KRefIndex::Parts::registers() {
  const auto* core = dynamic_cast<const CoreFile*>(&k.mem());
  if (!core) return;
  for (size_t c = 0; c < core->threads().size(); ++c) {
    KRoot r;
    r.kind = KRoot::Kind::kRegisters;
    r.cpu = static_cast<int>(c);
    const uint32_t tag = root(std::move(r));
    ++ix.stats_.cpu_registers;
    const uint32_t n = static_cast<uint32_t>(core->threads()[c].nregs());
    for (uint32_t i = 0; i < n; ++i) values.push_back({core->threads()[c].regs[i], tag, i});
  }
}

// The object holding `a` (objects sorted by address), nullptr when none.
KObject* KRefIndex::Parts::object_at(uint64_t a) {
  auto& objs = ix.objects_;
  auto it = std::upper_bound(objs.begin(), objs.end(), a,
                             [](uint64_t v, const KObject& o) { return v < o.addr; });
  if (it == objs.begin() || a - (it - 1)->addr >= (it - 1)->size) return nullptr;
  return &*(it - 1);
}

// Marks the object holding each rcu_head of the chain from `head` as
// waiting to be freed; bounded (a looping chain is a warning).
void KRefIndex::Parts::rcu_chain(uint64_t head, uint64_t o_next, const char* what) {
  uint64_t h = head, n = 0;
  for (; h && n < lim.max_objects; ++n) {
    if (KObject* o = object_at(h)) {
      if (!o->rcu) ++ix.stats_.rcu_pending;
      o->rcu = true;
    }
    uint64_t next = 0;
    if (!k.mem().read(h + o_next, &next, 8).ok()) {
      warn(fmt::format("{}: rcu_head {:#x} is not readable; the list was cut there", what, h));
      rcu_cut = true;
      return;
    }
    h = next;
  }
  if (h) {
    warn(fmt::format("{}: more than {} callbacks (a loop?); the rest were not marked", what, n));
    rcu_cut = true;
  }
}

// Objects waiting for a grace period: each CPU's RCU callback list and
// kfree_rcu's lists (kfree_rcu_cpu.head, and each batch's head_free). Their
// contents are dead: neither leaks nor roots. kfree_rcu's page-sized bulk
// arrays of pointers are kernel pages, so the objects they list are
// reachable and scanned (never reported as leaks).
Result<void> KRefIndex::Parts::rcu_pending() {
  LR_ASSIGN(kint::PerCpu pc, kint::per_cpu(k));
  LR_ASSIGN(uint64_t rd, kint::ksymbol(k, "rcu_data"));
  LR_ASSIGN(kint::Layout R, kint::Layout::of(k, "rcu_data"));
  LR_ASSIGN(uint64_t o_head, R.off("cblist.head"));
  LR_ASSIGN(kint::Layout CH, kint::Layout::of(k, "callback_head"));
  LR_ASSIGN(uint64_t o_next, CH.off("next"));
  // kfree_rcu's lists are optional: a kernel without them has RCU's only.
  auto krc = kint::ksymbol(k, "krc");
  auto K = kint::Layout::of(k, "kfree_rcu_cpu");
  auto W = kint::Layout::of(k, "kfree_rcu_cpu_work");
  for (uint64_t c = 0; c < pc.ncpu; ++c) {
    uint64_t head = 0;
    LR_ASSIGN(uint64_t a, kint::per_cpu_var(k, pc, rd, c));
    if (k.mem().read(a + o_head, &head, 8).ok()) rcu_chain(head, o_next, "rcu_data.cblist");
    if (!krc.ok() || !K.ok() || !W.ok()) continue;
    LR_ASSIGN(uint64_t kc, kint::per_cpu_var(k, pc, krc.value(), c));
    if (auto o = K.value().off("head"); o.ok() && k.mem().read(kc + o.value(), &head, 8).ok())
      rcu_chain(head, o_next, "krc.head");
    auto o_arr = K.value().off("krw_arr");
    auto o_free = W.value().off("head_free");
    if (!o_arr.ok() || !o_free.ok()) continue;
    for (uint64_t b = 0; b < 2; ++b)
      if (k.mem().read(kc + o_arr.value() + b * W.value().size + o_free.value(), &head, 8).ok())
        rcu_chain(head, o_next, "krc.krw_arr.head_free");
  }
  return {};
}

// kmemleak's marks on the objects, on a kernel built with it.
void KRefIndex::Parts::kmemleak() {
  std::vector<std::string> w;
  auto notes = kmemleak_notes(k, lim, &w);
  for (auto& s : w) warn("kmemleak: " + s);
  if (!notes.ok()) {
    warn("kmemleak's metadata is not readable: " + notes.error().message);
    return;
  }
  for (const KmemleakNote& n : notes.value())
    if (KObject* o = object_at(n.pointer)) o->kmemleak |= n.mark;
  for (const KObject& o : ix.objects_) {
    ix.stats_.kmemleak_not_leak += (o.kmemleak & KmemleakNote::kNotLeak) != 0;
    ix.stats_.kmemleak_no_scan += (o.kmemleak & KmemleakNote::kNoScan) != 0;
  }
}

Result<std::unique_ptr<KRefIndex>> KRefIndex::build(KernelTarget& k, const KernelLimits& lim) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<KRefIndex> ix(new KRefIndex());
  Parts P(k, lim, *ix);
  LR_TRY(P.bases());
  LR_TRY(P.slab());
  LR_TRY(P.vmalloc());
  LR_TRY(P.tasks());
  P.modules();
  LR_TRY(P.percpu());
  LR_TRY(P.kernel_data());
  LR_TRY(P.pages());
  P.registers();
  // Objects: slab objects and the vmalloc areas that are neither a module's
  // nor a task's stack, in address order.
  for (const Area& a : P.areas) {
    if (a.stack || a.module) continue;
    KObject o;
    o.kind = a.cached_stack ? KObject::Kind::kStack : KObject::Kind::kVmalloc;
    o.addr = a.addr;
    o.size = a.size;
    o.caller = a.caller;
    ix->objects_.push_back(o);
  }
  std::sort(ix->objects_.begin(), ix->objects_.end(),
            [](const KObject& a, const KObject& b) { return a.addr < b.addr; });
  if (auto r = P.rcu_pending(); !r.ok()) P.warn("RCU callbacks: " + r.error().message);
  P.kmemleak();
  std::vector<GraphObject> objs;
  objs.reserve(ix->objects_.size());
  for (const KObject& o : ix->objects_)
    objs.push_back({o.addr, o.size,
                    o.kind != KObject::Kind::kStack && !o.rcu && !o.untracked &&
                        !(o.kmemleak & KmemleakNote::kNoScan)});
  ix->stats_.collect_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  ObjectGraphOptions go;
  go.interrupted = lim.interrupted;
  ix->values_ = P.values;
  LR_ASSIGN(ix->graph_, ObjectGraph::build(k.mem(), std::move(objs), std::move(P.roots),
                                           std::move(P.values), go));
  if (P.tasks_unread)
    P.partial.push_back(fmt::format("{} task{} not readable: {} kernel stack{} not scanned",
                                    P.tasks_unread, P.tasks_unread == 1 ? " is" : "s are",
                                    P.tasks_unread == 1 ? "its" : "their",
                                    P.tasks_unread == 1 ? " was" : "s were"));
  if (P.rcu_cut)
    P.partial.push_back(
        "an RCU callback list was cut short: objects waiting past the cut to be freed may be "
        "listed as leaked");
  ix->model_ = kernel_root_model(*ix->graph_, ix->roots_, std::move(P.partial));
  for (const GraphUnread& u : ix->graph_->unread())
    if (u.object != GraphUnread::kNone) ix->objects_[u.object].unread = true;
  return ix;
}

KRefIndex::~KRefIndex() = default;

Result<std::vector<Ref>> KRefSource::refs_into(uint64_t addr, uint64_t size) const {
  const size_t i = ix_.find(addr);
  if (i == SIZE_MAX)
    return make_error(
        Errc::kNotFound,
        fmt::format("{:#x} is inside no allocated slab object or vmalloc area", addr));
  std::vector<Ref> out;
  for (const GraphRef& g : ix_.graph().referrers(i)) {
    if (g.value - addr >= size || (g.from >= addr && g.from - addr < size)) continue;
    Ref r;
    r.from = g.from;
    r.value = g.value;
    r.target = static_cast<uint32_t>(i);
    r.kind = RefFrom::kChunk;
    if (g.value_root != GraphRef::kNone) {
      r.kind = RefFrom::kRegister;
    } else if (g.root != GraphRef::kNone) {
      const KRoot& k = ix_.roots()[ix_.graph().roots()[g.root].tag];
      r.kind = kernel_root_kind(k);
      r.tid = k.pid;
    }
    out.push_back(r);
  }
  return out;
}

std::vector<KLeak> kernel_leaks(const KRefIndex& ix) {
  std::vector<KLeak> out;
  const auto seen = ix.graph().reachable();
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] & ObjectGraph::kReached) continue;
    if (ix.objects()[i].kind == KObject::Kind::kStack) continue;      // a spare stack
    if (ix.objects()[i].rcu) continue;                                // being freed
    if (ix.objects()[i].untracked) continue;                          // kmemleak's metadata
    if (ix.objects()[i].kmemleak & KmemleakNote::kNotLeak) continue;  // kmemleak_not_leak
    if (ix.objects()[i].unread) continue;                             // not in the dump: not known
    out.push_back({i, (seen[i] & ObjectGraph::kReferenced) != 0});
  }
  return out;
}

}  // namespace lr
