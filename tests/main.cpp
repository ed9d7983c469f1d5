// Catch2 runner. Ends with the failed test cases' names and a plain closing
// line "tests: N passed, N failed, N skipped" (test cases) that CI and
// humans read.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "targets/targets.hpp"

namespace {
Catch::Totals g_totals;
std::set<std::string> g_failed;  // test cases with a failed assertion
// Seconds per test case: the slowest are listed at the end (where CI's time
// goes, without timing assertions in any test).
std::map<std::string, double> g_seconds;
std::chrono::steady_clock::time_point g_case_start;
struct Closing : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(Catch::TestCaseInfo const&) override {
    g_case_start = std::chrono::steady_clock::now();
  }
  void testCaseEnded(Catch::TestCaseStats const& s) override {
    if (s.totals.testCases.failed) g_failed.insert(s.testInfo.name);
    g_seconds[s.testInfo.name] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - g_case_start).count();
  }
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
  lr::register_targets();
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
  // A skip is not a pass: every run lists its skips, and under CI=true a
  // skip fails the run unless tests/allowed-skips.txt names its test case.
  const auto& skips = lrtest::skips();
  int skipped = lrtest::skipped_count();
  std::map<std::string, size_t> skipped_tests;  // test case -> skips in it
  for (const auto& s : skips) ++skipped_tests[s.test];
  size_t unallowed = 0;
  if (!skips.empty()) std::printf("skipped (%zu):\n", skips.size());
  const char* ci = std::getenv("CI");
  const bool under_ci = ci && std::string(ci) == "true";
  std::string why;
  const std::string list = std::string(LR_SOURCE_DIR) + "/tests/allowed-skips.txt";
  auto allowed = lrtest::allowed_skips(list, &why);
  if (!why.empty()) {
    std::printf("allowed skips: %s\n", why.c_str());
    if (rc == 0) rc = 1;
  }
  for (const auto& s : skips) {
    auto a = allowed.find(s.test);
    std::string note = a != allowed.end() ? "  (allowed: " + a->second + ")"
                       : under_ci         ? "  (NOT ALLOWED under CI)"
                                          : "";
    std::printf("  [%s] %s%s\n", s.test.c_str(), s.reason.c_str(), note.c_str());
  }
  // A test case that skipped counts as skipped, never as passed (one that
  // failed before its skip stays failed); under CI an unallowed one that
  // passed counts as failed.
  size_t skipped_passed = 0, unallowed_passed = 0;
  for (const auto& [test, n] : skipped_tests) {
    const bool ok = allowed.count(test) > 0, failed_too = g_failed.count(test) > 0;
    unallowed += !ok;
    skipped_passed += !failed_too;
    unallowed_passed += !ok && !failed_too;
  }
  if (under_ci && unallowed > 0) {
    std::printf("%zu test case(s) skipped under CI=true without a line in %s\n", unallowed,
                list.c_str());
    if (rc == 0) rc = 1;
  }
  std::vector<std::pair<double, std::string>> slow;
  for (const auto& [name, secs] : g_seconds) slow.emplace_back(secs, name);
  std::sort(slow.rbegin(), slow.rend());
  if (slow.size() > 12) slow.resize(12);
  if (!slow.empty()) std::printf("slowest test cases:\n");
  for (const auto& [secs, name] : slow) std::printf("  %7.1f s  %s\n", secs, name.c_str());
  // Named again at the very end: CI keeps only the tail of the output.
  if (!g_failed.empty()) std::printf("failed test cases:\n");
  for (const auto& name : g_failed) std::printf("  %s\n", name.c_str());
  const size_t skipped_cases = std::min(g_totals.testCases.passed, skipped_passed);
  const size_t failed = g_totals.testCases.failed + (under_ci ? unallowed_passed : 0);
  std::printf("tests: %zu passed, %zu failed, %d skipped\n",
              g_totals.testCases.passed - skipped_cases, failed, skipped);
  return rc;
}
