// Kernel subcommands shared by `leakref kernel` (standalone, a vmcore) and
// the crash extension (`crash> leakref ...`).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "common.hpp"
#include "leakref/kernel.hpp"

namespace lrcli {

// Runs `args` = {SUBCOMMAND, options...} (walk, inodes, modules, check) on
// `k`. `source` names the dump in JSON output. Returns an exit code (README
// "Exit codes"); never throws.
int run_kernel_command(lr::KernelTarget& k, const std::vector<std::string>& args,
                       const std::string& source, Out& out, Out& err,
                       const std::atomic<bool>* interrupted);

}  // namespace lrcli
