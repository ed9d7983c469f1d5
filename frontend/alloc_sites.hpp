// Allocation traces (leakref-trace --malloc, mmleak, bcc memleak, with a
// maps capture beside them) joined with a core's heap: where each live block
// was allocated. Shared by `leaks --trace` and the snapshots of diff/trend.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "corelib/analyses/correlate.hpp"
#include "corelib/analyses/trace.hpp"
#include "corelib/base/result.hpp"

namespace lr {
class Program;
struct HeapWalk;
}  // namespace lr

struct LiveSites {
  std::map<uint64_t, std::string> by_ptr;        // live block's address -> its site ("(no caller)")
  std::map<std::string, std::string> module_of;  // a site -> its module ("libfoo.so.0")
  std::vector<lr::AllocSite> sites;              // ranked by live bytes
  std::vector<std::string> warnings;             // the trace readers' and the join's
};

// The traces among `paths`, each given the mappings the maps captures among
// them carry (when it has none of its own); empty when only maps.
lr::Result<std::vector<lr::Trace>> load_traces(const std::vector<std::string>& paths,
                                               lr::TraceFormat format = lr::TraceFormat::kAuto);

// kInvalidArgument when the files hold no allocation record at all.
lr::Result<LiveSites> live_sites(const lr::Program& prog, const lr::HeapWalk& heap,
                                 const std::vector<std::string>& paths);
