// The root model against programs that print their own truth
// (fixtures/fx_roots.c): each mode puts a heap block's only pointer where a
// conservative scan must find it (a vector register, ...) or must not (the
// stack of a thread that no longer exists), and `leaks` and `refs` must say
// what the program knows.
#include <catch2/catch.hpp>
#include <set>

#include "harness.hpp"

using nlohmann::json;

namespace {

const lrtest::FixtureCore& roots_core(const std::string& mode) {
  return lrtest::fixture_core("roots-" + mode, lrtest::fixture_path("fx_roots"), {mode});
}

std::set<std::string> leaked_blocks(const std::string& core) {
  auto r = lrtest::leakref({"leaks", core, "--json"}, 120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::set<std::string> out;
  const json j = r.json();
  for (const auto& b : j["blocks"]) out.insert(b["ptr"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("roots: a pointer held only in a vector register keeps its block", "[core][roots]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("vector");
  const auto kept = lrtest::manifest_items(fc.manifest, {"kept"});
  REQUIRE(kept.size() == 1);
  const std::string p = *kept.begin();
  CHECK(leaked_blocks(fc.core).count(p) == 0);
  auto r = lrtest::leakref({"refs", fc.core, p, "--json"});
  INFO(r.err << r.out);
  REQUIRE(r.status == 0);
  bool xmm8 = false;
  const json j = r.json();
  for (const auto& ref : j["objects"][0]["referrers"])
    xmm8 |= ref["kind"] == "register" &&
            ref["what"].get<std::string>().find("register xmm8") != std::string::npos;
  CHECK(xmm8);
  auto t = lrtest::leakref({"refs", fc.core, p});
  CHECK(t.out.find("register xmm8") != std::string::npos);
}
