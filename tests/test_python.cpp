// CPython processes: every object of a real python3.11's core (Debian's,
// with python3.11-dbg) against the program's own count of them, taken just
// before the core (gc.get_objects by type, sys.getrefcount,
// sys.getallocatedblocks), and the references it counted that nothing
// holds (Py_IncRef called through ctypes: a Py_DECREF forgotten).
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "doc_checks.hpp"
#include "harness.hpp"
#include "roots_checks.hpp"

using nlohmann::json;

namespace {

const lrtest::FixtureCore& py_core() {
  return lrtest::fixture_core("pyobjects", lrtest::fixture_path("fx_pyobjects.py"));
}

// The tree of Debian 13's python3.13 and its debug info
// (scripts/debian-root, cached), where the 3.13 fixture runs chrooted.
const std::string& py313_root() {
  static std::string root;
  if (root.empty()) {
    auto r = lrtest::run({std::string(LR_SOURCE_DIR) + "/scripts/debian-root", "py313", "trixie",
                          "python3.13", "python3.13-dbg", "libc6-dbg"},
                         900);
    INFO(r.err);
    REQUIRE(r.status == 0);
    REQUIRE(r.out.rfind("ROOT=", 0) == 0);
    root = r.out.substr(5, r.out.find('\n') - 5);
  }
  return root;
}

// fx_pyobjects under Debian 13's python3.13, chrooted in its tree; leakref
// finds its debug info there (--debug-dir).
const lrtest::FixtureCore& py313_core() {
  const std::string& root = py313_root();
  return lrtest::fixture_core(
      "pyobjects313", lrtest::fixture_path("fx_pyobjects.py"), {},
      {std::string(LR_SOURCE_DIR) + "/scripts/debian-root", "--in", root, "--bind",
       lrtest::build_dir() + "/fixtures", "--bind-rw", lrtest::tmp_dir(), "/usr/bin/env",
       "PYTHONDONTWRITEBYTECODE=1", "/usr/bin/python3.13"});
}

std::vector<std::string> py313_opts() {
  return {"--debug-dir", py313_root() + "/usr/lib/debug"};
}

json python_json(const std::vector<std::string>& extra = {},
                 const lrtest::FixtureCore& fc = py_core(),
                 const std::vector<std::string>& opts = {}) {
  std::vector<std::string> args{"python", fc.core, "--json"};
  args.insert(args.end(), opts.begin(), opts.end());
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = lrtest::leakref(args, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

// Whether a python answer is whole but for the one partial reason any core
// may give by chance: a file the core leaves out (the C library's locale
// data) holding a word that happens to point into a block (python3.11 is
// not PIE: its brk heap lies at low addresses that 32-bit table entries
// can spell).
bool whole_but_for_files(const json& j) {
  for (const auto& r : j["partial_reasons"])
    if (r.get<std::string>().find("the core leaves out") == std::string::npos) return false;
  return true;
}

// A type's name as type(o).__name__ gives it: tp_name past its last dot.
std::string short_name(const std::string& tp_name) {
  const size_t dot = tp_name.rfind('.');
  return dot == std::string::npos ? tp_name : tp_name.substr(dot + 1);
}

void check_engine_leaks(const lrtest::FixtureCore& fc, const std::vector<std::string>& opts);

// Every object of fx_pyobjects' core `fc` (a CPython `release`), against
// the program's own count of them.
void check_every_object(const lrtest::FixtureCore& fc, const std::string& release,
                        const std::vector<std::string>& opts) {
  const json j = python_json({"--top", "100000"}, fc, opts);
  CHECK(j["version"].get<std::string>().rfind(release, 0) == 0);
  for (const auto& w : j["warnings"]) {
    INFO(w.get<std::string>());
    CHECK(w.get<std::string>().find("the core leaves out") != std::string::npos);
  }
  INFO(j["partial_reasons"].dump());
  CHECK(whole_but_for_files(j));

  // pymalloc's blocks in use, walked pool by pool, and its own count of the
  // requests it passed on to malloc: sys.getallocatedblocks(), measured
  // when nothing more was allocated.
  // Written beside the manifest: KEY.manifest.json.blocks for the core KEY.PID.
  const std::string blocks =
      lrtest::read_file(fc.core.substr(0, fc.core.rfind('.')) + ".manifest.json.blocks");
  REQUIRE(blocks.size() == 8);
  int64_t allocated = 0;
  std::memcpy(&allocated, blocks.data(), 8);
  CHECK(j["pymalloc"]["blocks"].get<int64_t>() + j["pymalloc"]["raw_blocks"].get<int64_t>() ==
        allocated);

  // Every object the GC tracks, by type, as gc.get_objects() counted them.
  std::map<std::string, int64_t> tracked, objects;
  for (const auto& t : j["types"]) {
    tracked[short_name(t["type"])] += t["tracked"].get<int64_t>();
    objects[t["type"]] += t["objects"].get<int64_t>();
  }
  std::map<std::string, int64_t> want;
  for (const auto& [name, n] : fc.manifest["gc_types"].items()) want[name] = n.get<int64_t>();
  std::erase_if(tracked, [](const auto& kv) { return kv.second == 0; });
  CHECK(tracked == want);
  for (const auto& [name, n] : fc.manifest["counts"].items()) {
    INFO(name);
    CHECK(objects[name] == n.get<int64_t>());
  }
  // Objects the GC does not track are found by their blocks alone: each
  // Leafy's name (a compact str, smaller than str's tp_basicsize), the
  // floats, the 100 kB bytes in a block of the system allocator.
  CHECK(objects["str"] >= 12346);
  CHECK(objects["float"] >= 5000);
  CHECK(objects["bytes"] >= 1);

  // The references counted that nothing holds: exactly the objects the
  // program leaked a reference of, each reachable from nothing.
  CHECK(j["excess_objects"] == 50);
  CHECK(j["excess_refs"] == 50);
  CHECK(j["leaked"] == 50);
  CHECK(j["unreachable"] == 50);
  std::set<std::string> leaked, want_leaked;
  for (const auto& a : fc.manifest["leaked"])
    want_leaked.insert(fmt::format("{:#x}", a.get<uint64_t>()));
  for (const auto& o : j["listed"]) {
    INFO(o.dump());
    CHECK(o["type"] == "Leaked");
    CHECK(o["refcnt"] == 1);
    CHECK(o["found"] == 0);
    CHECK(o["leaked"] == true);
    leaked.insert(o["addr"]);
  }
  CHECK(leaked == want_leaked);
}

}  // namespace

TEST_CASE("python: every object of a CPython core, as the program counted them", "[python]") {
  check_every_object(py_core(), "3.11.", {});
}

TEST_CASE("python: an object's refcount and the references found to it", "[python]") {
  const auto& fc = py_core();
  const json j = python_json({"--type", "Leafy", "--top", "100000"});
  const std::string keep = fmt::format("{:#x}", fc.manifest["keep"]["addr"].get<uint64_t>());
  bool seen = false;
  for (const auto& o : j["listed"])
    if (o["addr"] == keep) {
      seen = true;
      INFO(o.dump());
      CHECK(o["refcnt"] == fc.manifest["keep"]["refcnt"]);
      CHECK(o["found"] == o["refcnt"]);
      CHECK(o["tracked"] == true);
    }
  CHECK(seen);
  CHECK(j["listed"].size() == fc.manifest["counts"]["Leafy"].get<size_t>());

  // --fail-on excess: the leaked references are findings.
  auto r = lrtest::leakref({"python", fc.core, "--fail-on", "excess"}, 300);
  CHECK(r.status == 1);
  CHECK(r.out.find("50 objects have 50 references counted that no live memory holds") !=
        std::string::npos);
}

TEST_CASE("python: account and heap see pymalloc's blocks as Python objects", "[python]") {
  const auto& fc = py_core();
  auto r = lrtest::leakref({"account", fc.core}, 300);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  // Every byte of the arenas placed: no difference between the walk and
  // the ranges it holds.
  CHECK(r.err.find("accounts") == std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(\n  Python Leafy +(\d+) +(\d+))")));
  CHECK(m[2] == std::to_string(fc.manifest["counts"]["Leafy"].get<int64_t>()));
  CHECK(r.out.find("pymalloc free blocks") != std::string::npos);

  auto h = lrtest::leakref({"heap", fc.core, "--json"}, 300);
  REQUIRE(h.status == 0);
  const json hj = json::parse(h.out);
  CHECK(hj["layers"] == json::array({"pymalloc", "cpython data stacks"}));
  size_t carved = 0;
  for (const auto& reg : hj["regions"]) carved += reg["kind"] == "carved";
  const json pj = python_json();
  CHECK(carved == pj["pymalloc"]["arenas"].get<size_t>());
  INFO(pj["partial_reasons"].dump());
  CHECK(whole_but_for_files(pj));

  check_engine_leaks(fc, {});
}

namespace {

// leaks, account and retained on fx_pyobjects' core: the GC's links
// (HeapWalk::links) and the words past a list's length are no references.
// The engine stays conservative where python is exact (any word pointing
// into a block is a reference: a str's padding after its state word, a
// stale word in a C block, may spell a leaked object's address), so its
// leaked objects are python's less those a stale word keeps: never one
// python calls live, and most of the 50 (with the GC's links followed,
// none). The retained tree agrees with leaks, and networkx's dominators
// with it; account's leaked category is the same blocks, by name.
void check_engine_leaks(const lrtest::FixtureCore& fc, const std::vector<std::string>& opts) {
  std::vector<std::string> args{"leaks", fc.core, "--json"};
  args.insert(args.end(), opts.begin(), opts.end());
  auto l = lrtest::leakref(args, 300);
  INFO(l.err);
  REQUIRE(l.status == 0);
  const json lj = json::parse(l.out);
  INFO(lj["partial_reasons"].dump());
  CHECK(whole_but_for_files(lj));
  std::set<std::string> objects, want;
  for (const auto& a : fc.manifest["leaked"]) want.insert(fmt::format("{:#x}", a.get<uint64_t>()));
  for (const auto& b : lj["blocks"]) {
    INFO(b.dump());
    if (b["type"] == "Python Leaked") {
      // The object lies past its pre-header (GC head, dict and weakref
      // pointers): 32 bytes in 3.11 and 3.13.
      const uint64_t block = std::stoull(b["ptr"].get<std::string>(), nullptr, 16);
      const std::string obj = fmt::format("{:#x}", block + 32);
      CHECK(want.count(obj) == 1);
      objects.insert(obj);
    } else {
      CHECK(b["type"] == "Python Leaked (attribute values)");
    }
  }
  CHECK(objects.size() >= 40);
  lrtest::check_retained_agrees(fc.core, lj, opts);
  args[0] = "account";
  args.erase(std::find(args.begin(), args.end(), "--json"));
  auto a = lrtest::leakref(args, 300);
  REQUIRE(a.status == 0);
  INFO(a.out);
  CHECK(std::regex_search(
      a.out, std::regex(R"(\n  Python Leaked +\d+ +)" + std::to_string(objects.size()) + " ")));
}

// Who holds fx_pyobjects' named objects, as the fixture says it placed
// them.
void check_holders(const lrtest::FixtureCore& fc, const std::vector<std::string>& opts) {
  // Each object the fixture placed where it names it: a module's dict
  // entry, an instance's attribute, a class's attribute, a frame's local.
  for (const auto& [want, id] : fc.manifest["named"].items()) {
    const json j = python_json({"--holders", std::to_string(id.get<uint64_t>())}, fc, opts);
    const json& h = j["holders"];
    INFO(want << ": " << h.dump());
    CHECK(h["addr"] == fmt::format("{:#x}", id.get<uint64_t>()));
    REQUIRE(h["holders"].size() >= 1);
    if (want == "local req") {
      // main()'s frame, at the line gdb's py-bt gives it (the next test).
      CHECK(std::regex_match(h["path"].get<std::string>(),
                             std::regex(R"(frame main\(\) line \d+, local req)")));
      continue;
    }
    CHECK(h["path"] == want);
    CHECK(h["holders"].size() == 1);
    CHECK(h["holders"][0]["name"] == want);
    CHECK(h["holders"][0]["root"] == false);
  }
  // KEEP: each of the references sys.getrefcount counted, by name.
  const json k = python_json(
      {"--holders", std::to_string(fc.manifest["keep"]["addr"].get<uint64_t>())}, fc, opts);
  std::multiset<std::string> names;
  for (const auto& h : k["holders"]["holders"]) names.insert(h["name"]);
  CHECK(names == std::multiset<std::string>{"module __main__, global KEEP",
                                            "module __main__, global HOLDERS[0]",
                                            "module __main__, global HOLDERS[1]",
                                            "module __main__, global HOLDERS[2][0]"});
  CHECK(names.size() == fc.manifest["keep"]["refcnt"].get<size_t>());
  // The text names them too; an address holding no object is refused.
  std::vector<std::string> args{"python", fc.core, "--holders",
                                fmt::format("{:#x}", fc.manifest["keep"]["addr"].get<uint64_t>())};
  args.insert(args.end(), opts.begin(), opts.end());
  auto t = lrtest::leakref(args, 300);
  CHECK(t.status == 0);
  CHECK(t.out.find("held by 4 words:") != std::string::npos);
  CHECK(t.out.find("  module __main__, global HOLDERS[2][0]\n") != std::string::npos);
  args.resize(4);
  args[3] = "0x10";
  args.insert(args.end(), opts.begin(), opts.end());
  auto bad = lrtest::leakref(args, 300);
  CHECK(bad.status != 0);
  CHECK(bad.err.find("no live Python object at 0x10") != std::string::npos);
}

// info's Python stack of fx_pyobjects' core, frame by frame; returns them
// as "file:line:function", innermost first, and checks them against the
// stack the program wrote of itself on the line it sleeps on.
std::vector<std::string> check_stack(const lrtest::FixtureCore& fc, const std::string& release,
                                     const std::vector<std::string>& opts) {
  std::vector<std::string> args{"info", fc.core, "--json"};
  args.insert(args.end(), opts.begin(), opts.end());
  auto r = lrtest::leakref(args, 300);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["language_stacks"].size() == 1);
  const json& st = j["language_stacks"][0];
  CHECK(st["language"].get<std::string>().rfind("Python " + release, 0) == 0);
  REQUIRE(st["threads"].size() == 1);
  CHECK(st["threads"][0]["tid"] == j["threads"][0]["tid"]);
  std::vector<std::string> ours, own;
  for (const auto& f : st["threads"][0]["frames"])
    ours.push_back(fmt::format("{}:{}:{}", f["file"].get<std::string>(), f["line"].get<int>(),
                               f["function"].get<std::string>()));
  for (const auto& f : fc.manifest["stack"])
    own.push_back(
        fmt::format("{}:{}:{}", f[0].get<std::string>(), f[1].get<int>(), f[2].get<std::string>()));
  REQUIRE(own.size() == 2);  // main(), then the module
  CHECK(ours == own);
  return ours;
}

}  // namespace

TEST_CASE("python: who holds an object, named as a Python user writes it", "[python]") {
  check_holders(py_core(), {});
}

TEST_CASE("python: info prints each thread's Python stack as gdb's py-bt does", "[python]") {
  const auto& fc = py_core();
  const std::vector<std::string> ours = check_stack(fc, "3.11.", {});
  // gdb with python3.11-dbg's libpython.py, on the same core.
  auto g = lrtest::run({"gdb", "-batch", "-nx", "-iex", "set auto-load safe-path /",
                        "/usr/bin/python3.11", fc.core, "-ex", "py-bt"},
                       300);
  INFO(g.out << g.err);
  std::vector<std::string> theirs;
  std::regex line(R"re(\n  File "([^"]+)", line (\d+), in (\S+))re");
  for (std::sregex_iterator it(g.out.begin(), g.out.end(), line), end; it != end; ++it)
    theirs.push_back(fmt::format("{}:{}:{}", (*it)[1].str(), (*it)[2].str(), (*it)[3].str()));
  REQUIRE(theirs.size() >= 2);
  CHECK(ours == theirs);
  CHECK(ours.back().find(":<module>") != std::string::npos);
}

// Debian 13's python3.13: its obmalloc state in the interpreter, frames
// without _PyCFrame, attribute values inline after the object, immortal
// objects. The same fixture and truth as 3.11's. gdb's py-bt is no oracle
// here: Debian's optimized build leaves _PyEval_EvalFrameDefault's frame
// <optimized out>, and py-bt says "unable to read python frame
// information"; the program's own stack is.
TEST_CASE("python: CPython 3.13's objects, holders and stack, as the program counted them",
          "[python][py313]") {
  const auto& fc = py313_core();
  check_every_object(fc, "3.13.", py313_opts());
  check_holders(fc, py313_opts());
  check_stack(fc, "3.13.", py313_opts());
  check_engine_leaks(fc, py313_opts());
  // Immortal objects (the interned strs, the types' own) say so, with no
  // excess however large their counts read.
  const json j = python_json({"--type", "str", "--top", "100000"}, fc, py313_opts());
  CHECK(j["immortal"].get<int64_t>() > 1000);
  size_t immortal = 0;
  for (const auto& o : j["listed"]) {
    if (!o["immortal"].get<bool>()) continue;
    ++immortal;
    INFO(o.dump());
    CHECK(o["refcnt"].get<int64_t>() >= (int64_t{1} << 31));
    CHECK(o["excess"] == 0);
    CHECK(o["leaked"] == false);
  }
  CHECK(immortal > 100);
  std::vector<std::string> args{"python", fc.core};
  for (const auto& o : py313_opts()) args.push_back(o);
  auto t = lrtest::leakref(args, 300);
  CHECK(t.out.find(fmt::format("\nimmortal: {} objects,", j["immortal"].get<int64_t>())) !=
        std::string::npos);
}

TEST_CASE("python: a C extension's missing Py_DECREF, under an http.server's load", "[python]") {
  // lrpyext's retry path keeps the new reference PyObject_GetAttrString
  // gave it: each retried request's body outlives its request.
  INFO("lrpyext.so is built from fixtures/python/lrpyext.c against python3.11-dev");
  REQUIRE(std::filesystem::exists(lrtest::fixture_path("lrpyext.so")));
  const auto& fc = lrtest::fixture_core("pyserver", lrtest::fixture_path("fx_pyserver.py"));
  CHECK(fc.manifest["served"] == 400);
  REQUIRE(fc.manifest["settled"] == true);  // only the main and the serving thread left
  std::set<std::string> want;
  for (const auto& a : fc.manifest["leaked"]) want.insert(fmt::format("{:#x}", a.get<uint64_t>()));
  REQUIRE(want.size() == 58);  // every 7th of 400 requests
  auto r = lrtest::leakref({"python", fc.core, "--json", "--top", "100000"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  // Exactly the leaked references, each of a Body, and nothing else.
  CHECK(j["excess_objects"] == want.size());
  CHECK(j["excess_refs"] == want.size());
  std::set<std::string> got;
  for (const auto& o : j["listed"]) {
    INFO(o.dump());
    if (o["excess"] == 0) {
      // What only a leaked body held (its data) is leaked with it.
      CHECK(o["type"] == "bytes");
      CHECK(o["leaked"] == true);
      CHECK(o["found"] == 0);
      continue;
    }
    CHECK(o["type"] == "Body");
    CHECK(o["refcnt"] == 1);
    CHECK(o["found"] == 0);
    CHECK(o["leaked"] == true);
    got.insert(o["addr"]);
  }
  CHECK(got == want);
  for (const auto& t : j["types"])
    if (t["type"] == "Body") {
      CHECK(t["excess_refs"] == want.size());
      CHECK(t["leaked"] == want.size());
    }
  auto f = lrtest::leakref({"python", fc.core, "--fail-on", "excess"}, 300);
  CHECK(f.status == 1);
}

TEST_CASE("python: a damaged core gives a bounded answer that says so", "[python][hostile]") {
  const auto& fc = py_core();
  const std::string dir = lrtest::tmp_dir();
  const uint64_t keep = fc.manifest["keep"]["addr"], leafy = fc.manifest["leafy_type"],
                 cache = fc.manifest["cache"];
  auto run = [&](const std::string& core) {
    auto r = lrtest::leakref({"python", core, "--json", "--top", "0"}, 300);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  auto warned = [](const json& j, const std::string& what) {
    for (const auto& w : j["warnings"])
      if (w.get<std::string>().find(what) != std::string::npos) return true;
    return false;
  };
  auto count_of = [](const json& j, const std::string& type) {
    for (const auto& t : j["types"])
      if (t["type"] == type) return t["objects"].get<int64_t>();
    return int64_t{0};
  };
  const json whole = run(fc.core);
  // A freed object still on a GC list (its count 0: no object lies there).
  const json freed = run(lrtest::patched(fc.core, dir + "/py-freed.core", {{keep, 0}}));
  CHECK(warned(freed, fmt::format("lists {:#x}, which is no live object", keep)));
  CHECK(freed["partial"] == true);
  CHECK(count_of(freed, "Leafy") == count_of(whole, "Leafy") - 1);
  // A type whose ob_type is itself: its instances are no objects, said once.
  const json cyc = run(lrtest::patched(fc.core, dir + "/py-cycle.core", {{leafy + 8, leafy}}));
  CHECK(warned(cyc, fmt::format("type {:#x}: its ob_type chain is a cycle", leafy)));
  CHECK(cyc["partial"] == true);
  CHECK(count_of(cyc, "Leafy") == 0);
  CHECK(cyc["warnings"].size() <= 12);
  // A dict whose keys pointer reads as no keys table of its entries.
  const std::string bad_dict =
      lrtest::patched(fc.core, dir + "/py-dict.core", {{cache + 32, cache}});
  const json dict = run(bad_dict);
  CHECK(warned(dict, fmt::format("dict {:#x}: 50 entries in use", cache)));
  CHECK(dict["partial"] == true);
  auto f = lrtest::leakref({"python", bad_dict, "--fail-on", "partial"}, 300);
  CHECK(f.status == 1);
  CHECK(f.out.rfind("partial: ", 0) == 0);
  // A GC list link (KEEP's _gc_next, the word of its PyGC_Head 16 bytes
  // before it) pointing out of the heap: leaks takes the links past it for
  // references, and says so.
  const std::string bad_link =
      lrtest::patched(fc.core, dir + "/py-link.core", {{keep - 16, 0x10000000}});
  auto bl = lrtest::leakref({"leaks", bad_link, "--json"}, 300);
  REQUIRE(bl.status == 0);
  const json blj = json::parse(bl.out);
  CHECK(blj["partial"] == true);
  CHECK(blj["partial_reasons"].dump().find("CPython's GC generation list") != std::string::npos);
  // An arena table entry pointing outside every mapping (its address read
  // from the table by gdb): named, its megabyte not walked, the objects
  // the GC lists there warned of, the rest counted, and partial.
  auto g = lrtest::run({"gdb", "-batch", "-nx", "/usr/bin/python3.11", fc.core, "-ex",
                        "p/x (long)'arenas.lto_priv.0'"},
                       120);
  std::smatch tm;
  REQUIRE(std::regex_search(g.out, tm, std::regex(R"(\$1 = (0x[0-9a-f]+))")));
  const uint64_t table = std::stoull(tm[1].str(), nullptr, 16);
  const json arena = run(lrtest::patched(fc.core, dir + "/py-arena.core", {{table, 0x10000000}}));
  CHECK(warned(arena, "arena 0x10000000: its entry does not read as an arena"));
  CHECK(arena["partial"] == true);
  CHECK(arena["objects"].get<int64_t>() > 0);
  CHECK(arena["objects"].get<int64_t>() < whole["objects"].get<int64_t>());
  // --holders through the damaged dict: bounded, named as far as it reads.
  const uint64_t k42 = fc.manifest["named"]["module __main__, global _CACHE['k42']"];
  auto h = lrtest::leakref({"python", bad_dict, "--holders", std::to_string(k42)}, 300);
  INFO(h.out << h.err);
  CHECK(h.status == 0);
  CHECK(h.out.find("global _CACHE['k42']") == std::string::npos);
}

TEST_CASE("python: diff names the cache that grew and the class that fills it", "[python][diff]") {
  // fx_pycache at its two checkpoints: 2000 sessions, then 5000.
  const std::string dir = lrtest::tmp_dir() + "/pycache";
  lrtest::run({"/bin/mkdir", "-p", dir});
  const std::string go = dir + "/go", man = dir + "/manifest.json";
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_pycache.py"), man, go});
  const std::string pid = std::to_string(fx.pid);
  bool ok = lrtest::wait_for_text(fx.out_path, "CP1", 60) &&
            lrtest::run({"gcore", "-o", dir + "/c1", pid}, 120).status == 0;
  lrtest::write_file(go, "go");
  ok = ok && lrtest::wait_for_text(fx.out_path, "CP2", 60) &&
       lrtest::run({"gcore", "-o", dir + "/c2", pid}, 120).status == 0;
  lrtest::finish(fx, SIGKILL);
  INFO(lrtest::read_file(fx.err_path));
  REQUIRE(ok);
  const json m = json::parse(lrtest::read_file(man));
  auto r = lrtest::leakref({"diff", dir + "/c1." + pid, dir + "/c2." + pid, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  auto cls = [&](const std::string& kind, const std::string& name) -> const json* {
    for (const auto& c : j["classes"])
      if (c["kind"] == kind && c["name"] == name) return &c;
    return nullptr;
  };
  // The class whose instances grew, counted as gc.get_objects() did.
  const json* s = cls("python", "Session");
  REQUIRE(s != nullptr);
  CHECK((*s)["before"] == m["cp1"]["Session"]);
  CHECK((*s)["after"] == m["cp2"]["Session"]);
  // The dict that holds them, by its name, with len() at each moment; the
  // steady one unchanged.
  const json* d = cls("python container", "module __main__, global _SESSIONS (dict)");
  REQUIRE(d != nullptr);
  CHECK((*d)["before"] == m["cp1"]["sessions"]);
  CHECK((*d)["after"] == m["cp2"]["sessions"]);
  const json* c = cls("python container", "module __main__, global _CONFIG (dict)");
  REQUIRE(c != nullptr);
  CHECK((*c)["before"] == 1500);
  CHECK((*c)["after"] == 1500);
  // The text says so among what grew most.
  auto t = lrtest::leakref({"diff", dir + "/c1." + pid, dir + "/c2." + pid}, 300);
  CHECK(t.out.find("module __main__, global _SESSIONS (dict)") != std::string::npos);
}

TEST_CASE("python: an interpreter without its debug info is refused, naming it", "[python]") {
  const auto& fc = py_core();
  // A sysroot that holds the interpreter but not /usr/lib/debug.
  const std::string root = lrtest::tmp_dir() + "/py-nodebug";
  std::filesystem::create_directories(root + "/usr/bin");
  std::filesystem::create_directories(root + "/usr/lib");
  std::filesystem::create_symlink("/usr/bin/python3.11", root + "/usr/bin/python3.11");
  std::filesystem::create_directory_symlink("/usr/lib/x86_64-linux-gnu",
                                            root + "/usr/lib/x86_64-linux-gnu");
  auto r = lrtest::leakref({"python", fc.core, "--sysroot", root}, 300);
  INFO(r.out << r.err);
  CHECK(r.status != 0);
  CHECK(r.status != 1);
  CHECK(r.err.find("python3.11 is CPython 3.11.") != std::string::npos);
  CHECK(r.err.find("without its debug info") != std::string::npos);
  CHECK(r.err.find("install python3.11-dbg") != std::string::npos);
  CHECK(r.out.empty());
}

TEST_CASE("docs: the python example runs as written", "[python][docs]") {
  const auto& fc = py_core();
  const std::string part = lrtest::readme_section("python");
  REQUIRE(!part.empty());
  const std::string dir = lrtest::tmp_dir() + "/docs-python";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", fc.core, dir + "/core"}).status == 0);
  // The interpreter's own objects vary a little from run to run (the
  // paths it was given are strings): the totals are not compared.
  auto norm = [](const std::string& s) {
    std::string t = std::regex_replace(s, std::regex("0x[0-9a-f]{6,}"), "0xADDR");
    t = std::regex_replace(t, std::regex(R"(\): \d+ live objects.*)"), "): TOTALS");
    return std::regex_replace(t, std::regex(R"(pymalloc: \d+ arenas.*)"), "pymalloc: TOTALS");
  };
  CHECK(lrtest::check_doc_commands(part, dir, norm) == 1);
}
