// Catch2 runner. Ends with a plain closing line "tests: N passed, N failed,
// N skipped" (test cases) that CI and humans read.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "harness.hpp"

namespace {
Catch::Totals g_totals;
struct Closing : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunEnded(Catch::TestRunStats const& s) override { g_totals = s.totals; }
};
}  // namespace
CATCH_REGISTER_LISTENER(Closing)

int main(int argc, char** argv) {
#ifdef LR_SANITIZE
  // LeakSanitizer in every leakref the tests run: libkdumpfile 0.5 loses a
  // few hundred bytes of its own allocations when reads of a cut-off dump
  // fail (nothing of ours points at them); tests/lsan.supp names only it.
  if (!std::getenv("LSAN_OPTIONS"))
    setenv("LSAN_OPTIONS",
           ("suppressions=" + std::string(LR_SOURCE_DIR) + "/tests/lsan.supp:print_suppressions=0")
               .c_str(),
           1);
#endif
  Catch::Session session;
  std::string spool = lrtest::json_spool_dir();
  std::system(("rm -rf '" + spool + "' && mkdir -p '" + spool + "'").c_str());
  int rc = session.run(argc, argv);
  // Every JSON document the tests saw must match its schema under schemas/;
  // a whole run (no test names given) must also have seen every schema.
  std::string check = "/usr/bin/python3 '" + std::string(LR_SOURCE_DIR) +
                      "/tests/check_json_schemas.py' '" + spool + "' '" + LR_SOURCE_DIR +
                      "/schemas'" + (argc > 1 ? "" : " --require-all");
  if (std::system(check.c_str()) != 0) {
    std::printf("JSON schema check failed (%s)\n", check.c_str());
    if (rc == 0) rc = 1;
  }
  int skipped = lrtest::skipped_count();
  std::printf("tests: %zu passed, %zu failed, %d skipped\n",
              g_totals.testCases.passed - std::min<size_t>(g_totals.testCases.passed, skipped),
              g_totals.testCases.failed, skipped);
  return rc;
}
