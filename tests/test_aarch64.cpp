// aarch64 user cores against the fixtures' own truth. The fixtures are built
// by Debian's cross compilers (build/fixtures/aarch64), run by qemu-aarch64
// on Debian 12's arm64 libc6 (scripts/glibc-release bookworm arm64, with
// libc6-dbg:arm64 in the same tree), and stopped by SIGABRT, so the cores
// are the ones qemu writes: no NT_FILE note, no build-id pages, no
// NT_ARM_TLS. leakref is given the executable and the tree (--exe,
// --sysroot) as a support engineer would be.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>

#include "harness.hpp"
#include "roots_checks.hpp"

using lrtest::leakref;
using lrtest::manifest_items;
using nlohmann::json;

namespace {

struct ArmRoot {
  std::string root, debug, why;
};

const ArmRoot& arm_root() {
  static const ArmRoot r = [] {
    ArmRoot a;
    if (!lrtest::have_program("qemu-aarch64") || !lrtest::have_program("aarch64-linux-gnu-g++")) {
      a.why = "qemu-aarch64 or aarch64-linux-gnu-g++ is not installed (make test installs them)";
      return a;
    }
    auto g = lrtest::run(
        {std::string(LR_SOURCE_DIR) + "/scripts/glibc-release", "bookworm", "arm64"}, 600);
    std::istringstream in(g.out);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("ROOT=", 0) == 0) a.root = line.substr(5);
      if (line.rfind("DEBUG=", 0) == 0) a.debug = line.substr(6);
    }
    if (g.status != 0 || a.root.empty()) a.why = "scripts/glibc-release bookworm arm64: " + g.err;
    return a;
  }();
  return r;
}

#define NEED_ARM(a)                         \
  do {                                      \
    if (!(a).why.empty()) LR_SKIP((a).why); \
  } while (0)

std::string arm_fixture(const std::string& name) {
  return lrtest::fixture_path("aarch64/" + name);
}

const lrtest::FixtureCore& arm_core(const std::string& name) {
  return lrtest::qemu_fixture_core("aarch64-" + name, arm_fixture(name), arm_root().root);
}

// leakref CMD CORE ARGS... --exe FIXTURE --sysroot ROOT
lrtest::RunResult on_arm(const std::string& cmd, const lrtest::FixtureCore& fc,
                         std::vector<std::string> args = {}) {
  std::vector<std::string> a{cmd, fc.core};
  a.insert(a.end(), args.begin(), args.end());
  a.insert(a.end(), {"--exe", fc.exe, "--sysroot", arm_root().root});
  return leakref(a, 120);
}

}  // namespace

TEST_CASE("aarch64: info: threads, thread pointers, modules and their debuginfo", "[aarch64]") {
  const auto& a = arm_root();
  NEED_ARM(a);
  const auto& fc = arm_core("fx_leaks");
  auto r = on_arm("info", fc, {"--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["arch"] == "aarch64");
  CHECK(j["warnings"].empty());
  REQUIRE(j["threads"].size() == 2);  // main and the holder thread
  const int pid = fc.manifest["pid"];
  for (const auto& t : j["threads"]) {
    INFO(t.dump());
    CHECK(t["registers"].size() == 34);
    CHECK(t["pc_symbol"].get<std::string>().find("[libc.so.6]") != std::string::npos);
    // TPIDR_EL0, which qemu's core lacks, from glibc's own thread list: the
    // main thread's is what the fixture read with __builtin_thread_pointer.
    if (t["tid"] == pid) CHECK(t["tp"] == fc.manifest["thread_pointer"]);
    CHECK(t["tp"].is_string());
  }
  std::map<std::string, json> mods;
  for (const auto& m : j["modules"]) mods[m["path"]] = m;
  REQUIRE(mods.count(fc.exe) == 1);
  CHECK(mods[fc.exe]["is_exe"] == true);
  for (const char* lib : {"/lib/aarch64-linux-gnu/libc.so.6", "/lib/ld-linux-aarch64.so.1"}) {
    INFO(lib);
    REQUIRE(mods.count(lib) == 1);
    // libc6-dbg:arm64's file, found by build-id under the sysroot.
    CHECK(mods[lib]["debuginfo"].get<std::string>().rfind(a.debug + "/.build-id/", 0) == 0);
  }
  // The core holds no build-id note of any file: each is matched by its
  // dynamic section, and its text read from it.
  REQUIRE(j["mapped_files"].size() >= 4);  // exe, ld.so, libc, libstdc++, ...
  for (const auto& f : j["mapped_files"]) {
    INFO(f.dump());
    CHECK(f["status"] == "verified");
    CHECK(f["core_build_id"] == "");
  }
  CHECK(j["bytes"]["files"].get<uint64_t>() > 1000000);  // libc's text among them
}

TEST_CASE("aarch64: a qemu core without its executable, or with another's, is refused",
          "[aarch64]") {
  const auto& a = arm_root();
  NEED_ARM(a);
  const auto& fc = arm_core("fx_leaks");
  auto r = leakref({"leaks", fc.core});
  CHECK(r.status == 4);
  CHECK(r.err.find("the core lists no mapped files (it has no NT_FILE note") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // The x86_64 build of the same fixture is not this core's executable.
  r = leakref({"leaks", fc.core, "--exe", lrtest::fixture_path("fx_leaks")});
  CHECK(r.status == 4);
  CHECK(r.err.find("not the executable of " + fc.core +
                   " (its machine x86_64, the core's "
                   "aarch64") != std::string::npos);
  // Another aarch64 program: its entry point is not the core's.
  r = leakref({"leaks", fc.core, "--exe", arm_fixture("fx_heap"), "--sysroot", a.root});
  CHECK(r.status == 4);
  CHECK(r.err.find("not the executable of") != std::string::npos);
}

TEST_CASE("aarch64: walk and show match fx_structs' manifest", "[aarch64]") {
  NEED_ARM(arm_root());
  const auto& fc = arm_core("fx_structs");
  const json& s = fc.manifest["structures"];
  for (const auto& [name, how] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"list", {"--list-member", "link", "--refcount", "ref"}},
           {"hash", {"--hlist-member", "hnode", "--refcount", "ref"}},
           {"chain", {"--next", "next", "--refcount", "ref.refcount.refs.counter"}}}) {
    INFO(name);
    std::vector<std::string> args{"--json", "--type", s[name]["type"], "--head", s[name]["head"]};
    args.insert(args.end(), how.begin(), how.end());
    auto r = on_arm("walk", fc, args);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const json j = r.json();
    const json& want = s[name]["objects"];
    REQUIRE(j["objects"].size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(j["objects"][i]["addr"] == want[i]["addr"]);
      CHECK(j["objects"][i]["refcount"] == want[i]["refcount"]);
    }
  }
  const json& first = s["list"]["objects"][0];
  auto r = on_arm("show", fc, {first["addr"], "--type", "struct obj", "--json"});
  REQUIRE(r.status == 0);
  CHECK(r.json()["value"]["name"] == "list-1");
  CHECK(r.json()["value"]["ref"]["refcount"]["refs"]["counter"] == first["refcount"]);
}

TEST_CASE("aarch64: heap: every live block of fx_heap, no freed one", "[aarch64][heap]") {
  NEED_ARM(arm_root());
  const auto& fc = arm_core("fx_heap");
  auto r = on_arm("heap", fc, {"--json", "--list"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["allocator"] == "glibc");
  CHECK(j["warnings"].empty());
  CHECK(j["glibc"]["layout"].get<std::string>().find("libc's DWARF") != std::string::npos);
  std::map<uint64_t, uint64_t> in_use;
  for (const auto& c : j["in_use"])
    in_use[std::stoull(c[0].get<std::string>(), nullptr, 16)] = c[1].get<uint64_t>();
  size_t live = 0, freed = 0;
  for (const auto& l : fc.manifest["live"]) {
    auto it = in_use.find(std::stoull(l[0].get<std::string>(), nullptr, 16));
    live += it != in_use.end() && it->second >= l[1].get<uint64_t>();
  }
  for (const auto& f : fc.manifest["freed"])
    freed += in_use.count(std::stoull(f.get<std::string>(), nullptr, 16));
  CHECK(live == fc.manifest["live"].size());
  CHECK(freed == 0);
  CHECK(fc.manifest["live"].size() == 600);
}

TEST_CASE("aarch64: leaks and refs: fx_leaks' leaks, and each kept block's root", "[aarch64]") {
  NEED_ARM(arm_root());
  const auto& fc = arm_core("fx_leaks");
  auto r = on_arm("leaks", fc, {"--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  std::set<std::string> leaked, unreferenced;
  for (const auto& b : j["blocks"]) {
    leaked.insert(b["ptr"].get<std::string>());
    if (b["unreferenced"] == true) unreferenced.insert(b["ptr"].get<std::string>());
  }
  CHECK(leaked == manifest_items(fc.manifest,
                                 {"leaked", "dead-slot", "cycle", "leaked-widget", "leaked-part"}));
  CHECK(unreferenced == manifest_items(fc.manifest, {"leaked", "dead-slot", "leaked-widget"}));
  CHECK(j["summary"]["leaked"] == 14);
  lrtest::check_retained_agrees(fc.core, j, {"--exe", fc.exe, "--sysroot", arm_root().root});
  // Each kept block by its root: a global, the main thread's TLS (found
  // through the thread pointer glibc's list gave), a frame of the second
  // thread's stack (unwound through libc by its CFI).
  std::map<std::string, std::string> why;
  for (const auto& i : fc.manifest["items"])
    if (i["kind"] == "reachable") why[i["ptr"]] = i["why"];
  REQUIRE(why.size() == 3);
  const uint64_t tp = std::stoull(fc.manifest["thread_pointer"].get<std::string>(), nullptr, 16);
  const uint64_t tls = std::stoull(fc.manifest["tls_block_at"].get<std::string>(), nullptr, 16);
  for (const auto& [p, w] : why) {
    auto rr = on_arm("refs", fc, {p, "--json"});
    REQUIRE(rr.status == 0);
    const json o = rr.json()["objects"][0];
    INFO(p << " " << w << ": " << o.dump());
    REQUIRE(o["referrers"].size() == 1);
    const json& ref = o["referrers"][0];
    const std::string what = ref["what"];
    if (w.rfind("global g_tagged", 0) == 0) {
      CHECK(what == "global g_tagged [fx_leaks]");
    } else if (w == "tls tls_block") {
      CHECK(ref["kind"] == "tls");
      CHECK(ref["from"] == fc.manifest["tls_block_at"]);
      CHECK(what.find(fmt::format("TLS at {:#x} (tpidr_el0+{:#x})", tls, tls - tp)) !=
            std::string::npos);
    } else {
      CHECK(ref["kind"] == "stack");
      CHECK(what.find("frame #1 holder_thread(void*)+0x") != std::string::npos);
    }
  }
}

TEST_CASE("aarch64: diff between fx_grow's two checkpoints", "[aarch64][diff]") {
  const auto& a = arm_root();
  NEED_ARM(a);
  // qemu writes a core only as the guest dies: two runs, stopped at CP1 and
  // at CP2 (the go file there from the start); qemu places them alike.
  const std::string dir = lrtest::tmp_dir() + "/arm-grow";
  lrtest::run({"/bin/mkdir", "-p", dir});
  const std::string go = dir + "/go";
  const auto& cp1 =
      lrtest::qemu_fixture_core("aarch64-grow1", arm_fixture("fx_grow"), a.root, {go}, "CP1");
  lrtest::write_file(go, "go");
  const auto& cp2 =
      lrtest::qemu_fixture_core("aarch64-grow2", arm_fixture("fx_grow"), a.root, {go}, "CP2");
  auto r = leakref({"diff", cp1.core, cp2.core, "--json", "--exe", cp1.exe, "--sysroot", a.root});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  std::map<std::string, long> got, want;
  for (const auto& c : j["classes"])
    if (c["kind"] == "heap" && c["delta"] != 0) got[c["name"]] = c["delta"];
  for (const auto& g : cp2.manifest["groups"]) {
    const long d = g["cp2"].get<long>() - g["cp1"].get<long>();
    const uint64_t usable = g["usable"];
    if (d != 0 && usable <= 1024) want[std::to_string(usable) + " B"] += d;
  }
  REQUIRE(!want.empty());
  for (const auto& [name, d] : want) CHECK(got[name] == d);
}

TEST_CASE("aarch64: correlate: glibc's own mtrace log of fx_alloc, against its core",
          "[aarch64][trace]") {
  const auto& a = arm_root();
  NEED_ARM(a);
  if (!lrtest::have_program("mtrace")) LR_SKIP("glibc's mtrace script is not installed");
  // glibc's tracer: libc_malloc_debug.so preloaded in the guest, MALLOC_TRACE
  // naming the log; fx_alloc calls mtrace() and muntrace() around its window.
  const std::string dir = lrtest::tmp_dir() + "/arm-alloc";
  lrtest::run({"/bin/mkdir", "-p", dir});
  const std::string go = dir + "/go", log = dir + "/mtrace.log";
  lrtest::write_file(go, "go");
  const auto& fc = lrtest::qemu_fixture_core(
      "aarch64-alloc", arm_fixture("fx_alloc"), a.root, {go}, "READY",
      {"LD_PRELOAD=/lib/aarch64-linux-gnu/libc_malloc_debug.so.0", "MALLOC_TRACE=" + log});
  auto r = leakref({"correlate", fc.core, log, "--json", "--exe", fc.exe, "--sysroot", a.root});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["traces"][0]["format"] == "mtrace");
  CHECK(j["traces"][0]["complete"] == true);  // its "= End": muntrace() closed the log
  const json& al = j["allocations"];
  CHECK(al["heap_checked"] == true);
  std::map<std::string, std::pair<uint64_t, std::string>> got, want;
  for (const auto& b : al["blocks"]) {
    CHECK(b["live"] == true);
    const std::string site = b["site"];
    got[b["ptr"]] = {b["size"].get<uint64_t>(), site.substr(0, site.find('+'))};
  }
  for (const auto& b : fc.manifest["structures"]["allocs"]["leaked"])
    want[b["ptr"]] = {b["size"].get<uint64_t>(), b["site"].get<std::string>()};
  REQUIRE(want.size() == 9);
  CHECK(got == want);
  CHECK(al["live_in_core"] == 9);
  // glibc's own mtrace script reads the same log: its "Memory not freed"
  // list is the outstanding set.
  auto mt = lrtest::run({"mtrace", log});
  std::set<uint64_t> script, ours;
  std::istringstream in(mt.out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0x", 0) == 0)
      script.insert(std::stoull(line.substr(0, line.find(' ')), nullptr, 16));
  for (const auto& [p, sb] : got) ours.insert(std::stoull(p, nullptr, 16));
  CHECK(script == ours);
}
