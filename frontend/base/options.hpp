// The options every dump-reading command takes (the dump, its executable,
// sysroot, debuginfo and types files, --json), opening a process core by them,
// and what the CLI11 apps share.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "corelib/debuginfo/program.hpp"

namespace lrcli {

struct DumpOptions {
  std::string core;
  std::string exe, sysroot;
  std::vector<std::string> debug_dirs;
  std::vector<std::string> types;  // --types: DWARF for a program without debuginfo
  std::string vmlinux;             // --vmlinux: kernel dumps (diff, snapshot, trend)
  bool json = false;
};

// Registers every target with the engine, and how this front end names a
// types file in the engine's messages; once, before anything is opened.
void start_front_end();

void add_dump_options(CLI::App* sub, DumpOptions& c, bool needs_core = true);
// --vmlinux, for the commands that also read kernel dumps.
void add_vmlinux_option(CLI::App* sub, DumpOptions& c);
// When `word` (the first word after the options) names none of `app`'s
// subcommands: "unknown subcommand 'wlak'; did you mean 'walk'?" (CLI11 says
// only "A subcommand is required"). "" when it is one, or an option.
std::string unknown_subcommand(const CLI::App& app, const std::string& word);
// Every repeatable option of `app` and its subcommands takes one value per
// occurrence (`--fail-on a,b` or `--fail-on a --fail-on b`): CLI11's greedy
// default swallowed the core path after `--fail-on cycle`.
void one_value_per_option(CLI::App* app);
// Whether --fail-on list `fail_on` asks for finding `what` (or "any").
bool fail_on_wants(const std::vector<std::string>& fail_on, const char* what);

// Opens the core with the options in `c`, and adds each --types file.
lr::Result<std::unique_ptr<lr::Program>> open_program(const DumpOptions& c);
// Adds a types file's DWARF to `prog` (the engine's add_types_file, its
// errors naming --types).
lr::Result<void> add_types_file(lr::Program& prog, const std::string& path);

}  // namespace lrcli
