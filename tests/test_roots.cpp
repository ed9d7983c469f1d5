// The root model against programs that print their own truth
// (fixtures/fx_roots.c): each mode puts a heap block's only pointer where a
// conservative scan must find it (a vector register, ...) or must not (the
// stack of a thread that no longer exists), and `leaks` and `refs` must say
// what the program knows.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
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

namespace {

// Every block the fixture says it leaked is leaked, every block it kept is
// not, and nothing else of its is called leaked; the answer is whole.
void check_truth(const lrtest::FixtureCore& fc, size_t want_leaked, size_t want_kept) {
  const auto leaked = lrtest::manifest_items(fc.manifest, {"leaked"});
  const auto kept = lrtest::manifest_items(fc.manifest, {"kept"});
  REQUIRE(leaked.size() == want_leaked);
  REQUIRE(kept.size() == want_kept);
  auto r = lrtest::leakref({"leaks", fc.core, "--json"}, 120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["partial"] == false);
  std::set<std::string> found;
  for (const auto& b : j["blocks"]) found.insert(b["ptr"].get<std::string>());
  for (const auto& p : leaked) CHECK(found.count(p) == 1);
  for (const auto& p : kept) CHECK(found.count(p) == 0);
  // The rest of the heap is the C library's and stdio's: live.
  CHECK(found.size() == leaked.size());
}

}  // namespace

TEST_CASE("roots: the stacks and TLS of threads that exited are not roots", "[core][roots]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("exited");
  check_truth(fc, 15, 3);
  // What held a leaked block is named: a stale word in an exited thread's
  // stack (glibc's stack cache), never a root.
  const auto leaked = lrtest::manifest_items(fc.manifest, {"leaked"});
  std::vector<std::string> args{"refs", fc.core, "--json"};
  args.insert(args.end(), leaked.begin(), leaked.end());
  auto r = lrtest::leakref(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  size_t stale = 0;
  for (const auto& o : j["objects"]) {
    CHECK(o["referrers"].empty());
    for (const auto& s : o["stale_referrers"]) {
      ++stale;
      CHECK(s["what"].get<std::string>().find("exited thread (glibc's stack cache)") !=
            std::string::npos);
    }
  }
  CHECK(stale > 0);
}

TEST_CASE("roots: in a fork child, the parent's other threads' stacks are not roots",
          "[core][roots]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("fork");
  // The core is the child's: one thread.
  auto i = lrtest::leakref({"info", fc.core, "--json"});
  REQUIRE(i.status == 0);
  const json ij = i.json();
  CHECK(ij["threads"].size() == 1);
  check_truth(fc, 15, 3);
}

TEST_CASE("roots: a read-only table's only pointer keeps its block", "[core][roots]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("readonly");
  check_truth(fc, 0, 1);
  const auto kept = lrtest::manifest_items(fc.manifest, {"kept"});
  auto t = lrtest::leakref({"refs", fc.core, *kept.begin()});
  CHECK(t.out.find("readonly read-only mapping at") != std::string::npos);
}

TEST_CASE("heap: an aligned block above the mmap threshold is glibc's chunk at ptr - 16",
          "[core][roots][heap]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("memalign");
  const auto kept = lrtest::manifest_items(fc.manifest, {"kept"});
  REQUIRE(kept.size() == 1);
  const std::string p = *kept.begin();
  const uint64_t ptr = std::stoull(p, nullptr, 16);
  auto h = lrtest::leakref({"heap", fc.core, "--json", "--list"});
  REQUIRE(h.status == 0);
  const json hj = h.json();
  bool found = false;
  for (const auto& c : hj["in_use"]) {
    const uint64_t user = std::stoull(c[0].get<std::string>(), nullptr, 16);
    const uint64_t usable = c[1].get<uint64_t>();
    // No block starts in the alignment gap or spans the aligned pointer.
    CHECK((user == ptr || user + usable <= ptr || user > ptr));
    if (user == ptr) {
      found = true;
      // As glibc's malloc_usable_size says (the mapping's tail past the
      // aligned block is the chunk's).
      CHECK(usable == fc.manifest["usable"].get<uint64_t>());
    }
  }
  CHECK(found);
  check_truth(fc, 0, 1);
  auto r = lrtest::leakref({"refs", fc.core, p, "--json"});
  REQUIRE(r.status == 0);
  const json rj = r.json();
  CHECK(rj["objects"][0]["chunk"] == p);
}

// gcore leaves a MAP_SHARED file mapping out of the core; the file holds
// what the mapping held. Unchanged since the core was written, it is read:
// its pointer keeps its block. Changed after, nobody can say what the
// mapping held: the answer is partial, never a quiet "leaked".
TEST_CASE("roots: a mapping the core leaves out is read from its file or the answer is partial",
          "[core][roots]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("shared");
  const auto unknown = lrtest::manifest_items(fc.manifest, {"unknown"});
  REQUIRE(unknown.size() == 1);
  const std::string file = lrtest::tmp_dir() + "/roots-shared.manifest.json.shared";
  namespace fs = std::filesystem;
  REQUIRE(fs::exists(file));
  const auto written = fs::last_write_time(fc.core);
  fs::last_write_time(file, written - std::chrono::hours(1));
  auto r = lrtest::leakref({"leaks", fc.core, "--json"}, 120);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["partial"] == false);
  CHECK(j["summary"]["leaked"] == 0);
  auto refs = lrtest::leakref({"refs", fc.core, *unknown.begin(), "--json"});
  REQUIRE(refs.status == 0);
  bool from_file = false;
  const json rj = refs.json();
  for (const auto& x : rj["objects"][0]["referrers"])
    from_file |=
        x["what"].get<std::string>().find(".shared (read from the file)") != std::string::npos;
  CHECK(from_file);
  // Written after the core: what the mapping held is unknown.
  fs::last_write_time(file, written + std::chrono::hours(1));
  r = lrtest::leakref({"leaks", fc.core, "--json"}, 120);
  fs::last_write_time(file, written - std::chrono::hours(1));
  REQUIRE(r.status == 0);
  j = r.json();
  CHECK(j["partial"] == true);
  REQUIRE(j["partial_reasons"].size() == 1);
  CHECK(j["partial_reasons"][0].get<std::string>().find(
            ".shared the core leaves out (" + file +
            " holds words that point into the heap, and changed after the core was written)") !=
        std::string::npos);
  fs::last_write_time(file, written + std::chrono::hours(1));
  auto t = lrtest::leakref({"leaks", fc.core});
  CHECK(t.out.rfind("partial: ", 0) == 0);
  // Under --fail-on a partial answer fails, whatever was asked.
  auto f = lrtest::leakref({"leaks", fc.core, "--fail-on", "leaked"});
  CHECK(f.status == 1);
  auto a = lrtest::leakref({"account", fc.core, "--json"});
  fs::last_write_time(file, written - std::chrono::hours(1));
  REQUIRE(a.status == 0);
  const json aj = a.json();
  bool said = false;
  for (const auto& w : aj["warnings"]) said |= w.get<std::string>().rfind("partial: ", 0) == 0;
  CHECK(said);
}

TEST_CASE("refs: a freed block's free chunk and list, and the pointers still held to it",
          "[core][roots]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("dangling");
  REQUIRE(fc.manifest["items"].size() == 2);
  for (const auto& it : fc.manifest["items"]) {
    const std::string p = it["ptr"].get<std::string>(), list = it["why"].get<std::string>();
    INFO(p << " " << list);
    auto r = lrtest::leakref({"refs", fc.core, p, "--json"});
    CHECK(r.status == 4);  // not an in-use block: a lookup that found none
    const json o = r.json()["objects"][0];
    REQUIRE(o.contains("freed"));
    const std::string freed = o["freed"].get<std::string>();
    CHECK(freed.find(list == "tcache" ? "on a thread cache (tcache) or fastbin list"
                                      : "a free chunk in the bins") != std::string::npos);
    bool global = false;
    for (const auto& d : o["dangling_referrers"])
      global |= d["what"].get<std::string>().find("global dangling_") != std::string::npos;
    CHECK(global);
  }
}

TEST_CASE(
    "heap: zero-filled blocks of a tcache's size are the program's, by libc's tcache "
    "variables",
    "[core][roots][heap]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("zeroed");
  check_truth(fc, 3, 5);
  // One tcache (the main thread's), named by its variable: no guess said.
  auto h = lrtest::leakref({"heap", fc.core, "--json"});
  REQUIRE(h.status == 0);
  const json hj = h.json();
  CHECK(hj["stats"]["tcache_structs"] == 1);
  CHECK(hj["warnings"].dump().find("by shape alone") == std::string::npos);
  // account: the five kept are live, the three dropped leaked, none overhead.
  auto a = lrtest::leakref({"account", fc.core, "--json"});
  REQUIRE(a.status == 0);
  const json aj = a.json();
  for (const auto& c : aj["categories"]) {
    if (c["name"] == "leaked") CHECK(c["blocks"] == 3);
    if (c["name"] == "live") CHECK(c["blocks"].get<int>() >= 5);
  }
}

TEST_CASE("hostile: a mapped file whose name is not UTF-8 leaves every JSON answer JSON",
          "[core][roots][hostile]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = roots_core("badname");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"leaks", fc.core, "--json"},
        std::vector<std::string>{"account", fc.core, "--json"},
        std::vector<std::string>{"info", fc.core, "--json"},
        std::vector<std::string>{"heap", fc.core, "--json"}}) {
    auto r = lrtest::leakref(args, 120);
    INFO(args[0] << ": " << r.err);
    CHECK(r.status == 0);
    CHECK_NOTHROW(r.json());
  }
  auto i = lrtest::leakref({"info", fc.core, "--json"});
  CHECK(i.out.find("caf\xef\xbf\xbd") != std::string::npos);  // U+FFFD for the 0xe9
}

// A C++ object is shown with its base classes (gdb's <Base> = {...}), and a
// virtual base, which has no fixed offset, is named as not shown: never an
// object printed as complete with members left out.
TEST_CASE("show: C++ base classes are shown, a virtual base is said", "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("bases", lrtest::fixture_path("fx_bases"));
  auto d = lrtest::leakref({"show", fc.core, "*g_derived"});
  INFO(d.out << d.err);
  REQUIRE(d.status == 0);
  CHECK(d.out.find("<Base> = {") != std::string::npos);
  CHECK(d.out.find("base_id = 7") != std::string::npos);
  CHECK(d.out.find("base_count = 11") != std::string::npos);
  CHECK(d.out.find("own = 42") != std::string::npos);
  // A base's member is the derived object's, by name.
  auto m = lrtest::leakref({"show", fc.core, "g_derived->base_count"});
  INFO(m.out << m.err);
  CHECK(m.status == 0);
  CHECK(m.out.find("11") != std::string::npos);
  auto v = lrtest::leakref({"show", fc.core, "*g_vderived"});
  INFO(v.out << v.err);
  REQUIRE(v.status == 0);
  CHECK(v.out.find("w = 6") != std::string::npos);
  CHECK(v.out.find("<virtual base VBase> = <not shown: the DWARF gives it no fixed offset>") !=
        std::string::npos);
}
