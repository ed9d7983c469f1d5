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
  int rc = session.run(argc, argv);
  int skipped = lrtest::skipped_count();
  std::printf("tests: %zu passed, %zu failed, %d skipped\n",
              g_totals.testCases.passed - std::min<size_t>(g_totals.testCases.passed, skipped),
              g_totals.testCases.failed, skipped);
  return rc;
}
