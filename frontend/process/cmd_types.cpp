// leakref types build: C headers into a DWARF types file for a program
// without debuginfo, stamped with (and cached by) its executable's build-id.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "corelib/answers/profile_match.hpp"
#include "corelib/debuginfo/types_build.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/profiles/profile.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/process/cmd_profile.hpp"

namespace lrcli {

struct TypesBuildArgs {
  std::vector<std::string> headers, include_dirs, defines;
  std::string out, profile;
  bool verbose = false;
};

static int cmd_types_build(const DumpOptions& c, const TypesBuildArgs& a) {
  lr::TypesBuild b;
  std::string note;
  if (!a.profile.empty()) {
    auto p = lr::find_profile(a.profile, profile_dirs());
    if (!p.ok()) return fail(p.error());
    if (p.value().build_headers.empty())
      return fail_usage("types build: profile " + p.value().name + " has no [build] section");
    lr::add_profile_recipe(p.value(), &b);
    note = p.value().build_note;
  }
  if (a.headers.empty() && b.headers.empty())
    return fail_usage("types build: give at least one --header (or a --profile with [build])");
  std::string bid;
  if (!c.core.empty()) {
    auto prog = open_program(c);
    if (!prog.ok()) return fail(prog.error());
    const lr::Module* exe = prog.value()->modules().exe();
    if (!exe || exe->build_id.empty())
      return fail(lr::make_error(lr::Errc::kNotFound,
                                 c.core + ": no executable build-id in the core (give --exe)"));
    bid = exe->build_id;
  } else if (!c.exe.empty()) {
    auto b = lr::build_id_of_file(c.exe);
    if (!b.ok()) return fail(lr::make_error(b.error().code, c.exe + ": " + b.error().message));
    bid = b.value();
  }
  std::string out = a.out;
  if (out.empty()) {
    if (bid.empty())
      return fail_usage("types build: give -o FILE, or a core or --exe to cache the types for");
    out = lr::types_cache_path("types", bid);
    if (out.empty()) return fail_usage("types build: no cache directory (HOME unset): give -o");
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(out).parent_path(), ec);
  }
  b.headers.insert(b.headers.end(), a.headers.begin(), a.headers.end());
  b.include_dirs.insert(b.include_dirs.end(), a.include_dirs.begin(), a.include_dirs.end());
  b.defines.insert(b.defines.end(), a.defines.begin(), a.defines.end());
  b.target_build_id = bid;
  std::string cmd;
  auto r = lr::build_types(b, out, &cmd);
  if (a.verbose) out_stderr().print("{}\n", cmd);
  if (!r.ok())
    return fail(note.empty()
                    ? r.error()
                    : lr::make_error(r.error().code, r.error().message + " (" + note + ")"));
  out_stdout().print("{}\n", out);
  return kOk;
}

Command register_types(CLI::App& app) {
  auto* types =
      app.add_subcommand("types", "synthesize DWARF types for a program without debuginfo");
  Command gluster = register_types_gluster(*types);
  types->require_subcommand(1);
  auto a = std::make_shared<TypesBuildArgs>();
  auto c = std::make_shared<DumpOptions>();
  auto* tb = types->add_subcommand(
      "build", "types from C headers, stamped with and cached by the executable's build-id");
  tb->add_option("core", c->core, "core whose executable the types are for");
  tb->add_option("--exe", c->exe, "the executable (no core; or overriding the core's)");
  tb->add_option("--header", a->headers, "header to include (repeatable, in order)");
  tb->add_option("--profile", a->profile, "take headers, includes and defines from its [build]");
  tb->add_option("-I,--include-dir", a->include_dirs, "include directory (repeatable)");
  tb->add_option("-D,--define", a->defines, "NAME or NAME=VALUE, as the program was built");
  tb->add_option("-o,--output", a->out, "write here instead of the cache");
  tb->add_flag("-v,--verbose", a->verbose, "print the compiler command");
  return {types, [tb, c, a, gluster] { return *tb ? cmd_types_build(*c, *a) : gluster.run(); },
          [] { return false; }};
}

}  // namespace lrcli
