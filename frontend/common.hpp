// Shared pieces of the leakref CLI: options every subcommand takes, opening
// the program, exit codes, JSON helpers.
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/objects.hpp"
#include "corelib/walks/walkspec.hpp"

namespace lrcli {

// Documented in README "Exit codes".
enum Exit : int {
  kOk = 0,
  kFindings = 1,  // --fail-on matched
  kUsage = 2,     // bad command line or expression
  kInput = 3,     // core/exe/debuginfo unreadable, corrupt or unsupported
  kLookup = 4,    // symbol/type/member not found, or needed memory unreadable
  kInternal = 5,
};

struct Common {
  std::string core;
  std::string exe, sysroot;
  std::vector<std::string> debug_dirs;
  std::vector<std::string> types;  // --types: DWARF for a program without debuginfo
  std::string vmlinux;             // --vmlinux: kernel dumps (diff, snapshot, trend)
  bool json = false;
};

void add_common(CLI::App* sub, Common& c, bool needs_core = true);
// --vmlinux, for the commands that also read kernel dumps.
void add_vmlinux_option(CLI::App* sub, Common& c);
int exit_for(const lr::Error& e);
// Prints "leakref: error: MSG" to stderr and returns the exit code for it.
int fail(const lr::Error& e);
int fail_usage(const std::string& msg);
// Under --json, errors are also written to stdout as leakref.error/1
// ({schema, error: {code, message, exit}}), after the stderr line.
// `lines` (--jsonl): the error document on one line, as every other line is.
void json_errors(bool on, bool lines = false);
// When `word` (the first word after the options) names none of `app`'s
// subcommands: "unknown subcommand 'wlak'; did you mean 'walk'?" (CLI11 says
// only "A subcommand is required"). "" when it is one, or an option.
std::string unknown_subcommand(const CLI::App& app, const std::string& word);
// Every repeatable option of `app` and its subcommands takes one value per
// occurrence (`--fail-on a,b` or `--fail-on a --fail-on b`): CLI11's greedy
// default swallowed the core path after `--fail-on cycle`.
void one_value_per_option(CLI::App* app);
// Opens the core with the options in `c`, and adds each --types file.
lr::Result<std::unique_ptr<lr::Program>> open_program(const Common& c);
// Adds a types file's DWARF to `prog` (the engine's add_types_file, its
// errors naming --types).
lr::Result<void> add_types_file(lr::Program& prog, const std::string& path);

// Where a command's text goes: stdout/stderr for the CLI, crash's fp for the
// extension. A write that fails (the reader of `| head` went away) makes the
// sink refuse everything after it, so a command stops producing output.
class Out {
 public:
  virtual ~Out() = default;
  void put(std::string_view s) {
    if (!failed_ && !s.empty() && !write(s)) failed_ = true;
  }
  template <class... A>
  void print(fmt::format_string<A...> f, A&&... a) {
    if (!failed_) put(fmt::format(f, std::forward<A>(a)...));
  }
  bool failed() const { return failed_; }

 protected:
  virtual bool write(std::string_view s) = 0;  // false: stop writing

 private:
  bool failed_ = false;
};
Out& out_stdout();
Out& out_stderr();
// fail() for a command whose text goes to `err` (the crash extension's).
int fail(const lr::Error& e, Out& err);

std::string hex(uint64_t v);
// Whether --fail-on list `fail_on` asks for finding `what` (or "any").
bool fail_on_wants(const std::vector<std::string>& fail_on, const char* what);
nlohmann::json value_json(const lr::FieldValue& v);
// A value tree as JSON: structs as objects (members in order), arrays as
// lists, scalars as value_json renders them.
nlohmann::ordered_json tree_json(const lr::ValueNode& n);
void print_warnings_text(const std::vector<std::string>& w, Out& err = out_stderr());
void emit_json(const nlohmann::json& j, Out& out = out_stdout());
// Text escaped for HTML (&, <, >, ").
std::string html_escape(const std::string& s);
// Writes a command's --html page to `path`; kIo naming it when it cannot.
lr::Result<void> write_html_page(const std::string& path, const std::string& page);

}  // namespace lrcli
