// Snapshots for `diff`, `snapshot`, `trend` and `batch`, read by the engine
// (corelib/answers/snapshots.hpp) with the CLI's options: from a core, a
// kernel dump, a program's own state dump (a GlusterFS statedump), or a
// snapshot that `leakref snapshot --json` wrote (leakref.snapshot/1), so a
// series can be kept without its cores.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "corelib/analyses/diff.hpp"
#include "corelib/answers/snapshots.hpp"
#include "frontend/base/options.hpp"

namespace lrcli {

// `profile` (file or installed name, "" for none) runs on cores and kernel
// dumps; a text input with it is refused. `c` gives --exe, --sysroot,
// --debug-dir, --types and --vmlinux. `extras` (may be null) receives the
// program and its targets' findings of a core. `traces` (allocation traces:
// leakref-trace --malloc, mmleak, bcc memleak; may be empty) add a core's
// heap blocks per allocation site ("site" classes: recorded, never freed in
// the trace, live in the core). `by_type`: a core's blocks by type too
// ("type" classes).
lr::Result<lr::Snapshot> load_snapshot(const DumpOptions& c, const std::string& path,
                                       const std::string& profile,
                                       lr::SnapshotExtras* extras = nullptr,
                                       const std::vector<std::string>& traces = {},
                                       bool by_type = false);
// A snapshot's time as "2026-11-25 07:19:17 UTC"; `unknown` when it has none.
std::string snapshot_time(double t, const std::string& unknown);

// What the account's classes say of the growth from `older` to `newer`
// (lr::growth_verdict): {kind, text}, or null when nothing is said; and the
// text line diff and trend print ("" when nothing is said).
nlohmann::json verdict_json(const lr::Snapshot& older, const lr::Snapshot& newer);
std::string verdict_line(const lr::Snapshot& older, const lr::Snapshot& newer);

}  // namespace lrcli
