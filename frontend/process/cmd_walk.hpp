// `leakref walk` and what the other walking front ends (`kernel walk`, the
// crash extension, correlate's --type walk) share with it: the walk options
// and running-and-rendering a walk.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <string>
#include <vector>

#include "corelib/blocks/refindex.hpp"
#include "corelib/walks/walkspec.hpp"
#include "frontend/base/out.hpp"

namespace lrcli {

struct WalkArgs {
  std::string type, head;
  std::string next, list_member, hlist_member;
  std::string tree_member;
  bool array = false, pointer_array = false, xarray = false;
  std::string hashtable;      // "val" or "key": an nfs-ganesha hash_table_t walk
  std::string std_container;  // --std[=PATH]: a C++ standard container's elements
  uint64_t count = 0, buckets = 0;
  std::string count_from;
  std::string refcount;
  std::vector<std::string> show;
  std::string where;
  uint64_t limit = 0;
  std::vector<std::string> fail_on;
  std::vector<std::string> group_by;  // count matched objects by these fields' values
  std::string sort;                   // --sort FIELD | -FIELD (holds every object)
  bool jsonl = false;
  std::string profile, profile_set;  // --profile F --set S: the set's walk instead
  bool summary_only = false, stats = false;
  bool reconcile = false;  // refcounts against the references in memory (process cores)
  // Text: the summary before the rows when they are many (default on a
  // terminal; --summary-first/--summary-last choose).
  bool summary_first = false, summary_last = false;
  const std::atomic<bool>* interrupted = nullptr;  // polled by the walk
  // Objects another enumeration found (kernel slab --type): walked instead
  // of a head; mode and address name what found them (borrowed).
  const std::vector<uint64_t>* addresses = nullptr;
  std::string addresses_mode;
  uint64_t addresses_at = 0;
  const lr::RefSource* index = nullptr;  // --reconcile's (borrowed; built by the command)
};

// Registers the walk options (--type, --head, --next, ...) on `sub`.
void add_walk_options(CLI::App* sub, WalkArgs& w, bool required);
lr::WalkSpec walk_spec_from(const WalkArgs& a);
// Registers --limit, --fail-on, --summary, --stats and --group-by.
void add_walk_run_options(CLI::App* sub, WalkArgs& w);
// Checks --fail-on and --where (no target needed: usage errors come first).
lr::Result<void> check_walk_args(const WalkArgs& a);
// Runs the walk on `prog` and prints it (text or leakref.walk/1 JSON;
// `source` is the core or dump named in the output). `a` has passed
// check_walk_args.
int run_and_render_walk(lr::Program& prog, const WalkArgs& a, bool json, bool is_kernel,
                        const std::string& source, const std::vector<std::string>& pre_warnings,
                        Out& out, Out& err);

}  // namespace lrcli
