#include "common.hpp"

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
  sub->add_flag("--json", c.json, "machine-readable output (see README: JSON schema)");
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

int fail(const lr::Error& e, Out& err) {
  err.print("leakref: error: {}\n", e.message);
  return exit_for(e);
}

int fail_usage(const std::string& msg) {
  fmt::print(stderr, "leakref: error: {}\n", msg);
  return kUsage;
}

lr::Result<std::unique_ptr<lr::Program>> open_program(const Common& c) {
  lr::ProgramOptions o;
  o.exe = c.exe;
  o.sysroot = c.sysroot;
  o.debug_dirs = c.debug_dirs;
  return lr::Program::open_core(c.core, o);
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

void emit_json(const nlohmann::json& j, Out& out) {
  // Invalid UTF-8 from target memory must not abort the dump.
  out.put(j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
  out.put("\n");
}

}  // namespace lrcli
