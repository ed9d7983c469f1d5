// Kernel subcommands shared by `leakref kernel` (standalone, a vmcore) and
// the crash extension (`crash> leakref ...`).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "frontend/base/out.hpp"
#include "targets/linux/kernel.hpp"

namespace lrcli {

// The kernel to run on, opened only once the command line has parsed (so
// usage errors never wait for a vmlinux). The target stays owned by the caller.
using KernelOpener = std::function<lr::Result<lr::KernelTarget*>()>;

// Runs `args` = {SUBCOMMAND, options...} (walk, inodes, modules, check) on
// the kernel `open` gives. `source` names the dump in JSON output. Returns
// an exit code (README "Exit codes"); never throws. `interrupted` (may be
// null) is polled by the walks; the crash extension sets it on Ctrl-C.
// `usage_name` is how usage lines name the command ("leakref" in crash).
int run_kernel_command(const KernelOpener& open, const std::vector<std::string>& args,
                       const std::string& source, Out& out, Out& err,
                       const std::atomic<bool>* interrupted,
                       const std::string& usage_name = "leakref");
// `leakref kernel [--vmcore F --vmlinux F] SUB ...`; `help`: SUB's usage
// (no dump needed).
int cmd_kernel(const std::string& vmcore, const std::string& vmlinux, const lr::DebugOptions& dbg,
               const std::vector<std::string>& args, bool help);

}  // namespace lrcli
