// Catch2 runner. Ends with a plain closing line "tests: N passed, N failed,
// N skipped" (test cases) that CI and humans read.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

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
  Catch::Session session;
  int rc = session.run(argc, argv);
  int skipped = lrtest::skipped_count();
  std::printf("tests: %zu passed, %zu failed, %d skipped\n",
              g_totals.testCases.passed - std::min<size_t>(g_totals.testCases.passed, skipped),
              g_totals.testCases.failed, skipped);
  return rc;
}
