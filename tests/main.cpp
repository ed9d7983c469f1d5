// Catch2 runner. Ends with the failed test cases' names and a plain closing
// line "tests: N passed, N failed, N skipped" (test cases) that CI and
// humans read.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "targets/targets.hpp"

namespace {

// --shard K/N: this process runs only its share of the test cases the rest
// of the command line selects (make test runs N side by side, one a core).
// Test cases that set up one shared environment run in one shard: the
// GlusterFS volumes (gluster, and batch's archive of GlusterFS dumps) and
// nfs-ganesha's server. Shares are balanced by each test case's seconds in
// tests/durations.txt ("SECONDS<TAB>NAME", from a whole run's
// `make test-durations`; the sanitized build's in tests/durations-san.txt,
// `make test-sanitize-durations`); a test case it lacks counts 10 s.
struct Shard {
  size_t index = 0, count = 0;  // count 0: not sharded
};

// Removes "--shard K/N" from argv; false with a message when it is malformed.
bool take_shard(int& argc, char** argv, Shard* sh) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--shard") continue;
    unsigned k = 0, n = 0;
    if (i + 1 >= argc || std::sscanf(argv[i + 1], "%u/%u", &k, &n) != 2 || k < 1 || k > n) {
      std::fprintf(stderr, "--shard takes K/N with 1 <= K <= N\n");
      return false;
    }
    sh->index = k - 1;
    sh->count = n;
    for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
    argc -= 2;
    return true;
  }
  return true;
}

// Seconds per test case from a durations file ("SECONDS<TAB>NAME" lines),
// over `d`.
void read_durations(const std::string& path, std::map<std::string, double>* d) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    if (line.empty() || line[0] == '#' || tab == std::string::npos) continue;
    (*d)[line.substr(tab + 1)] = std::atof(line.substr(0, tab).c_str());
  }
}

// The sanitized build's seconds differ from the plain build's by test (a
// parse-heavy test slows more under ASan than one waiting on a guest), so
// it balances its shards by its own file, the plain one for what that
// lacks.
std::map<std::string, double> durations() {
  std::map<std::string, double> d;
  const std::string dir = std::string(LR_SOURCE_DIR) + "/tests/";
  read_durations(dir + "durations.txt", &d);
#ifdef LR_SANITIZE
  read_durations(dir + "durations-san.txt", &d);
#endif
  return d;
}

// The environment a test case shares with others ("" for none).
std::string shared_env(const Catch::TestCaseInfo& t) {
  for (const auto& tag : t.tags)
    if (tag == "gluster" || tag == "batch") return "gluster";
  for (const auto& tag : t.tags)
    if (tag == "ganesha") return "ganesha";
  return "";
}

// A test name as a Catch test spec matches it exactly: its control
// characters escaped.
std::string spec_of(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::strchr("\\,[]~\"", c)) out += '\\';
    out += c;
  }
  return out;
}

// This shard's test cases: units (one test case, or every test case of one
// shared environment) placed heaviest first on the lightest shard.
std::vector<std::string> shard_tests(Catch::Session& session, const Shard& sh) {
  auto& cfg = session.config();
  auto tests = Catch::filterTests(Catch::getAllTestCasesSorted(cfg), cfg.testSpec(), cfg);
  const auto secs = durations();
  std::map<std::string, std::pair<double, std::vector<std::string>>> units;
  for (const auto& t : tests) {
    const std::string env = shared_env(t.getTestCaseInfo());
    auto& u = units[env.empty() ? "test " + t.name : "env " + env];
    auto it = secs.find(t.name);
    u.first += it == secs.end() ? 10.0 : it->second;
    u.second.push_back(t.name);
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [k, u] : units) order.emplace_back(u.first, k);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<double> load(sh.count, 0.0);
  std::vector<std::string> mine;
  for (const auto& [w, k] : order) {
    const size_t to =
        static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[to] += w;
    if (to == sh.index)
      for (const auto& n : units[k].second) mine.push_back(n);
  }
  std::printf("shard %zu/%zu: %zu test cases, about %.0f s\n", sh.index + 1, sh.count, mine.size(),
              load[sh.index]);
  return mine;
}

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
  // The scripts the tests run (leakref-snap, leakref-trace) use the leakref
  // of this test binary's build, not one of another build directory.
  setenv("LEAKREF", (lrtest::build_dir() + "/leakref").c_str(), 1);
  Shard shard;
  if (!take_shard(argc, argv, &shard)) return 2;
  Catch::Session session;
  std::string spool = lrtest::json_spool_dir();
  std::system(("rm -rf '" + spool + "' && mkdir -p '" + spool + "'").c_str());
  if (int e = session.applyCommandLine(argc, argv); e != 0) return e;
  if (shard.count) {
    Catch::ConfigData d = session.configData();
    // One spec, the names separated by commas (Catch runs several specs
    // given apart into one name); a shard with nothing to run runs nothing
    // (no filter would run all).
    std::string spec;
    for (const auto& n : shard_tests(session, shard))
      spec += (spec.empty() ? "" : ",") + spec_of(n);
    d.testsOrTags = {spec.empty() ? std::string("~*") : spec};
    session.useConfigData(d);
  }
  int rc = session.run();
  // Every JSON document the tests saw must match its schema under schemas/;
  // a whole run (no test names given) must also have seen every schema.
  // (A shard's share proves nothing of the whole: make test checks every
  // shard's documents together, --require-all, once all have ended.)
  std::string check = "/usr/bin/python3 '" + std::string(LR_SOURCE_DIR) +
                      "/tests/check_json_schemas.py' '" + spool + "' '" + LR_SOURCE_DIR +
                      "/schemas'" + (argc > 1 || shard.count ? "" : " --require-all");
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
  // The documents stay for make test's check over every shard
  // (LR_KEEP_SPOOL=1); a run by hand leaves nothing behind.
  if (!std::getenv("LR_KEEP_SPOOL")) std::system(("rm -rf '" + spool + "'").c_str());
  return rc;
}
