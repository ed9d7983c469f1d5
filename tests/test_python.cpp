// CPython processes: every object of a real python3.11's core (Debian's,
// with python3.11-dbg) against the program's own count of them, taken just
// before the core (gc.get_objects by type, sys.getrefcount,
// sys.getallocatedblocks), and the references it counted that nothing
// holds (Py_IncRef called through ctypes: a Py_DECREF forgotten).
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "doc_checks.hpp"
#include "harness.hpp"

using nlohmann::json;

namespace {

const lrtest::FixtureCore& py_core() {
  return lrtest::fixture_core("pyobjects", lrtest::fixture_path("fx_pyobjects.py"));
}

json python_json(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"python", py_core().core, "--json"};
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

}  // namespace

TEST_CASE("python: every object of a CPython core, as the program counted them", "[python]") {
  const auto& fc = py_core();
  const json j = python_json({"--top", "100000"});
  CHECK(j["version"].get<std::string>().rfind("3.11.", 0) == 0);
  for (const auto& w : j["warnings"]) {
    INFO(w.get<std::string>());
    CHECK(w.get<std::string>().find("the core leaves out") != std::string::npos);
  }
  INFO(j["partial_reasons"].dump());
  CHECK(whole_but_for_files(j));

  // pymalloc's blocks in use, walked pool by pool, and its own count of the
  // requests it passed on to malloc: sys.getallocatedblocks(), measured
  // when nothing more was allocated.
  const std::string blocks =
      lrtest::read_file(lrtest::tmp_dir() + "/pyobjects.manifest.json.blocks");
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
  CHECK(j["listed"].size() == 12346);

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
  CHECK(m[2] == "12346");
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

  // leaks follows the GC's links, which reach every tracked object: it
  // says so, and is partial, where python is whole.
  auto l = lrtest::leakref({"leaks", fc.core, "--json"}, 300);
  REQUIRE(l.status == 0);
  const json lj = json::parse(l.out);
  CHECK(lj["partial"] == true);
  CHECK(lj.dump().find("GC chains every object it tracks") != std::string::npos);
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
