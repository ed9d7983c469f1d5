// leakref diff: two moments of one program. Truth from the fixture's own
// manifest (fx_grow: the usable size malloc gave each group and its live
// count at each checkpoint); GlusterFS statedump pairs are in test_gluster.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <regex>

#include "harness.hpp"

using nlohmann::json;

namespace {

struct TwoMoments {
  std::string dir, core1, core2;
  json manifest;
  std::string why_not;
};

// fx_grow's core at each checkpoint (taken once per run).
const TwoMoments& two_moments() {
  static TwoMoments t = [] {
    TwoMoments m;
    if (!lrtest::have_gcore()) {
      m.why_not = "gcore (gdb) is not installed";
      return m;
    }
    m.dir = lrtest::tmp_dir() + "/grow";
    lrtest::run({"/bin/mkdir", "-p", m.dir});
    std::string go = m.dir + "/go", man = m.dir + "/manifest.json";
    auto fx = lrtest::spawn({lrtest::fixture_path("fx_grow"), man, go});
    std::string pid = std::to_string(fx.pid);
    bool ok = lrtest::wait_for_text(fx.out_path, "CP1", 30) &&
              lrtest::run({"gcore", "-o", m.dir + "/grow1", pid}, 120).status == 0;
    lrtest::write_file(go, "go");
    ok = ok && lrtest::wait_for_text(fx.out_path, "CP2", 30) &&
         lrtest::run({"gcore", "-o", m.dir + "/grow2", pid}, 120).status == 0;
    lrtest::finish(fx, SIGKILL);
    if (!ok) {
      m.why_not = "fx_grow or gcore failed: " + lrtest::read_file(fx.err_path);
      return m;
    }
    m.core1 = m.dir + "/grow1." + pid;
    m.core2 = m.dir + "/grow2." + pid;
    m.manifest = json::parse(lrtest::read_file(man));
    return m;
  }();
  return t;
}

// The heap class diff names a usable size by (sizes up to 1 KiB exactly).
std::string heap_class(size_t usable) {
  if (usable <= 1024) return std::to_string(usable) + " B";
  size_t lo = 1024;
  while (lo * 2 < usable) lo *= 2;
  return std::to_string(lo + 1) + "-" + std::to_string(lo * 2) + " B";
}

}  // namespace

TEST_CASE("diff: a program that grows some classes and not others", "[diff]") {
  const auto& t = two_moments();
  if (!t.why_not.empty()) {
    if (t.why_not.rfind("gcore (gdb)", 0) == 0) LR_SKIP(t.why_not);
    FAIL(t.why_not);
  }
  auto r = lrtest::leakref({"diff", t.core1, t.core2, "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["schema"] == "leakref.diff/1");
  CHECK(j["old"]["kind"] == "core");
  std::map<std::string, json> heap;
  for (const auto& c : j["classes"])
    if (c["kind"] == "heap") heap[c["name"]] = c;
  // Each group's class moved by exactly the group's change; nothing else moved.
  std::map<std::string, long> want;
  for (const auto& g : t.manifest["groups"])
    want[heap_class(g["usable"])] += g["cp2"].get<long>() - g["cp1"].get<long>();
  REQUIRE(want.size() == 4);
  for (const auto& [name, c] : heap) {
    INFO(name << ": " << c.dump());
    CHECK(c["delta"].get<long>() == (want.count(name) ? want[name] : 0));
    CHECK(c["delta"].get<long>() == c["after"].get<long>() - c["before"].get<long>());
    if (c["after_bytes"].is_number() && c["before_bytes"].is_number() &&
        name.find('-') == std::string::npos && name != "mmapped")
      CHECK(c["after_bytes"].get<long>() - c["before_bytes"].get<long>() ==
            c["delta"].get<long>() * std::stol(name));
  }
  for (const auto& [name, d] : want) CHECK(heap.count(name) == 1);
  CHECK(j["summary"]["grew"] == 2);
  CHECK(j["summary"]["shrank"] == 1);
  CHECK(j["classes"][0]["name"] ==
        heap_class(t.manifest["groups"][0]["usable"]));  // most grown first

  // Text: the grown classes first, most grown at the top; the shrunk apart.
  auto txt = lrtest::leakref({"diff", t.core1, t.core2});
  REQUIRE(txt.status == 0);
  std::string g200 = heap_class(t.manifest["groups"][0]["usable"]);
  size_t grew = txt.out.find("\ngrew most:\nKIND"), shrank = txt.out.find("\nshrank most:\n");
  REQUIRE(grew != std::string::npos);
  REQUIRE(shrank != std::string::npos);
  std::regex row("\\nheap +" + std::regex_replace(g200, std::regex("-"), "\\-") +
                 " +([0-9]+) +([0-9]+) +\\+200 +3\\.00x\\n");
  CHECK(std::regex_search(txt.out.substr(grew, shrank - grew), row));
  CHECK(txt.out.find("1000 B", shrank) != std::string::npos);
  CHECK(txt.out.find("-100", shrank) != std::string::npos);

  // --fail-on: growth is a finding; a core against itself has none.
  CHECK(lrtest::leakref({"diff", t.core1, t.core2, "--fail-on", "grew"}).status == 1);
  auto same = lrtest::leakref({"diff", t.core1, t.core1, "--fail-on", "grew", "--json"});
  CHECK(same.status == 0);
  CHECK(same.json()["summary"]["grew"] == 0);
  CHECK(same.json()["summary"]["shrank"] == 0);
}

TEST_CASE("diff: inputs that do not fit are refused in one line", "[diff][hostile]") {
  const auto& t = two_moments();
  if (!t.why_not.empty()) {
    if (t.why_not.rfind("gcore (gdb)", 0) == 0) LR_SKIP(t.why_not);
    FAIL(t.why_not);
  }
  std::string d = t.dir;
  const std::string head = "DUMP-START-TIME: 2026-11-22 00:27:55.082394 +0000\n";
  const std::string pools =
      "\n[mempool]\n-----=-----\npool-name=inode_t\nxlator-name=fuse\nactive-count=7\n"
      "sizeof-type=160\npadded-sizeof=256\nsize=1792\nshared-pool=0x1\n";
  const std::string tail = "\nDUMP-END-TIME: 2026-11-22 00:27:55.1 +0000";
  lrtest::write_file(d + "/a.dump", head + pools + tail);
  // A core and a statedump are not two moments of one thing.
  auto r = lrtest::leakref({"diff", d + "/a.dump", t.core1});
  CHECK(r.status == 2);
  CHECK(r.err.find("is a statedump and") != std::string::npos);
  // Cores of different programs.
  const auto& other = lrtest::fixture_core("structs", lrtest::fixture_path("fx_structs"));
  r = lrtest::leakref({"diff", t.core1, other.core});
  CHECK(r.status == 2);
  CHECK(r.err.find("different builds") != std::string::npos);
  // A count that is not a number names the file and line.
  lrtest::write_file(
      d + "/bad.dump",
      head + std::regex_replace(pools, std::regex("active-count=7"), "active-count=seven") + tail);
  r = lrtest::leakref({"diff", d + "/a.dump", d + "/bad.dump"});
  CHECK(r.status == 3);
  CHECK(r.err.find("bad.dump:7: active-count is 'seven', not a number") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // Cut short: the classes it has, and a warning that the rest is missing.
  lrtest::write_file(d + "/cut.dump", head + pools.substr(0, pools.size() - 20));
  r = lrtest::leakref({"diff", d + "/a.dump", d + "/cut.dump", "--json"});
  CHECK(r.status == 0);
  CHECK(r.json()["warnings"][0].get<std::string>().find("cut short") != std::string::npos);
  // Neither a statedump nor a core.
  lrtest::write_file(d + "/text.txt", "hello\n");
  r = lrtest::leakref({"diff", d + "/a.dump", d + "/text.txt"});
  CHECK(r.status == 3);
  CHECK(r.err.find("text.txt") != std::string::npos);
  // A FIFO does not hang it.
  REQUIRE(mkfifo((d + "/fifo").c_str(), 0600) == 0);
  r = lrtest::leakref({"diff", d + "/a.dump", d + "/fifo"}, 20);
  CHECK(!r.timed_out);
  CHECK(r.status == 3);
  // Same statedump twice: nothing moved.
  r = lrtest::leakref({"diff", d + "/a.dump", d + "/a.dump", "--json"});
  REQUIRE(r.status == 0);
  CHECK(r.json()["classes"].size() == 1);
  CHECK(r.json()["classes"][0]["name"] == "inode_t@fuse");
  CHECK(r.json()["classes"][0]["before_bytes"] == 1792);
}

TEST_CASE("README: the diff example runs as written", "[diff][docs]") {
  const auto& t = two_moments();
  if (!t.why_not.empty()) {
    if (t.why_not.rfind("gcore (gdb)", 0) == 0) LR_SKIP(t.why_not);
    FAIL(t.why_not);
  }
  std::string part = lrtest::readme_section("diff");
  REQUIRE(!part.empty());
  std::string dir = t.dir + "/readme";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", t.core1, dir + "/core.1"}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", t.core2, dir + "/core.2"}).status == 0);
  size_t commands = 0;
  for (const auto& [cmd, want] : lrtest::readme_commands(part)) {
    INFO(cmd);
    auto r = lrtest::run(
        {"/bin/bash", "-c", "cd '" + dir + "' && PATH='" + lrtest::build_dir() + "':$PATH " + cmd});
    CHECK(r.out == want);
    ++commands;
  }
  CHECK(commands == 1);
}

// --profile: a profile's sets become classes and its objects are matched by
// the set's key. The same core twice: every object unchanged; a profile for
// another program is refused.
TEST_CASE("diff --profile: object sets by their keys", "[diff][profile]") {
  const auto& t = two_moments();
  if (!t.why_not.empty()) {
    if (t.why_not.rfind("gcore (gdb)", 0) == 0) LR_SKIP(t.why_not);
    FAIL(t.why_not);
  }
  const auto& fc = lrtest::fixture_core("locks", lrtest::fixture_path("fx_locks"));
  std::string prof = std::string(LR_SOURCE_DIR) + "/tests/profiles/fx_locks.toml";
  auto r = lrtest::leakref({"diff", fc.core, fc.core, "--profile", prof, "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  auto p = lrtest::leakref({"profile", fc.core, "--profile", prof, "--json"});
  REQUIRE(p.status == 0);
  json pj = p.json();
  size_t objects = 0, sets = 0;
  for (const auto& s : pj["sets"]) {
    objects += s["objects"].size();
    ++sets;
    bool found = false;
    for (const auto& c : j["classes"])
      if (c["kind"] == "profile" && c["name"] == s["name"]) {
        found = true;
        CHECK(c["before"] == s["objects"].size());
        CHECK(c["delta"] == 0);
      }
    CHECK(found);
  }
  CHECK(sets >= 3);
  CHECK(j["summary"]["same"] == objects);
  CHECK(j["objects"].empty());
  r = lrtest::leakref({"diff", t.core1, t.core2, "--profile", prof});
  CHECK(r.status == 3);
  CHECK(r.err.find("grow1") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}
