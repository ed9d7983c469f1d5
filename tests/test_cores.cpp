// Integration tests on real cores: fixtures run, gcore snapshots them, and
// leakref's JSON must equal each fixture's manifest exactly.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <unistd.h>

#include "harness.hpp"

using lrtest::leakref;
using nlohmann::json;

namespace {

const lrtest::FixtureCore* structs_core(bool pie) {
  if (!lrtest::have_gcore()) return nullptr;
  return pie ? &lrtest::fixture_core("structs_pie", lrtest::fixture_path("fx_structs_pie"))
             : &lrtest::fixture_core("structs", lrtest::fixture_path("fx_structs"));
}

// Runs `leakref walk` and checks objects (order, addresses, refcounts) and
// the histogram against manifest entry `m`.
json check_walk(const std::string& core, const json& m, std::vector<std::string> how) {
  std::vector<std::string> args = {"walk",    core,     "--json", "--type",
                                   m["type"], "--head", m["head"]};
  args.insert(args.end(), how.begin(), how.end());
  auto r = leakref(args);
  INFO("leakref " << json(args).dump() << "\nstderr: " << r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  REQUIRE(j["schema"] == "leakref.walk/1");
  const json& want = m["objects"];
  const json& got = j["objects"];
  REQUIRE(got.size() == want.size());
  std::map<std::string, uint64_t> hist;
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("object " << i);
    CHECK(got[i]["addr"] == want[i]["addr"]);
    CHECK(got[i]["refcount"] == want[i]["refcount"]);
    hist[std::to_string(want[i]["refcount"].get<long>())]++;
  }
  json wh = json::object();
  for (auto& [k, v] : hist) wh[k] = v;
  CHECK(j["summary"]["histogram"] == wh);
  CHECK(j["summary"]["visited"] == want.size());
  return j;
}

}  // namespace

TEST_CASE("walks on a non-PIE and a PIE core match the manifest exactly", "[core]") {
  for (bool pie : {false, true}) {
    const auto* fc = structs_core(pie);
    if (!fc) LR_SKIP("gcore (gdb) is not installed: core tests need it");
    const json& s = fc->manifest["structures"];
    INFO((pie ? "PIE" : "non-PIE"));
    auto j = check_walk(fc->core, s["list"], {"--list-member", "link", "--refcount", "ref"});
    CHECK(j["mode"] == "list");
    CHECK(j["summary"]["stop"] == "end");
    j = check_walk(fc->core, s["hash"], {"--hlist-member", "hnode", "--refcount", "ref"});
    CHECK(j["mode"] == "hash:hlist");
    CHECK(j["summary"]["buckets"] == 64);
    check_walk(fc->core, s["chain"], {"--next", "next", "--refcount", "ref.refcount.refs.counter"});
    j = check_walk(fc->core, s["chain_buckets"], {"--next", "next", "--refcount", "ref"});
    CHECK(j["mode"] == "hash:chain");
    check_walk(fc->core, s["table"], {"--pointer-array", "--refcount", "ref"});
    check_walk(fc->core, s["array"], {"--array", "--refcount", "ref"});
    // The deliberate cycle: all 10 distinct nodes once, the loop named.
    j = check_walk(fc->core, s["cycle"], {"--next", "next", "--refcount", "ref"});
    CHECK(j["summary"]["stop"] == "cycle");
    CHECK(j["summary"]["cycle"]["start"] == s["cycle"]["cycle_start"]);
    CHECK(j["summary"]["cycle"]["length"] == 6);
  }
}

TEST_CASE("fields, filters and fail-on", "[core]") {
  const auto* fc = structs_core(true);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  const json& list = fc->manifest["structures"]["list"];
  auto r = leakref({"walk", fc->core, "--json", "--type", "struct obj", "--head", "obj_list",
                    "--list-member", "link", "--refcount", "ref", "--show",
                    "name,state,flags,prio,gfid,lo,u.l,label,link.next->next", "--where",
                    "refcount>1 && state==7"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  size_t leaked = 0;
  for (auto& o : list["objects"]) leaked += o["refcount"].get<int>() > 1;
  REQUIRE(j["summary"]["matched"] == leaked);
  REQUIRE(leaked > 0);
  for (auto& o : j["objects"]) {
    CHECK(o["refcount"].get<int>() > 1);
    CHECK(o["fields"]["state"] == "OBJ_DEAD");
    CHECK(o["fields"]["label"] == "list");  // char* into .rodata: filled from the file
    std::string name = o["fields"]["name"];
    long id = std::stol(name.substr(5));
    CHECK(o["fields"]["flags"] == (id & 7));
    CHECK(o["fields"]["prio"] == (id & 31));
    CHECK(o["fields"]["lo"] == -id);
    CHECK(o["fields"]["u.l"] == id * 1000);
    char gfid[40];
    std::snprintf(gfid, sizeof gfid, "%02lx%02lx%02lx%02lx-", (id * 16) & 255, (id * 16 + 1) & 255,
                  (id * 16 + 2) & 255, (id * 16 + 3) & 255);
    CHECK(o["fields"]["gfid"].get<std::string>().rfind(gfid, 0) == 0);
  }
  r = leakref({"walk", fc->core, "--type", "struct obj", "--head", "obj_list", "--list-member",
               "link", "--refcount", "ref", "--where", "refcount>1", "--fail-on", "match"});
  CHECK(r.status == 1);
  r = leakref({"walk", fc->core, "--type", "struct obj", "--head", "cyc_head", "--next", "next",
               "--fail-on", "cycle", "--summary"});
  CHECK(r.status == 1);
  CHECK(r.out.find("stopped: cycle") != std::string::npos);
  r = leakref({"walk", fc->core, "--type", "struct obj", "--head", "obj_list", "--list-member",
               "link", "--refcount", "ref", "--limit", "5", "--json"});
  CHECK(r.json()["summary"]["stop"] == "limit");
  CHECK(r.json()["objects"].size() == 5);
}

TEST_CASE("show and sym agree with the manifest", "[core]") {
  const auto* fc = structs_core(false);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  const json& first = fc->manifest["structures"]["list"]["objects"][0];
  auto r = leakref({"show", fc->core, first["addr"], "--type", "struct obj", "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json v = r.json()["value"];
  CHECK(v["ref"]["refcount"]["refs"]["counter"] == first["refcount"]);
  CHECK(v["name"] == "list-1");
  r = leakref({"show", fc->core, first["addr"], "--type", "struct obj"});
  CHECK(r.out.find("struct obj {") == 0);
  CHECK(r.out.find("name = \"list-1\"") != std::string::npos);
  CHECK(r.out.find("state = OBJ_ACTIVE (1)") != std::string::npos);

  r = leakref({"sym", fc->core, "obj_list", "--json"});
  REQUIRE(r.status == 0);
  std::string addr = r.json()["addr"];
  CHECK(r.json()["type"] == "struct list_head");
  CHECK(r.json()["symbol"] == "obj_list");
  r = leakref({"sym", fc->core, addr});
  CHECK(r.out.find("obj_list [fx_structs]") != std::string::npos);
  // Both ways round, the symbol's name is under one key.
  r = leakref({"sym", fc->core, addr, "--json"});
  CHECK(r.json()["symbol"] == "obj_list");
  CHECK(r.json()["offset"] == 0);
  r = leakref({"sym", fc->core, "no_such_symbol_xyz"});
  CHECK(r.status == 4);
  CHECK(r.err.find("no_such_symbol_xyz") != std::string::npos);
}

TEST_CASE("info reports threads, modules, debuginfo and segments", "[core]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& fc = lrtest::fixture_core("threads", lrtest::fixture_path("fx_threads"));
  auto r = leakref({"info", fc.core, "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["threads"].size() == fc.manifest["structures"]["threads"]["count"]);
  CHECK(j["pid"] == fc.manifest["pid"]);
  CHECK(j["truncated"] == false);
  bool exe_found = false, libc = false;
  for (auto& m : j["modules"]) {
    if (m["is_exe"] == true) {
      exe_found = true;
      CHECK(m["debuginfo_source"] == "embedded");
      CHECK(m["path"] == fc.exe);
    }
    if (m["path"].get<std::string>().find("libc.so") != std::string::npos) libc = true;
  }
  CHECK(exe_found);
  CHECK(libc);
  CHECK(j["bytes"]["files"].get<uint64_t>() > 0);  // rodata/text filled from disk
  // Each thread's list, walked by the address the fixture printed.
  for (int t = 0; t < 4; ++t) {
    const json& m = fc.manifest["structures"]["thread" + std::to_string(t)];
    check_walk(fc.core, m, {"--list-member", "link", "--refcount", "refcount"});
  }
  r = leakref({"info", fc.core});
  CHECK(r.out.find("threads:     5") != std::string::npos);
}

TEST_CASE("a structure inside a dlopen()ed shared library", "[core]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& fc = lrtest::fixture_core("shlib", lrtest::fixture_path("fx_shlib"),
                                        {lrtest::fixture_path("libfxshared.so")});
  const json& m = fc.manifest["structures"]["shared"];
  check_walk(fc.core, m, {"--list-member", "link", "--refcount", "refcount"});
  json m2 = m;
  m2["head"] = "shared_list@libfxshared.so";
  check_walk(fc.core, m2, {"--list-member", "link", "--refcount", "refcount"});
}

// The expression language against the manifest: each condition is
// recomputed here from the fixture's own values (obj_new sets flags = id & 7,
// state = OBJ_DEAD iff refs > 1, lo = -id).
TEST_CASE("where: enum names, !, bit tests, arithmetic, wrappers, strings", "[core]") {
  const auto* fc = structs_core(true);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  const json& list = fc->manifest["structures"]["list"]["objects"];
  struct Case {
    const char* where;
    std::function<bool(long id, long refs)> want;
  };
  std::vector<Case> cases = {
      {"state == OBJ_DEAD", [](long, long r) { return r > 1; }},
      {"state == \"OBJ_DEAD\"", [](long, long r) { return r > 1; }},
      {"!(state == OBJ_DEAD)", [](long, long r) { return r <= 1; }},
      {"flags & 4", [](long id, long) { return (id & 4) != 0; }},
      {"flags & 4 == 0", [](long id, long) { return (id & 4) == 0; }},
      {"(flags | 1) == 3 || prio % 5 == 0",
       [](long id, long) { return ((id & 7) | 1) == 3 || (id & 31) % 5 == 0; }},
      {"lo * -2 == hi + hi && ref > 1", [](long, long r) { return r > 1; }},
      {"ref.refcount == 3", [](long, long r) { return r == 3; }},  // refcount_t descends
      {"u.l / 1000 - 2 >= 3 && label == \"list\"", [](long id, long) { return id - 2 >= 3; }},
      {"$addr != 0 && name != \"list-4\"", [](long id, long) { return id != 4; }},
      {"next == 0 || next.ref > 0", [](long, long) { return true; }},  // '.' through a pointer
  };
  for (const auto& c : cases) {
    auto r = leakref({"walk", fc->core, "--json", "--type", "struct obj", "--head", "obj_list",
                      "--list-member", "link", "--refcount", "ref", "--show", "name", "--where",
                      c.where});
    INFO(c.where << "\n" << r.err);
    REQUIRE(r.status == 0);
    std::vector<std::string> want, got;
    json j = r.json();
    for (const auto& o : j["objects"]) got.push_back(o["addr"]);
    // Recompute from a full walk's names (list-ID) and refcounts.
    auto all = leakref({"walk", fc->core, "--json", "--type", "struct obj", "--head", "obj_list",
                        "--list-member", "link", "--refcount", "ref", "--show", "name"});
    json jall = all.json();
    REQUIRE(jall["objects"].size() == list.size());
    for (const auto& o : jall["objects"]) {
      long id = std::stol(o["fields"]["name"].get<std::string>().substr(5));
      if (c.want(id, o["refcount"].get<long>())) want.push_back(o["addr"]);
    }
    CHECK(got == want);
    CHECK(j["warnings"].empty());
  }
  // Refused with one clear message (exit 2 or 4), never a silent 0 matches.
  struct Bad {
    const char* where;
    const char* says;
    int status;
  };
  for (const Bad& b :
       std::vector<Bad>{{"link > 1", "struct list_head, not a number", 2},
                        {"state == OBJ_BOGUS", "no member 'OBJ_BOGUS'", 4},
                        {"naem == \"x\"", "did you mean 'name'", 4},
                        {"name < \"x\"", "only compares with == or !=", 2},
                        {"state == \"NOPE\"", "not an enumerator of enum obj_state", 4},
                        {"refcount > (1", "expected ')'", 2},
                        {"$nope > 1", "unknown variable '$nope'", 4}}) {
    auto r = leakref({"walk", fc->core, "--type", "struct obj", "--head", "obj_list",
                      "--list-member", "link", "--refcount", "ref", "--where", b.where});
    INFO(b.where << "\n" << r.err);
    CHECK(r.status == b.status);
    CHECK(r.err.find(b.says) != std::string::npos);
    CHECK(r.out.empty());
  }
  // An evaluation error (a NULL pointer on the path) is a warning, not hidden.
  auto r = leakref({"walk", fc->core, "--json", "--type", "struct obj", "--head", "obj_list",
                    "--list-member", "link", "--where", "next->ref > 0"});
  REQUIRE(r.status == 0);
  REQUIRE(r.json()["warnings"].size() == 1);
  CHECK(r.json()["warnings"][0].get<std::string>().find("NULL") != std::string::npos);
}

TEST_CASE("command line: typos, help SUBCOMMAND, one value per option", "[core][cli]") {
  auto r = leakref({"wlak"});
  CHECK(r.status == 2);
  CHECK(r.err == "leakref: error: unknown subcommand 'wlak'; did you mean 'walk'?\n");
  r = leakref({"kernel", "--vmcore", "/nonexistent", "indoes"});
  CHECK(r.status == 2);
  CHECK(r.err == "leakref: error: unknown subcommand 'indoes'; did you mean 'inodes'?\n");
  r = leakref({"help", "walk"});
  CHECK(r.status == 0);
  CHECK(r.out.find("Usage: leakref walk [OPTIONS] core") != std::string::npos);
  r = leakref({"help", "types", "build"});
  CHECK(r.status == 0);
  CHECK(r.out.find("Usage: leakref types build") != std::string::npos);
  // A kernel subcommand's own usage, with no dump at hand.
  for (auto args : {std::vector<std::string>{"help", "kernel", "inodes"},
                    std::vector<std::string>{"kernel", "inodes", "--help"}}) {
    r = leakref(args);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find("Usage: leakref kernel inodes [OPTIONS]") != std::string::npos);
    CHECK(r.out.find("--super-block") != std::string::npos);
  }
  r = leakref({"kernel", "inodes"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--vmcore is required") != std::string::npos);

  const auto* fc = structs_core(true);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  // --fail-on and --show before the core: each takes its one value.
  r = leakref({"walk", "--fail-on", "cycle", fc->core, "--type", "struct obj", "--head", "cyc_head",
               "--next", "next", "--show", "name", "--show", "ref", "--summary"});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.out.find("stopped: cycle") != std::string::npos);
  // Bare type names, as crash and gdb users write them.
  auto bare = leakref(
      {"walk", fc->core, "--type", "obj", "--head", "obj_list", "--list-member", "link", "--json"});
  auto tagged = leakref({"walk", fc->core, "--type", "struct obj", "--head", "obj_list",
                         "--list-member", "link", "--json"});
  REQUIRE(bare.status == 0);
  CHECK(bare.json()["objects"] == tagged.json()["objects"]);
  CHECK(bare.json()["objects"].size() == fc->manifest["structures"]["list"]["objects"].size());
  // Nothing readable where the walk starts: a failed lookup (4), not an
  // empty histogram with exit 0.
  for (auto how : {std::vector<std::string>{"--list-member", "link"},
                   {"--next", "next"},
                   {"--array", "--count", "3"}}) {
    std::vector<std::string> args = {"walk", fc->core, "--type", "struct obj", "--head", "0x10"};
    args.insert(args.end(), how.begin(), how.end());
    r = leakref(args);
    INFO(how[0]);
    CHECK(r.status == 4);
    CHECK(r.out.empty());
    CHECK(r.err.rfind("leakref: error: the walk cannot start: ", 0) == 0);
  }
}

namespace {

// Peak RSS (KiB) of `leakref ARGS > /dev/null`, measured by /usr/bin/time.
long peak_kib(const std::vector<std::string>& args) {
  std::string tf = lrtest::tmp_dir() + "/time.out";
  std::vector<std::string> argv = {
      "/usr/bin/time", "-f", "%M", "-o", tf, lrtest::build_dir() + "/leakref"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string cmd;
  for (const auto& a : argv) cmd += "'" + a + "' ";
  auto r = lrtest::run({"/bin/sh", "-c", cmd + "> /dev/null"}, 120);
  REQUIRE(r.status == 0);
  return std::stol(lrtest::read_file(tf));
}

}  // namespace

TEST_CASE("walk output streams: JSON, JSON lines and text carry the same objects",
          "[core][stream]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  if (!lrtest::have_program("time") && access("/usr/bin/time", X_OK) != 0)
    LR_SKIP("/usr/bin/time is not installed (make test installs it)");
  const auto& fc = lrtest::fixture_core("big300k", lrtest::fixture_path("fx_big"), {"300000"});
  std::vector<std::string> walk = {"walk",       fc.core,    "--type",        "struct bnode",
                                   "--head",     "big_list", "--list-member", "link",
                                   "--refcount", "refcount"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = walk;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  auto j = leakref(with({"--json"}));
  REQUIRE(j.status == 0);
  json jj = j.json();
  const json& objs = jj["objects"];
  REQUIRE(objs.size() == 300000);
  CHECK(jj["summary"]["visited"] == 300000);
  CHECK(!jj["summary"].contains("walk_ns"));  // timing only with --stats: reproducible output
  CHECK(leakref(with({"--json", "--summary", "--stats"})).json()["summary"].contains("walk_ns"));
  json hist = json::object();
  for (const auto& o : objs)
    hist[std::to_string(o["refcount"].get<long>())] =
        hist.value(std::to_string(o["refcount"].get<long>()), 0) + 1;
  json want_hist = json::object();
  for (const auto& [k, v] : fc.manifest["structures"]["list"]["histogram"].items())
    if (v.get<long>()) want_hist[k] = v;
  CHECK(hist == want_hist);

  // JSON lines: a walk record, one per object, the summary.
  auto l = leakref(with({"--jsonl"}));
  REQUIRE(l.status == 0);
  std::istringstream ls(l.out);
  std::string line;
  size_t n = 0;
  json first, last;
  while (std::getline(ls, line)) {
    json r = json::parse(line);
    if (r["record"] == "object") {
      REQUIRE(n < objs.size());
      CHECK(r["addr"] == objs[n]["addr"]);
      CHECK(r["refcount"] == objs[n]["refcount"]);
      ++n;
    } else if (first.is_null()) {
      first = r;
    } else {
      last = r;
    }
  }
  CHECK(n == objs.size());
  CHECK(first["record"] == "walk");
  CHECK(last["record"] == "summary");
  CHECK(last["summary"]["visited"] == 300000);

  // Text: a header, then aligned columns with no name= in the cells.
  auto t = leakref(walk);
  REQUIRE(t.status == 0);
  std::istringstream ts(t.out);
  std::getline(ts, line);
  CHECK(line.rfind("ADDR", 0) == 0);
  CHECK(line.find("REFCOUNT") != std::string::npos);
  size_t col = line.find("REFCOUNT") + 8;
  for (size_t i = 0; i < objs.size(); ++i) {
    std::getline(ts, line);
    if (line.size() != col || line.rfind(objs[i]["addr"].get<std::string>(), 0) != 0 ||
        std::stol(line.substr(col - 8)) != objs[i]["refcount"].get<long>()) {
      FAIL("text row " << i << " is '" << line << "', JSON has " << objs[i].dump());
    }
  }

  // Output memory is flat: the objects are not held (a JSON tree of 300,000
  // objects took ~160 MiB more).
  long summary = peak_kib(with({"--json", "--summary"}));
  long full = peak_kib(with({"--json"}));
  INFO("peak RSS: --summary " << summary << " KiB, every object " << full << " KiB");
  CHECK(full - summary < 24 * 1024);
}

// Issue 16: "the summary first when output is long". Long text output (more
// rows than the 256 that size the columns) puts the summary first on a
// terminal or with --summary-first; the rows are then those of a second walk.
TEST_CASE("walk text: the summary first when the output is long", "[core][stream]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& fc = lrtest::fixture_core("big300k", lrtest::fixture_path("fx_big"), {"300000"});
  std::vector<std::string> walk = {"walk",       fc.core,    "--type",        "struct bnode",
                                   "--head",     "big_list", "--list-member", "link",
                                   "--refcount", "refcount"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = walk;
    a.insert(a.end(), more.begin(), more.end());
    return leakref(a);
  };
  // Splits text output into its rows (header included) and the rest.
  auto split = [](const std::string& out, std::string* rows, std::string* rest) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line))
      (line.rfind("0x", 0) == 0 || line.rfind("ADDR", 0) == 0 ? *rows : *rest) += line + "\n";
  };
  auto last = with({});  // into a pipe: streamed, the summary last
  REQUIRE(last.status == 0);
  CHECK(last.out.rfind("ADDR", 0) == 0);
  auto first = with({"--summary-first"});
  REQUIRE(first.status == 0);
  CHECK(first.err.empty());
  CHECK(first.out.rfind("struct bnode walked as list from big_list (", 0) == 0);
  CHECK(first.out.find(": 300000 visited\nstopped: end\nrefcount histogram (refcount):\n") !=
        std::string::npos);
  size_t hdr = first.out.find("\n\nADDR ");
  REQUIRE(hdr != std::string::npos);
  CHECK(first.out.find("visited") < hdr);
  CHECK(first.out.find("visited", hdr) == std::string::npos);  // said once
  std::string rows_l, rest_l, rows_f, rest_f;
  split(last.out, &rows_l, &rest_l);
  split(first.out, &rows_f, &rest_f);
  CHECK(rows_f == rows_l);  // every row once, in walk order, same columns
  CHECK(std::count(rows_f.begin(), rows_f.end(), '\n') == 300001);
  // The same summary lines, blank lines aside.
  auto lines = [](const std::string& s) {
    std::multiset<std::string> m;
    std::istringstream in(s);
    std::string l;
    while (std::getline(in, l))
      if (!l.empty()) m.insert(l);
    return m;
  };
  CHECK(lines(rest_f) == lines(rest_l));

  // Short output stays rows first: nothing is walked twice.
  CHECK(with({"--limit", "200", "--summary-first"}).out == with({"--limit", "200"}).out);
  // With --sort every object is held: the rest comes from them, sorted.
  auto sorted_l = with({"--sort", "-refcount"});
  auto sorted_f = with({"--sort", "-refcount", "--summary-first"});
  REQUIRE(sorted_f.status == 0);
  CHECK(sorted_f.out.rfind("struct bnode walked", 0) == 0);
  std::string srows_l, srest_l, srows_f, srest_f;
  split(sorted_l.out, &srows_l, &srest_l);
  split(sorted_f.out, &srows_f, &srest_f);
  CHECK(srows_f == srows_l);
  // Groups are counted in the first walk only.
  auto grouped = [&](bool f) {
    auto r = with({"--group-by", "refcount", f ? "--summary-first" : "--summary-last"});
    std::string rows, rest;
    split(r.out, &rows, &rest);
    rest = rest.substr(rest.find("grouped by"));
    return rest.substr(0, rest.find_last_not_of('\n') + 1);
  };
  CHECK(grouped(true) == grouped(false));
  CHECK(with({"--summary-first", "--summary-last"}).status == 2);

  // On a terminal (script(1)) the summary comes first without being asked.
  if (lrtest::have_program("script")) {
    std::string log = lrtest::tmp_dir() + "/summary-first.log", cmd;
    for (const auto& a : walk) cmd += "'" + a + "' ";
    auto t = lrtest::run(
        {"script", "-qec", "'" + lrtest::build_dir() + "/leakref' " + cmd + "--limit 1000", log});
    CHECK(t.status == 0);
    std::string tty = lrtest::read_file(log);
    size_t s = tty.find("struct bnode walked"), h = tty.find("ADDR");
    CHECK(s != std::string::npos);
    CHECK(s < h);
  }
}

TEST_CASE("walk --sort and several --group-by", "[core][stream]") {
  const auto* fc = structs_core(true);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  std::vector<std::string> base = {"walk",       fc->core,   "--type",        "struct obj",
                                   "--head",     "obj_list", "--list-member", "link",
                                   "--refcount", "ref",      "--json"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return leakref(a);
  };
  const json& want = fc->manifest["structures"]["list"]["objects"];
  auto r = with({"--sort", "-refcount", "--show", "prio"});
  REQUIRE(r.status == 0);
  json objs = r.json()["objects"];
  REQUIRE(objs.size() == want.size());
  for (size_t i = 1; i < objs.size(); ++i)
    CHECK(objs[i - 1]["refcount"].get<long>() >= objs[i]["refcount"].get<long>());
  r = with({"--sort", "prio", "--show", "name,prio"});
  objs = r.json()["objects"];
  for (size_t i = 1; i < objs.size(); ++i)
    CHECK(objs[i - 1]["fields"]["prio"].get<long>() <= objs[i]["fields"]["prio"].get<long>());
  // A sort field that is not shown is evaluated but not printed.
  r = with({"--sort", "prio"});
  CHECK(!r.json()["objects"][0].contains("fields"));
  CHECK(with({"--sort", "nosuch"}).status == 4);
  CHECK(with({"--sort", "refcount", "--refcount", ""}).status != 0);

  // Two group-by fields: one group per (state, flags) pair, counts from the manifest.
  r = with({"--group-by", "state", "--group-by", "flags", "--summary"});
  REQUIRE(r.status == 0);
  std::map<std::string, uint64_t> got;
  json groups = r.json()["summary"]["groups"];  // not a temporary in the range-for
  for (const auto& g : groups) got[g["value"]] = g["count"];
  auto all = with({"--show", "state,flags"}).json()["objects"];
  std::map<std::string, uint64_t> expect;
  for (const auto& o : all)
    expect[o["fields"]["state"].get<std::string>() + ", " +
           std::to_string(o["fields"]["flags"].get<long>())]++;
  CHECK(got == expect);
  CHECK(expect.size() > 1);
}

// Places written as gdb, crash and drgn users write them, in --head and show.
TEST_CASE("head expressions: &, *, casts, [], ->, '.' through pointers", "[core][head]") {
  const auto* fc = structs_core(true);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  auto place = [&](const std::string& expr) {
    auto r = leakref({"show", fc->core, expr, "--json", "--depth", "0"});
    INFO(expr << ": " << r.err);
    REQUIRE(r.status == 0);
    json j = r.json();
    return std::make_pair(j["addr"].get<std::string>(), j["type"].get<std::string>());
  };
  auto num = [](const std::string& h) { return std::stoull(h, nullptr, 16); };
  auto list = place("obj_list");
  CHECK(list.second == "struct list_head");
  CHECK(place("&obj_list") == list);
  CHECK(place("*&obj_list") == list);
  CHECK(place("(struct list_head *)&obj_list") == list);
  CHECK(place("*(struct list_head *)" + list.first) == list);
  auto hash = place("obj_hash");
  auto h3 = place("obj_hash[3]");
  CHECK(num(h3.first) == num(hash.first) + 3 * 8);
  CHECK(h3.second == "struct hlist_head");
  const json& objs = fc->manifest["structures"]["list"]["objects"];
  // list.next points at the first object's link; ->next at the second's.
  auto next = place("obj_list.next");
  CHECK(next.second == "struct list_head *");
  auto second = place("obj_list.next->next");
  CHECK(place("obj_list.next.next") == second);  // '.' through a pointer, as gdb allows
  auto first_link = place("*obj_list.next");
  CHECK(first_link.second == "struct list_head");
  uint64_t link_off = num(first_link.first) - num(objs[0]["addr"]);
  CHECK(link_off < 120);
  // A cast reaches an object and its members.
  std::string o0 = objs[0]["addr"];
  auto a = leakref({"show", fc->core, o0, "--type", "struct obj", "--json"});
  auto b = leakref({"show", fc->core, "*(struct obj *)" + o0, "--json"});
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  CHECK(a.json()["value"] == b.json()["value"]);
  auto nm = leakref({"show", fc->core, "((struct obj *)" + o0 + ")->name", "--json"});
  REQUIRE(nm.status == 0);
  CHECK(nm.json()["value"] == a.json()["value"]["name"]);
  // The walk from a cast head equals the manifest.
  auto w =
      leakref({"walk", fc->core, "--json", "--type", "obj", "--head",
               "*(struct list_head *)" + list.first, "--list-member", "link", "--refcount", "ref"});
  REQUIRE(w.status == 0);
  CHECK(w.json()["objects"].size() == objs.size());
  // Refused, each with one line: ambiguous, out of range, not a pointer.
  struct Bad {
    std::string expr, says;
  } bad[] = {{"*obj_list.next+8", "ambiguous"},
             {"obj_hash[999]", "index 999 past the array's 64 elements"},
             {"*obj_hash[1]", "'*' applied to struct hlist_head, not a pointer"},
             {"obj_list->next", "'*' applied to struct list_head, not a pointer"},
             {"(struct obj **)obj_list", "one level of pointer"},
             {"obj_list.nosuch", "nosuch"}};
  for (const auto& x : bad) {
    auto r = leakref({"show", fc->core, x.expr});
    INFO(x.expr << ": " << r.err);
    CHECK((r.status == 2 || r.status == 4));
    CHECK(r.err.find(x.says) != std::string::npos);
    CHECK(r.out.empty());
  }
}

// show --json keeps a struct's members in declaration order, as crash and
// gdb print them (a JSON object had them sorted by name).
TEST_CASE("show --json: members in declaration order; errors as JSON under --json",
          "[core][head]") {
  const auto* fc = structs_core(true);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  std::string o0 = fc->manifest["structures"]["list"]["objects"][0]["addr"];
  auto r = leakref({"show", fc->core, o0, "--type", "struct obj", "--json"});
  REQUIRE(r.status == 0);
  size_t ref = r.out.find("\"ref\""), name = r.out.find("\"name\""), link = r.out.find("\"link\""),
         state = r.out.find("\"state\"");
  CHECK(ref < name);
  CHECK(name < link);
  CHECK(link < state);
  // An error under --json is one line on stderr and leakref.error/1 on stdout.
  auto e = leakref({"walk", fc->core, "--type", "nosuch", "--head", "obj_list", "--list-member",
                    "link", "--json"});
  CHECK(e.status == 4);
  json ej = e.json();
  CHECK(ej["schema"] == "leakref.error/1");
  CHECK(ej["error"]["exit"] == 4);
  CHECK(ej["error"]["message"].get<std::string>().find("type 'nosuch' not found") == 0);
  CHECK(e.err.rfind("leakref: error: type 'nosuch' not found", 0) == 0);
  auto u = leakref({"walk", fc->core, "--type", "obj", "--head", "obj_list", "--list-member",
                    "link", "--where", "x >", "--json"});
  CHECK(u.status == 2);
  CHECK(u.json()["error"]["exit"] == 2);
  // Without --json stdout stays empty.
  CHECK(
      leakref({"walk", fc->core, "--type", "nosuch", "--head", "obj_list", "--list-member", "link"})
          .out.empty());
}

TEST_CASE("a pointer head is not read as a bucket; a struct is not a group key", "[core][head]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& big = lrtest::fixture_core("big300k", lrtest::fixture_path("fx_big"), {"300000"});
  std::vector<std::string> w = {"walk",  big.core,     "--type",   "struct hnode", "--hlist-member",
                                "hnode", "--refcount", "refcount", "--summary",    "--head"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = w;
    a.insert(a.end(), more.begin(), more.end());
    return leakref(a);
  };
  auto p = with({"big_hash"});
  CHECK(p.status == 2);
  CHECK(p.err.find("head 'big_hash' is a pointer (struct hlist_head *), not a hlist_head") !=
        std::string::npos);
  auto one = with({"*big_hash"});
  CHECK(one.status == 0);
  CHECK(one.err.find("is one hlist_head reached through a pointer") != std::string::npos);
  uint64_t buckets = big.manifest["structures"]["hash"]["buckets"];
  auto all = with({"*big_hash", "--buckets", std::to_string(buckets), "--json"});
  REQUIRE(all.status == 0);
  CHECK(all.json()["summary"]["visited"] == 300000);
  CHECK(all.err.empty());

  const auto* fc = structs_core(true);
  REQUIRE(fc);
  std::vector<std::string> base = {"walk",     fc->core,        "--type",    "obj",        "--head",
                                   "obj_list", "--list-member", "link",      "--refcount", "ref",
                                   "--json",   "--summary",     "--group-by"};
  auto g = leakref([&] {
    auto a = base;
    a.push_back("ref");
    return a;
  }());
  REQUIRE(g.status == 0);
  json gj = g.json();
  json groups = gj["summary"]["groups"];
  std::map<std::string, uint64_t> got, want;
  for (const auto& x : groups) got[x["value"]] = x["count"];
  for (const auto& [k, v] : gj["summary"]["histogram"].items()) want[k] = v;
  CHECK(got == want);  // a kref groups by its count, like --refcount reads it
  auto s = leakref([&] {
    auto a = base;
    a.push_back("link");
    return a;
  }());
  CHECK(s.status == 2);
  CHECK(s.err.find("field 'link' is struct list_head, not a value to group or sort by") !=
        std::string::npos);
}

// A progress line on a terminal only: never in a pipe or file.
TEST_CASE("walk progress: on a terminal only, erased when done", "[core][stream]") {
  const auto* fc = structs_core(true);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  std::vector<std::string> w = {lrtest::build_dir() + "/leakref",
                                "walk",
                                fc->core,
                                "--type",
                                "obj",
                                "--head",
                                "obj_list",
                                "--list-member",
                                "link",
                                "--summary"};
  // stderr is a pipe here: nothing but the output.
  auto quiet = lrtest::leakref({w.begin() + 1, w.end()});
  REQUIRE(quiet.status == 0);
  CHECK(quiet.err.empty());
  // Forced on (as on a terminal): drawn, then erased with "\r\x1b[K".
  std::vector<std::string> forced = {"env", "LEAKREF_PROGRESS=always"};
  forced.insert(forced.end(), w.begin(), w.end());
  auto shown = lrtest::run(forced);
  REQUIRE(shown.status == 0);
  CHECK(shown.err.rfind("\rleakref: walking: ", 0) == 0);
  CHECK(shown.err.size() >= 4);
  CHECK(shown.err.substr(shown.err.size() - 4) == "\r\x1b[K");
  CHECK(shown.out == quiet.out);
  // Under a real terminal (script(1)) with the output going to a file, the
  // file holds only the output. Whether the line is drawn depends on the walk
  // outlasting the half-second delay (a loaded machine or a sanitized build
  // may), so the terminal is checked only for being left clean.
  if (lrtest::have_program("script")) {
    std::string out = lrtest::tmp_dir() + "/progress.out", log = lrtest::tmp_dir() + "/tty.log";
    std::string cmd;
    for (const auto& a : w) cmd += "'" + a + "' ";
    auto t = lrtest::run({"script", "-qec", cmd + "> " + out, log});
    CHECK(t.status == 0);
    std::string tty = lrtest::read_file(log);
    auto drawn = tty.rfind("leakref: walking");
    if (drawn != std::string::npos) CHECK(tty.find("\r\x1b[K", drawn) != std::string::npos);
    CHECK(lrtest::read_file(out) == quiet.out);
  }
}

// A misspelt type, symbol, member or option is named with the nearest real one.
TEST_CASE("did you mean: types, symbols, members, options", "[core][cli]") {
  const auto* fc = structs_core(true);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  auto walk = [&](std::vector<std::string> more) {
    std::vector<std::string> a = {"walk", fc->core};
    a.insert(a.end(), more.begin(), more.end());
    return leakref(a);
  };
  struct Case {
    std::vector<std::string> args;
    int status;
    std::string says;
  } cases[] = {
      {{"--type", "struct ojb", "--head", "obj_list", "--list-member", "link"},
       4,
       "did you mean 'struct obj'?"},
      {{"--type", "ojb", "--head", "obj_list", "--list-member", "link"}, 4, "did you mean 'obj'?"},
      {{"--type", "obj", "--head", "obj_lsit", "--list-member", "link"},
       4,
       "symbol 'obj_lsit' not found; did you mean 'obj_list'?"},
      {{"--type", "obj", "--head", "obj_list", "--list-member", "lnik"},
       4,
       "struct obj has no member 'lnik'; did you mean 'link'?"},
      {{"--type", "obj", "--head", "obj_list", "--list-member", "link", "--show", "nmae"},
       4,
       "did you mean 'name'?"},
      {{"--type", "obj", "--head", "obj_list", "--list-member", "link", "--wehre", "x"},
       2,
       "did you mean '--where'?"},
  };
  for (const auto& c : cases) {
    auto r = walk(c.args);
    INFO(json(c.args).dump() << ": " << r.err);
    CHECK(r.status == c.status);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
}

// `man leakref`'s EXAMPLES run as written on a core of the program they
// name (core.7084 is the fx_structs core); each walk's numbers are the
// manifest's. (The profile and kernel examples run in their own tests.)
TEST_CASE("man leakref: the walk examples run as written", "[core][docs]") {
  const auto* fc = structs_core(false);
  if (!fc) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const json& s = fc->manifest["structures"];
  uint64_t hash_shared = 0;  // objects in obj_hash with refcount > 1
  for (const auto& o : s["hash"]["objects"]) hash_shared += o["refcount"].get<long>() > 1;
  int walks = 0;
  for (std::string cmd : lrtest::man_examples("leakref.1")) {
    if (cmd.rfind("leakref walk core.7084 ", 0) != 0) continue;
    ++walks;
    cmd.replace(cmd.find("core.7084"), 9, "'" + fc->core + "'");
    auto r = lrtest::run({"sh", "-c", "PATH='" + lrtest::build_dir() + "':$PATH " + cmd});
    INFO(cmd << "\n" << r.err);
    REQUIRE(r.status == 0);
    std::string visited = fmt::format(
        ": {} visited",
        (cmd.find("obj_hash") != std::string::npos ? s["hash"] : s["list"])["objects"].size());
    CHECK(r.out.find(visited) != std::string::npos);
    if (cmd.find("--where 'refcount > 1'") != std::string::npos)
      CHECK(r.out.find(fmt::format(", {} matched 'refcount > 1'", hash_shared)) !=
            std::string::npos);
  }
  CHECK(walks == 2);
}

// A container kind a target registers (nfs-ganesha's hash table) takes only
// the members it declares: the engine refuses another before any read.
TEST_CASE("walk: a registered container kind refuses a member it does not take", "[core]") {
  const auto* fc = structs_core(false);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  auto r =
      leakref({"walk", fc->core, "--type", "struct obj", "--head", "obj_list", "--hashtable=next"});
  CHECK(r.status == 2);
  CHECK(r.err.find("an nfs-ganesha hash_table_t takes val or key, not 'next'") !=
        std::string::npos);
}

// One contract per walk mode, checked before the first read: a head of
// another type, an amount the mode does not take and a count past the
// head's DWARF array are refused naming both, never walked as garbage
// (each of these gave objects, "cycle" or "corrupt" with exit 0).
TEST_CASE("walk: a head that does not fit the mode, or a count past it, is refused",
          "[core][head]") {
  const auto* fc = structs_core(false);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  struct Case {
    std::vector<std::string> how;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"--head", "obj_list", "--next", "next"},
       "head 'obj_list' is struct list_head; a chain walk of struct obj needs"},
      {{"--head", "obj_list", "--hlist-member", "hnode"},
       "head 'obj_list' is struct list_head; an hlist walk of struct obj needs a struct "
       "hlist_head"},
      {{"--head", "obj_hash", "--list-member", "link"},
       "head 'obj_hash' is struct hlist_head [64]; a list walk of struct obj needs"},
      {{"--head", "obj_array", "--list-member", "link"},
       "head 'obj_array' is struct obj [8]; a list walk"},
      {{"--head", "obj_array", "--next", "next"}, "head 'obj_array' is struct obj [8]; a chain"},
      {{"--head", "obj_table", "--array"}, "an array of pointers is a pointer-array walk"},
      {{"--head", "obj_array", "--pointer-array"}, "a pointer-array walk of struct obj needs"},
      {{"--head", "obj_array", "--array", "--count", "12"},
       "count 12 is past head 'obj_array', struct obj [8]: it has 8 elements"},
      {{"--head", "obj_table", "--pointer-array", "--count", "40"},
       "count 40 is past head 'obj_table', struct obj * [32]: it has 32 elements"},
      {{"--head", "obj_hash", "--hlist-member", "hnode", "--buckets", "128"},
       "bucket count 128 is past head 'obj_hash', struct hlist_head [64]: it has 64"},
      {{"--head", "obj_hash", "--hlist-member", "hnode", "--count-from", "next_id"},
       "a count (or count-from) applies to array and pointer-array walks, not to an hlist walk"},
      {{"--head", "obj_array", "--array", "--buckets", "4"},
       "a bucket count applies to list, hlist and chain walks"},
      {{"--head", "obj_hash", "--hlist-member", "hnode", "--buckets", "0"},
       "--buckets: 0 is not a count"},
      {{"--head", "obj_list", "--list-member", "link", "--limit", "0"},
       "--limit: 0 is not a count"},
      {{"--head", "obj_hash", "--hlist-member", "hnode", "--buckets", "dyn_nbuckets"},
       "--buckets: 'dyn_nbuckets' is not a number"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> a = {"walk", fc->core, "--type", "struct obj", "--summary"};
    a.insert(a.end(), c.how.begin(), c.how.end());
    auto r = leakref(a);
    INFO(nlohmann::json(c.how).dump() << "\n" << r.out << r.err);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find(c.err) != std::string::npos);
  }
  // What fits still walks: the full array, the pointer array's set slots.
  const json& m = fc->manifest["structures"];
  check_walk(fc->core, m["array"], {"--array", "--count", "8", "--refcount", "ref"});
  check_walk(fc->core, m["table"], {"--pointer-array", "--count", "32", "--refcount", "ref"});
  check_walk(fc->core, m["chain"], {"--next", "next", "--refcount", "ref"});

  // A profile's set: refused before any set is printed, JSON or text.
  std::string prof = lrtest::tmp_dir() + "/mislinked.toml";
  lrtest::write_file(prof, R"(format = 1
name = "mislinked"
[types.obj]
c = "struct obj"
[[set]]
name = "listed"
type = "obj"
head = "obj_list"
link = "list"
member = "link"
[[set]]
name = "hashed"
type = "obj"
head = "obj_hash"
link = "list"
member = "link"
)");
  for (bool as_json : {true, false}) {
    std::vector<std::string> a = {"profile", fc->core, "--profile", prof};
    if (as_json) a.push_back("--json");
    auto p = leakref(a);
    INFO(p.out << p.err);
    CHECK(p.status == 2);
    CHECK(p.out.find("listed") == std::string::npos);
    if (as_json) CHECK(p.json()["error"]["exit"] == 2);
    CHECK(p.err.find("set 'hashed': head 'obj_hash' is struct hlist_head [64]; a list walk") !=
          std::string::npos);
  }
}

// A refcount below what is held reads as such; holders whose sum does not
// fit are an error, never a negative "held" with verdicts built on it.
TEST_CASE("profile: the missing verdict's text; holders past int64 are an error", "[core]") {
  const auto* fc = structs_core(false);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  auto prof = [&](const std::string& name, const std::string& a, const std::string& b) {
    std::string p = lrtest::tmp_dir() + "/" + name + ".toml";
    lrtest::write_file(p, "format = 1\nname = \"" + name +
                              "\"\n[[set]]\nname = \"listed\"\ntype = \"struct obj\"\n"
                              "head = \"obj_list\"\nlink = \"list\"\nmember = \"link\"\n"
                              "refcount = \"ref\"\n  [[set.holder]]\n  name = \"list\"\n"
                              "  count = " +
                              a + "\n  [[set.holder]]\n  name = \"hash\"\n  count = " + b + "\n");
    return p;
  };
  auto two = leakref({"profile", fc->core, "--profile", prof("two", "1", "1")});
  REQUIRE(two.status == 0);
  CHECK(two.out.find("1, but held by 2 = 1 list + 1 hash: 1 fewer than held") != std::string::npos);
  auto big = leakref({"profile", fc->core, "--profile",
                      prof("big", "9223372036854775807", "9223372036854775807"), "--json"});
  INFO(big.err);
  REQUIRE(big.status == 0);
  json j = big.json();
  REQUIRE(j["sets"][0]["objects"].size() == 20);
  for (const auto& o : j["sets"][0]["objects"]) {
    CHECK(o["verdict"] == "error");
    CHECK(o["error"].get<std::string>().find("holders add up past") != std::string::npos);
    CHECK(o["held"].is_null());
    CHECK(o["unexplained"].is_null());
  }
}

// Errors that misled: each names what the user typed and what fits it.
TEST_CASE("errors: the subcommand's own options, one suggestion, JSON under --json(l)",
          "[core][cli]") {
  const auto* fc = structs_core(false);
  if (!fc) LR_SKIP("gcore (gdb) is not installed");
  auto refs = leakref({"refs", fc->core});
  CHECK(refs.status == 2);
  CHECK(refs.err.find("PLACE is required") != std::string::npos);  // as the man page says
  auto typ = leakref({"walk", fc->core, "--typ", "x"});
  CHECK(typ.err.find("did you mean '--type'?") != std::string::npos);  // not trend's --top
  auto where = leakref({"walk", fc->core, "--type", "struct obj", "--head", "obj_list",
                        "--list-member", "link", "--where", "nmae == 1"});
  CHECK(where.status == 4);
  size_t first = where.err.find("did you mean 'name'?");
  CHECK(first != std::string::npos);
  CHECK(where.err.find("did you mean", first + 1) == std::string::npos);
  auto jl = leakref({"walk", fc->core, "--type", "struct obj", "--head", "nosuch", "--list-member",
                     "link", "--jsonl"});
  CHECK(jl.status == 4);
  CHECK(std::count(jl.out.begin(), jl.out.end(), '\n') == 1);  // one line, as every other
  CHECK(jl.json()["error"]["exit"] == 4);
  // A NULL met on the way is named where it is, not as a fault further on.
  std::string path = "chain_head";
  size_t n = fc->manifest["structures"]["chain"]["objects"].size();
  for (size_t i = 0; i < n; ++i) path += "->next";
  auto null = leakref({"show", fc->core, path + "->id"});
  CHECK(null.status != 0);
  CHECK(null.err.find("'" + path + "' is NULL") != std::string::npos);
  auto xa = leakref({"walk", fc->core, "--type", "struct obj", "--head", "0x10", "--xarray"});
  CHECK(xa.err.find("head '0x10' is an untyped address") != std::string::npos);
  // A process core given as a vmcore is named as one, not asked for QEMU's vmcoreinfo.
  auto kv = leakref({"kernel", "--vmcore", fc->core, "modules"});
  CHECK(kv.status != 0);
  CHECK(kv.err.find("a process core (it has an auxiliary vector") != std::string::npos);
  CHECK(kv.err.find("QEMU") == std::string::npos);
  auto parse = leakref({"walk", fc->core, "--type", "struct obj", "--bogus", "--json"});
  CHECK(parse.status == 2);
  CHECK(parse.json()["error"]["message"].get<std::string>().find("--bogus") != std::string::npos);
}
