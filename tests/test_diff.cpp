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
  // The heap's classes; the account's grew too (live, overhead), in bytes.
  int heap_grew = 0, heap_shrank = 0;
  for (const auto& c : j["classes"])
    if (c["kind"] == "heap") heap_grew += c["delta"] > 0, heap_shrank += c["delta"] < 0;
  CHECK(heap_grew == 2);
  CHECK(heap_shrank == 1);
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
  // A count no dump holds, alone or summed over a pool named twice (the
  // fuzzer's find: 7777777777777777777 twice wrapped int64), is refused.
  auto count = [&](const char* n) {
    return std::regex_replace(pools, std::regex("active-count=7"),
                              std::string("active-count=") + n);
  };
  std::string many;  // 37 pools of 7777777777777 (each below 2^48): their sum is past it
  for (int i = 0; i < 37; ++i) many += count("7777777777777");
  for (const std::string& body : {count("-3"), count("7777777777777777777"), many}) {
    lrtest::write_file(d + "/huge.dump", head + body + tail);
    r = lrtest::leakref({"diff", d + "/a.dump", d + "/huge.dump"});
    CHECK(r.status == 3);
    CHECK(r.err.find("huge.dump: mempool 'inode_t@fuse' counts") != std::string::npos);
    CHECK(r.err.find("the file is damaged") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
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
  // Odd section names (a list name with nothing before it, empty ones, a
  // memusage section with no type) are read without harm.
  lrtest::write_file(d + "/odd.dump", head +
                                          "\n[.1]\ngfid=x\nref=1\n[.active.1]\ngfid=y\nref=2\n[]\n"
                                          "[ memusage]\nnum_allocs=1\n[a.b.active_size]\n"
                                          "a.b.active_size.active_size=3\n" +
                                          tail);
  r = lrtest::leakref({"diff", d + "/odd.dump", d + "/odd.dump", "--json"});
  CHECK(r.status == 0);
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
    // The classes exactly; the account's bytes (stacks, libc's data, what
    // the C library allocated for itself) differ between machines: their
    // rows, with any number.
    const std::string cut = "\naccount (bytes):";
    CHECK(r.out.substr(0, r.out.find(cut)) == want.substr(0, want.find(cut)));
    auto rows = [&](const std::string& s) {
      return std::regex_replace(s.substr(std::min(s.find(cut), s.size())), std::regex("[+0-9]+"),
                                "N");
    };
    CHECK(rows(r.out) == rows(want));
    CHECK(r.out.find("\nleaked                    0              0             +0\n") !=
          std::string::npos);
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

// A series of a live process (fx_steady keeps 10 more 200-byte blocks every
// 100 ms; 50 600-byte blocks stay): leakref-snap keeps one summary per core
// and removes the cores; trend finds the class that only grows and not the
// constant one; the HTML report renders in a real browser.
TEST_CASE("series: leakref-snap --every, leakref trend and its HTML report", "[diff][series]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  std::string d = lrtest::tmp_dir() + "/series";
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_steady")});
  REQUIRE(lrtest::wait_for_text(fx.out_path, "READY", 30));
  auto snap = lrtest::run({std::string(LR_SOURCE_DIR) + "/scripts/leakref-snap",
                           std::to_string(fx.pid), "--every", "1", "--count", "4", "--dir", d},
                          300);
  lrtest::finish(fx, SIGKILL);
  INFO(snap.err);
  REQUIRE(snap.status == 0);
  std::vector<std::string> snaps;
  for (int i = 1; i <= 4; ++i) {
    std::string f = d + "/snap.000" + std::to_string(i) + ".json";
    CHECK(access(f.c_str(), R_OK) == 0);
    CHECK(access((d + "/core.000" + std::to_string(i)).c_str(), F_OK) != 0);  // removed
    snaps.push_back(f);
  }
  std::vector<std::string> args = {"trend"};
  args.insert(args.end(), snaps.rbegin(), snaps.rend());  // given out of order: sorted by time
  args.push_back("--json");
  auto t = lrtest::leakref(args);
  INFO(t.err);
  REQUIRE(t.status == 0);
  json j = t.json();
  CHECK(j["schema"] == "leakref.trend/1");
  CHECK(j["summary"]["snapshots"] == 4);
  CHECK(j["slope_unit"] == "per hour");
  CHECK(j["snapshots"][0]["source"].get<std::string>().find("core.0001") != std::string::npos);
  std::map<std::string, json> cls;
  for (const auto& c : j["classes"])
    if (c["kind"] == "heap") cls[c["name"]] = c;
  REQUIRE(cls.count("200 B"));
  REQUIRE(cls.count("600 B"));
  const json& grown = cls["200 B"]["counts"];
  for (size_t i = 1; i < grown.size(); ++i) CHECK(grown[i].get<long>() > grown[i - 1].get<long>());
  CHECK(cls["200 B"]["only_grows"] == true);
  CHECK(cls["200 B"]["slope"].get<double>() > 0);
  CHECK(cls["600 B"]["only_grows"] == false);
  CHECK(cls["600 B"]["slope"].get<double>() == 0);
  for (const auto& v : cls["600 B"]["counts"]) CHECK(v == cls["600 B"]["counts"][0]);
  json first_heap;
  for (const auto& c : j["classes"])
    if (c["kind"] == "heap" && first_heap.is_null()) first_heap = c;
  CHECK(first_heap["name"] == "200 B");  // steepest first

  // Text, --fail-on, and diff of two saved summaries (no core needed).
  args.pop_back();
  auto txt = lrtest::leakref(args);
  REQUIRE(txt.status == 0);
  size_t only = txt.out.find("\nonly grow (");
  REQUIRE(only != std::string::npos);
  CHECK(txt.out.find("200 B", only) < txt.out.find("\nsteepest growth:"));
  args.push_back("--fail-on");
  args.push_back("grows");
  CHECK(lrtest::leakref(args).status == 1);
  auto df = lrtest::leakref({"diff", snaps[0], snaps[3], "--json"});
  REQUIRE(df.status == 0);
  json dj = df.json();
  for (const auto& c : dj["classes"])
    if (c["name"] == "200 B") CHECK(c["delta"] == grown[3].get<long>() - grown[0].get<long>());

  // Inputs that do not fit.
  CHECK(lrtest::leakref({"trend", snaps[0]}).status == 2);
  const auto& g = two_moments();
  if (g.why_not.empty()) {
    // leakref snapshot itself: what leakref-snap saved, from a core.
    auto one = lrtest::leakref({"snapshot", g.core2, "--json"});
    REQUIRE(one.status == 0);
    json oj = one.json();
    CHECK(oj["kind"] == "core");
    CHECK(oj["time"].get<double>() > 0);
    CHECK(!oj["build_id"].get<std::string>().empty());
    auto otxt = lrtest::leakref({"snapshot", g.core2});
    CHECK(otxt.out.find("classes, 0 objects") != std::string::npos);
    CHECK(otxt.out.find("\nheap      200 B ") != std::string::npos);
    auto other = lrtest::leakref({"trend", snaps[0], g.core1});
    CHECK(other.status == 2);
    CHECK(other.err.find("not snapshots of one program") != std::string::npos);
  }
  lrtest::write_file(d + "/bad.json", "{\"schema\": \"leakref.snapshot/1\", \"kind\": \"core\"}");
  auto bad = lrtest::leakref({"trend", snaps[0], d + "/bad.json"});
  CHECK(bad.status == 3);
  CHECK(bad.err.find("bad.json: not a leakref.snapshot/1") != std::string::npos);

  // The HTML report: one file, an SVG plot per growing class, and it renders.
  std::string html = d + "/report.html";
  args = {"trend", snaps[0], snaps[1], snaps[2], snaps[3], "--html", html};
  REQUIRE(lrtest::leakref(args).status == 0);
  std::string page = lrtest::read_file(html);
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("src=") == std::string::npos);  // nothing fetched
  CHECK(page.find("<title>heap 200 B</title>") != std::string::npos);
  // Every SVG is well-formed XML.
  auto xml = lrtest::run({"/usr/bin/python3", "-c",
                          "import re,sys,xml.dom.minidom as m\n"
                          "p=open(sys.argv[1]).read()\n"
                          "s=re.findall(r'<svg.*?</svg>',p,re.S)\n"
                          "[m.parseString(x) for x in s]\n"
                          "print(len(s))",
                          html});
  INFO(xml.err);
  REQUIRE(xml.status == 0);
  CHECK(std::stoi(xml.out) >= 1);
  if (!lrtest::have_program("chromium")) {
    FAIL("chromium is not installed (make test installs it): the report's rendering is untested");
  }
  long blank = lrtest::screenshot("about:blank", d + "/blank.png");
  long shot = lrtest::screenshot("file://" + html, d + "/report.png");
  INFO("screenshot bytes: report " << shot << ", blank page " << blank);
  REQUIRE(blank > 0);
  REQUIRE(shot > 0);
  CHECK(shot > 4 * blank);  // plots and text, not an empty page
}

// The README's series example, executed as written on a live fx_steady (times,
// counts and slopes aside: they differ from run to run).
TEST_CASE("README: the series example runs as written", "[diff][series][docs]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  std::string part = lrtest::readme_section("series");
  REQUIRE(!part.empty());
  std::string dir = lrtest::tmp_dir() + "/readme-series";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_steady")});
  REQUIRE(lrtest::wait_for_text(fx.out_path, "READY", 30));
  auto norm = [](const std::string& s) {
    std::string t = std::regex_replace(s, std::regex("[0-9]+(\\.[0-9]+)?"), "N");
    return std::regex_replace(t, std::regex(" +"), " ");
  };
  size_t commands = 0;
  for (const auto& [cmd, want] : lrtest::readme_commands(part)) {
    INFO(cmd);
    auto r =
        lrtest::run({"/bin/bash", "-c",
                     "cd '" + dir + "' && export PID=" + std::to_string(fx.pid) + " && PATH='" +
                         lrtest::build_dir() + "':'" + LR_SOURCE_DIR + "/scripts':$PATH " + cmd},
                    300);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(norm(r.out) == norm(want));
    ++commands;
  }
  lrtest::finish(fx, SIGKILL);
  CHECK(commands == 2);
  CHECK(lrtest::read_file(dir + "/report.html").find("<svg") != std::string::npos);
}

namespace {
// Three cores of fx_steady 0.3 s apart in `dir` (it only grows).
std::vector<std::string> steady_series(const std::string& dir) {
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_steady")});
  REQUIRE(lrtest::wait_for_text(fx.out_path, "READY", 30));
  std::vector<std::string> cores;
  for (int i = 1; i <= 3; ++i) {
    usleep(300000);
    std::string p = dir + "/c" + std::to_string(i);
    auto g = lrtest::run({"gcore", "-o", p, std::to_string(fx.pid)}, 120);
    if (g.status != 0) lrtest::finish(fx, SIGKILL);
    REQUIRE(g.status == 0);
    cores.push_back(p + "." + std::to_string(fx.pid));
  }
  lrtest::finish(fx, SIGKILL);
  return cores;
}
}  // namespace

// trend orders by when each input was taken and says where that came from;
// copies made in another order carry the copy's mtime, so --order args keeps
// the order given, and both say when the two orders disagree. The same dump
// twice is named.
TEST_CASE("trend: the order, where each time came from, the same dump twice", "[diff][series]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  std::string d = lrtest::tmp_dir() + "/order";
  std::vector<std::string> cores = steady_series(d);
  // Copied newest first: the copies' mtimes run backwards.
  std::vector<std::string> copies(3);
  for (int i = 2; i >= 0; --i) {
    copies[i] = d + "/copy" + std::to_string(i + 1);
    REQUIRE(lrtest::run({"/bin/cp", cores[i], copies[i]}).status == 0);
    usleep(20000);
  }
  auto by_time = lrtest::leakref({"trend", copies[0], copies[1], copies[2], "--json"});
  REQUIRE(by_time.status == 0);
  json bj = by_time.json();
  std::string w = bj["warnings"].dump();
  CHECK(w.find("ordered by when each was taken (file modification times") != std::string::npos);
  CHECK(w.find("--order args keeps that order") != std::string::npos);
  CHECK(bj["snapshots"][0]["source"] == copies[2]);
  CHECK(bj["snapshots"][0]["time_from"] == "file mtime");
  auto args = lrtest::leakref({"trend", copies[0], copies[1], copies[2], "--order", "args"});
  REQUIRE(args.status == 0);
  CHECK(args.out.find("file mtime") != std::string::npos);
  CHECK(args.out.find("\nonly grow (") != std::string::npos);  // fx_steady only grows
  CHECK(args.err.find("would order 2 of them differently; kept in the order given") !=
        std::string::npos);
  auto twice = lrtest::leakref({"trend", cores[0], cores[0], cores[1]});
  CHECK(twice.err.find(cores[0] + " and " + cores[0] + " have the same count in every class") !=
        std::string::npos);
  CHECK(lrtest::leakref({"trend", cores[0], cores[1], "--order", "size"}).status == 2);
}

// A saved snapshot is checked member by member: hostile numbers are refused
// in one line naming the member, never read as counts (2^64-1 was -1,
// INT64_MIN made a class grow by 2^63, duplicated classes were summed, a
// nonsense time became null) and JSON that is not an object is not called a
// core.
TEST_CASE("saved snapshots: hostile members are refused, not counted", "[diff][hostile]") {
  std::string d = lrtest::tmp_dir() + "/badsnap";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", d}).status == 0);
  auto doc = [](const std::string& classes, const std::string& time) {
    return "{\"schema\":\"leakref.snapshot/1\",\"source\":\"x\",\"kind\":\"core\","
           "\"build_id\":null,\"time\":" +
           time + ",\"classes\":[" + classes + "],\"objects\":[],\"warnings\":[]}";
  };
  std::string good_cls = "{\"kind\":\"heap\",\"name\":\"200 B\",\"count\":3,\"bytes\":600}";
  lrtest::write_file(d + "/good.json", doc(good_cls, "1764000000"));
  struct Case {
    std::string name, text, says;
  };
  std::vector<Case> cases = {
      {"huge",
       doc("{\"kind\":\"heap\",\"name\":\"200 B\",\"count\":18446744073709551615,"
           "\"bytes\":null}",
           "1764000001"),
       "'count' is 18446744073709551615, not an integer from 0 to"},
      {"negative",
       doc("{\"kind\":\"heap\",\"name\":\"200 B\",\"count\":-9223372036854775808,\"bytes\":null}",
           "1764000001"),
       "'count' is -9223372036854775808, not an integer"},
      {"twice", doc(good_cls + "," + good_cls, "1764000001"), "class heap '200 B' is listed twice"},
      {"time", doc(good_cls, "\"yesterday\""), "'time' is \"yesterday\", not seconds since 1970"},
      {"array", "[1,2,3]", "the document is not a JSON object"},
      {"missing", "{\"schema\":\"leakref.snapshot/1\",\"kind\":\"core\"}", "'source' is missing"},
  };
  for (const auto& c : cases) {
    std::string f = d + "/" + c.name + ".json";
    lrtest::write_file(f, c.text);
    for (const char* cmd : {"diff", "trend"}) {
      auto r = lrtest::leakref({cmd, d + "/good.json", f});
      INFO(c.name << " " << cmd << ": " << r.out << r.err);
      CHECK(r.status == 3);
      CHECK(r.out.empty());
      CHECK(r.err.find(f + ": not a leakref.snapshot/1: " + c.says) != std::string::npos);
      CHECK(r.err.find("json.exception") == std::string::npos);
    }
  }
}

// A dump leakref could not count whole is unknown in a diff, a series and a
// batch row, never zero: a truncated core against a good one made "3
// classes shrank", a series with one made a class "only grow" from 0, and
// batch stored it as ok with 0 classes.
TEST_CASE("a dump not counted whole is unknown in diff, trend and batch, never zero",
          "[diff][hostile]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  std::string d = lrtest::tmp_dir() + "/partial";
  std::vector<std::string> cores = steady_series(d);
  std::string half = d + "/half.core";
  REQUIRE(lrtest::run({"/bin/sh", "-c",
                       "head -c $(( $(stat -c %s '" + cores[1] + "') / 2 )) '" + cores[1] +
                           "' > '" + half + "'"})
              .status == 0);
  auto df = lrtest::leakref({"diff", cores[0], half, "--json"});
  INFO(df.err);
  REQUIRE(df.status == 0);
  json dj = df.json();
  CHECK(dj["summary"]["shrank"] == 0);
  CHECK(dj["summary"]["grew"] == 0);
  CHECK(dj["summary"]["unknown"].get<int>() > 0);
  CHECK(dj["warnings"].dump().find("heap is unknown in " + half) != std::string::npos);
  CHECK(dj["warnings"].dump().find(half + " does not say its build-id") != std::string::npos);

  auto tr = lrtest::leakref({"trend", cores[0], half, cores[1], cores[2], "--order", "args",
                             "--fail-on", "grows", "--json"});
  INFO(tr.err);
  CHECK(tr.status == 0);  // no class is said to only grow from a part
  json tj = tr.json();
  for (const auto& c : tj["classes"]) CHECK(c["kind"] != "heap");
  CHECK(tj["warnings"].dump().find("heap classes are not counted whole in 1 of 4 inputs") !=
        std::string::npos);
  auto good = lrtest::leakref({"trend", cores[0], cores[1], cores[2], "--fail-on", "grows"});
  CHECK(good.status == 1);  // the same series whole: fx_steady's 200-byte class only grows

  auto b = lrtest::leakref({"batch", "one", half});
  REQUIRE(b.status == 0);
  json bj = b.json();
  CHECK(bj["status"] == "partial");
  CHECK(bj["error"].get<std::string>().find("heap, account not counted whole") !=
        std::string::npos);
}

namespace {

// fx_frag's cores at its two checkpoints, in one mode (frag, leak, held).
struct FragCores {
  std::string core1, core2;
  json manifest;
};

FragCores frag_cores(const std::string& mode) {
  FragCores f;
  const std::string dir = lrtest::tmp_dir() + "/frag-" + mode;
  lrtest::run({"/bin/mkdir", "-p", dir});
  const std::string go = dir + "/go", man = dir + "/manifest.json";
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_frag"), man, go, mode});
  const std::string pid = std::to_string(fx.pid);
  bool ok = lrtest::wait_for_text(fx.out_path, "CP1", 30) &&
            lrtest::run({"gcore", "-o", dir + "/c1", pid}, 120).status == 0;
  lrtest::write_file(go, "go");
  ok = ok && lrtest::wait_for_text(fx.out_path, "CP2", 30) &&
       lrtest::run({"gcore", "-o", dir + "/c2", pid}, 120).status == 0;
  lrtest::finish(fx, SIGKILL);
  REQUIRE(ok);
  f.core1 = dir + "/c1." + pid;
  f.core2 = dir + "/c2." + pid;
  f.manifest = json::parse(lrtest::read_file(man));
  return f;
}

int64_t class_delta(const json& d, const std::string& kind, const std::string& name) {
  for (const auto& c : d["classes"])
    if (c["kind"] == kind && c["name"] == name)
      return c["after_bytes"].get<int64_t>() - c["before_bytes"].get<int64_t>();
  FAIL("no class " << kind << " " << name);
  return 0;
}

}  // namespace

// The account's categories are classes of diff, and its verdict tells memory
// the allocator keeps from a leak and from memory still held: free and in-use
// bytes against the fixture's own mallinfo2() at each checkpoint (the tcache's
// few entries are free to leakref and in use to mallinfo2).
TEST_CASE("diff: the account's classes and its verdict: fragmentation, leak, held",
          "[diff][account]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  for (const std::string mode : {"frag", "leak", "held"}) {
    INFO(mode);
    const FragCores f = frag_cores(mode);
    auto r = lrtest::leakref({"diff", f.core1, f.core2, "--json"}, 120);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const json d = r.json();
    const json& m = f.manifest;
    const int64_t fordblks =
        m["cp2"]["fordblks"].get<int64_t>() - m["cp1"]["fordblks"].get<int64_t>();
    const int64_t uordblks =
        m["cp2"]["uordblks"].get<int64_t>() - m["cp1"]["uordblks"].get<int64_t>();
    const int64_t free_ = class_delta(d, "account", "free");
    // mallinfo2 counts a chunk in use by its size: usable bytes and header.
    const int64_t in_use = class_delta(d, "account", "live") + class_delta(d, "account", "leaked") +
                           class_delta(d, "account", "overhead");
    CHECK(std::abs(free_ - fordblks) < 65536);
    CHECK(std::abs(in_use - uordblks) < 65536);
    REQUIRE(d["verdict"].is_object());
    const std::string want = mode == "frag" ? "fragmentation" : mode;
    CHECK(d["verdict"]["kind"] == want);
    auto t = lrtest::leakref({"diff", f.core1, f.core2}, 120);
    CHECK(t.out.find("verdict: " + want + ": ") != std::string::npos);
    // trend says the same from the first snapshot to the last.
    auto tr = lrtest::leakref({"trend", f.core1, f.core2, "--order", "args", "--json"}, 120);
    INFO(tr.err);
    REQUIRE(tr.status == 0);
    CHECK(tr.json()["verdict"]["kind"] == want);
  }
}
