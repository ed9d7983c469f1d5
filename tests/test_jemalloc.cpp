// jemalloc 5.3's heap against the fixtures' own truth. The library is built
// from Debian's source of the installed libjemalloc2 with Debian's options
// and its DWARF kept (scripts/jemalloc-build), twice: for 48-bit addresses
// (a compact two-level extent map, as most machines build it) and 57-bit
// ones (three levels of two-word leaves, as configure picks on a CPU that
// reports five-level paging). fx_heap and fx_leaks run with it preloaded.
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

const Build& jemalloc_build(const std::string& vaddr, const std::string& stats = "") {
  static std::map<std::string, Build> built;
  if (auto it = built.find(vaddr + stats); it != built.end()) return it->second;
  Build b;
  std::vector<std::string> cmd{std::string(LR_SOURCE_DIR) + "/scripts/jemalloc-build", vaddr};
  if (!stats.empty()) cmd.push_back(stats);
  auto r = lrtest::run(cmd, 900);
  if (r.status != 0) b.why = "scripts/jemalloc-build " + vaddr + " failed: " + r.err;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (auto eq = line.find('='); eq != std::string::npos)
      b.kv[line.substr(0, eq)] = line.substr(eq + 1);
  return built[vaddr + stats] = b;
}

// A fixture's core, the fixture running on the built jemalloc.
const lrtest::FixtureCore& core_on(const Build& b, const std::string& vaddr,
                                   const std::string& fixture,
                                   const std::vector<std::string>& args = {}) {
  ::setenv("LD_PRELOAD", b.kv.at("LIB").c_str(), 1);
  std::string key = "jemalloc" + vaddr + "-" + fixture;
  for (const auto& a : args) key += "-" + a;
  const auto& fc = lrtest::fixture_core(key, lrtest::fixture_path(fixture), args);
  ::unsetenv("LD_PRELOAD");
  return fc;
}

using lrtest::manifest_items;

void check_heap(const lrtest::FixtureCore& fc, const std::string& vaddr) {
  auto r = lrtest::leakref({"heap", fc.core, "--json", "--list"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["allocator"] == "jemalloc");
  CHECK(j["jemalloc"]["page"] == 4096);
  CHECK(j["stats"]["arenas"] == 3);  // fx_heap's two threads get arenas of their own
  CHECK(j["stats"]["tcache_free"].get<int>() > 0);
  CHECK(j["stats"]["slab_free"].get<int>() > 0);
  CHECK(j["jemalloc"]["large"].get<int>() > 0);
  CHECK(j["warnings"].empty());
  std::map<uint64_t, uint64_t> in_use;
  for (const auto& c : j["in_use"])
    in_use[std::stoull(c[0].get<std::string>(), nullptr, 16)] = c[1].get<uint64_t>();
  size_t live = 0, fits = 0, freed = 0;
  for (const auto& l : fc.manifest["live"]) {
    auto it = in_use.find(std::stoull(l[0].get<std::string>(), nullptr, 16));
    live += it != in_use.end();
    fits += it != in_use.end() && it->second >= l[1].get<uint64_t>();
  }
  for (const auto& f : fc.manifest["freed"])
    freed += in_use.count(std::stoull(f.get<std::string>(), nullptr, 16));
  INFO("LG_VADDR " << vaddr);
  CHECK(live == 600);
  CHECK(fits == 600);  // each block at least the size the fixture asked for
  CHECK(freed == 0);   // freed: in a slab's free regions or a thread cache
  // The program's own few (stdio's buffer) besides the fixture's.
  CHECK(in_use.size() >= 600);
  CHECK(in_use.size() <= 610);
}

}  // namespace

TEST_CASE("jemalloc 5.3: heap, account, leaks and refs read exactly", "[core][heap][jemalloc]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  for (const std::string vaddr : {"48", "57"}) {
    INFO("LG_VADDR " << vaddr);
    const Build& b = jemalloc_build(vaddr);
    if (!b.why.empty()) FAIL(b.why);
    CHECK(b.kv.at("LG_VADDR") == vaddr);
    const auto& heap = core_on(b, vaddr, "fx_heap");
    check_heap(heap, vaddr);
    // Every byte of its ranges in one category, with none left over.
    auto acc = lrtest::leakref({"account", heap.core});
    CHECK(acc.status == 0);
    CHECK(acc.err.empty());
    CHECK(acc.out.find("thread caches") != std::string::npos);
    CHECK(acc.out.find("metadata (base blocks)") != std::string::npos);
    const auto& lk = core_on(b, vaddr, "fx_leaks");
    auto r = lrtest::leakref({"leaks", lk.core, "--json"}, 120);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const json j = r.json();  // kept: a range-for over a temporary's member dangles
    std::set<std::string> leaked, unreferenced;
    for (const auto& x : j["blocks"]) {
      leaked.insert(x["ptr"].get<std::string>());
      if (x["unreferenced"] == true) unreferenced.insert(x["ptr"].get<std::string>());
    }
    // The thread caches' stacks keep pointers to regions handed out long
    // ago: read as roots, they would hide these leaks.
    CHECK(leaked == manifest_items(lk.manifest, {"leaked", "dead-slot", "cycle", "leaked-widget",
                                                 "leaked-part"}));
    CHECK(unreferenced == manifest_items(lk.manifest, {"leaked", "dead-slot", "leaked-widget"}));
    lrtest::check_retained_agrees(lk.core, j);
    // A block held only through TLS is found from its root.
    const auto reachable = manifest_items(lk.manifest, {"reachable"});
    REQUIRE(!reachable.empty());
    const std::string tls = *reachable.begin();
    auto refs = lrtest::leakref({"refs", lk.core, tls, "--json"});
    CHECK(refs.status == 0);
  }
}

// Debian's own libjemalloc2 is stripped: the heap state is in hidden
// symbols. Its heap is refused in one line naming what to install, never
// searched for by shape, never read as the idle glibc arena beside it.
TEST_CASE("a stripped jemalloc is refused, naming its debug symbols", "[core][heap][jemalloc]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const std::string so = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
  ::setenv("LD_PRELOAD", so.c_str(), 1);
  const auto& fc = lrtest::fixture_core("jemalloc-debian-fx_heap", lrtest::fixture_path("fx_heap"));
  ::unsetenv("LD_PRELOAD");
  for (const char* cmd : {"heap", "leaks"}) {
    auto r = lrtest::leakref({cmd, fc.core});
    CHECK(r.status == 3);
    CHECK(r.err.find(so + " is jemalloc but has no symbol je_arena_emap_global: its heap state "
                          "is named only in its full symbol table (install its debug symbols, "
                          "e.g. libjemalloc2-dbgsym, in a debug directory leakref searches)") !=
          std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

// Built without statistics, jemalloc's arenas list no thread cache: the
// regions the caches hold cannot be told from in-use ones, which the walk
// says, never passing the count off as exact.
TEST_CASE("jemalloc without statistics: the unlisted thread caches are said",
          "[core][heap][jemalloc]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const Build& b = jemalloc_build("48", "nostats");
  if (!b.why.empty()) FAIL(b.why);
  const auto& fc = core_on(b, "48-nostats", "fx_heap");
  auto r = lrtest::leakref({"heap", fc.core, "--json"});
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["jemalloc"]["tcaches"] == 0);
  CHECK(j["warnings"] ==
        json::array({"jemalloc: thread caches are on (opt.tcache) but no arena lists one (a "
                     "build without statistics keeps no list): regions they hold are counted "
                     "in use"}));
}

TEST_CASE("jemalloc: a read-only table's only pointer keeps its block", "[core][roots][jemalloc]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const Build& b = jemalloc_build("48");
  if (!b.why.empty()) FAIL(b.why);
  const auto& fc = core_on(b, "48", "fx_roots", {"readonly"});
  lrtest::check_readonly_root(fc);
}
