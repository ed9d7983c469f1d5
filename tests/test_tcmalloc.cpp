// tcmalloc's heap (gperftools 2.10) against the fixtures' own truth. The
// library is built from Debian's source of the installed
// libgoogle-perftools4, with its DWARF kept (scripts/tcmalloc-build), and
// preloaded into fx_heap and fx_leaks. Debian's own stripped library is
// refused, naming its debug symbols.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "harness.hpp"
#include "roots_checks.hpp"

using nlohmann::json;

namespace {

struct Build {
  std::map<std::string, std::string> kv;
  std::string why;
};

const Build& tcmalloc_build() {
  static const Build b = [] {
    Build out;
    auto r = lrtest::run({std::string(LR_SOURCE_DIR) + "/scripts/tcmalloc-build"}, 900);
    if (r.status != 0) out.why = "scripts/tcmalloc-build failed: " + r.err;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
      if (auto eq = line.find('='); eq != std::string::npos)
        out.kv[line.substr(0, eq)] = line.substr(eq + 1);
    return out;
  }();
  return b;
}

const lrtest::FixtureCore& core_on(const std::string& lib, const std::string& key,
                                   const std::string& fixture,
                                   const std::vector<std::string>& args = {}) {
  ::setenv("LD_PRELOAD", lib.c_str(), 1);
  std::string k = key + "-" + fixture;
  for (const auto& a : args) k += "-" + a;
  const auto& fc = lrtest::fixture_core(k, lrtest::fixture_path(fixture), args);
  ::unsetenv("LD_PRELOAD");
  return fc;
}

using lrtest::manifest_items;

}  // namespace

TEST_CASE("tcmalloc: heap, account and leaks read exactly", "[core][heap][tcmalloc]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const Build& b = tcmalloc_build();
  if (!b.why.empty()) FAIL(b.why);
  const auto& heap = core_on(b.kv.at("LIB"), "tcmalloc", "fx_heap");
  auto r = lrtest::leakref({"heap", heap.core, "--json", "--list"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["allocator"] == "tcmalloc");
  CHECK(j["tcmalloc"]["page"] == 8192);
  CHECK(j["tcmalloc"]["large_spans"].get<int>() > 0);
  CHECK(j["stats"]["free_objects"].get<int>() > 0);
  CHECK(j["warnings"].empty());
  std::map<uint64_t, uint64_t> in_use;
  for (const auto& c : j["in_use"])
    in_use[std::stoull(c[0].get<std::string>(), nullptr, 16)] = c[1].get<uint64_t>();
  size_t live = 0, fits = 0, freed = 0;
  for (const auto& l : heap.manifest["live"]) {
    auto it = in_use.find(std::stoull(l[0].get<std::string>(), nullptr, 16));
    live += it != in_use.end();
    fits += it != in_use.end() && it->second >= l[1].get<uint64_t>();
  }
  for (const auto& f : heap.manifest["freed"])
    freed += in_use.count(std::stoull(f.get<std::string>(), nullptr, 16));
  CHECK(live == 600);
  CHECK(fits == 600);
  CHECK(freed == 0);  // freed: on a span's, a central list's or a thread cache's free list
  auto acc = lrtest::leakref({"account", heap.core});
  CHECK(acc.status == 0);
  CHECK(acc.err.empty());
  const auto& lk = core_on(b.kv.at("LIB"), "tcmalloc", "fx_leaks");
  auto l = lrtest::leakref({"leaks", lk.core, "--json"}, 120);
  INFO(l.err);
  REQUIRE(l.status == 0);
  const json lj = l.json();
  std::set<std::string> leaked, extra;
  for (const auto& x : lj["blocks"]) leaked.insert(x["ptr"].get<std::string>());
  const auto want =
      manifest_items(lk.manifest, {"leaked", "dead-slot", "cycle", "leaked-widget", "leaked-part"});
  REQUIRE(want.size() == 14);  // the fixture's leaks: never an empty loop below
  for (const auto& p : want) CHECK(leaked.count(p) == 1);
  lrtest::check_retained_agrees(lk.core, lj);
  // Besides the fixture's: gperftools' own default MallocExtension, which
  // Register() drops when tcmalloc installs itself (a real leak, by vtable).
  for (const auto& x : lj["blocks"])
    if (!want.count(x["ptr"].get<std::string>())) {
      INFO(x.dump());
      CHECK(x["type"] == "MallocExtension");
    }
}

// Debian's own libtcmalloc is stripped: the heap state is in hidden
// symbols; refused in one line naming what to install, never read as the
// idle glibc arena beside it.
TEST_CASE("a stripped tcmalloc is refused, naming its debug symbols", "[core][heap][tcmalloc]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const std::string so = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4";
  const auto& fc = core_on(so, "tcmalloc-debian", "fx_heap");
  for (const char* cmd : {"heap", "leaks"}) {
    auto r = lrtest::leakref({cmd, fc.core});
    CHECK(r.status == 3);
    CHECK(r.err.find("libtcmalloc.so.4.5.10 is tcmalloc but has no symbol "
                     "_ZN8tcmalloc6Static9pageheap_E: its heap state is named only in its full "
                     "symbol table (install its debug symbols, e.g. "
                     "libgoogle-perftools4-dbgsym, in a debug directory leakref searches)") !=
          std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("tcmalloc: a read-only table's only pointer keeps its block", "[core][roots][tcmalloc]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const Build& b = tcmalloc_build();
  if (!b.why.empty()) FAIL(b.why);
  const auto& fc = core_on(b.kv.at("LIB"), "tcmalloc", "fx_roots", {"readonly"});
  lrtest::check_readonly_root(fc);
}
