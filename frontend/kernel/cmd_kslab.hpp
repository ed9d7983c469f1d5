// `leakref kernel slab` (and `crash> leakref slab`): SLUB caches, every
// allocated object of the chosen ones, who allocated them (slub_debug=U),
// and with --type the walk machinery (--where, --show, --refcount,
// --group-by) over a cache's objects.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "frontend/base/out.hpp"
#include "frontend/process/cmd_walk.hpp"
#include "targets/linux/kernel.hpp"

namespace lrcli {

struct SlabArgs {
  std::vector<std::string> caches;
  bool stacks = false;      // group allocated objects by allocation stack
  uint64_t top = 20;        // --stacks: how many
  bool objects = false;     // list allocated objects without --cache: of every cache
  bool scan_pages = false;  // KSlabFilter::scan_pages
};

// A kernel text address as "function+0x1f" ("[module]" added outside
// vmlinux), or the address when no symbol covers it.
std::string ksym(lr::KernelTarget& k, uint64_t addr);
// A SLUB allocation track as leakref.kernel.* JSON (caller symbolized).
nlohmann::json track_json(lr::KernelTarget& k, const lr::KSlabTrack& t);

// Registers slab's own options and the walk's field options (--type,
// --refcount, --show, --where, and the run options) on `sub`.
void add_slab_options(CLI::App* sub, SlabArgs& s, WalkArgs& w);
// Runs it on `k`; `source` names the dump. An exit code (README "Exit codes").
int run_slab(lr::KernelTarget& k, const SlabArgs& s, const WalkArgs& w, bool json,
             const std::string& source, const lr::KernelLimits& lim, Out& out, Out& err);

}  // namespace lrcli
