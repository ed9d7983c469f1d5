// Snapshots for `diff`, `snapshot` and `trend`: read from a core (heap size
// classes; GlusterFS's classes and inodes when it maps libglusterfs; a
// profile's sets on request), a GlusterFS statedump, or a snapshot that
// `leakref snapshot --json` wrote (leakref.snapshot/1), so a series can be
// kept without its cores.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.hpp"
#include "corelib/analyses/diff.hpp"
#include "targets/glusterfs/gluster.hpp"

namespace lrcli {

// What a core gives beyond its snapshot, for `batch` (which then runs its
// profiles on the same opened program).
struct CoreExtras {
  std::unique_ptr<lr::Program> prog;  // the opened core (null for text inputs)
  bool gluster = false;               // it maps libglusterfs
  std::vector<lr::GfFinding> gluster_findings;
};

// `profile` (file or installed name, "" for none) runs on cores only; a
// statedump or a saved snapshot with it is refused. `c` gives --exe,
// --sysroot, --debug-dir and --types for cores. `extras` (may be null)
// receives the program and the GlusterFS findings of a core.
// `traces` (allocation traces: leakref-trace --malloc, mmleak, bcc memleak;
// may be empty) add a core's heap blocks per allocation site ("site"
// classes: recorded, never freed in the trace, live in the core).
lr::Result<lr::Snapshot> load_snapshot(const Common& c, const std::string& path,
                                       const std::string& profile, CoreExtras* extras = nullptr,
                                       const std::vector<std::string>& traces = {});
// A snapshot's time as "2026-11-25 07:19:17 UTC"; `unknown` when it has none.
std::string snapshot_time(double t, const std::string& unknown);

// What the account's classes say of the growth from `older` to `newer`
// (lr::growth_verdict): {kind, text}, or null when nothing is said; and the
// text line diff and trend print ("" when nothing is said).
nlohmann::json verdict_json(const lr::Snapshot& older, const lr::Snapshot& newer);
std::string verdict_line(const lr::Snapshot& older, const lr::Snapshot& newer);

}  // namespace lrcli
