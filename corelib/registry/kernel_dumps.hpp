// What a kernel target gives the engine for a kernel dump (identify_dump's
// kKernelDump): the dump opened with its kernel's debuginfo, as a program
// profiles run on, its snapshot, and the findings of its own checks. The
// kernel's reports (inodes, modules, slabs...) are the target's own and its
// front-end commands render them; this is what the engine's answers that
// take any dump (snapshots, batch) need of one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "corelib/analyses/diff.hpp"
#include "corelib/base/result.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/registry/process_target.hpp"

namespace lr {

class OpenKernelDump {
 public:
  virtual ~OpenKernelDump() = default;
  virtual Program& prog() = 0;
  // The kernel and its release, as the dump says ("<kernel> 6.1.0-26-amd64").
  virtual std::string program() const = 0;
  virtual std::string build_id() const = 0;  // "" when the dump does not say
  // The dump's classes and objects (`source` names it in the snapshot).
  virtual Result<Snapshot> snapshot(const std::string& source) = 0;
  // The kernel's own invariants that the dump breaks.
  virtual Result<std::vector<TargetFinding>> findings() = 0;
  virtual std::vector<std::string> warnings() const = 0;
};

class KernelDumps {
 public:
  virtual ~KernelDumps() = default;
  // Opens `path` with `vmlinux` ("" for the debuginfo search of `dbg`).
  virtual Result<std::unique_ptr<OpenKernelDump>> open(const std::string& path,
                                                       const std::string& vmlinux,
                                                       const DebugOptions& dbg) = 0;
};

}  // namespace lr
