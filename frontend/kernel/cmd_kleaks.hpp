// `leakref kernel … leaks`, `… refs` and `… retained` (and the same in
// crash): kernel objects nothing reachable points to, who points at one,
// and what holds the memory.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "frontend/base/out.hpp"
#include "frontend/process/retained_render.hpp"
#include "targets/linux/kernel.hpp"

namespace lrcli {

struct KLeaksArgs {
  std::vector<std::string> caches;
  uint64_t min_age = 0;  // jiffies
  std::string type;      // with one cache: its objects' type
  std::vector<std::string> fail_on;
  bool json = false;
};

struct KRefsArgs {
  std::string place;
  size_t depth = 0;
  bool json = false;
};

// The reference index of `k`'s image, built on first use and kept on the
// target (a crash session's later commands reuse it).
lr::Result<std::shared_ptr<lr::KRefIndex>> kernel_ref_index(lr::KernelTarget& k,
                                                            const lr::KernelLimits& lim);

void add_kleaks_options(CLI::App* sub, KLeaksArgs& a);
void add_krefs_options(CLI::App* sub, KRefsArgs& a);
// Each runs on `k`; `source` names the dump. An exit code (README "Exit codes").
int run_kleaks(lr::KernelTarget& k, const KLeaksArgs& a, const std::string& source,
               const lr::KernelLimits& lim, Out& out, Out& err);
int run_krefs(lr::KernelTarget& k, const KRefsArgs& a, const std::string& source,
              const lr::KernelLimits& lim, Out& out, Out& err);
int run_kretained(lr::KernelTarget& k, const RetainedArgs& a, bool json, const std::string& source,
                  const lr::KernelLimits& lim, Out& out, Out& err);

}  // namespace lrcli
