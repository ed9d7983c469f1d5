#include "alloc_sites.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "corelib/analyses/trace.hpp"
#include "corelib/debuginfo/program.hpp"

lr::Result<std::vector<lr::Trace>> load_traces(const std::vector<std::string>& paths,
                                               lr::TraceFormat format) {
  std::vector<lr::Trace> traces;
  std::vector<lr::TraceMapping> maps;
  for (const auto& p : paths) {
    LR_ASSIGN(auto t, lr::load_trace(p, format));
    if (t.format == lr::TraceFormat::kMaps)
      maps.insert(maps.end(), t.mappings.begin(), t.mappings.end());
    else
      traces.push_back(std::move(t));
  }
  for (auto& t : traces)
    if (t.mappings.empty()) t.mappings = maps;
  return traces;
}

lr::Result<LiveSites> live_sites(const lr::Program& prog, const lr::HeapWalk& heap,
                                 const std::vector<std::string>& paths) {
  LR_ASSIGN(std::vector<lr::Trace> traces, load_traces(paths));
  lr::FrameResolver fr(&prog.modules(), prog.core());
  lr::CorrelateOptions opts;
  opts.top = SIZE_MAX;
  lr::CorrelateReport rep = lr::correlate(traces, {}, fr, opts, &heap);
  if (rep.alloc_sites.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          fmt::format("--trace: no allocation records (leakref-trace --malloc, "
                                      "mmleak or bcc memleak output) in {}",
                                      fmt::join(paths, ", ")));
  LiveSites out;
  for (const auto& al : rep.allocs) {
    if (!al.live) continue;
    const lr::Trace& t = traces[al.ev.trace];
    const auto& e = t.events[al.ev.event];
    std::string site = "(no caller)", module = "(no caller)";
    if (e.stack && !t.stacks[e.stack].empty()) {
      const lr::ResolvedFrame f = fr.resolve(t, t.stacks[e.stack][0]);
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
