// Allocation traces (leakref-trace --malloc, mmleak, bcc memleak, with a
// maps capture beside them) joined with a core's heap: where each live block
// was allocated. Shared by `leaks --trace` and the snapshots of diff/trend.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "corelib/analyses/correlate.hpp"
#include "corelib/base/result.hpp"

namespace lr {
class Program;
struct HeapWalk;
}  // namespace lr

struct LiveSites {
  std::map<uint64_t, std::string> by_ptr;  // live block's address -> its site ("(no caller)")
  std::vector<lr::AllocSite> sites;        // ranked by live bytes
  std::vector<std::string> warnings;       // the trace readers' and the join's
};

// kInvalidArgument when the files hold no allocation record at all.
lr::Result<LiveSites> live_sites(const lr::Program& prog, const lr::HeapWalk& heap,
                                 const std::vector<std::string>& paths);
