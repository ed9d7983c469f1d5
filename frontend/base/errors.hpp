// Errors as the front ends report them: one line on stderr (and a
// leakref.error/1 document under --json), and the exit code documented in
// the README's "Exit codes".
#pragma once

#include <string>

#include "corelib/base/result.hpp"
#include "frontend/base/out.hpp"

namespace lrcli {

enum Exit : int {
  kOk = 0,
  kFindings = 1,  // --fail-on matched
  kUsage = 2,     // bad command line or expression
  kInput = 3,     // core/exe/debuginfo unreadable, corrupt or unsupported
  kLookup = 4,    // symbol/type/member not found, or needed memory unreadable
  kInternal = 5,
};

int exit_for(const lr::Error& e);
// Prints "leakref: error: MSG" to stderr and returns the exit code for it.
int fail(const lr::Error& e);
// fail() for a command whose text goes to `err` (the crash extension's).
int fail(const lr::Error& e, Out& err);
int fail_usage(const std::string& msg);
// Under --json, errors are also written to stdout as leakref.error/1
// ({schema, error: {code, message, exit}}), after the stderr line.
// `lines` (--jsonl): the error document on one line, as every other line is.
void json_errors(bool on, bool lines = false);

}  // namespace lrcli
