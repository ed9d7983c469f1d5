// The options every dump-reading command takes, and opening a dump by them
// (options.hpp).
#include "frontend/base/options.hpp"

#include <fmt/format.h>

#include "corelib/base/names.hpp"
#include "corelib/debuginfo/open_core.hpp"
#include "targets/targets.hpp"

namespace lrcli {

void add_dump_options(CLI::App* sub, DumpOptions& c, bool needs_core) {
  if (needs_core)
    sub->add_option("core", c.core, "core file (gcore output or a crash core)")->required();
  sub->add_option("--exe", c.exe, "executable (default: from the core's NT_FILE note)");
  sub->add_option("--sysroot", c.sysroot, "root directory for the core's files (another machine)");
  sub->add_option("--debug-dir", c.debug_dirs,
                  "extra debuginfo directory (build-id tree or .debug files)");
  sub->add_option("--types", c.types,
                  "DWARF types for a program without debuginfo (leakref types build; "
                  "GlusterFS: default synthesized and cached)");
  sub->add_flag(
      "--json", c.json,
      "machine-readable output (each document names its schema; $PREFIX/share/leakref/schemas)");
}

void add_vmlinux_option(CLI::App* sub, DumpOptions& c) {
  sub->add_option("--vmlinux", c.vmlinux,
                  "kernel dumps: vmlinux with DWARF (default: found by the dump's build-id or "
                  "release, as for leakref kernel)");
}

std::string unknown_subcommand(const CLI::App& app, const std::string& word) {
  if (word.empty() || word[0] == '-') return "";
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) return "";
    names.push_back(sub->get_name());
  }
  std::string near = lr::closest_name(word, names);
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  return fmt::format("unknown subcommand '{}'; {}", word,
                     near.empty() ? "one of: " + all : "did you mean '" + near + "'?");
}

void one_value_per_option(CLI::App* app) {
  for (CLI::Option* o : app->get_options())
    if (!o->get_positional() && o->get_items_expected_max() > 1) o->allow_extra_args(false);
  for (CLI::App* sub : app->get_subcommands({})) one_value_per_option(sub);
}

// How the CLI names a types file in the engine's messages.
static lr::TypesOrigin cli_types_origin() {
  return {"--types ", "(leakref types build CORE --header ... makes one for it)"};
}

// The engine opens the core by its own policy; the CLI adds what to run
// instead on a kernel dump, and names its own option on a types file.
lr::Result<std::unique_ptr<lr::Program>> open_program(const DumpOptions& c) {
  lr::CoreOpenOptions o;
  o.program.exe = c.exe;
  o.program.sysroot = c.sysroot;
  o.program.debug_dirs = c.debug_dirs;
  o.types = c.types;
  o.types_origin = cli_types_origin();
  o.kernel_dump_hint = fmt::format(
      "use 'leakref kernel --vmcore {} [--vmlinux FILE] inodes|modules|check|walk|profile'",
      c.core);
  return lr::open_process_core(c.core, o);
}

void start_front_end() {
  lr::register_targets();
  lr::set_types_origin(cli_types_origin());
}

lr::Result<void> add_types_file(lr::Program& prog, const std::string& path) {
  return lr::add_types_file(prog, path, cli_types_origin());
}

bool fail_on_wants(const std::vector<std::string>& fail_on, const char* what) {
  for (const auto& f : fail_on)
    if (f == what || f == "any") return true;
  return false;
}

}  // namespace lrcli
