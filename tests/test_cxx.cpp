// C++ programs: libstdc++'s standard containers walked from their globals
// (walk --std), element by element against gdb's own libstdc++
// pretty-printers on the same core; containers whose records disagree with
// their nodes are said to, never listed short in silence.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "doc_checks.hpp"
#include "harness.hpp"

using nlohmann::json;

namespace {

// Each global and the fields that make one element's leaves, in gdb's
// order (a map's entry: its key, then its value's members).
const std::vector<std::pair<std::string, std::string>> kContainers = {
    {"g_vec", "."},
    {"g_points", "x,y"},
    {"g_list", "."},
    {"g_flist", "."},
    {"g_map", "first,second"},
    {"g_mmap", "first,second"},
    {"g_set", "."},
    {"g_umap", "first,second"},
    {"g_uset", "."},
    {"g_wide", "first,second.a,second.b"},
    {"g_nodes", "first,second.x,second.y"},
    {"g_map_ptr", "first,second"},
    {"g_empty", "."},
    {"g_deque", "."},
    {"g_dpoints", "x,y"},
    {"g_arr", "."},
    {"g_parr", "x,y"},
    {"g_up", "x,y"},
    {"g_up_null", "x,y"},
    {"g_opt", "x,y"},
    {"g_opt_none", "."},
};

// gdb's view: {"g_vec": [["-50"], ["-43"], ...], ...}.
json gdb_elements(const std::string& exe, const std::string& core) {
  std::string names;
  for (const auto& [g, f] : kContainers) names += (names.empty() ? "" : ",") + g;
  const std::string script = std::string(LR_SOURCE_DIR) + "/tests/gdb_std_elements.py";
  // C++ as the language: the core stops in libc's pause(), a C frame, and
  // in C gdb names a type "struct std::pair<...>", a name the printers'
  // node-type lookup then misses.
  auto r = lrtest::run(
      {"/usr/bin/env", "LR_GLOBALS=" + names, "gdb", "-batch", "-nx", "-ex", "set language c++",
       "-ex", "python exec(open('" + script + "').read())", exe, core},
      300);
  INFO("gdb: " << r.err);
  const size_t at = r.out.find("LR-JSON ");
  REQUIRE(at != std::string::npos);
  return json::parse(r.out.substr(at + 8, r.out.find('\n', at) - at - 8));
}

// leakref's view of one container, in the same form.
json leakref_elements(const std::string& core, const std::string& head, const std::string& show) {
  auto r = lrtest::leakref({"walk", core, "--std", "--head", head, "--show", show, "--json"}, 300);
  INFO("leakref walk --std --head " << head << ": " << r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["warnings"].empty());
  CHECK(j["summary"]["stop"] == "end");
  json out = json::array();
  std::vector<std::string> fields;
  for (size_t s = 0, e; s <= show.size(); s = e + 1) {
    e = std::min(show.find(',', s), show.size());
    fields.push_back(show.substr(s, e - s));
  }
  for (const auto& o : j["objects"]) {
    json leaves = json::array();
    for (const auto& f : fields) {
      const json& v = o["fields"][f];
      leaves.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    }
    out.push_back(leaves);
  }
  return out;
}

}  // namespace

TEST_CASE("walk --std: libstdc++'s containers equal gdb's pretty-printers, element by element",
          "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const std::string exe = lrtest::fixture_path("fx_cxx");
  const auto& fc = lrtest::fixture_core("cxx", exe);
  const json want = gdb_elements(exe, fc.core);
  for (const auto& [g, show] : kContainers) {
    INFO(g);
    const json got = leakref_elements(fc.core, g, show);
    CHECK(got == want[g]);
    const std::string counted = g == "g_map_ptr" ? "g_map" : g;
    CHECK(got.size() == fc.manifest["containers"][counted].get<size_t>());
  }
  // The element type comes from the container's own template parameters.
  auto r = lrtest::leakref({"walk", fc.core, "--std", "--head", "g_map", "--summary", "--json"});
  REQUIRE(r.status == 0);
  CHECK(r.json()["type"] == "struct pair<int const, long int>");
}

// A size that disagrees with the nodes, a tree whose node links back, a
// head that is no container: a warning naming it or one clear error, never
// a short list passed off as the whole.
TEST_CASE("walk --std: damaged containers are said to be", "[core][cpp][hostile]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("cxx", lrtest::fixture_path("fx_cxx"));
  // Where a member is, and what it holds, through leakref's own member
  // paths (as the walk finds them: no offset written here).
  auto at = [&](const std::string& place, const char* key) {
    auto r = lrtest::leakref({"show", fc.core, place, "--json"});
    INFO(place << ": " << r.err);
    REQUIRE(r.status == 0);
    const json v = r.json()[key];
    return v.is_string() ? std::stoull(v.get<std::string>(), nullptr, 16) : v.get<uint64_t>();
  };
  const std::string dir = lrtest::tmp_dir();
  const uint64_t count_at = at("&g_map._M_t._M_impl._M_node_count", "addr");
  const std::string bad = lrtest::patched(fc.core, dir + "/cxx-count.core", {{count_at, 499}});
  auto r = lrtest::leakref(
      {"walk", bad, "--std", "--head", "g_map", "--summary", "--json", "--fail-on", "issue"});
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK(r.out.find("records 499 elements, but 500 nodes were walked") != std::string::npos);
  // The set's root made its own left child: a cycle, stopped and said.
  const uint64_t root = at("g_set._M_t._M_impl._M_header._M_parent", "value");
  const uint64_t left_at = at("&g_set._M_t._M_impl._M_header._M_parent->_M_left", "addr");
  const std::string cyc = lrtest::patched(fc.core, dir + "/cxx-cycle.core", {{left_at, root}});
  r = lrtest::leakref({"walk", cyc, "--std", "--head", "g_set", "--summary", "--json"});
  INFO(r.out << r.err);
  CHECK(r.json()["summary"]["stop"] == "cycle");
  // A vector's size past its capacity: refused, naming the three words.
  const uint64_t finish_at = at("&g_vec._M_impl._M_finish", "addr");
  const uint64_t end = at("g_vec._M_impl._M_end_of_storage", "value");
  const std::string over =
      lrtest::patched(fc.core, dir + "/cxx-over.core", {{finish_at, end + 8 * 100}});
  r = lrtest::leakref({"walk", over, "--std", "--head", "g_vec", "--summary"});
  INFO(r.out << r.err);
  CHECK(r.status != 0);
  CHECK(r.err.find("_M_end_of_storage") != std::string::npos);
  // A deque whose middle map slot points elsewhere: the walk stops there,
  // said; its _M_finish slot before its _M_start's: refused.
  const uint64_t slot = at("g_deque._M_impl._M_start._M_node", "value");
  const std::string moved =
      lrtest::patched(fc.core, dir + "/cxx-deque-slot.core", {{slot + 8 * 2, 0x1000}});
  r = lrtest::leakref({"walk", moved, "--std", "--head", "g_deque", "--summary", "--json"});
  INFO(r.out << r.err);
  CHECK(r.json()["summary"]["stop"] != "end");
  const uint64_t fin_node = at("&g_deque._M_impl._M_finish._M_node", "addr");
  const std::string back =
      lrtest::patched(fc.core, dir + "/cxx-deque-back.core", {{fin_node, slot - 8}});
  r = lrtest::leakref({"walk", back, "--std", "--head", "g_deque", "--summary"});
  INFO(r.out << r.err);
  CHECK(r.status != 0);
  CHECK(r.err.find("not a deque's iterators") != std::string::npos);
  // An optional whose flag is no bool: refused, never read as engaged.
  const uint64_t flag = at("&g_opt._M_payload._M_engaged", "addr");
  const std::string odd = lrtest::patched(fc.core, dir + "/cxx-opt.core", {{flag, 5}}, 1);
  r = lrtest::leakref({"walk", odd, "--std", "--head", "g_opt", "--summary"});
  INFO(r.out << r.err);
  CHECK(r.status != 0);
  CHECK(r.err.find("_M_engaged is 5, no bool") != std::string::npos);
  // Not a container: refused, naming it.
  r = lrtest::leakref({"walk", fc.core, "--std", "--head", "main"});
  CHECK(r.status != 0);
  CHECK(r.err.find("not a C++ standard container") != std::string::npos);
}

namespace {

uint64_t hex(const json& v) {
  return std::stoull(v.get<std::string>(), nullptr, 16);
}

// The exported graph's blocks: start -> (size, type).
std::map<uint64_t, std::pair<uint64_t, std::string>> exported_blocks(const std::string& core) {
  const std::string file = lrtest::tmp_dir() + "/cxx-graph.json";
  auto r = lrtest::leakref({"retained", core, "--export", file, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json doc = r.json();
  CHECK(doc["warnings"].empty());
  const json g = json::parse(lrtest::read_file(file));
  std::map<uint64_t, std::pair<uint64_t, std::string>> out;
  for (const auto& n : g["nodes"])
    if (n["kind"] == "block") out[hex(n["node"])] = {n["size"], n["type"]};
  return out;
}

}  // namespace

// The blocks a container allocated are named by the container and what
// holds it: each block holding an element the program's own iterators
// gave (the manifest's "owned") has the container's name, and no other
// block has it.
TEST_CASE("retained and account: containers' blocks are named by what holds them", "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("cxx", lrtest::fixture_path("fx_cxx"));
  const auto blocks = exported_blocks(fc.core);
  REQUIRE(!blocks.empty());
  auto block_of = [&](uint64_t a) -> uint64_t {
    auto it = blocks.upper_bound(a);
    if (it == blocks.begin()) return 0;
    --it;
    return a < it->first + it->second.first ? it->first : 0;
  };
  std::map<std::string, size_t> named;
  for (const auto& [a, b] : blocks) ++named[b.second];
  const std::vector<std::pair<std::string, std::string>> want = {
      {"g_map", "node of std::map<int, long> g_map"},
      {"g_list", "node of std::list<int> g_list"},
      {"g_flist", "node of std::forward_list<int> g_flist"},
      {"g_set", "node of std::set<int> g_set"},
      {"g_umap", "node of std::unordered_map<int, long> g_umap"},
      {"g_owned", "node of std::map<int, Point*> g_owned"},
      {"g_owned points", "struct Point"},
      {"g_names", "node of std::map<std::string, long> g_names"},
      {"g_names keys", "characters of std::string g_names[].first"},
      {"g_reg->index", "node of std::unordered_map<long, long> Registry.index"},
      {"g_vec", "elements of std::vector<long> g_vec"},
      {"g_reg->items", "elements of std::vector<long> Registry.items"},
      {"g_deque", "buffer of std::deque<long> g_deque"},
  };
  const json& owned = fc.manifest["owned"];
  for (const auto& [key, type] : want) {
    INFO(key << " should be in blocks named " << type);
    std::set<uint64_t> in;
    REQUIRE(!owned[key].empty());
    for (const auto& a : owned[key]) {
      const uint64_t b = block_of(hex(a));
      REQUIRE(b != 0);
      CHECK(blocks.at(b).second == type);
      in.insert(b);
    }
    // One element a node (a vector's one array; a deque's 64-long buffers),
    // and every block so named is one of them.
    if (key == "g_deque")
      CHECK(in.size() == 7);  // 77 in the first buffer's last 77 - 64 = 13 and one full, 300 on
    else
      CHECK(in.size() == (key == "g_vec" || key == "g_reg->items" ? 1 : owned[key].size()));
    if (type != "struct Point") CHECK(named[type] == in.size());
  }
  const uint64_t reg = block_of(hex(owned["g_reg"]));
  REQUIRE(reg != 0);
  CHECK(blocks.at(reg).second == "struct Registry");
  // The hash table's bucket array: one block, its bucket count's pointers.
  size_t bucket_arrays = 0;
  for (const auto& [a, b] : blocks)
    if (b.second == "buckets of std::unordered_map<int, long> g_umap") {
      ++bucket_arrays;
      CHECK(b.first >= fc.manifest["umap_buckets"].get<uint64_t>() * 8);
    }
  CHECK(bucket_arrays == 1);
  // The account groups the live blocks by the same names.
  auto acc = lrtest::leakref({"account", fc.core, "--json"}, 300);
  REQUIRE(acc.status == 0);
  const json aj = acc.json();
  std::map<std::string, uint64_t> counted;
  std::vector<const json*> stack;
  for (const auto& c : aj["categories"]) stack.push_back(&c);
  while (!stack.empty()) {
    const json* n = stack.back();
    stack.pop_back();
    counted[(*n)["name"].get<std::string>()] += (*n)["blocks"].get<uint64_t>();
    for (const auto& c : (*n)["children"]) stack.push_back(&c);
  }
  CHECK(counted["node of std::map<int, long> g_map"] == owned["g_map"].size());
  CHECK(counted["node of std::unordered_map<long, long> Registry.index"] ==
        owned["g_reg->index"].size());
  CHECK(counted["elements of std::vector<long> g_vec"] == 1);
}

TEST_CASE("docs: the walk --std examples run as written", "[core][cpp][docs]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("cxx", lrtest::fixture_path("fx_cxx"));
  const std::string part = lrtest::readme_section("cxx");
  REQUIRE(!part.empty());
  const std::string dir = lrtest::tmp_dir() + "/docs-cxx";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", fc.core, dir + "/core"}).status == 0);
  auto norm = [](const std::string& s) {
    return std::regex_replace(s, std::regex("0x[0-9a-f]{6,}"), "0xADDR");
  };
  CHECK(lrtest::check_doc_commands(part, dir, norm) == 3);
}

namespace {

// A fixture's shared_ptrs (fx_cxx's with libstdc++, fx_libcxx's with
// libc++), its own truth masked in its memory (a plain copy would be one
// more owner): three shared_ptrs and a weak_ptr on one block, a second
// owner new'd and lost, a cycle of two, a separate pointer block. `m` has
// "mask", "masked" and "use"; `owner` is the library's member pointing at
// the block, `sep` how its separate pointer block's class begins.
void check_shared(const lrtest::FixtureCore& fc, const json& m, const std::string& exe,
                  const std::string& owner, const std::string& sep_class) {
  const uint64_t mask = std::stoull(m["mask"].get<std::string>(), nullptr, 16);
  std::vector<std::string> a;  // sp, sp object, kept, kept object, sep, sep object, cyc a, cyc b
  for (const auto& v : m["masked"])
    a.push_back(fmt::format("{:#x}", std::stoull(v.get<std::string>(), nullptr, 16) ^ mask));
  REQUIRE(a.size() == 8);
  auto r = lrtest::leakref({"shared", fc.core, "--all", "--json"}, 300);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  std::map<std::string, json> by;
  for (const auto& b : j["blocks"]) by[b["addr"]] = b;
  CHECK(j["control_blocks"] == 5);
  REQUIRE(by.count(a[0]));
  const json& sp = by[a[0]];
  CHECK(sp["object"] == a[1]);
  CHECK(sp["use_count"] == m["use"][0]);
  CHECK(sp["weak_count"] == 2);  // one weak_ptr, and the shared owners' one
  CHECK(sp["live_owners"] == 4);
  CHECK(sp["verdict"] == "ok");
  std::set<std::string> names;
  for (const auto& o : sp["owners"]) names.insert(o["name"].get<std::string>());
  std::set<std::string> want;
  for (const char* g : {"g_sp1", "g_sp2", "g_sp3", "g_wp"})
    want.insert(fmt::format("global {}.{} [{}]", g, owner, exe));
  CHECK(names == want);
  const json& kept = by[a[2]];
  CHECK(kept["object"] == a[3]);
  CHECK(kept["use_count"] == m["use"][1]);
  CHECK(kept["live_owners"] == 1);
  CHECK(kept["owners"].size() == 2);  // the lost one inside its leaked block
  CHECK(kept["verdict"] == "leaked-owner");
  const json& sep = by[a[4]];
  CHECK(sep["object"] == a[5]);
  CHECK(sep["use_count"] == m["use"][2]);
  CHECK(sep["verdict"] == "ok");
  CHECK(sep["type"].get<std::string>().rfind(sep_class, 0) == 0);
  // The cycle: each held only by the other's Cyc.next.
  for (int k : {6, 7}) {
    INFO("cycle block " << a[k]);
    const json& c = by[a[k]];
    CHECK(c["verdict"] == "leaked");
    REQUIRE(c["owners"].size() == 1);
    CHECK(c["owners"][0]["live"] == false);
    const std::string other = a[k == 6 ? 7 : 6];
    CHECK(c["owners"][0]["name"].get<std::string>().find(".next." + owner + " (in control block " +
                                                         other + ")") != std::string::npos);
  }
  CHECK(j["verdicts"]["ok"] == 2);
  r = lrtest::leakref({"shared", fc.core, "--fail-on", "leaked"}, 300);
  CHECK(r.status == 1);
  // leaks agrees: the cycle's two blocks and the lost owner's are leaked,
  // and it shows the cycle, each block's word by the Cyc member it is.
  auto l = lrtest::leakref({"leaks", fc.core, "--json"}, 300);
  REQUIRE(l.status == 0);
  const json lj = l.json();
  CHECK(lj["summary"]["leaked"] == 3);
  CHECK(lj["cycle_groups"] == 1);
  REQUIRE(lj["cycles"].size() == 1);
  const json& y = lj["cycles"][0];
  INFO(y.dump());
  CHECK(std::set<std::string>(y["blocks"].begin(), y["blocks"].end()) ==
        std::set<std::string>{a[6], a[7]});
  // libstdc++ keeps make_shared's object in a buffer templated on it, which
  // is named as the object; libc++'s in a plain byte blob, named as bytes.
  REQUIRE(y["links"].size() == 2);
  for (const auto& w : y["links"])
    CHECK(
        (w.get<std::string>().find(".next.") != std::string::npos || owner != "_M_refcount._M_pi"));
  auto t = lrtest::leakref({"leaks", fc.core}, 300);
  CHECK(t.out.find("1 group of leaked blocks that hold one another") != std::string::npos);
}

}  // namespace

TEST_CASE("shared: control blocks' counts against their owners, cycles", "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("cxx", lrtest::fixture_path("fx_cxx"));
  check_shared(fc, fc.manifest, "fx_cxx", "_M_refcount._M_pi", "std::_Sp_counted_ptr<Point*");
}

// libc++ stores one less than each count, in a long: the same fixture's
// verdicts and counts, built with clang++ -stdlib=libc++.
TEST_CASE("shared: libc++'s control blocks, counted as libstdc++'s are", "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("libcxx", lrtest::fixture_path("fx_libcxx"));
  check_shared(fc, fc.manifest["shared"], "fx_libcxx", "__cntrl_",
               "std::__1::__shared_ptr_pointer<Point*");
}

// make bench's fixture, small: 20,000 owners held by one vector (a block
// that points at every control block, read once for all of them), pairs in
// cycles, one leaked owner, and a pair erased from a vector whose words
// stay in its spare capacity (stale: no owners, and no root's reach);
// every verdict as the program made it.
TEST_CASE("shared: owners in a vector, cycles, a lost owner and stale words, exactly",
          "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("cxxscale", lrtest::fixture_path("fx_cxxscale"),
                                        {"3000", "20000", "spare"});
  const json& m = fc.manifest;
  auto r = lrtest::leakref({"shared", fc.core, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  const int64_t owned = m["owned"], cycles = m["cycles"], lost = m["leaked_owners"];
  const int64_t extra = m["extra_owners"];
  CHECK(j["verdicts"] == json{{"ok", owned},
                              {"leaked-owner", lost},
                              {"extra-owner", extra},
                              {"leaked", 2 * cycles},
                              {"corrupt", 0}});
  CHECK(j["control_blocks"] == owned + 2 * cycles + lost + extra);
  REQUIRE(m["stale_words"] == 2);
  CHECK(j["stale_words"] == m["stale_words"]);
  // A bitwise copy in a typed global is an extra owner for sure; one in an
  // untyped block is unsure, and its block ok.
  REQUIRE(extra == 1);
  CHECK(j["unsure_blocks"] == m["unsure_blocks"]);
  // Shown: the blocks that are not ok, each cycle's block held by its peer
  // (and the erased pair's by a stale word past g_spare's one element).
  const json blocks = j["blocks"];
  REQUIRE(blocks.size() == static_cast<size_t>(2 * cycles + lost + extra));
  int stale = 0;
  for (const auto& b : blocks) {
    if (b["verdict"] == "extra-owner") {
      REQUIRE(b["owners"].size() == 2);
      CHECK(b["use_count"] == 1);
      CHECK(b["unsure_owners"] == 0);
      std::set<std::string> names;
      for (const auto& o : b["owners"]) names.insert(o["name"].get<std::string>());
      CHECK(names == std::set<std::string>{"global g_twin_a._M_refcount._M_pi [fx_cxxscale]",
                                           "global g_twin_b._M_refcount._M_pi [fx_cxxscale]"});
    }
    if (b["verdict"] != "leaked") continue;
    int peers = 0;
    for (const auto& o : b["owners"]) {
      const std::string name = o["name"];
      INFO(name);
      CHECK(o["live"] == false);
      if (o["stale"] == true) {
        ++stale;
        CHECK(name.find("g_spare") != std::string::npos);
        CHECK(name.find("past its container's elements") != std::string::npos);
      } else {
        ++peers;
        CHECK(name.find(".peer._M_refcount._M_pi (in control block ") != std::string::npos);
      }
    }
    CHECK(peers == 1);
  }
  CHECK(stale == m["stale_words"]);
  // --all shows the unsure block: g_solo's, its copy in g_raw's block.
  auto all = lrtest::leakref({"shared", fc.core, "--all", "--json"}, 300);
  REQUIRE(all.status == 0);
  int unsure = 0;
  const json every = all.json();
  for (const auto& b : every["blocks"]) {
    if (b["unsure_owners"] == 0) continue;
    ++unsure;
    CHECK(b["verdict"] == "ok");
    CHECK(b["live_owners"] == 2);
    CHECK(b["use_count"] == 1);
    for (const auto& o : b["owners"])
      CHECK((o["unsure"] == true) ==
            (o["name"].get<std::string>().find("g_solo") == std::string::npos));
  }
  CHECK(unsure == 1);
}

// The pair erased from g_spare is held by nothing but its own words and
// the stale ones past g_spare's element: leaks, account and the retained
// tree call it leaked, as the census does (its words past the elements
// hold nothing once the heap is typed by its containers).
TEST_CASE("spare capacity: a cycle held only past a vector's elements is leaked everywhere",
          "[core][cpp][retained]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("cxxscale", lrtest::fixture_path("fx_cxxscale"),
                                        {"3000", "20000", "spare"});
  const json& m = fc.manifest;
  // Every cycle's two control blocks (make_shared: the Node inside) and
  // the lost owner's new'd shared_ptr.
  const int64_t leaked = 2 * m["cycles"].get<int64_t>() + m["leaked_owners"].get<int64_t>();
  auto l = lrtest::leakref({"leaks", fc.core, "--json"}, 300);
  INFO(l.err);
  REQUIRE(l.status == 0);
  const json lj = l.json();
  CHECK(lj["summary"]["leaked"] == leaked);
  // Each pair is a group of two that hold each other, each block's word
  // named through make_shared's buffer as the Node's member.
  CHECK(lj["cycle_groups"] == m["cycles"]);
  REQUIRE(lj["cycles"].size() == 100);
  for (const auto& y : lj["cycles"]) {
    INFO(y.dump());
    CHECK(y["group_blocks"] == 2);
    REQUIRE(y["blocks"].size() == 2);
    REQUIRE(y["links"].size() == 2);
    for (const auto& w : y["links"])
      CHECK(w.get<std::string>().find("._M_impl._M_storage.peer._M_") != std::string::npos);
  }
  auto a = lrtest::leakref({"account", fc.core, "--json"}, 300);
  REQUIRE(a.status == 0);
  int64_t account_leaked = -1;
  const json aj = a.json();  // kept: a range-for over a temporary's member dangles
  for (const auto& c : aj["categories"])
    if (c["name"] == "leaked") account_leaked = c["blocks"];
  CHECK(account_leaked == leaked);
  // The erased pair: the census's leaked blocks with a stale word.
  auto s = lrtest::leakref({"shared", fc.core, "--json"}, 300);
  REQUIRE(s.status == 0);
  std::set<std::string> pair;
  const json sj = s.json();
  for (const auto& b : sj["blocks"])
    for (const auto& o : b["owners"])
      if (o["stale"] == true) pair.insert(b["addr"].get<std::string>());
  REQUIRE(pair.size() == 2);
  // refs lists g_spare's word past its element as stale, no reference.
  for (const auto& p : pair) {
    auto f = lrtest::leakref({"refs", fc.core, p, "--depth", "8", "--json"}, 300);
    REQUIRE(f.status == 0);
    const json o = f.json()["objects"][0];
    INFO(o.dump());
    CHECK(o["reachable"] == false);
    CHECK(o["anchor_chain"].empty());
    int spare = 0;
    for (const auto& r : o["referrers"])
      CHECK(r["what"].get<std::string>().find("g_spare") == std::string::npos);
    for (const auto& r : o["stale_referrers"])
      spare += r["what"].get<std::string>().find("elements of std::vector") != std::string::npos &&
               r["what"].get<std::string>().find("g_spare") != std::string::npos;
    CHECK(spare >= 1);
  }
  const std::string file = lrtest::tmp_dir() + "/spare-graph.json";
  auto r = lrtest::leakref({"retained", fc.core, "--export", file, "--json"}, 300);
  REQUIRE(r.status == 0);
  const json doc = json::parse(lrtest::read_file(file));
  int entries = 0, found = 0;
  for (const auto& n : doc["nodes"]) {
    const std::string id = n["node"];
    if (!pair.count(id)) continue;
    ++found;
    INFO(id << " idom " << n["idom"]);
    CHECK((n["idom"] == "leaked" || pair.count(n["idom"].get<std::string>())));
    entries += n["idom"] == "leaked";
  }
  CHECK(found == 2);
  CHECK(entries == 1);
}

TEST_CASE("docs: the shared example runs as written", "[core][cpp][docs]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("cxx", lrtest::fixture_path("fx_cxx"));
  const std::string part = lrtest::readme_section("shared");
  REQUIRE(!part.empty());
  const std::string dir = lrtest::tmp_dir() + "/docs-shared";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", fc.core, dir + "/core"}).status == 0);
  auto norm = [](const std::string& s) {
    return std::regex_replace(s, std::regex("0x[0-9a-f]{6,}"), "0xADDR");
  };
  CHECK(lrtest::check_doc_commands(part, dir, norm) == 1);
}

// clang's DWARF names std::allocator without its parameter: a map's
// element type is then unknown, and the walk refuses it rather than read
// its keys' type as the element; a set's element is its first parameter.
TEST_CASE("walk --std: a clang-built map is refused, not read as its keys", "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  if (access("/usr/bin/clang++", X_OK) != 0) LR_SKIP("clang++ is not installed");
  const std::string exe = lrtest::tmp_dir() + "/fx_cxx_clang";
  auto b = lrtest::run({"/usr/bin/clang++", "-g", "-O0", "-o", exe,
                        std::string(LR_SOURCE_DIR) + "/fixtures/fx_cxx.cpp"},
                       300);
  INFO(b.err);
  REQUIRE(b.status == 0);
  const auto& fc = lrtest::fixture_core("cxx-clang", exe);
  auto r = lrtest::leakref({"walk", fc.core, "--std", "--head", "g_map", "--show", "first"});
  INFO(r.out << r.err);
  CHECK(r.status != 0);
  CHECK(r.err.find("no element type") != std::string::npos);
  r = lrtest::leakref({"walk", fc.core, "--std", "--head", "g_set", "--summary", "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.json()["summary"]["visited"] == fc.manifest["containers"]["g_set"]);
}

// A later dump of the program with 200 more Points in g_owned: diff
// --by-type says the map's nodes and the Points grew by exactly 200 each,
// as the manifests count them; without --by-type there are no such
// classes, and a side that did not count types is never read as "none".
TEST_CASE("diff --by-type: the map that grew, named by what holds it", "[core][cpp][diff]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& a = lrtest::fixture_core("cxx", lrtest::fixture_path("fx_cxx"));
  const auto& b = lrtest::fixture_core("cxx-more", lrtest::fixture_path("fx_cxx"), {"200"});
  auto r = lrtest::leakref({"diff", a.core, b.core, "--by-type", "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json d = r.json();
  std::map<std::string, json> types;
  for (const auto& c : d["classes"])
    if (c["kind"] == "type") types[c["name"].get<std::string>()] = c;
  const std::string node = "node of std::map<int, Point*> g_owned";
  REQUIRE(types.count(node));
  CHECK(types[node]["before"] == a.manifest["owned"]["g_owned"].size());
  CHECK(types[node]["after"] == b.manifest["owned"]["g_owned"].size());
  CHECK(types[node]["delta"] == 200);
  // Every node the same size: the bytes grew by 200 of them.
  const int64_t per = types[node]["before_bytes"].get<int64_t>() / 20;
  CHECK(types[node]["after_bytes"] == per * 220);
  REQUIRE(types.count("struct Point"));
  CHECK(types["struct Point"]["delta"] == 200);
  // The containers that did not change are unchanged.
  REQUIRE(types.count("node of std::map<int, long> g_map"));
  CHECK(types["node of std::map<int, long> g_map"]["delta"] == 0);
  // Without --by-type: no type classes at all.
  auto plain = lrtest::leakref({"diff", a.core, b.core, "--json"}, 300);
  REQUIRE(plain.status == 0);
  const json pj = plain.json();
  REQUIRE(!pj["classes"].empty());
  for (const auto& c : pj["classes"]) CHECK(c["kind"] != "type");
  // A snapshot saved without --by-type against a core read with it: the
  // types are not compared (never 220 "new" nodes), and it is said.
  auto saved = lrtest::leakref({"snapshot", a.core, "--json"}, 300);
  REQUIRE(saved.status == 0);
  const std::string file = lrtest::tmp_dir() + "/cxx-untyped.snapshot.json";
  lrtest::write_file(file, saved.out);
  auto mixed = lrtest::leakref({"diff", file, b.core, "--by-type", "--json"}, 300);
  REQUIRE(mixed.status == 0);
  const json m = mixed.json();
  REQUIRE(!m["classes"].empty());
  for (const auto& c : m["classes"]) CHECK(c["kind"] != "type");
  bool unknown_type = false;
  for (const auto& c : m["unknown"]) unknown_type |= c["kind"] == "type";
  CHECK(unknown_type);
  bool said = false;
  for (const auto& w : m["warnings"])
    said |= w.get<std::string>().find("--by-type") != std::string::npos;
  CHECK(said);
  // trend plots the same classes, one count per dump.
  auto t = lrtest::leakref(
      {"trend", a.core, b.core, "--by-type", "--order", "args", "--top", "200", "--json"}, 300);
  REQUIRE(t.status == 0);
  bool plotted = false;
  const json tj = t.json();  // kept: a temporary's member is no range to loop over
  for (const auto& c : tj["classes"])
    if (c["kind"] == "type" && c["name"] == node) plotted = c["counts"] == json::array({20, 220});
  CHECK(plotted);
}

// boost::intrusive_ptr through a profile: sets over standard containers
// (the elements, or what a pointer member of each points at), each count
// against its holders and the references found, against the fixture's own
// truth (fx_intrusive's manifest).
TEST_CASE("profile: boost::intrusive_ptr owners in std containers, reconciled",
          "[core][cpp][profile]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("intrusive", lrtest::fixture_path("fx_intrusive"));
  const std::string prof = std::string(LR_SOURCE_DIR) + "/tests/profiles/fx_intrusive.toml";
  auto r = lrtest::leakref(
      {"profile", fc.core, "--profile", prof, "--reconcile", "--all", "--jsonl"}, 300);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  std::map<std::string, json> objs, sets;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    const json j = json::parse(l);
    if (j["record"] == "object") objs[j["addr"].get<std::string>()] = j;
    if (j["record"] == "set") sets[j["set"].get<std::string>()] = j;
  }
  REQUIRE(sets.count("conns"));
  CHECK(sets["conns"]["matched"] == 40);
  CHECK(sets["active"]["matched"] == 14);
  CHECK(sets["sessions"]["matched"] == 20);
  CHECK(sets["conns"]["over_referenced"] == 2);
  CHECK(sets["conns"]["leaked_held"] == 1);
  CHECK(sets["sessions"]["over_referenced"] == 1);
  size_t seen = 0;
  for (const char* kind : {"conns", "sessions"}) {
    for (const auto& m : fc.manifest[kind]) {
      const std::string addr = m["addr"];
      INFO(kind << " " << addr);
      REQUIRE(objs.count(addr));
      const json& o = objs[addr];
      ++seen;
      CHECK(o["refcount"] == m["nref"]);
      CHECK(o["held"] == m["owners"]);
      const int unowned = m["unowned"], lost = m["leaked_owner"];
      CHECK(o["verdict"] == (unowned || lost ? "extra" : "ok"));
      CHECK(o.value("over", 0) == unowned);
      CHECK(o.value("from_leaked", 0) == lost);
      CHECK(o["inbound"] == m["owners"].get<int>() + lost);
    }
  }
  CHECK(seen == 60);
  // --fail-on flagged: the leaked references are findings.
  r = lrtest::leakref(
      {"profile", fc.core, "--profile", prof, "--reconcile", "--fail-on", "flagged"}, 300);
  CHECK(r.status == 1);
}

// A walk takes the objects a container's smart pointers point at; refs
// names a word in a container's node by the container and the element's
// member, and its chain from a root takes the container as one step, however
// deep the node hangs in its tree.
TEST_CASE("walk --std=PATH and refs: objects behind a container's pointers", "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("intrusive", lrtest::fixture_path("fx_intrusive"));
  auto r = lrtest::leakref({"walk", fc.core, "--std=second.px", "--head", "g_conns", "--refcount",
                            "nref", "--show", "id", "--json"},
                           300);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const json w = r.json();
  REQUIRE(w["objects"].size() == 40);
  for (size_t i = 0; i < 40; ++i) {
    CHECK(w["objects"][i]["addr"] == fc.manifest["conns"][i]["addr"]);
    CHECK(w["objects"][i]["refcount"] == fc.manifest["conns"][i]["nref"]);
  }
  // A path that is not a pointer is refused, naming what it is.
  r = lrtest::leakref({"walk", fc.core, "--std=second", "--head", "g_conns"}, 300);
  CHECK(r.status != 0);
  CHECK(r.err.find("'second' is intrusive_ptr<Conn>, not a typed pointer") != std::string::npos);
  std::string lost;
  for (const auto& m : fc.manifest["conns"])
    if (m["leaked_owner"] == 1) lost = m["addr"];
  REQUIRE(!lost.empty());
  r = lrtest::leakref({"refs", fc.core, lost, "--depth", "2", "--json"}, 300);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const json j = r.json()["objects"][0];
  REQUIRE(j["referrers"].size() == 2);
  bool in_node = false;
  for (const auto& ref : j["referrers"])
    in_node |= ref["what"].get<std::string>().find(
                   "node of std::map<int, intrusive_ptr<Conn>> g_conns, element.second.px") !=
               std::string::npos;
  CHECK(in_node);
  REQUIRE(j["anchor_chain"].size() == 2);
  CHECK(j["anchor_chain"][0]["what"] == "global g_conns [fx_intrusive]");
}

// libc++'s containers (clang++ -stdlib=libc++): Debian has no gdb printers
// for them, so fx_libcxx writes each element's address and value in its
// iterators' order, and walk --std must give the same, element by element.
TEST_CASE("walk --std: libc++'s containers equal the program's own iteration", "[core][cpp]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("libcxx", lrtest::fixture_path("fx_libcxx"));
  const std::map<std::string, std::string> show = {{"g_vec", "."},
                                                   {"g_points", "x,y"},
                                                   {"g_list", "."},
                                                   {"g_flist", "."},
                                                   {"g_map", "first,second"},
                                                   {"g_mmap", "first,second"},
                                                   {"g_set", "."},
                                                   {"g_umap", "first,second"},
                                                   {"g_uset", "."},
                                                   {"g_nodes", "first,second.x,second.y"},
                                                   {"g_arr", "x,y"},
                                                   {"g_up", "x,y"},
                                                   {"g_up_null", "x,y"},
                                                   {"g_empty", "."},
                                                   {"g_deque", "."},
                                                   {"g_dpoints", "x,y"},
                                                   {"g_dempty", "."},
                                                   {"g_spare", "."},
                                                   {"g_opt", "x,y"},
                                                   {"g_opt_none", "x,y"}};
  size_t elements = 0;
  for (const auto& [g, want] : fc.manifest["containers"].items()) {
    INFO(g);
    REQUIRE(show.count(g));
    auto r = lrtest::leakref(
        {"walk", fc.core, "--std", "--head", g, "--show", show.at(g), "--json"}, 300);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const json j = r.json();
    CHECK(j["warnings"].empty());
    CHECK(j["summary"]["stop"] == "end");
    CHECK(j["mode"] == "std:libc++");
    REQUIRE(j["objects"].size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const json& o = j["objects"][i];
      CHECK(o["addr"] == want[i][0]);
      std::string v;
      for (size_t s = 0, e; s <= show.at(g).size(); s = e + 1) {
        e = std::min(show.at(g).find(',', s), show.at(g).size());
        const json& f = o["fields"][show.at(g).substr(s, e - s)];
        v += (v.empty() ? "" : ",") + (f.is_string() ? f.get<std::string>() : f.dump());
      }
      CHECK(v == want[i][1]);
      ++elements;
    }
  }
  CHECK(elements > 4000);
  // The account names libc++'s nodes by the container holding them.
  auto a = lrtest::leakref({"account", fc.core, "--json"}, 300);
  REQUIRE(a.status == 0);
  CHECK(a.out.find("block of std::deque<long> g_deque") != std::string::npos);
  CHECK(a.out.find("map of std::deque<Point> g_dpoints") != std::string::npos);
  CHECK(a.out.find("spare block of std::deque<long> g_spare") != std::string::npos);
  CHECK(a.out.find("characters of std::string g_str") != std::string::npos);
  CHECK(a.out.find("g_short") == std::string::npos);
  CHECK(a.out.find("bits of std::vector<bool> g_bits") != std::string::npos);
  CHECK(a.out.find("control block of shared_ptr<Point> g_sep") != std::string::npos);
  CHECK(a.out.find("object of shared_ptr<Point> g_sep") != std::string::npos);
  CHECK(a.out.find("node of std::map<int, long> g_map") != std::string::npos);
  CHECK(a.out.find("node of std::unordered_map<int, long> g_umap") != std::string::npos);
  CHECK(a.out.find("elements of std::vector<long> g_vec") != std::string::npos);
}
