// Docs examples executed as written: each "$ CMD" block of a README or docs
// section, run in a directory the test prepared, must exit 0 and print what
// the docs show once both are normalised (addresses, times, ids).
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "harness.hpp"

namespace lrtest {

// Runs every command of `part` (readme_section's text) in `dir` with the
// build directory first on PATH; returns how many ran.
inline size_t check_doc_commands(const std::string& part, const std::string& dir,
                                 const std::function<std::string(const std::string&)>& norm,
                                 int timeout_s = 300) {
  size_t commands = 0;
  for (const auto& [cmd, want] : readme_commands(part)) {
    INFO(cmd);
    auto r = run({"/bin/bash", "-c", "cd '" + dir + "' && PATH='" + build_dir() + "':$PATH " + cmd},
                 timeout_s);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(norm(r.out) == norm(want));
    ++commands;
  }
  return commands;
}

}  // namespace lrtest
