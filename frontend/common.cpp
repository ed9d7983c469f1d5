#include "common.hpp"

#include "corelib/objects/expr.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "corelib/debuginfo/open_core.hpp"
#include "corelib/debuginfo/types_build.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace lrcli {

void add_common(CLI::App* sub, Common& c, bool needs_core) {
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

void add_vmlinux_option(CLI::App* sub, Common& c) {
  sub->add_option("--vmlinux", c.vmlinux,
                  "kernel dumps: vmlinux with DWARF (default: found by the dump's build-id or "
                  "release, as for leakref kernel)");
}

int exit_for(const lr::Error& e) {
  switch (e.code) {
    case lr::Errc::kInvalidArgument:
      return kUsage;
    case lr::Errc::kIo:
    case lr::Errc::kBadFormat:
    case lr::Errc::kUnsupported:
      return kInput;
    case lr::Errc::kNotFound:
    case lr::Errc::kFault:
      return kLookup;
    case lr::Errc::kInterrupted:
      return kInternal;
  }
  return kInternal;
}

int fail(const lr::Error& e) {
  std::fflush(stdout);
  return fail(e, out_stderr());
}

namespace {
bool g_json_errors = false;
bool g_json_lines = false;

}  // namespace

void json_errors(bool on, bool lines) {
  g_json_errors = on;
  g_json_lines = lines;
}

int fail(const lr::Error& e, Out& err) {
  err.print("leakref: error: {}\n", e.message);
  int code = exit_for(e);
  // Under --json a pipeline reading stdout sees the error as JSON too.
  if (g_json_errors && &err == &out_stderr()) {
    nlohmann::json j{
        {"schema", "leakref.error/1"},
        {"error", {{"code", lr::errc_name(e.code)}, {"message", e.message}, {"exit", code}}}};
    if (g_json_lines)
      out_stdout().put(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    else
      emit_json(j, out_stdout());
  }
  return code;
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

int fail_usage(const std::string& msg) {
  std::fflush(stdout);
  return fail(lr::make_error(lr::Errc::kInvalidArgument, msg), out_stderr());
}

// How the CLI names a types file in the engine's messages.
static lr::TypesOrigin cli_types_origin() {
  return {"--types ", "(leakref types build CORE --header ... makes one for it)"};
}

// The engine opens the core by its own policy; the CLI adds what to run
// instead on a kernel dump, and names its own option on a types file.
lr::Result<std::unique_ptr<lr::Program>> open_program(const Common& c) {
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

lr::Result<void> add_types_file(lr::Program& prog, const std::string& path) {
  return lr::add_types_file(prog, path, cli_types_origin());
}

std::string hex(uint64_t v) {
  return fmt::format("{:#x}", v);
}

bool fail_on_wants(const std::vector<std::string>& fail_on, const char* what) {
  for (const auto& f : fail_on)
    if (f == what || f == "any") return true;
  return false;
}

nlohmann::json value_json(const lr::FieldValue& v) {
  using K = lr::FieldValue::Kind;
  switch (v.kind) {
    case K::kSigned:
      return v.s;
    case K::kUnsigned:
      return v.u;
    case K::kBool:
      return v.u != 0;
    case K::kPointer:
      return hex(v.u);
    case K::kEnum:
      return v.text.empty() ? nlohmann::json(v.s) : nlohmann::json(v.text);
    case K::kString:
    case K::kUuid:
      return v.text;
    case K::kFloat:
      return v.f;
    case K::kAggregate:
      return nlohmann::json{{"aggregate", v.text}};
    case K::kError:
      return nlohmann::json{{"error", v.text}};
  }
  return nullptr;
}

namespace {
struct FileOut final : Out {
  explicit FileOut(std::FILE* f) : f_(f) {}
  bool write(std::string_view s) override {
    return std::fwrite(s.data(), 1, s.size(), f_) == s.size();
  }
  std::FILE* f_;
};
}  // namespace

Out& out_stdout() {
  static FileOut o(stdout);
  return o;
}
Out& out_stderr() {
  static FileOut o(stderr);
  return o;
}

void print_warnings_text(const std::vector<std::string>& w, Out& err) {
  for (const auto& s : w) err.print("leakref: warning: {}\n", s);
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

lr::Result<void> write_html_page(const std::string& path, const std::string& page) {
  std::ofstream f(path, std::ios::trunc);
  f << page;
  if (!f.flush()) return lr::make_error(lr::Errc::kIo, "--html " + path + ": could not be written");
  return {};
}

void emit_json(const nlohmann::json& j, Out& out) {
  // Invalid UTF-8 from target memory must not abort the dump.
  out.put(j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
  out.put("\n");
}

// JSON for a value tree: structs as objects with their members in
// declaration order (anonymous members numbered), arrays as lists (with a
// trailing {"more": N} when cut), scalars as values (as walk renders them).
nlohmann::ordered_json tree_json(const lr::ValueNode& n) {
  if (n.value.kind != lr::FieldValue::Kind::kAggregate || (n.children.empty() && !n.is_array))
    return nlohmann::ordered_json(value_json(n.value));
  if (n.is_array) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& c : n.children) arr.push_back(tree_json(c));
    if (n.more) arr.push_back({{"more", n.more}});
    return arr;
  }
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  int anon = 0;
  for (const auto& c : n.children)
    o[c.name.empty() ? fmt::format("<anonymous{}>", anon++) : c.name] = tree_json(c);
  return o;
}

}  // namespace lrcli
