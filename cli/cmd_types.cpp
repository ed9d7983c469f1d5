// leakref types build: C headers into a DWARF types file for a program
// without debuginfo, stamped with (and cached by) its executable's build-id.
#include <fmt/format.h>

#include <filesystem>

#include "common.hpp"
#include "leakref/elfcore.hpp"
#include "leakref/types_build.hpp"

namespace lrcli {

int cmd_types_build(const Common& c, const TypesBuildArgs& a) {
  if (a.headers.empty()) return fail_usage("types build: give at least one --header");
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
  lr::TypesBuild b;
  b.headers = a.headers;
  b.include_dirs = a.include_dirs;
  b.defines = a.defines;
  b.target_build_id = bid;
  std::string cmd;
  auto r = lr::build_types(b, out, &cmd);
  if (a.verbose) fmt::print(stderr, "{}\n", cmd);
  if (!r.ok()) return fail(r.error());
  fmt::print("{}\n", out);
  return kOk;
}

}  // namespace lrcli
