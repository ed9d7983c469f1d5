// The reference index against a fixture's own truth (fx_leaks writes every
// block it leaked or kept, and why, to its manifest): `leaks` names exactly
// the leaked blocks, and exactly the unreferenced ones among them; `refs`
// names each kept block's root (a tagged global, TLS, another thread's live
// stack); `walk --reconcile` flags exactly the objects counted more often
// than anything points at them.
#include <signal.h>

#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>

#include "doc_checks.hpp"
#include "harness.hpp"
#include "roots_checks.hpp"

using nlohmann::json;

namespace {

struct LeaksCore {
  std::string core, why_not;
  json manifest;
};

const LeaksCore& leaks_core() {
  static LeaksCore c = [] {
    LeaksCore l;
    if (!lrtest::have_gcore()) {
      l.why_not = "gcore (gdb) is not installed";
      return l;
    }
    std::string dir = lrtest::tmp_dir() + "/leaks";
    lrtest::run({"/bin/mkdir", "-p", dir});
    auto fx = lrtest::spawn({lrtest::fixture_path("fx_leaks"), dir + "/manifest.json"});
    bool ready = lrtest::wait_for_text(fx.out_path, "READY", 30);
    const std::string pid = std::to_string(fx.pid);
    auto g = lrtest::run({"gcore", "-o", dir + "/core", pid}, 120);
    lrtest::finish(fx, SIGKILL);
    if (!ready || g.status != 0) {
      l.why_not = "fx_leaks or gcore failed: " + g.err;
      return l;
    }
    l.core = dir + "/core." + pid;
    l.manifest = json::parse(lrtest::read_file(dir + "/manifest.json"));
    return l;
  }();
  return c;
}

#define NEED_LEAKS_CORE(c)                                                \
  do {                                                                    \
    if (!(c).why_not.empty()) {                                           \
      if ((c).why_not.rfind("gcore (gdb)", 0) == 0) LR_SKIP((c).why_not); \
      FAIL((c).why_not);                                                  \
    }                                                                     \
  } while (0)

using lrtest::manifest_items;

}  // namespace

TEST_CASE("leaks: exactly the blocks the fixture leaked, and the unreferenced ones", "[refs]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  auto r = lrtest::leakref({"leaks", c.core, "--json"}, 120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  std::set<std::string> leaked, unreferenced;
  std::map<std::string, json> by_ptr;
  for (const auto& b : j["blocks"]) {
    leaked.insert(b["ptr"].get<std::string>());
    if (b["unreferenced"] == true) unreferenced.insert(b["ptr"].get<std::string>());
    by_ptr[b["ptr"]] = b;
  }
  // Leaked: overwritten pointers, a pointer left only below the stack
  // pointer (a dead slot is no root), a cycle of two, an object and the
  // two blocks it points to.
  CHECK(leaked == manifest_items(c.manifest,
                                 {"leaked", "dead-slot", "cycle", "leaked-widget", "leaked-part"}));
  lrtest::check_retained_agrees(c.core, j);
  // Unreferenced: all but the cycle, whose blocks point at each other, and
  // the object's parts.
  CHECK(unreferenced == manifest_items(c.manifest, {"leaked", "dead-slot", "leaked-widget"}));
  CHECK(j["summary"]["leaked"] == 14);
  CHECK(j["summary"]["unreferenced"] == 10);
  auto cyc = manifest_items(c.manifest, {"cycle"});
  REQUIRE(cyc.size() == 2);
  CHECK(by_ptr[*cyc.begin()]["referenced_by"] == json::array({*cyc.rbegin()}));
  CHECK(by_ptr[*cyc.rbegin()]["referenced_by"] == json::array({*cyc.begin()}));
  // The object's type comes from its vtable.
  std::string w = *manifest_items(c.manifest, {"leaked-widget"}).begin();
  CHECK(by_ptr[w]["type"] == "Widget");
  CHECK(by_ptr[w]["type_from"] == "vtable");
  bool grouped = false, parts = false;
  for (const auto& g : j["groups"]) {
    grouped |= g["type"] == "Widget" && g["count"] == 1;
    parts |= g["type"] == "struct part" && g["count"] == 2;
  }
  CHECK(grouped);
  CHECK(parts);
  // The parts' type comes from the typed pointers to them: the Widget's
  // member, then the first part's `next`, as the manifest says.
  for (const auto& i : c.manifest["items"])
    if (i["kind"] == "leaked-part") {
      INFO(by_ptr[i["ptr"]].dump());
      CHECK(by_ptr[i["ptr"]]["type"] == "struct part");
      CHECK(by_ptr[i["ptr"]]["type_from"] == i["why"]);
    }
  // Sizes: glibc's usable sizes for the requests (64 -> 72, 200 -> 200).
  bool g72 = false, g200 = false;
  for (const auto& g : j["groups"]) {
    g72 |= g["size"] == 72 && g["count"] == 5 && g["unreferenced"] == 5;
    g200 |= g["size"] == 200 && g["count"] == 3;
  }
  CHECK(g72);
  CHECK(g200);
  // Nothing kept is called leaked.
  for (const auto& p : manifest_items(c.manifest, {"reachable", "object"})) CHECK(!leaked.count(p));
  CHECK(lrtest::leakref({"leaks", c.core, "--fail-on", "leaked"}, 120).status == 1);
  // Text: the summary and the groups.
  auto t = lrtest::leakref({"leaks", c.core}, 120);
  CHECK(t.out.rfind("14 of ", 0) == 0);
  CHECK(t.out.find("10 of them unreferenced") != std::string::npos);
}

TEST_CASE("refs: each kept block's referrers and its chain from a root", "[refs]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  int pid = c.manifest["pid"];
  std::map<std::string, std::string> why;  // ptr -> the manifest's reason
  for (const auto& i : c.manifest["items"])
    if (i["kind"] == "reachable") why[i["ptr"]] = i["why"];
  REQUIRE(why.size() == 3);
  std::vector<std::string> args = {"refs", c.core};
  for (const auto& [p, w] : why) args.push_back(p);
  std::string dead = *manifest_items(c.manifest, {"dead-slot"}).begin();
  args.push_back(dead);
  args.insert(args.end(), {"--depth", "4", "--json"});
  auto r = lrtest::leakref(args, 120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  REQUIRE(j["objects"].size() == 4);
  for (const auto& o : j["objects"]) {
    std::string p = o["addr"];
    INFO(p << ": " << o.dump());
    if (p == dead) {  // only a dead stack slot pointed at it: nothing does now
      CHECK(o["referrers"].empty());
      CHECK(o["anchor_chain"].empty());
      continue;
    }
    REQUIRE(o["referrers"].size() == 1);
    const json& ref = o["referrers"][0];
    const std::string& w = why[p];
    if (w.rfind("global g_tagged", 0) == 0) {
      // (block + 24) | 1: a tagged pointer into the middle of the block.
      CHECK(ref["kind"] == "global");
      CHECK(ref["what"].get<std::string>().find("g_tagged") != std::string::npos);
      uint64_t v = std::stoull(ref["value"].get<std::string>(), nullptr, 16);
      CHECK(v == ((std::stoull(p, nullptr, 16) + 24) | 1));
    } else if (w == "tls tls_block") {
      CHECK(ref["kind"] == "tls");
      CHECK(ref["tid"] == pid);
      CHECK(ref["what"].get<std::string>().find("TLS at " + ref["from"].get<std::string>() +
                                                " (fs_base-0x") != std::string::npos);
    } else {
      CHECK(w == "thread stack");
      CHECK(ref["kind"] == "stack");
      CHECK(ref["tid"] != pid);  // the second thread's
      // The frame holding the live local, as gdb's own unwinder numbers it.
      CHECK(ref["what"].get<std::string>().find("frame #1 holder_thread(void*)+0x") !=
            std::string::npos);
      auto bt = lrtest::run({"gdb", "-batch", "-ex", "thread apply all bt",
                             lrtest::fixture_path("fx_leaks"), c.core});
      CHECK(std::regex_search(bt.out, std::regex(R"(\n#1 +0x[0-9a-f]+ in holder_thread)")));
    }
    REQUIRE(o["anchor_chain"].size() == 1);  // the root's own reference
    CHECK(o["anchor_chain"][0]["kind"] == ref["kind"]);
  }
  // The list's last object: anchored through the global head and five links.
  std::string last = c.manifest["items"].back()["ptr"];
  auto chain = lrtest::leakref({"refs", c.core, last, "--depth", "8", "--json"}, 120);
  REQUIRE(chain.status == 0);
  const json cj = chain.json();
  const json& ch = cj["objects"][0]["anchor_chain"];
  REQUIRE(ch.size() == 6);
  CHECK(ch[0]["kind"] == "global");
  CHECK(ch[0]["what"].get<std::string>().find("g_list") != std::string::npos);
  for (size_t i = 1; i < ch.size(); ++i) CHECK(ch[i]["kind"] == "chunk");
  // Too few steps for the chain is not "leaked": the block is reachable.
  auto shallow = lrtest::leakref({"refs", c.core, last, "--depth", "2"}, 120);
  CHECK(shallow.out.find("reachable from a root, but by no chain within 2 steps") !=
        std::string::npos);
  CHECK(shallow.out.find("leaked") == std::string::npos);
  auto dead_t = lrtest::leakref({"refs", c.core, dead, "--depth", "2"}, 120);
  CHECK(dead_t.out.find("no chain of references from any root: leaked") != std::string::npos);
  // An address in no heap block is one error line, exit 4.
  auto bad = lrtest::leakref({"refs", c.core, "0x10"}, 120);
  CHECK(bad.status == 4);
  CHECK(bad.err.find("0x10 is not inside an in-use heap block") != std::string::npos);
  auto unknown = lrtest::leakref({"refs", c.core, "no_such_symbol"}, 120);
  CHECK(unknown.status == 4);
  CHECK(unknown.err.find("no_such_symbol") != std::string::npos);
  // A place as gdb writes it: what the global list head points to.
  auto head = lrtest::leakref({"refs", c.core, "*g_list", "--json"}, 120);
  REQUIRE(head.status == 0);
  const json hj = head.json();
  CHECK(hj["objects"][0]["addr"] == ch[0]["value"]);
  CHECK(hj["objects"][0]["referrers"][0]["what"] == "global g_list [fx_leaks]");
}

TEST_CASE("walk --reconcile: refcounts above the references found are flagged", "[refs]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  auto r = lrtest::leakref({"walk", c.core, "--type", "struct obj", "--head", "g_list", "--next",
                            "next", "--refcount", "refcount", "--reconcile", "--json"},
                           120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  std::map<std::string, json> want;
  for (const auto& i : c.manifest["items"])
    if (i["kind"] == "object") want[i["ptr"]] = i;
  REQUIRE(j["objects"].size() == want.size());
  uint64_t over = 0;
  for (const auto& o : j["objects"]) {
    const json& w = want[o["addr"]];
    INFO(o.dump());
    CHECK(o["refcount"] == w["refcount"]);
    CHECK(o["inbound"] == w["holders"]);  // the list's one link, nothing else
    int64_t extra = w["refcount"].get<int64_t>() - w["holders"].get<int64_t>();
    if (extra > 0) {
      ++over;
      CHECK(o["over"] == extra);
    } else {
      CHECK(!o.contains("over"));
    }
  }
  CHECK(over == 3);
  CHECK(j["summary"]["over_referenced"] == 3);
  auto t = lrtest::leakref({"walk", c.core, "--type", "struct obj", "--head", "g_list", "--next",
                            "next", "--refcount", "refcount", "--reconcile", "--fail-on", "over"},
                           120);
  CHECK(t.status == 1);
  CHECK(t.out.find("!! 4 counted, held by nothing found") != std::string::npos);
  CHECK(t.out.find("3 objects with a refcount above them") != std::string::npos);
}

// A profile names the objects it walks: a referring word inside one of them
// is that set's object and member, and profile --reconcile flags the
// objects counted more often than anything points at them, as walk does.
TEST_CASE("refs --profile and profile --reconcile on a profile's objects", "[refs][profile]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  const std::string prof = std::string(LR_SOURCE_DIR) + "/tests/profiles/fx_leaks.toml";
  std::vector<json> objs;
  for (const auto& i : c.manifest["items"])
    if (i["kind"] == "object") objs.push_back(i);
  REQUIRE(objs.size() == 6);
  std::vector<std::string> args = {"refs", c.core};
  for (size_t i = 1; i < objs.size(); ++i) args.push_back(objs[i]["ptr"]);
  args.insert(args.end(), {"--profile", prof, "--depth", "8", "--json"});
  auto r = lrtest::leakref(args, 120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["known_objects"] == 6);
  REQUIRE(j["objects"].size() == 5);
  for (size_t i = 0; i < 5; ++i) {
    const json& o = j["objects"][i];
    INFO(o.dump());
    CHECK(o["type"] == "struct obj (set objs)");
    REQUIRE(o["referrers"].size() == 1);
    CHECK(o["referrers"][0]["what"] ==
          "struct obj.next of " + objs[i]["ptr"].get<std::string>() + " (set objs)");
    CHECK(o["reachable"] == true);
    CHECK(o["anchor_chain"].size() == i + 2);  // g_list, then i + 1 links
  }
  // A profile for another program is refused in one line.
  auto other = lrtest::leakref({"refs", c.core, objs[1]["ptr"], "--profile",
                                std::string(LR_SOURCE_DIR) + "/tests/profiles/fx_locks.toml"},
                               120);
  CHECK(other.status != 0);
  CHECK(other.err.find("fx_locks") != std::string::npos);

  auto p = lrtest::leakref(
      {"profile", c.core, "--profile", prof, "--reconcile", "--flagged", "--json"}, 120);
  INFO(p.err);
  REQUIRE(p.status == 0);
  json pj = p.json();
  REQUIRE(pj["sets"].size() == 1);
  const json& set = pj["sets"][0];
  std::map<std::string, json> want;
  for (const auto& o : objs) want[o["ptr"]] = o;
  uint64_t over = 0;
  for (const auto& o : set["objects"]) {  // the flagged ones only
    const json& w = want[o["addr"]];
    INFO(o.dump());
    CHECK(o["inbound"] == w["holders"]);
    REQUIRE(o.contains("over"));
    CHECK(o["over"] == w["refcount"].get<int64_t>() - w["holders"].get<int64_t>());
    CHECK(o["referrers"].size() == 1);
    ++over;
  }
  CHECK(over == 3);
  CHECK(set["summary"]["over_referenced"] == 3);
  CHECK(set["summary"]["not_indexed"] == 0);
  auto pt = lrtest::leakref(
      {"profile", c.core, "--profile", prof, "--reconcile", "--fail-on", "flagged"}, 120);
  CHECK(pt.status == 1);
  CHECK(pt.out.find("1 reference found !! 4 counted, held by nothing found") != std::string::npos);
  CHECK(pt.out.find("3 with a refcount above the references found") != std::string::npos);
}

// The README's leaks/refs/reconcile example, executed as written on a fresh
// fx_leaks core (addresses aside: they differ from run to run).
TEST_CASE("README: the leaks example runs as written", "[refs][docs]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  std::string part = lrtest::readme_section("leaks");
  REQUIRE(!part.empty());
  std::string dir = lrtest::tmp_dir() + "/readme-leaks";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", c.core, dir + "/core"}).status == 0);
  REQUIRE(
      lrtest::run({"/bin/ln", "-sf", std::string(LR_SOURCE_DIR) + "/tests/profiles/fx_leaks.toml",
                   dir + "/fx_leaks.toml"})
          .status == 0);
  auto norm = [](const std::string& s) {
    return std::regex_replace(s, std::regex("0x[0-9a-f]{6,}"), "0xADDR");
  };
  CHECK(lrtest::check_doc_commands(part, dir, norm, 120) == 3);
}

// A block with more than 64 Ki pointers (fx_big's bucket array) makes its
// group of rows wide; everything behind it stays reachable: fx_big keeps
// all it allocated.
// leaks --trace names each leaked block's allocation site, and carries the
// trace reader's warnings (a line it skipped) into its text and JSON, as
// diff --trace does; it dropped them.
TEST_CASE("leaks --trace: sites of leaked blocks, and the trace's warnings", "[refs][trace]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  std::string trace = lrtest::tmp_dir() + "/leaks-mmleak.out", text;
  auto leaked = manifest_items(c.manifest, {"leaked"});
  REQUIRE(!leaked.empty());
  // Each record's size is the one the fixture asked malloc for.
  for (const auto& i : c.manifest["items"])
    if (i["kind"] == "leaked")
      text +=
          i["ptr"].get<std::string>() + " 0x401234 " + std::to_string(i["size"].get<int>()) + "\n";
  text += "this is not an mmleak record\n";
  lrtest::write_file(trace, text);
  auto r = lrtest::leakref({"leaks", c.core, "--trace", trace, "--json"}, 120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  size_t with_site = 0;
  for (const auto& b : j["blocks"])
    if (leaked.count(b["ptr"].get<std::string>())) with_site += !b["site"].is_null();
  CHECK(with_site == leaked.size());
  CHECK(j["warnings"].dump().find("1 line(s) not understood were skipped") != std::string::npos);
  auto t = lrtest::leakref({"leaks", c.core, "--trace", trace}, 120);
  CHECK(t.status == 0);
  CHECK(t.err.find("1 line(s) not understood were skipped") != std::string::npos);
  // account --by site: the same blocks under the trace's site, the rest not in it.
  auto a = lrtest::leakref({"account", c.core, "--by", "site", "--trace", trace, "--json"}, 120);
  INFO(a.err);
  REQUIRE(a.status == 0);
  const json aj = a.json();
  uint64_t want = 0, got = 0;
  for (const auto& i : c.manifest["items"])
    if (i["kind"] == "leaked") want += 1;
  for (const auto& cat : aj["categories"])
    if (cat["name"] == "leaked")
      for (const auto& k : cat["children"])
        if (k["name"] != "(not in the trace)") got += k["blocks"].get<uint64_t>();
  REQUIRE(want > 0);
  CHECK(got == want);
  CHECK(aj["by"] == "site");
  // By module through the trace: its one caller is in no module of the core.
  auto am = lrtest::leakref({"account", c.core, "--by", "module", "--trace", trace, "--json"}, 120);
  REQUIRE(am.status == 0);
  const json amj = am.json();
  uint64_t no_module = 0;
  for (const auto& cat : amj["categories"])
    if (cat["name"] == "leaked")
      for (const auto& k : cat["children"])
        if (k["name"] == "(no module)") no_module = k["blocks"].get<uint64_t>();
  CHECK(no_module == want);
  CHECK(aj["warnings"].dump().find("1 line(s) not understood were skipped") != std::string::npos);
}

TEST_CASE("leaks: nothing leaked behind a pointer-dense block", "[refs]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& big = lrtest::fixture_core("big300k", lrtest::fixture_path("fx_big"), {"300000"});
  auto r = lrtest::leakref({"leaks", big.core, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["summary"]["blocks"].get<uint64_t>() > 600000);
  CHECK(j["summary"]["leaked"] == 0);
  // The bucket array is held by the global, and pointed into by each
  // bucket's first node (its pprev).
  auto b = lrtest::leakref({"refs", big.core, "*big_hash", "--json"}, 300);
  REQUIRE(b.status == 0);
  json bj = b.json();
  size_t globals = 0, chunks = 0;
  for (const auto& r : bj["objects"][0]["referrers"]) {
    globals += r["what"] == "global big_hash [fx_big]";
    chunks += r["kind"] == "chunk";
  }
  CHECK(globals == 1);
  CHECK(chunks + 1 == bj["objects"][0]["referrers"].size());
  CHECK(chunks > 65536);
}

// One membership in a list ring is one reference, though two words (the
// neighbours' next and prev) point at the object; an hlist's likewise
// (the previous next or the head's first, and the next node's pprev). In
// fx_structs each object is on one list and counts one reference for it;
// any count above 1 is a reference nobody holds (the fixture's refs_for).
TEST_CASE("walk --reconcile: a list or hlist membership is one reference", "[refs]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& fc = lrtest::fixture_core("structs", lrtest::fixture_path("fx_structs"));
  for (const char* set : {"list", "hash"}) {
    const json& m = fc.manifest["structures"][set];
    bool ring = std::string(set) == "list";
    auto r = lrtest::leakref({"walk", fc.core, "--type", "struct obj", "--head", m["head"],
                              ring ? "--list-member" : "--hlist-member", ring ? "link" : "hnode",
                              "--refcount", "ref", "--reconcile", "--json"},
                             120);
    INFO(set << ": " << r.err);
    REQUIRE(r.status == 0);
    json j = r.json();
    REQUIRE(j["objects"].size() == m["objects"].size());
    uint64_t over = 0;
    for (const auto& o : j["objects"]) {
      INFO(o.dump());
      // main()'s stale locals on the stack are references too, one each.
      int64_t stack = 0;
      for (const auto& f : o["referrers"]) stack += f["kind"] == "stack";
      CHECK(o["inbound"] == 1 + stack);
      // A ring node has both neighbours' words (an hlist's last node, one).
      if (ring) CHECK(o["inbound_words"] == 2 + stack);
      int64_t extra = o["refcount"].get<int64_t>() - 1 - stack;
      if (extra > 0) {
        ++over;
        CHECK(o["over"] == extra);
      }
    }
    CHECK(over > 0);
    CHECK(j["summary"]["over_referenced"] == over);
  }
}

// account's leaked blocks are leaks' blocks, typed the same way (vtable,
// then typed pointers between leaked blocks); a live C++ object by its vtable.
TEST_CASE("account: leaked blocks by type as leaks groups them; live ones by vtable",
          "[refs][account]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  auto l = lrtest::leakref({"leaks", c.core, "--json"});
  auto a = lrtest::leakref({"account", c.core, "--json"});
  INFO(a.err);
  REQUIRE(l.status == 0);
  REQUIRE(a.status == 0);
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // bytes, blocks
  const json lj = l.json(), aj = a.json();  // kept: the loops below read into them
  for (const auto& g : lj["groups"]) {
    auto& t = by_type[g["type"].is_null() ? "(unknown)" : g["type"].get<std::string>()];
    t.first += g["bytes"].get<uint64_t>();
    t.second += g["count"].get<uint64_t>();
  }
  std::map<std::string, std::pair<uint64_t, uint64_t>> acc;
  std::set<std::string> live_types;
  for (const auto& cat : aj["categories"]) {
    if (cat["name"] == "leaked")
      for (const auto& k : cat["children"])
        acc[k["name"]] = {k["bytes"].get<uint64_t>(), k["blocks"].get<uint64_t>()};
    if (cat["name"] == "live")
      for (const auto& k : cat["children"]) live_types.insert(k["name"]);
  }
  CHECK(acc == by_type);
  CHECK(by_type.count("Widget"));
  CHECK(live_types.count("Widget"));  // g_widget, by its vtable

  // By module: a C++ object by its vtable's, the executable's here.
  auto m = lrtest::leakref({"account", c.core, "--by", "module", "--json"});
  INFO(m.err);
  REQUIRE(m.status == 0);
  const json mj = m.json();
  const json* leaked_mod = nullptr;
  for (const auto& cat : mj["categories"])
    if (cat["name"] == "leaked")
      for (const auto& k : cat["children"])
        if (k["name"] == "fx_leaks") leaked_mod = &k;
  REQUIRE(leaked_mod);
  CHECK((*leaked_mod)["blocks"].get<uint64_t>() == by_type["Widget"].second);
}

// With a profile, the blocks holding its objects take its type and set: the
// six objects on g_list are live, under set objs and under struct obj.
TEST_CASE("account --profile: blocks by the profile's sets and types", "[refs][account][profile]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  const std::string prof = std::string(LR_SOURCE_DIR) + "/tests/profiles/fx_leaks.toml";
  uint64_t objects = 0;
  for (const auto& i : c.manifest["items"])
    if (i["kind"] == "object") ++objects;
  REQUIRE(objects == 6);
  auto blocks_under = [](const json& j, const std::string& cat, const std::string& key) {
    for (const auto& n : j["categories"])
      if (n["name"] == cat)
        for (const auto& k : n["children"])
          if (k["name"] == key) return k["blocks"].get<uint64_t>();
    return uint64_t{0};
  };
  auto s = lrtest::leakref({"account", c.core, "--profile", prof, "--by", "set", "--json"}, 120);
  INFO(s.err);
  REQUIRE(s.status == 0);
  const json sj = s.json();
  CHECK(blocks_under(sj, "live", "objs") == objects);
  CHECK(blocks_under(sj, "leaked", "objs") == 0);
  CHECK(blocks_under(sj, "live", "(in no set)") > 0);
  auto t = lrtest::leakref({"account", c.core, "--profile", prof, "--json"}, 120);
  REQUIRE(t.status == 0);
  CHECK(blocks_under(t.json(), "live", "struct obj") == objects);
  // A profile for another program is refused in one line, as refs does.
  auto other = lrtest::leakref({"account", c.core, "--profile",
                                std::string(LR_SOURCE_DIR) + "/tests/profiles/fx_locks.toml"},
                               120);
  CHECK(other.status != 0);
  CHECK(other.err.find("fx_locks") != std::string::npos);
}

// Types inside C++ namespaces are found by their qualified names, as
// struct, class or bare: fx_leaks's lrfx::Holder (the tcmalloc and Ceph
// kind of program declares everything in one).
TEST_CASE("show: a type inside a C++ namespace, by its qualified name", "[refs][types]") {
  const auto& c = leaks_core();
  NEED_LEAKS_CORE(c);
  for (const char* t : {"lrfx::Holder", "struct lrfx::Holder", "class lrfx::Holder"}) {
    INFO(t);
    auto r = lrtest::leakref({"show", c.core, "g_holder", "--type", t, "--json"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    json j = r.json();
    CHECK(j["type"] == "struct Holder");
    CHECK(j["size"] == 16);
    CHECK(j["value"]["id"] == 7);
  }
  // The bare name is not the namespaced one's: nothing outside lrfx is Holder.
  auto bare = lrtest::leakref({"show", c.core, "g_holder", "--type", "Holder"});
  CHECK(bare.status == 4);
}
