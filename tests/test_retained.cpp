// What holds the memory (retained, suspects) against programs that compute
// their own dominators and retained sizes (fixtures/fx_graphs.c), and
// against networkx's dominators of the graph leakref exports.
#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <sstream>

#include "doc_checks.hpp"
#include "harness.hpp"

using nlohmann::json;

namespace {

const lrtest::FixtureCore& graphs_core(const std::string& mode,
                                       const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = {mode};
  args.insert(args.end(), more.begin(), more.end());
  std::string key = "graphs-" + mode;
  for (const auto& m : more) key += "-" + m;
  return lrtest::fixture_core(key, lrtest::fixture_path("fx_graphs"), args);
}

// The exported graph's nodes by name.
std::map<std::string, json> exported(const std::string& core, const std::string& file) {
  auto r = lrtest::leakref({"retained", core, "--export", file, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json doc = json::parse(lrtest::read_file(file));
  std::map<std::string, json> out;
  for (const auto& n : doc["nodes"]) out[n["node"].get<std::string>()] = n;
  return out;
}

// The node id leakref gives what the fixture calls `idom`.
std::string idom_id(const json& m, const std::map<std::string, json>& nodes,
                    const std::string& want) {
  if (want == "top" || want == "leaked") return want;
  if (want.rfind("global ", 0) == 0) return want + " [fx_graphs]";
  if (want == "stack") {
    for (const auto& [k, n] : nodes)
      if (k.find("hold_on_stack") != std::string::npos) return k;
    return "(no frame of hold_on_stack)";
  }
  for (const auto& o : m["objects"])
    if (o["name"] == want) return o["ptr"].get<std::string>();
  return "(unknown " + want + ")";
}

}  // namespace

TEST_CASE("retained: dominators and retained sizes equal the program's own", "[core][retained]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = graphs_core("shapes");
  const auto nodes = exported(fc.core, lrtest::tmp_dir() + "/shapes-graph.json");
  size_t checked = 0;
  uint64_t cycle_bytes = 0, cycle_blocks = 0;
  std::vector<json> cycle;
  for (const auto& o : fc.manifest["objects"]) {
    const std::string name = o["name"], ptr = o["ptr"];
    INFO(name << " at " << ptr);
    REQUIRE(nodes.count(ptr));
    const json& n = nodes.at(ptr);
    CHECK(n["size"] == o["size"]);
    if (name.rfind("leaked_cycle.", 0) == 0)
      cycle_bytes += o["size"].get<uint64_t>(), ++cycle_blocks;
    if (!o["exact"].get<bool>()) {
      cycle.push_back(n);
      continue;
    }
    CHECK(n["idom"] == idom_id(fc.manifest, nodes, o["idom"]));
    CHECK(n["retained"] == o["retained"]);
    CHECK(n["retained_blocks"] == o["retained_blocks"]);
    ++checked;
  }
  CHECK(checked == 26);
  // The leaked cycle is entered at one of its two blocks: that one is below
  // "leaked" and retains the whole cycle and what hangs off it.
  REQUIRE(cycle.size() == 2);
  int entries = 0;
  for (const auto& n : cycle)
    if (n["idom"] == "leaked") {
      ++entries;
      CHECK(n["retained"] == cycle_bytes);
      CHECK(n["retained_blocks"] == cycle_blocks);
    }
  CHECK(entries == 1);
}

TEST_CASE("retained: the exported graph's dominators equal networkx's", "[core][retained]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  for (const char* mode : {"shapes", "cache"}) {
    const auto& fc = std::string(mode) == "cache" ? graphs_core(mode, {"3000"}) : graphs_core(mode);
    const std::string file = lrtest::tmp_dir() + "/nx-" + mode + ".json";
    exported(fc.core, file);
    auto r = lrtest::run(
        {"python3", std::string(LR_SOURCE_DIR) + "/tests/check_dominators.py", file}, 300);
    INFO(mode << ": " << r.out << r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find(" 0 differences") != std::string::npos);
  }
}

TEST_CASE("retained: a chain of a million blocks, iteratively", "[core][retained]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = graphs_core("chain");
  const json& ch = fc.manifest["chain"];
  auto r = lrtest::leakref(
      {"retained", fc.core, "--tree", ch["head"].get<std::string>(), "--depth", "1", "--json"},
      300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["partial"] == false);
  const json& head = j["tree"][0];
  CHECK(head["node"] == ch["head"]);
  CHECK(head["type"] == "struct gnode");
  CHECK(head["idom"] == "global g_chain [fx_graphs]");
  CHECK(head["retained_blocks"] == ch["blocks"]);
  CHECK(head["retained"] == ch["retained"]);
  // The suspect is the global, and the list's head is where it accumulates.
  auto s = lrtest::leakref({"suspects", fc.core, "--json"}, 300);
  INFO(s.err);
  REQUIRE(s.status == 0);
  const json sj = s.json();
  REQUIRE(sj["suspects"].size() >= 1);
  CHECK(sj["suspects"][0]["node"]["node"] == "global g_chain [fx_graphs]");
  CHECK(sj["suspects"][0]["accumulation"]["node"] == ch["head"]);
  CHECK(sj["suspects"][0]["chain"] == ch["blocks"].get<uint64_t>() - 1);
  auto t = lrtest::leakref({"suspects", fc.core});
  CHECK(t.out.find("It heads a chain of 999999 more struct gnode") != std::string::npos);
}

TEST_CASE("retained: paths, trees and types name the program's structures", "[core][retained]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = graphs_core("cache", {"3000"});
  const json& c = fc.manifest["cache"];
  // The global retains the table and every entry.
  auto r = lrtest::leakref({"retained", fc.core, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  const json& h = j["holders"][0];
  CHECK(h["node"] == "global g_cache [fx_graphs]");
  CHECK(h["retained"] == c["bytes"]);
  CHECK(h["retained_blocks"] == c["entries"].get<uint64_t>() + 1);
  CHECK(j["biggest"][0]["node"] == c["addr"]);
  CHECK(j["biggest"][0]["type"] == "struct cache");
  // By type: the entries together, each chain counted once.
  auto bt = lrtest::leakref({"retained", fc.core, "--by-type", "--json"}, 300);
  REQUIRE(bt.status == 0);
  bool entries = false;
  const json btj = bt.json();
  for (const auto& row : btj["by_type"])
    if (row["type"] == "struct entry") {
      entries = true;
      CHECK(row["count"] == c["entries"]);
      CHECK(row["retained"] == c["entries_bytes"]);
    }
  CHECK(entries);
  // The path to an entry deep in a bucket's chain goes through the table's
  // bucket and each entry's next.
  auto p = lrtest::leakref({"retained", fc.core, "--path", c["addr"].get<std::string>()});
  INFO(p.out);
  CHECK(p.out.find("global g_cache [fx_graphs]") != std::string::npos);
  auto m = lrtest::leakref({"retained", fc.core, "--paths-of", "struct entry", "--depth", "3"});
  INFO(m.out);
  CHECK(m.status == 0);
  CHECK(m.out.find("3000 blocks of type struct entry") != std::string::npos);
  CHECK(m.out.find("3000: global g_cache [fx_graphs]") != std::string::npos);
  CHECK(m.out.find(".buckets[") != std::string::npos);
  // The table's first five children, as a partial sort finds them, are the
  // first five of all of them sorted.
  auto kids = [&](const char* top) {
    auto k = lrtest::leakref({"retained", fc.core, "--tree", c["addr"].get<std::string>(),
                              "--depth", "1", "--top", top, "--json"});
    REQUIRE(k.status == 0);
    const json tree = k.json()["tree"];
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const auto& n : tree)
      if (n["depth"] == 1) out.emplace_back(n["node"], n["retained"]);
    return out;
  };
  const auto five = kids("5"), all = kids("100000");
  REQUIRE(all.size() > 40);  // enough children for the partial sort
  REQUIRE(five.size() == 5);
  CHECK(std::equal(five.begin(), five.end(), all.begin()));
  CHECK(std::is_sorted(all.begin(), all.end(),
                       [](const auto& x, const auto& y) { return x.second > y.second; }));
}

TEST_CASE("suspects: growth against a baseline dump names the place that grew",
          "[core][retained]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& before = graphs_core("cache", {"3000"});
  const auto& after = graphs_core("cache", {"40000"});
  auto r = lrtest::leakref({"suspects", after.core, "--baseline", before.core, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  const uint64_t grew = after.manifest["cache"]["entries_bytes"].get<uint64_t>() -
                        before.manifest["cache"]["entries_bytes"].get<uint64_t>();
  bool place = false;
  for (const auto& g : j["growth"])
    if (g["place"] == "global g_cache [fx_graphs] > struct cache > struct entry") {
      place = true;
      CHECK(g["growth"] == grew);
      CHECK(g["count_before"] == 512);
      CHECK(g["count_after"] == 512);
    }
  CHECK(place);
  REQUIRE(j["suspects"].size() >= 1);
  const json& s = j["suspects"][0];
  CHECK(s["node"]["node"] == "global g_cache [fx_graphs]");
  CHECK(s["accumulation"]["type"] == "struct cache");
  CHECK(s["held"][0]["type"] == "struct entry");
  CHECK(s["held"][0]["count"] == 512);
  auto f = lrtest::leakref(
      {"suspects", after.core, "--baseline", before.core, "--fail-on", "growth"}, 300);
  CHECK(f.status == 1);
  CHECK(f.out.find("  global g_cache [fx_graphs] > struct cache > struct entry\n") !=
        std::string::npos);
}

// docs/cli.md's retained and suspects examples, executed as written on
// fresh cores (addresses and thread ids aside: they differ from run to run).
// A group retains together what none of its blocks retains alone: the
// cache's entries are chained, so each entry retains the rest of its
// chain, and the 40,000 entries as one group retain exactly themselves
// (200 bytes each, as the fixture allocates them); the cache block with
// them retains its bucket array too, and nothing is held around them.
TEST_CASE("retained --group: what a type's blocks retain together", "[core][retained]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = graphs_core("cache", {"40000"});
  auto r = lrtest::leakref({"retained", fc.core, "--json", "--group", "struct entry"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json g = r.json()["group"];
  CHECK(g["blocks"] == 40000);
  CHECK(g["retained_blocks"] == 40000);
  CHECK(g["retained"] == 40000 * 200);
  REQUIRE(g["by_type"].size() == 1);
  CHECK(g["by_type"][0]["type"] == "struct entry");
  CHECK(g["shared"].empty());
  r = lrtest::leakref(
      {"retained", fc.core, "--json", "--group", "struct entry", "--group", "struct cache"}, 300);
  REQUIRE(r.status == 0);
  g = r.json()["group"];
  CHECK(g["blocks"] == 40001);
  CHECK(g["retained"] == 40000 * 200 + 4104);
  // This fixture's thread sleeps in a system call: its vector registers'
  // copies (two, before 7568062) are no roots at all, and its general ones
  // hold none, so no register reference is set aside.
  r = lrtest::leakref({"retained", fc.core, "--json"}, 300);
  REQUIRE(r.status == 0);
  CHECK(r.json()["heap"]["register_refs_set_aside"] == 0);
  // Spinning in its own code with the table in r12 (and its copies the
  // call left in other general registers): those references, to a block
  // g_cache reaches too, are set aside and said; --all-roots counts them.
  const auto& spin = graphs_core("cache", {"3000", "spin"});
  r = lrtest::leakref({"retained", spin.core, "--json"}, 300);
  REQUIRE(r.status == 0);
  CHECK(r.json()["heap"]["register_refs_set_aside"].get<uint64_t>() > 0);
  r = lrtest::leakref({"retained", spin.core, "--json", "--all-roots"}, 300);
  REQUIRE(r.status == 0);
  CHECK(r.json()["heap"]["register_refs_set_aside"] == 0);
  // A group naming nothing is refused, never an empty answer.
  r = lrtest::leakref({"retained", fc.core, "--group", "struct nosuch"}, 300);
  CHECK(r.status != 0);
  CHECK(r.err.find("--group struct nosuch") != std::string::npos);
}

TEST_CASE("docs: the retained examples run as written", "[core][retained][docs]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& now = graphs_core("cache", {"40000"});
  const auto& before = graphs_core("cache", {"3000"});
  const std::string part = lrtest::readme_section("retained");
  REQUIRE(!part.empty());
  const std::string dir = lrtest::tmp_dir() + "/docs-retained";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", now.core, dir + "/core"}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", before.core, dir + "/before"}).status == 0);
  auto norm = [](const std::string& s) {
    return std::regex_replace(std::regex_replace(s, std::regex("0x[0-9a-f]{6,}"), "0xADDR"),
                              std::regex("thread [0-9]+"), "thread N");
  };
  CHECK(lrtest::check_doc_commands(part, dir, norm) == 3);
}

// A core cut short: the tree is said to be partial (the memory the core
// lacks may hold roots), never a whole answer; and the graph is never
// written over the core.
TEST_CASE("retained: a truncated core gives a partial tree; --export spares the core",
          "[core][retained][hostile]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = graphs_core("shapes");
  const std::string img = lrtest::read_file(fc.core);
  const std::string p = lrtest::tmp_dir() + "/graphs-truncated.core";
  lrtest::write_file(p, img.substr(0, img.size() * 9 / 10));
  for (const char* cmd : {"retained", "suspects"}) {
    auto r = lrtest::leakref({cmd, p, "--json"}, 300);
    INFO(cmd << ": " << r.err);
    REQUIRE(r.status < 128);
    if (r.status != 0) {  // refused in one line that says why (gcore's notes come last)
      CHECK(r.status == 3);
      CHECK(r.err.find("truncated") != std::string::npos);
      continue;
    }
    const json j = r.json();
    CHECK(j["partial"] == true);
    CHECK(!j["partial_reasons"].empty());
    auto f = lrtest::leakref({cmd, p, "--fail-on", "partial"}, 300);
    CHECK(f.status == 1);
    CHECK(f.out.rfind("partial: ", 0) == 0);
  }
  // A baseline of another program is refused, not compared.
  const auto& other = graphs_core("cache", {"3000"});
  auto b = lrtest::leakref(
      {"suspects", other.core, "--baseline",
       lrtest::fixture_core("roots-readonly", lrtest::fixture_path("fx_roots"), {"readonly"})
           .core});
  CHECK(b.status == 2);
  CHECK(b.err.find("not a core of the same executable") != std::string::npos);
  const std::string before = lrtest::sha256_file(fc.core);
  auto e = lrtest::leakref({"retained", fc.core, "--export", fc.core});
  CHECK(e.status == 2);
  CHECK(e.err.find("is the core; not overwritten") != std::string::npos);
  CHECK(lrtest::sha256_file(fc.core) == before);
}

// --html: one page with no scripts, an icicle chart whose first row holds
// the nodes directly below the roots, each as wide as its share of the
// heap (the JSON's holders), the suspects as `suspects` lists them, and a
// real browser renders it.
TEST_CASE("retained --html: the chart and the suspects, rendered in a real browser",
          "[core][retained][html]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = graphs_core("cache", {"3000"});
  const std::string d = lrtest::tmp_dir(), html = d + "/retained.html";
  auto r = lrtest::leakref({"retained", fc.core, "--top", "1000", "--json", "--html", html});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  const std::string page = lrtest::read_file(html);
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("http://") == page.find("http://www.w3.org/2000/svg"));  // the namespace only
  auto rows = lrtest::run({"python3", "-c",
                           "import sys,xml.dom.minidom as m,re\n"
                           "p=open(sys.argv[1]).read()\n"
                           "s=m.parseString(re.search(r'<svg.*?</svg>',p,re.S).group(0))\n"
                           "for r in s.getElementsByTagName('rect'):\n"
                           "  if r.getAttribute('data-row')=='0':\n"
                           "    print(r.getAttribute('width'), r.getAttribute('data-node'))",
                           html});
  INFO(rows.err);
  REQUIRE(rows.status == 0);
  std::map<std::string, double> width;
  std::istringstream in(rows.out);
  for (std::string line; std::getline(in, line);)
    width[line.substr(line.find(' ') + 1)] = std::stod(line.substr(0, line.find(' ')));
  const double heap = j["heap"]["bytes"].get<double>();
  size_t shown = 0;
  for (const auto& h : j["holders"]) {
    const double w = 1160 * h["retained"].get<double>() / heap;
    if (w < 1) continue;
    INFO(h["node"]);
    REQUIRE(width.count(h["node"]));
    CHECK(std::abs(width[h["node"]] - w) < 0.01);
    ++shown;
  }
  CHECK(shown == width.size());
  CHECK(shown >= 1);
  // The suspects, as `suspects` says them.
  auto s = lrtest::leakref({"suspects", fc.core, "--json"});
  REQUIRE(s.status == 0);
  const json sj = s.json();
  REQUIRE(!sj["suspects"].empty());  // the cache retains most of the heap
  for (const auto& x : sj["suspects"]) {
    std::string text = x["text"].get<std::string>();
    text = std::regex_replace(text, std::regex("&"), "&amp;");
    text = std::regex_replace(text, std::regex("<"), "&lt;");
    text = std::regex_replace(text, std::regex(">"), "&gt;");
    CHECK(page.find(text) != std::string::npos);
  }
  // Never over the core.
  auto over = lrtest::leakref({"retained", fc.core, "--html", fc.core});
  CHECK(over.status != 0);
  CHECK(over.err.find("is the core; not overwritten") != std::string::npos);
  if (!lrtest::have_program("chromium"))
    FAIL("chromium is not installed (make test installs it): the page's rendering is untested");
  long blank = lrtest::screenshot("about:blank", d + "/retained-blank.png");
  long shot = lrtest::screenshot("file://" + html, d + "/retained.png");
  INFO("screenshot bytes: page " << shot << ", blank page " << blank);
  REQUIRE(blank > 0);
  CHECK(shot > 4 * blank);
}
