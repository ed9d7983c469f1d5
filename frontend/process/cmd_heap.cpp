// heap: the malloc heap of a core (glibc's, jemalloc's or tcmalloc's), block-state aware.
#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "corelib/blocks/heap.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/render.hpp"
#include "targets/glibc/glibc_heap.hpp"
#include "targets/jemalloc/jemalloc_heap.hpp"
#include "targets/tcmalloc/tcmalloc_heap.hpp"

namespace lrcli {

namespace {

const char* region_kind(lr::HeapRegion::Kind k) {
  return k == lr::HeapRegion::Kind::kMain     ? "main"
         : k == lr::HeapRegion::Kind::kThread ? "thread"
         : k == lr::HeapRegion::Kind::kCarved ? "carved"
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
  j["layers"] = h.layers;
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
      out_stdout().print("{:#x} {}{}\n", ch.user, ch.usable(), ch.mmapped() ? " mmapped" : "");
  print_warnings_text(h.warnings);
  if (stats)
    out_stderr().print("leakref: heap walked in {:.3f} ms ({} in-use chunks)\n", ms,
                       h.stats.in_use);
}

int glibc_report(const lr::HeapWalk& h, const lr::GlibcHeap& g, const DumpOptions& c, bool list,
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
  out_stdout().print(
      "main_arena {:#x}, {} arena(s), {} heap(s), tcache key {}\n", g.main_arena, s.arenas, g.heaps,
      g.tcache_key_from.empty()
          ? std::string("unknown (no libc symbol, no tcache entry)")
          : fmt::format("{:#x}{}", g.tcache_key,
                        g.tcache_key_from == "libc" ? "" : " (from the tcache entries)"));
  for (const auto& r : h.regions)
    if (r.kind != lr::HeapRegion::Kind::kMmapped)
      out_stdout().print("  {:<7} [{:#x}, {:#x}) arena {:#x}{}\n", region_kind(r.kind), r.start,
                         r.end, r.arena, r.complete ? "" : " (chain broken)");
  out_stdout().print(
      "chunks {} ({} in heaps, {} mmapped): in use {} ({} bytes); free: bins {}, fastbins {}, "
      "tcache {}\n",
      s.chunks + s.mmapped, s.chunks, s.mmapped, s.in_use, s.in_use_bytes, g.bin_free,
      g.fastbin_free, g.tcache_free);
  out_stdout().print("glibc {}: malloc layout from {}\n",
                     g.layout.version.empty() ? "(release unknown)" : g.layout.version,
                     g.layout.from);
  list_text(h, list, stats, ms);
  return kOk;
}

int jemalloc_report(const lr::HeapWalk& h, const lr::JemallocHeap& g, const DumpOptions& c,
                    bool list, bool stats, double ms) {
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
  out_stdout().print("jemalloc: {} arena(s), {} thread cache(s), {}-byte pages; layout from {}\n",
                     s.arenas, g.tcaches, g.page, g.layout.from);
  out_stdout().print(
      "extents: {} slabs, {} large in use; free: {} dirty, {} muzzy ({} retained, unbacked)\n",
      g.slabs, g.large, g.dirty, g.muzzy, g.retained);
  out_stdout().print("blocks {}: in use {} ({} bytes); free: slab regions {}, thread caches {}\n",
                     s.chunks, s.in_use, s.in_use_bytes, g.slab_free, g.tcache_free);
  list_text(h, list, stats, ms);
  return kOk;
}

int tcmalloc_report(const lr::HeapWalk& h, const lr::TcmallocHeap& g, const DumpOptions& c,
                    bool list, bool stats, double ms) {
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
  out_stdout().print("tcmalloc: {} thread cache(s), {}-byte pages; layout from {}\n",
                     g.thread_caches, g.page, g.layout.from);
  out_stdout().print("spans: {} of small objects, {} large in use; {} free\n", g.small_spans,
                     g.large_spans, g.free_spans);
  out_stdout().print("blocks {}: in use {} ({} bytes); free objects {}\n", s.chunks, s.in_use,
                     s.in_use_bytes, free_objects);
  list_text(h, list, stats, ms);
  return kOk;
}

}  // namespace

static int cmd_heap(const DumpOptions& c, bool list, bool stats) {
  auto prog_r = open_program(c);
  if (!prog_r.ok()) return fail(prog_r.error());
  lr::Program& prog = *prog_r.value();
  auto t0 = std::chrono::steady_clock::now();
  auto hw = lr::read_heap(prog, cli_display());
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

Command register_heap(CLI::App& app, DumpOptions& c) {
  struct Args {
    bool list = false, stats = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "heap", "malloc arenas and in-use blocks (glibc, jemalloc, tcmalloc; state aware)");
  add_dump_options(sub, c);
  sub->add_flag("--list", a->list, "list every in-use chunk (address, usable size)");
  sub->add_flag("--stats", a->stats, "timing (JSON: walk_ns; text: on stderr)");
  return {sub, [&c, a] { return cmd_heap(c, a->list, a->stats); }, [&c] { return c.json; }};
}

}  // namespace lrcli
