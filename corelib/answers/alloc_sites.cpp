// Allocation sites of a core's live blocks (alloc_sites.hpp).
#include "corelib/answers/alloc_sites.hpp"

namespace lr {

Result<std::vector<Trace>> load_traces(const std::vector<std::string>& paths, TraceFormat format) {
  std::vector<Trace> traces;
  std::vector<TraceMapping> maps;
  for (const auto& p : paths) {
    LR_ASSIGN(auto t, load_trace(p, format));
    if (t.format == TraceFormat::kMaps)
      maps.insert(maps.end(), t.mappings.begin(), t.mappings.end());
    else
      traces.push_back(std::move(t));
  }
  for (auto& t : traces)
    if (t.mappings.empty()) t.mappings = maps;
  return traces;
}

LiveSites live_sites(const Program& prog, const HeapWalk& heap, const std::vector<Trace>& traces) {
  FrameResolver fr(&prog.modules(), prog.core());
  CorrelateOptions opts;
  opts.top = SIZE_MAX;
  CorrelateReport rep = correlate(traces, {}, fr, opts, &heap);
  LiveSites out;
  if (rep.alloc_sites.empty()) return out;
  for (const auto& al : rep.allocs) {
    if (!al.live) continue;
    const Trace& t = traces[al.ev.trace];
    const auto& e = t.events[al.ev.event];
    std::string site = "(no caller)", module = "(no caller)";
    if (e.stack && !t.stacks[e.stack].empty()) {
      const ResolvedFrame f = fr.resolve(t, t.stacks[e.stack][0]);
      site = f.text;
      // The key is "MODULE+0xOFFSET" or "MODULE:SYMBOL+0xOFFSET" when the
      // frame's module is known, a bare address or "?" when not.
      const size_t end = f.key.find_first_of(":+");
      module = end == std::string::npos || end == 0 ? "(no module)" : f.key.substr(0, end);
    }
    out.module_of.emplace(site, module);
    out.by_ptr[al.ptr] = std::move(site);
  }
  out.sites = std::move(rep.alloc_sites);
  out.warnings = std::move(rep.warnings);
  return out;
}

}  // namespace lr
