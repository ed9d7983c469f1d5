// Checks of the root model shared by the allocators' tests: a fixture core
// of fx_roots, taken on whichever allocator the caller preloaded.
#pragma once

#include <catch2/catch.hpp>

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

}  // namespace lrtest
