// Shared pieces of the leakref CLI: options every subcommand takes, opening
// the program, exit codes, JSON helpers.
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "leakref/heap.hpp"
#include "leakref/objects.hpp"
#include "leakref/program.hpp"
#include "leakref/walkspec.hpp"

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
  bool json = false;
};

void add_common(CLI::App* sub, Common& c, bool needs_core = true);
int exit_for(const lr::Error& e);
// Prints "leakref: error: MSG" to stderr and returns the exit code for it.
int fail(const lr::Error& e);
int fail_usage(const std::string& msg);
// Under --json, errors are also written to stdout as leakref.error/1
// ({schema, error: {code, message, exit}}), after the stderr line.
void json_errors(bool on);
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
// Adds a types file's DWARF to `prog`: refused when it is not readable, has
// no DWARF, or was stamped for another build of the core's executable.
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
void print_warnings_text(const std::vector<std::string>& w, Out& err = out_stderr());
void emit_json(const nlohmann::json& j, Out& out = out_stdout());

int cmd_info(const Common& c);
struct WalkArgs;
int cmd_walk(const Common& c, const WalkArgs& a);
int cmd_show(const Common& c, const std::string& addr, const std::string& type, int depth);
int cmd_sym(const Common& c, const std::string& what);
// The core's glibc heap, with a progress line while it is read (on a
// terminal); the engine's error when no arena is found.
lr::Result<lr::HeapWalk> read_heap(lr::Program& prog);
int cmd_heap(const Common& c, bool list, bool stats);

}  // namespace lrcli
namespace lr {
struct Profile;
struct GlusterReport;
struct GlusterSections;
}  // namespace lr
namespace lrcli {
void write_statedump(const lr::GlusterReport& r, const lr::GlusterSections& sec,
                     const std::string& core);

struct WalkArgs {
  std::string type, head;
  std::string next, list_member, hlist_member;
  std::string tree_member;
  bool array = false, pointer_array = false, xarray = false;
  std::string hashtable;  // "val" or "key": an nfs-ganesha hash_table_t walk
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
  const std::atomic<bool>* interrupted = nullptr;  // polled by the walk
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

// GlusterFS types for `prog`: real debuginfo, else `types_file`, else the
// synthesized cache (built on first use). Returns where they came from.
lr::Result<std::string> ensure_gluster_types(lr::Program& prog, const std::string& types_file);

struct ProfileArgs {
  std::string profile;            // file or installed name
  std::vector<std::string> sets;  // --set
  bool all = false, flagged = false, histogram = false, jsonl = false;
  std::vector<std::string> fail_on;
  const std::atomic<bool>* interrupted = nullptr;
};
// Registers --profile, --set, --all, --flagged, --histogram, --jsonl, --fail-on.
void add_profile_options(CLI::App* sub, ProfileArgs& a);
lr::Result<void> check_profile_args(const ProfileArgs& a);
// Runs profile `prof` (loaded from a.profile) on `prog` and renders it (text,
// leakref.profile/1 JSON or JSON lines); `is_kernel` for the profile's [match].
int run_and_render_profile(lr::Program& prog, const lr::Profile& prof, const ProfileArgs& a,
                           bool json, bool is_kernel, const std::string& source,
                           const std::vector<std::string>& pre_warnings, Out& out, Out& err);
int cmd_profile(const Common& c, const ProfileArgs& a);
// Where `--profile NAME` looks (README "Profiles").
std::vector<std::string> profile_dirs();

// `leakref kernel [--vmcore F --vmlinux F] SUB ...`; `help`: SUB's usage
// (no dump needed).
int cmd_kernel(const std::string& vmcore, const std::string& vmlinux,
               const std::vector<std::string>& args, bool help);

}  // namespace lrcli

namespace lr {
struct Profile;
}
namespace lrcli {
// For a profile with a [build] recipe on a core whose executable has no
// debuginfo and no types file yet: builds its types into the cache (saying so
// on `err`) and adds them. Nothing to do is success.
lr::Result<void> ensure_profile_types(lr::Program& prog, const lr::Profile& p, Out& err);
}  // namespace lrcli
