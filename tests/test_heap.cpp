// The glibc heap walk on a real core: every live block the fixture kept is
// an in-use chunk, and no block it freed (tcache, fastbins, bins) is.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <set>

#include <csignal>

#include "harness.hpp"

using nlohmann::json;

TEST_CASE("glibc heap walk: in-use chunks equal the fixture's live blocks", "[core][heap]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("heap", lrtest::fixture_path("fx_heap"));
  auto r = lrtest::leakref({"heap", fc.core, "--json", "--list"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  REQUIRE(j["schema"] == "leakref.heap/1");
  std::map<uint64_t, uint64_t> in_use;
  for (const auto& c : j["in_use"])
    in_use[std::stoull(c[0].get<std::string>(), nullptr, 16)] = c[1];
  size_t live = 0, freed_seen = 0;
  for (const auto& l : fc.manifest["live"]) {
    uint64_t a = std::stoull(l[0].get<std::string>(), nullptr, 16);
    INFO("live block " << l[0]);
    REQUIRE(in_use.count(a) == 1);
    CHECK(in_use[a] >= l[1].get<uint64_t>());
    ++live;
  }
  std::string seen;
  for (const auto& f : fc.manifest["freed"]) {
    uint64_t a = std::stoull(f.get<std::string>(), nullptr, 16);
    if (in_use.count(a)) {
      ++freed_seen;
      seen += f.get<std::string>() + " (" + std::to_string(in_use[a]) + " B) ";
    }
  }
  CHECK(live == 600);
  INFO("freed blocks reported in use: " << seen << "core " << fc.core);
  CHECK(freed_seen == 0);
  // Every list kind was exercised, so the test can tell a raw scan from a walk.
  const json& s = j["stats"];
  CHECK(s["arenas"] == 3);
  CHECK(s["tcache_free"].get<int>() > 0);
  CHECK(s["fastbin_free"].get<int>() > 0);
  CHECK(s["bin_free"].get<int>() > 0);
  CHECK(s["mmapped"].get<int>() >= 20);
  CHECK(j["warnings"].empty());
  // Beyond the kept blocks only a few of libc's own (tcache structs, stdio) remain.
  CHECK(in_use.size() - live < 16);
  // Text and JSON count the same chunks (mmapped ones were in one only).
  CHECK(s["chunks"].get<uint64_t>() ==
        s["heap_chunks"].get<uint64_t>() + s["mmapped"].get<uint64_t>());
  auto t = lrtest::leakref({"heap", fc.core});
  REQUIRE(t.status == 0);
  CHECK(t.out.find(fmt::format("\nchunks {} ({} in heaps, {} mmapped): in use {} (",
                               s["chunks"].get<uint64_t>(), s["heap_chunks"].get<uint64_t>(),
                               s["mmapped"].get<uint64_t>(), s["in_use"].get<uint64_t>())) !=
        std::string::npos);
}

// Reading the heap shows a progress line on a terminal (forced here, as the
// walk's is in test_cores), erased at the end; the output is unchanged.
TEST_CASE("heap: a progress line on a terminal, never in the output", "[core][heap]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("heap", lrtest::fixture_path("fx_heap"));
  auto quiet = lrtest::leakref({"heap", fc.core});
  REQUIRE(quiet.status == 0);
  CHECK(quiet.err.empty());
  auto shown = lrtest::run(
      {"env", "LEAKREF_PROGRESS=always", lrtest::build_dir() + "/leakref", "heap", fc.core});
  REQUIRE(shown.status == 0);
  CHECK(shown.err.rfind("\rleakref: reading the heap: ", 0) == 0);
  CHECK(shown.err.find(" chunks\x1b[K") != std::string::npos);
  REQUIRE(shown.err.size() >= 4);
  CHECK(shown.err.substr(shown.err.size() - 4) == "\r\x1b[K");
  CHECK(shown.out == quiet.out);
}

// The tcache key is libc's tcache_key as gdb reads it, on a process that
// freed nothing (no tcache entry carries it: it printed 0x0) and on one
// whose free entries carry it.
TEST_CASE("heap: the tcache key is libc's, as gdb reads it", "[core][heap]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_steady")});
  REQUIRE(lrtest::wait_for_text(fx.out_path, "READY", 30));
  std::string prefix = lrtest::tmp_dir() + "/steady-key";
  auto g = lrtest::run({"gcore", "-o", prefix, std::to_string(fx.pid)}, 120);
  std::string steady = prefix + "." + std::to_string(fx.pid);
  lrtest::finish(fx, SIGKILL);
  REQUIRE(g.status == 0);
  const auto& heap = lrtest::fixture_core("heap", lrtest::fixture_path("fx_heap"));
  for (auto [core, exe] :
       {std::pair{steady, lrtest::fixture_path("fx_steady")}, std::pair{heap.core, heap.exe}}) {
    auto gdb = lrtest::run({"gdb", "-batch", "-nx", "-ex", "p/x tcache_key", exe, core}, 120);
    auto at = gdb.out.rfind("= 0x");
    REQUIRE(at != std::string::npos);  // libc6-dbg (make test installs it) names it
    std::string key = gdb.out.substr(at + 2, gdb.out.find('\n', at) - at - 2);
    auto r = lrtest::leakref({"heap", core});
    INFO(core << "\n" << r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("tcache key " + key + "\n") != std::string::npos);
    auto j = lrtest::leakref({"heap", core, "--json"});
    CHECK(j.json()["tcache_key"] == key);
  }
}
