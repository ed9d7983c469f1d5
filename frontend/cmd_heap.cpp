// heap: the malloc heap of a core (glibc's, jemalloc's or tcmalloc's), block-state aware.
#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "cmd_heap.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "corelib/blocks/heap.hpp"
#include "progress.hpp"
#include "targets/glibc/glibc_heap.hpp"
#include "targets/jemalloc/jemalloc_heap.hpp"
#include "targets/tcmalloc/tcmalloc_heap.hpp"

namespace lrcli {

lr::Result<lr::HeapWalk> read_heap(lr::Program& prog) {
  std::atomic<uint64_t> chunks{0};
  lr::HeapLimits lim;
  lim.progress = &chunks;
  Progress shown("reading the heap", &chunks, false, "chunks");
  return lr::walk_heap(prog, lim);
}

lr::Result<CoreIndex> index_core(lr::Program& prog, const lr::HeapWalk* heap,
                                 const std::vector<uint64_t>& skip) {
  if (!prog.core())
    return lr::make_error(lr::Errc::kUnsupported,
                          "the reference index reads process cores, not kernel dumps");
  CoreIndex ci;
  if (!heap) {
    LR_ASSIGN(lr::HeapWalk h, read_heap(prog));
    ci.own_heap = std::make_unique<lr::HeapWalk>(std::move(h));
    heap = ci.own_heap.get();
  }
  ci.heap = heap;
  std::atomic<uint64_t> bytes{0};
  std::optional<Progress> shown;
  shown.emplace("indexing references", &bytes, false, "MiB", 1u << 20);
  lr::RefIndexOptions opts;
  opts.skip_chunks = skip;
  opts.progress = &bytes;
  LR_ASSIGN(ci.index, lr::RefIndex::build(*prog.core(), prog.modules(), *heap, opts));
  return ci;
}

nlohmann::json ref_brief_json(const lr::Ref& r) {
  nlohmann::json j{{"kind", lr::ref_from_name(r.kind)}};
  if (r.kind == lr::RefFrom::kRegister)
    j["register"] = r.from;
  else
    j["from"] = hex(r.from);
  if (r.tid) j["tid"] = r.tid;
  return j;
}

namespace {

const char* region_kind(lr::HeapRegion::Kind k) {
  return k == lr::HeapRegion::Kind::kMain     ? "main"
         : k == lr::HeapRegion::Kind::kThread ? "thread"
                                              : "mmapped";
}

nlohmann::json regions_json(const lr::HeapWalk& h, bool list) {
  nlohmann::json regions = nlohmann::json::array();
  for (const auto& r : h.regions)
    if (r.kind != lr::HeapRegion::Kind::kMmapped || list)
      regions.push_back({{"kind", region_kind(r.kind)},
                         {"start", hex(r.start)},
                         {"end", hex(r.end)},
                         {"arena", hex(r.arena)},
                         {"complete", r.complete}});
  return regions;
}

// The fields every allocator's report has, and --list's chunks.
void common_json(nlohmann::json& j, const lr::HeapWalk& h, bool list, bool stats, double ms) {
  j["allocator"] = h.allocator;
  j["warnings"] = h.warnings;
  // Timing only on request: the same core gives the same output.
  if (stats) j["walk_ns"] = static_cast<uint64_t>(ms * 1e6);
  j["regions"] = regions_json(h, list);
  if (list) {
    nlohmann::json chunks = nlohmann::json::array();
    for (const auto& ch : h.in_use) chunks.push_back({hex(ch.user), ch.usable(), ch.mmapped()});
    j["in_use"] = chunks;
  }
}

void list_text(const lr::HeapWalk& h, bool list, bool stats, double ms) {
  if (list)
    for (const auto& ch : h.in_use)
      fmt::print("{:#x} {}{}\n", ch.user, ch.usable(), ch.mmapped() ? " mmapped" : "");
  print_warnings_text(h.warnings);
  if (stats)
    fmt::print(stderr, "leakref: heap walked in {:.3f} ms ({} in-use chunks)\n", ms,
               h.stats.in_use);
}

int glibc_report(const lr::HeapWalk& h, const lr::GlibcHeap& g, const Common& c, bool list,
                 bool stats, double ms) {
  const lr::HeapStats& s = h.stats;
  if (c.json) {
    nlohmann::json j = {
        {"schema", "leakref.heap/1"},
        {"main_arena", hex(g.main_arena)},
        {"glibc", {{"release", g.layout.version}, {"layout", g.layout.from}}},
        {"tcache_key",
         g.tcache_key_from.empty() ? nlohmann::json(nullptr) : nlohmann::json(hex(g.tcache_key))},
        {"stats",
         {{"arenas", s.arenas},
          {"heaps", g.heaps},
          // every chunk, as the text says; heap_chunks without mmapped ones
          {"chunks", s.chunks + s.mmapped},
          {"heap_chunks", s.chunks},
          {"in_use", s.in_use},
          {"in_use_bytes", s.in_use_bytes},
          {"mmapped", s.mmapped},
          {"bin_free", g.bin_free},
          {"fastbin_free", g.fastbin_free},
          {"tcache_free", g.tcache_free},
          {"tcache_structs", g.tcache_structs},
          {"index_bytes", s.index_bytes}}}};
    common_json(j, h, list, stats, ms);
    emit_json(j);
    return kOk;
  }
  fmt::print("main_arena {:#x}, {} arena(s), {} heap(s), tcache key {}\n", g.main_arena, s.arenas,
             g.heaps,
             g.tcache_key_from.empty()
                 ? std::string("unknown (no libc symbol, no tcache entry)")
                 : fmt::format("{:#x}{}", g.tcache_key,
                               g.tcache_key_from == "libc" ? "" : " (from the tcache entries)"));
  for (const auto& r : h.regions)
    if (r.kind != lr::HeapRegion::Kind::kMmapped)
      fmt::print("  {:<7} [{:#x}, {:#x}) arena {:#x}{}\n", region_kind(r.kind), r.start, r.end,
                 r.arena, r.complete ? "" : " (chain broken)");
  fmt::print(
      "chunks {} ({} in heaps, {} mmapped): in use {} ({} bytes); free: bins {}, fastbins {}, "
      "tcache {}\n",
      s.chunks + s.mmapped, s.chunks, s.mmapped, s.in_use, s.in_use_bytes, g.bin_free,
      g.fastbin_free, g.tcache_free);
  fmt::print("glibc {}: malloc layout from {}\n",
             g.layout.version.empty() ? "(release unknown)" : g.layout.version, g.layout.from);
  list_text(h, list, stats, ms);
  return kOk;
}

int jemalloc_report(const lr::HeapWalk& h, const lr::JemallocHeap& g, const Common& c, bool list,
                    bool stats, double ms) {
  const lr::HeapStats& s = h.stats;
  if (c.json) {
    nlohmann::json j = {{"schema", "leakref.heap/1"},
                        {"jemalloc",
                         {{"layout", g.layout.from},
                          {"page", g.page},
                          {"tcaches", g.tcaches},
                          {"slabs", g.slabs},
                          {"large", g.large},
                          {"dirty", g.dirty},
                          {"muzzy", g.muzzy},
                          {"retained", g.retained},
                          {"base_blocks", g.base_blocks}}},
                        {"stats",
                         {{"arenas", s.arenas},
                          {"chunks", s.chunks},
                          {"in_use", s.in_use},
                          {"in_use_bytes", s.in_use_bytes},
                          {"slab_free", g.slab_free},
                          {"tcache_free", g.tcache_free},
                          {"index_bytes", s.index_bytes}}}};
    common_json(j, h, list, stats, ms);
    emit_json(j);
    return kOk;
  }
  fmt::print("jemalloc: {} arena(s), {} thread cache(s), {}-byte pages; layout from {}\n", s.arenas,
             g.tcaches, g.page, g.layout.from);
  fmt::print(
      "extents: {} slabs, {} large in use; free: {} dirty, {} muzzy ({} retained, unbacked)\n",
      g.slabs, g.large, g.dirty, g.muzzy, g.retained);
  fmt::print("blocks {}: in use {} ({} bytes); free: slab regions {}, thread caches {}\n", s.chunks,
             s.in_use, s.in_use_bytes, g.slab_free, g.tcache_free);
  list_text(h, list, stats, ms);
  return kOk;
}

int tcmalloc_report(const lr::HeapWalk& h, const lr::TcmallocHeap& g, const Common& c, bool list,
                    bool stats, double ms) {
  const lr::HeapStats& s = h.stats;
  uint64_t free_objects = 0;
  for (const auto& sp : h.space)
    if (sp.kind == lr::HeapSpace::Kind::kFree && sp.blocks) free_objects += sp.blocks;
  if (c.json) {
    nlohmann::json j = {{"schema", "leakref.heap/1"},
                        {"tcmalloc",
                         {{"layout", g.layout.from},
                          {"page", g.page},
                          {"thread_caches", g.thread_caches},
                          {"small_spans", g.small_spans},
                          {"large_spans", g.large_spans},
                          {"free_spans", g.free_spans}}},
                        {"stats",
                         {{"arenas", s.arenas},
                          {"chunks", s.chunks},
                          {"in_use", s.in_use},
                          {"in_use_bytes", s.in_use_bytes},
                          {"free_objects", free_objects},
                          {"index_bytes", s.index_bytes}}}};
    common_json(j, h, list, stats, ms);
    emit_json(j);
    return kOk;
  }
  fmt::print("tcmalloc: {} thread cache(s), {}-byte pages; layout from {}\n", g.thread_caches,
             g.page, g.layout.from);
  fmt::print("spans: {} of small objects, {} large in use; {} free\n", g.small_spans, g.large_spans,
             g.free_spans);
  fmt::print("blocks {}: in use {} ({} bytes); free objects {}\n", s.chunks, s.in_use,
             s.in_use_bytes, free_objects);
  list_text(h, list, stats, ms);
  return kOk;
}

}  // namespace

static int cmd_heap(const Common& c, bool list, bool stats) {
  auto prog_r = open_program(c);
  if (!prog_r.ok()) return fail(prog_r.error());
  lr::Program& prog = *prog_r.value();
  auto t0 = std::chrono::steady_clock::now();
  auto hw = read_heap(prog);
  if (!hw.ok())
    return fail(lr::make_error(hw.error().code, prog.core()->path() + ": " + hw.error().message));
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const lr::HeapWalk& h = hw.value();
  if (const auto* g = dynamic_cast<const lr::GlibcHeap*>(h.details.get()))
    return glibc_report(h, *g, c, list, stats, ms);
  if (const auto* g = dynamic_cast<const lr::JemallocHeap*>(h.details.get()))
    return jemalloc_report(h, *g, c, list, stats, ms);
  if (const auto* g = dynamic_cast<const lr::TcmallocHeap*>(h.details.get()))
    return tcmalloc_report(h, *g, c, list, stats, ms);
  // Another allocator's heap is refused, never printed as glibc's zeros.
  return fail(lr::make_error(lr::Errc::kUnsupported,
                             fmt::format("{}: heap has no report for the {} allocator",
                                         prog.core()->path(), h.allocator)));
}

Command register_heap(CLI::App& app, Common& c) {
  struct Args {
    bool list = false, stats = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "heap", "malloc arenas and in-use blocks (glibc, jemalloc, tcmalloc; state aware)");
  add_common(sub, c);
  sub->add_flag("--list", a->list, "list every in-use chunk (address, usable size)");
  sub->add_flag("--stats", a->stats, "timing (JSON: walk_ns; text: on stderr)");
  return {sub, [&c, a] { return cmd_heap(c, a->list, a->stats); }, [&c] { return c.json; }};
}

}  // namespace lrcli
