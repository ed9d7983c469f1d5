// `leakref retained` and `leakref suspects` (cmd_retained.cpp); the
// arguments of `retained`, which `leakref kernel … retained` takes too.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace lrcli {

struct RetainedArgs {
  size_t top = 20;
  bool by_type = false, all_roots = false;
  std::string tree, path, paths_of, export_file, html;
  size_t depth = 2;
  std::vector<std::string> group;  // types or places, together
  std::vector<std::string> fail_on;
};
// --top, --by-type, --tree, --depth, --path, --paths-of, --export, --html,
// --group, --all-roots, --fail-on.
void add_retained_options(CLI::App* sub, RetainedArgs& a);
// "" when the arguments hold, else what is wrong (a usage error).
std::string retained_args_error(const RetainedArgs& a);

}  // namespace lrcli
