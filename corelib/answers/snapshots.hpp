// Snapshots for diff, snapshot, trend and batch, assembled by what the input
// is: a process core (its heap's size classes and account, allocation sites
// from traces, what the program targets that know the process add, a
// profile's sets on request), a kernel dump (what its target reads, a
// profile's sets), or text (a saved snapshot or a program's own state dump).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "corelib/analyses/diff.hpp"
#include "corelib/answers/alloc_sites.hpp"
#include "corelib/base/progress.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/registry/kernel_dumps.hpp"
#include "corelib/registry/process_target.hpp"

namespace lr {

// What an input is, told before it is read: the options a caller may give
// depend on it.
struct SnapshotInput {
  enum Kind { kCore, kKernelDump, kText, kSaved } kind = kCore;
  std::string text_kind;  // kText: the dump's kind ("statedump")
};
Result<SnapshotInput> snapshot_input(const std::string& path);

struct SnapshotRequest {
  std::string path;
  std::string profile;  // a file or an installed name; "" none
  std::vector<std::string> profile_dirs;
  // Opens a process core as the caller's options say (exe, sysroot, types).
  std::function<Result<std::unique_ptr<Program>>(const std::string& path)> open_core;
  // The live blocks' allocation sites of a core given its heap, or the
  // caller's error when the heap could not be read (null: no traces).
  std::function<Result<LiveSites>(const Program& prog, const Result<HeapWalk>& heap)> sites;
  // A core's blocks by type too ("type" classes, as `account --by type`
  // names them: C++ containers' blocks by what holds them).
  bool by_type = false;
  std::string vmlinux;  // kernel dumps ("" searched by `dbg`)
  DebugOptions dbg;
  ProgressDisplay* show = nullptr;
};

// What a core gives beyond its snapshot, for batch (which then runs its
// profiles on the same opened program).
struct SnapshotExtras {
  std::unique_ptr<Program> prog;      // the opened core (null for text inputs)
  std::vector<std::string> programs;  // the program targets that knew it
  std::vector<TargetFinding> findings;
};

// The snapshot of `r.path`, whatever it is (a profile or sites asked of a
// text input are ignored: the caller refuses them first, by snapshot_input).
Result<Snapshot> load_snapshot(const SnapshotRequest& r, SnapshotExtras* extras = nullptr);

}  // namespace lr
