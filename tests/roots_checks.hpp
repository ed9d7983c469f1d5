// Checks of the root model shared by the allocators' tests: a fixture core
// of fx_roots, taken on whichever allocator the caller preloaded.
#pragma once

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness.hpp"

namespace lrtest {

// fx_roots readonly: the block whose only pointer lies in a mapping made
// read-only is not leaked, and refs names that one referrer as readonly.
inline void check_readonly_root(const FixtureCore& fc) {
  const auto kept = manifest_items(fc.manifest, {"kept"});
  REQUIRE(kept.size() == 1);
  auto r = leakref({"leaks", fc.core, "--json"}, 120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json j = r.json();
  CHECK(j["partial"] == false);
  for (const auto& x : j["blocks"]) CHECK(!kept.count(x["ptr"].get<std::string>()));
  auto refs = leakref({"refs", fc.core, *kept.begin(), "--json"});
  REQUIRE(refs.status == 0);
  const nlohmann::json rj = refs.json();
  REQUIRE(rj["objects"][0]["referrers"].size() == 1);
  CHECK(rj["objects"][0]["referrers"][0]["kind"] == "readonly");
}

// The retained-size tree of `core` agrees with `leaks` (its JSON given)
// on the same core: the heap's blocks, and exactly the leaked blocks (and
// no other) below the "leaked" node; the exported graph's dominators are
// networkx's. `args` are the options both take (--exe, --sysroot).
inline void check_retained_agrees(const std::string& core, const nlohmann::json& leaks,
                                  const std::vector<std::string>& args = {}) {
  const std::string graph =
      tmp_dir() + "/graph-" + std::to_string(leaks["summary"]["blocks"].get<uint64_t>()) + ".json";
  std::vector<std::string> a = {"retained", core, "--json", "--export", graph};
  a.insert(a.end(), args.begin(), args.end());
  auto r = leakref(a, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json j = r.json();
  CHECK(j["heap"]["blocks"] == leaks["summary"]["blocks"]);
  CHECK(j["heap"]["leaked_blocks"] == leaks["summary"]["leaked"]);
  CHECK(j["heap"]["leaked_bytes"] == leaks["summary"]["leaked_bytes"]);
  CHECK(j["partial"] == leaks["partial"]);
  // Below "leaked": the blocks whose dominators lead up to it.
  const nlohmann::json g = nlohmann::json::parse(read_file(graph));
  std::map<std::string, std::string> idom;
  for (const auto& n : g["nodes"]) idom[n["node"]] = n["idom"];
  std::set<std::string> below, want;
  for (const auto& [n, d] : idom) {
    std::string up = d;
    for (int steps = 0; up != "top" && up != "leaked" && steps < 1'000'000; ++steps) up = idom[up];
    if (up == "leaked" && n != "leaked") below.insert(n);
  }
  for (const auto& b : leaks["blocks"]) want.insert(b["ptr"].get<std::string>());
  CHECK(below == want);
  auto nx = run({"python3", std::string(LR_SOURCE_DIR) + "/tests/check_dominators.py", graph}, 300);
  INFO(nx.out << nx.err);
  CHECK(nx.status == 0);
}

}  // namespace lrtest
