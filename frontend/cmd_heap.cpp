// heap: the glibc malloc heap of a core, chunk-state aware.
#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "cmd_heap.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "corelib/blocks/heap.hpp"
#include "progress.hpp"
#include "targets/glibc/glibc_heap.hpp"

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
  const lr::HeapStats& s = h.stats;
  // The report (and leakref.heap/1) is glibc's arenas and bins: another
  // allocator's heap is refused, never printed as zeros.
  const auto* gp = dynamic_cast<const lr::GlibcHeap*>(h.details.get());
  if (!gp)
    return fail(lr::make_error(lr::Errc::kUnsupported,
                               fmt::format("{}: heap reports glibc's arenas; this core's heap is "
                                           "the {} allocator's",
                                           prog.core()->path(), h.allocator)));
  const lr::GlibcHeap& g = *gp;
  auto kind = [](lr::HeapRegion::Kind k) {
    return k == lr::HeapRegion::Kind::kMain     ? "main"
           : k == lr::HeapRegion::Kind::kThread ? "thread"
                                                : "mmapped";
  };
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
          {"index_bytes", s.index_bytes}}},
        {"warnings", h.warnings}};
    // Timing only on request: the same core gives the same output.
    if (stats) j["walk_ns"] = static_cast<uint64_t>(ms * 1e6);
    nlohmann::json regions = nlohmann::json::array();
    for (const auto& r : h.regions)
      if (r.kind != lr::HeapRegion::Kind::kMmapped || list)
        regions.push_back({{"kind", kind(r.kind)},
                           {"start", hex(r.start)},
                           {"end", hex(r.end)},
                           {"arena", hex(r.arena)},
                           {"complete", r.complete}});
    j["regions"] = regions;
    if (list) {
      nlohmann::json chunks = nlohmann::json::array();
      for (const auto& ch : h.in_use) chunks.push_back({hex(ch.user), ch.usable(), ch.mmapped()});
      j["in_use"] = chunks;
    }
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
      fmt::print("  {:<7} [{:#x}, {:#x}) arena {:#x}{}\n", kind(r.kind), r.start, r.end, r.arena,
                 r.complete ? "" : " (chain broken)");
  fmt::print(
      "chunks {} ({} in heaps, {} mmapped): in use {} ({} bytes); free: bins {}, fastbins {}, "
      "tcache {}\n",
      s.chunks + s.mmapped, s.chunks, s.mmapped, s.in_use, s.in_use_bytes, g.bin_free,
      g.fastbin_free, g.tcache_free);
  fmt::print("glibc {}: malloc layout from {}\n",
             g.layout.version.empty() ? "(release unknown)" : g.layout.version, g.layout.from);
  if (list)
    for (const auto& ch : h.in_use)
      fmt::print("{:#x} {}{}\n", ch.user, ch.usable(), ch.mmapped() ? " mmapped" : "");
  print_warnings_text(h.warnings);
  if (stats)
    fmt::print(stderr, "leakref: heap walked in {:.3f} ms ({} in-use chunks)\n", ms, s.in_use);
  return kOk;
}

Command register_heap(CLI::App& app, Common& c) {
  struct Args {
    bool list = false, stats = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub =
      app.add_subcommand("heap", "glibc malloc arenas and in-use chunks (chunk-state aware)");
  add_common(sub, c);
  sub->add_flag("--list", a->list, "list every in-use chunk (address, usable size)");
  sub->add_flag("--stats", a->stats, "timing (JSON: walk_ns; text: on stderr)");
  return {sub, [&c, a] { return cmd_heap(c, a->list, a->stats); }, [&c] { return c.json; }};
}

}  // namespace lrcli
