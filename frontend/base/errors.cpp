// Errors and exit codes (errors.hpp).
#include "frontend/base/errors.hpp"
#include "frontend/base/out.hpp"

#include <cstdio>

namespace lrcli {

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

namespace {
bool g_json_errors = false;
bool g_json_lines = false;

}  // namespace

int fail(const lr::Error& e) {
  std::fflush(stdout);
  return fail(e, out_stderr());
}

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
      out_stdout().put(json_text(j, -1) + "\n");
    else
      emit_json(j, out_stdout());
  }
  return code;
}

int fail_usage(const std::string& msg) {
  std::fflush(stdout);
  return fail(lr::make_error(lr::Errc::kInvalidArgument, msg), out_stderr());
}

}  // namespace lrcli
