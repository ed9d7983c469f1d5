// `leakref batch report`: the database's dumps in buckets of like ones.
#pragma once

#include <string>

namespace lrcli {

struct ReportOptions {
  std::string db, html;
  size_t top = 20;
  bool json = false;
};

// Text (or leakref.batch.report/1 with --json) on stdout; --html writes one
// self-contained page too. Returns an exit code.
int cmd_report(const ReportOptions& a);

}  // namespace lrcli
