// Allocation traces (leakref-trace's malloc capture, mmleak, bcc memleak,
// mtrace, with a maps capture beside them) joined with a core's heap: where
// each live block was allocated. Shared by leaks, account and the snapshots
// of diff and trend.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "corelib/analyses/correlate.hpp"
#include "corelib/analyses/trace.hpp"
#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/program.hpp"

namespace lr {

struct LiveSites {
  std::map<uint64_t, std::string> by_ptr;        // live block's address -> its site ("(no caller)")
  std::map<std::string, std::string> module_of;  // a site -> its module ("libfoo.so.0")
  std::vector<AllocSite> sites;       // ranked by live bytes; empty: no allocation record
  std::vector<std::string> warnings;  // the trace readers' and the join's
};

// The traces among `paths`, each given the mappings the maps captures among
// them carry (when it has none of its own); empty when only maps.
Result<std::vector<Trace>> load_traces(const std::vector<std::string>& paths,
                                       TraceFormat format = TraceFormat::kAuto);

// The live blocks' sites; `sites` is empty when the traces hold no
// allocation record at all.
LiveSites live_sites(const Program& prog, const HeapWalk& heap, const std::vector<Trace>& traces);

}  // namespace lr
