// The glibc heap walk on a real core: every live block the fixture kept is
// an in-use chunk, and no block it freed (tcache, fastbins, bins) is.
#include <fmt/format.h>
#include <filesystem>

#include <catch2/catch.hpp>
#include <set>

#include <elf.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>

#include "harness.hpp"

using nlohmann::json;

TEST_CASE("glibc heap walk: in-use chunks equal the fixture's live blocks", "[core][heap]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("heap", lrtest::fixture_path("fx_heap"));
  auto r = lrtest::leakref({"heap", fc.core, "--json", "--list"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  REQUIRE(j["schema"] == "leakref.heap/1");
  std::map<uint64_t, uint64_t> in_use;
  for (const auto& c : j["in_use"])
    in_use[std::stoull(c[0].get<std::string>(), nullptr, 16)] = c[1];
  size_t live = 0, freed_seen = 0;
  for (const auto& l : fc.manifest["live"]) {
    uint64_t a = std::stoull(l[0].get<std::string>(), nullptr, 16);
    INFO("live block " << l[0]);
    REQUIRE(in_use.count(a) == 1);
    CHECK(in_use[a] >= l[1].get<uint64_t>());
    ++live;
  }
  std::string seen;
  for (const auto& f : fc.manifest["freed"]) {
    uint64_t a = std::stoull(f.get<std::string>(), nullptr, 16);
    if (in_use.count(a)) {
      ++freed_seen;
      seen += f.get<std::string>() + " (" + std::to_string(in_use[a]) + " B) ";
    }
  }
  CHECK(live == 600);
  INFO("freed blocks reported in use: " << seen << "core " << fc.core);
  CHECK(freed_seen == 0);
  // Every list kind was exercised, so the test can tell a raw scan from a walk.
  const json& s = j["stats"];
  CHECK(s["arenas"] == 3);
  CHECK(s["tcache_free"].get<int>() > 0);
  CHECK(s["fastbin_free"].get<int>() > 0);
  CHECK(s["bin_free"].get<int>() > 0);
  CHECK(s["mmapped"].get<int>() >= 20);
  CHECK(j["warnings"].empty());
  // Beyond the kept blocks only a few of libc's own (tcache structs, stdio) remain.
  CHECK(in_use.size() - live < 16);
  // Text and JSON count the same chunks (mmapped ones were in one only).
  CHECK(s["chunks"].get<uint64_t>() ==
        s["heap_chunks"].get<uint64_t>() + s["mmapped"].get<uint64_t>());
  auto t = lrtest::leakref({"heap", fc.core});
  REQUIRE(t.status == 0);
  CHECK(t.out.find(fmt::format("\nchunks {} ({} in heaps, {} mmapped): in use {} (",
                               s["chunks"].get<uint64_t>(), s["heap_chunks"].get<uint64_t>(),
                               s["mmapped"].get<uint64_t>(), s["in_use"].get<uint64_t>())) !=
        std::string::npos);
}

// Reading the heap shows a progress line on a terminal (forced here, as the
// walk's is in test_cores), erased at the end; the output is unchanged.
TEST_CASE("heap: a progress line on a terminal, never in the output", "[core][heap]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("heap", lrtest::fixture_path("fx_heap"));
  auto quiet = lrtest::leakref({"heap", fc.core});
  REQUIRE(quiet.status == 0);
  CHECK(quiet.err.empty());
  auto shown = lrtest::run(
      {"env", "LEAKREF_PROGRESS=always", lrtest::build_dir() + "/leakref", "heap", fc.core});
  REQUIRE(shown.status == 0);
  CHECK(shown.err.rfind("\rleakref: reading the heap: ", 0) == 0);
  CHECK(shown.err.find(" chunks\x1b[K") != std::string::npos);
  REQUIRE(shown.err.size() >= 4);
  CHECK(shown.err.substr(shown.err.size() - 4) == "\r\x1b[K");
  CHECK(shown.out == quiet.out);
}

// The tcache key is libc's tcache_key as gdb reads it, on a process that
// freed nothing (no tcache entry carries it: it printed 0x0) and on one
// whose free entries carry it.
TEST_CASE("heap: the tcache key is libc's, as gdb reads it", "[core][heap]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_steady")});
  REQUIRE(lrtest::wait_for_text(fx.out_path, "READY", 30));
  std::string prefix = lrtest::tmp_dir() + "/steady-key";
  auto g = lrtest::run({"gcore", "-o", prefix, std::to_string(fx.pid)}, 120);
  std::string steady = prefix + "." + std::to_string(fx.pid);
  lrtest::finish(fx, SIGKILL);
  REQUIRE(g.status == 0);
  const auto& heap = lrtest::fixture_core("heap", lrtest::fixture_path("fx_heap"));
  for (auto [core, exe] :
       {std::pair{steady, lrtest::fixture_path("fx_steady")}, std::pair{heap.core, heap.exe}}) {
    auto gdb = lrtest::run({"gdb", "-batch", "-nx", "-ex", "p/x tcache_key", exe, core}, 120);
    auto at = gdb.out.rfind("= 0x");
    REQUIRE(at != std::string::npos);  // libc6-dbg (make test installs it) names it
    std::string key = gdb.out.substr(at + 2, gdb.out.find('\n', at) - at - 2);
    auto r = lrtest::leakref({"heap", core});
    INFO(core << "\n" << r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("tcache key " + key + "\n") != std::string::npos);
    auto j = lrtest::leakref({"heap", core, "--json"});
    CHECK(j.json()["tcache_key"] == key);
  }
}

// Damage in the heap is said, with what was not read, and carried into the
// commands built on the walk; it never becomes a different answer in
// silence. Each mutation of one real core is checked against the intact
// walk: a live chunk's size set to 0 (the walk stopped there and said
// nothing), a tcache entry pointing at itself and a tcache count at its
// maximum (each dropped the whole tcache: its free chunks counted in use).
TEST_CASE("hostile heap: damage is said and never a quiet different answer", "[heap][hostile]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("heap", lrtest::fixture_path("fx_heap"));
  auto intact = lrtest::leakref({"heap", fc.core, "--json", "--list"});
  REQUIRE(intact.status == 0);
  json ij = intact.json();
  REQUIRE(ij["warnings"].empty());
  const json& is = ij["stats"];
  std::string img = lrtest::read_file(fc.core);
  auto mutated = [&](const std::string& name, uint64_t va, const void* bytes, size_t n) {
    std::string m = img;
    uint64_t off = lrtest::core_offset(m, va);
    REQUIRE(off != 0);
    std::memcpy(&m[off], bytes, n);
    std::string p = lrtest::tmp_dir() + "/heap-" + name + ".core";
    lrtest::write_file(p, m);
    return p;
  };
  auto u64_at = [&](uint64_t va) {
    uint64_t v = 0;
    uint64_t off = lrtest::core_offset(img, va);
    REQUIRE(off != 0);
    std::memcpy(&v, img.data() + off, 8);
    return v;
  };
  // The tcache_perthread_struct: the first in-use chunk of 0x288 usable bytes.
  uint64_t tcache = 0;
  for (const auto& c : ij["in_use"])
    if (c[1] == 0x288 && !tcache) tcache = std::stoull(c[0].get<std::string>(), nullptr, 16);
  REQUIRE(tcache);
  int bin = -1;
  uint16_t count = 0;
  for (int i = 0; i < 64 && bin < 0; ++i) {
    uint64_t off = lrtest::core_offset(img, tcache + 2 * i);
    REQUIRE(off != 0);
    std::memcpy(&count, img.data() + off, 2);
    if (count >= 2) bin = i;
  }
  REQUIRE(bin >= 0);  // fx_heap frees blocks of one size more than once
  uint64_t first = u64_at(tcache + 128 + 8 * bin);

  SECTION("a live chunk's size set to 0") {
    const json& mid = ij["in_use"][ij["in_use"].size() / 2];
    uint64_t user = std::stoull(mid[0].get<std::string>(), nullptr, 16);
    uint64_t head = u64_at(user - 8) & 7;  // flags kept, size 0
    std::string p = mutated("size0", user - 8, &head, 8);
    auto h = lrtest::leakref({"heap", p, "--json"});
    REQUIRE(h.status == 0);
    json hj = h.json();
    CHECK(hj["stats"]["in_use"].get<int>() < is["in_use"].get<int>());
    std::string w = hj["warnings"].dump();
    CHECK(w.find("chunk chain breaks at") != std::string::npos);
    CHECK(w.find("bytes not walked") != std::string::npos);
    for (const char* cmd : {"leaks", "refs"}) {
      std::vector<std::string> a = {cmd, p, "--json"};
      if (std::string(cmd) == "refs") a.push_back(mid[0].get<std::string>());
      auto r = lrtest::leakref(a, 120);
      INFO(cmd << ": " << r.err);
      const json rj = r.json();
      CHECK(rj["warnings"].dump().find("chunk chain breaks at") != std::string::npos);
      // What was not walked is not scanned: the answer says it is partial.
      CHECK(rj["partial"] == true);
      CHECK(rj["partial_reasons"].dump().find("chunk chain breaks in 1 region") !=
            std::string::npos);
    }
    auto t = lrtest::leakref({"leaks", p});
    CHECK(t.out.rfind("partial: ", 0) == 0);
    CHECK(lrtest::leakref({"leaks", p, "--fail-on", "leaked"}).status == 1);
  }
  SECTION("a tcache entry pointing at itself") {
    uint64_t self = (first >> 12) ^ first;  // safe-linking: decodes to `first`
    std::string p = mutated("tcself", first, &self, 8);
    auto h = lrtest::leakref({"heap", p, "--json"});
    REQUIRE(h.status == 0);
    json hj = h.json();
    // Only the entries after the first can be lost to the cycle.
    CHECK(hj["stats"]["in_use"].get<int>() <= is["in_use"].get<int>() + count - 1);
    CHECK(hj["stats"]["tcache_free"].get<int>() >= is["tcache_free"].get<int>() - (count - 1));
    CHECK(hj["warnings"].dump().find("comes round again (a cycle)") != std::string::npos);
  }
  SECTION("a thread arena whose next points at itself") {
    auto gdb = lrtest::run({"gdb", "-batch", "-nx", "-ex", "p/x main_arena.next", "-ex",
                            "p/x (char*)&main_arena.next - (char*)&main_arena",
                            lrtest::fixture_path("fx_heap"), fc.core},
                           120);
    std::vector<uint64_t> v;
    const std::regex hexv("= (0x[0-9a-f]+)");
    for (auto it = std::sregex_iterator(gdb.out.begin(), gdb.out.end(), hexv);
         it != std::sregex_iterator(); ++it)
      v.push_back(std::stoull((*it)[1].str(), nullptr, 16));
    INFO(gdb.out << gdb.err);
    REQUIRE(v.size() == 2);
    // main_arena's next is fx_heap's thread arena.
    REQUIRE(v[0] != std::stoull(ij["main_arena"].get<std::string>(), nullptr, 16));
    uint64_t arena = v[0], self = arena;
    std::string p = mutated("arenaself", arena + v[1], &self, 8);
    auto h = lrtest::leakref({"heap", p, "--json"});
    REQUIRE(h.status == 0);
    json hj = h.json();
    CHECK(hj["stats"]["in_use"] == is["in_use"]);
    CHECK(hj["warnings"].dump().find("points back at") != std::string::npos);
    CHECK(hj["warnings"].dump().find("(itself)") != std::string::npos);
  }
  SECTION("a tcache count at its maximum") {
    uint16_t most = 65535;
    std::string p = mutated("tcmax", tcache + 2 * bin, &most, 2);
    auto h = lrtest::leakref({"heap", p, "--json"});
    REQUIRE(h.status == 0);
    json hj = h.json();
    CHECK(hj["stats"]["in_use"] == is["in_use"]);
    CHECK(hj["stats"]["tcache_free"] == is["tcache_free"]);
    CHECK(hj["warnings"].dump().find("its count says 65535 but the list ends after") !=
          std::string::npos);
  }
  SECTION("every tcache count at its maximum") {
    // The tcache is known by its thread's variable: damaged, it is said,
    // never a different heap in silence (diff said "7 grew").
    std::string counts(128, '\xff');
    std::string p = mutated("tcallmax", tcache, counts.data(), counts.size());
    auto h = lrtest::leakref({"heap", p, "--json"});
    REQUIRE(h.status == 0);
    json hj = h.json();
    CHECK(hj["warnings"].dump().find("(a thread's tcache variable names it) is damaged") !=
          std::string::npos);
  }
}

namespace {

// Another Debian release's libc, fetched and unpacked by scripts/glibc-release
// (KEY=VALUE lines), with fx_heap built against it.
struct Release {
  std::map<std::string, std::string> kv;
  std::string exe, why;
};

Release glibc_release(const std::string& name) {
  Release rel;
  auto r = lrtest::run({std::string(LR_SOURCE_DIR) + "/scripts/glibc-release", name}, 900);
  if (r.status != 0) {
    rel.why = "scripts/glibc-release " + name + " failed: " + r.err;
    return rel;
  }
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (auto eq = line.find('='); eq != std::string::npos)
      rel.kv[line.substr(0, eq)] = line.substr(eq + 1);
  rel.exe = lrtest::tmp_dir() + "/fx_heap-" + name;
  std::vector<std::string> cc{"gcc", "-g", "-O0", "-pthread"};
  std::istringstream flags(rel.kv["CFLAGS"]);
  for (std::string f; flags >> f;) cc.push_back(f);
  cc.insert(cc.end(), {"-o", rel.exe});
  cc.push_back(std::string(LR_SOURCE_DIR) + "/fixtures/fx_heap.c");
  auto b = lrtest::run(cc, 300);
  if (b.status != 0) rel.why = "building fx_heap against " + name + "'s libc failed: " + b.err;
  return rel;
}

// The walk's in-use chunks hold every block fx_heap kept and none it freed.
void check_heap_is_manifest(const lrtest::FixtureCore& fc, const json& j) {
  std::set<uint64_t> in_use;
  for (const auto& c : j["in_use"])
    in_use.insert(std::stoull(c[0].get<std::string>(), nullptr, 16));
  size_t live = 0, freed = 0;
  for (const auto& l : fc.manifest["live"])
    live += in_use.count(std::stoull(l[0].get<std::string>(), nullptr, 16));
  for (const auto& f : fc.manifest["freed"])
    freed += in_use.count(std::stoull(f.get<std::string>(), nullptr, 16));
  CHECK(live == 600);
  CHECK(freed == 0);
  CHECK(j["stats"]["arenas"] == 3);
  CHECK(j["stats"]["tcache_free"].get<int>() > 0);
  // From 2.43 malloc has no fastbins.
  const std::string rel = j["glibc"]["release"];
  const size_t dot = rel.find('.');
  if (dot != std::string::npos && std::stoi(rel.substr(dot + 1)) >= 43)
    CHECK(j["stats"]["fastbin_free"] == 0);
  else
    CHECK(j["stats"]["fastbin_free"].get<int>() > 0);
  CHECK(j["warnings"].empty());
}

}  // namespace

// Real libc6 and libc6-dbg of Debian 11, 13 and unstable (Debian 12's is the
// host's, walked by every other heap test), each running fx_heap: each walks
// exactly from leakref's table and from its DWARF. Unstable's 2.43 has no
// fastbins and counts its tcache by slots left; with tcache_max raised, its
// 2,000- and 5,000-byte frees go to the large tcache bins 2.42 added.
TEST_CASE("glibc releases: 2.31, 2.41 and 2.43 walk exactly from table and DWARF",
          "[core][heap][glibc-releases]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  for (const std::string name : {"bullseye", "trixie", "sid"}) {
    INFO("release " << name);
    const Release rel = glibc_release(name);
    if (!rel.why.empty()) LR_SKIP(rel.why);
    if (name == "sid") ::setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_max=8192", 1);
    const auto& fc = lrtest::fixture_core("heap-" + name, rel.exe);
    ::unsetenv("GLIBC_TUNABLES");
    const std::string v = rel.kv.at("VERSION");
    // Each release with a cache of its own, empty at first: the table's run
    // must not find a layout the DWARF's run kept.
    const std::string cache = lrtest::tmp_dir() + "/layout-cache-" + name;
    auto heap = [&](std::vector<std::string> extra) {
      std::vector<std::string> argv = {"env",
                                       "XDG_CACHE_HOME=" + cache,
                                       lrtest::build_dir() + "/leakref",
                                       "heap",
                                       fc.core,
                                       "--json",
                                       "--list"};
      argv.insert(argv.end(), extra.begin(), extra.end());
      return lrtest::run(argv, 60);
    };
    auto table = heap({});
    auto dwarf = heap({"--debug-dir", rel.kv.at("DEBUG")});
    CHECK(v == (name == "bullseye" ? "2.31" : name == "trixie" ? "2.41" : "2.43"));
    for (auto* r : {&table, &dwarf}) {
      INFO(r->err);
      REQUIRE(r->status == 0);
      json j = r->json();
      CHECK(j["glibc"]["release"] == v);
      CHECK(j["glibc"]["layout"].get<std::string>().rfind(
                r == &table ? "leakref's table for glibc " + v
                            : "libc's DWARF (" + rel.kv.at("DEBUG"),
                0) == 0);
      check_heap_is_manifest(fc, j);
      // Each of fx_heap's 3 threads frees 12 blocks of each size into its
      // own tcache of 16 slots a bin: 32 and 40 bytes share one bin (16
      // kept), 100 to 1000 bytes one bin each (4 x 12), and with tcache_max
      // raised 2000 and 5000 bytes the large bins 64 and 66 (2 x 12, 72 in
      // all: without them in the walk, those 72 freed blocks were in use).
      if (name == "sid") CHECK(j["stats"]["tcache_free"] == 3 * (16 + 4 * 12 + 2 * 12));
    }
    // The DWARF's layout is kept by libc's build-id: the next core of that
    // libc has it with no debuginfo at hand; a damaged cache file is not used.
    auto kept = heap({});
    REQUIRE(kept.status == 0);
    CHECK(kept.json()["glibc"]["layout"] == dwarf.json()["glibc"]["layout"]);
    check_heap_is_manifest(fc, kept.json());
    int damaged_files = 0;
    for (const auto& f : std::filesystem::directory_iterator(cache + "/leakref")) {
      ++damaged_files;
      std::string text = lrtest::read_file(f.path());
      const size_t at = text.find("\ntcache_count_width 2\n");
      REQUIRE(at != std::string::npos);
      lrtest::write_file(f.path(), text.replace(at, 22, "\ntcache_count_width 7\n"));
    }
    CHECK(damaged_files == 1);  // the one layout the DWARF's run kept
    auto damaged = heap({});
    REQUIRE(damaged.status == 0);
    CHECK(damaged.json()["glibc"]["layout"] == "leakref's table for glibc " + v);
  }
}

// A release newer than every table (Debian experimental's 2.44, beyond the
// 2.28-2.43 leakref is tested on): without its debuginfo the heap is refused
// in one line naming the release, never walked with a neighbour's layout;
// with its libc6-dbg the DWARF gives the layout and the walk is exact.
TEST_CASE("glibc 2.44 (experimental): refused without its debuginfo, exact with it",
          "[core][heap][glibc-releases]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const Release rel = glibc_release("experimental");
  if (!rel.why.empty()) LR_SKIP(rel.why);
  const auto& fc = lrtest::fixture_core("heap-experimental", rel.exe);
  // Whatever experimental carries must be outside the table, or this test
  // checks nothing (2.44 when written).
  const std::string v = rel.kv.at("VERSION");
  for (const char* known : {"2.31", "2.36", "2.41", "2.43"}) REQUIRE(v != known);
  const std::string cache = "XDG_CACHE_HOME=" + lrtest::tmp_dir() + "/layout-cache-experimental";
  auto bare = lrtest::run({"env", cache, lrtest::build_dir() + "/leakref", "heap", fc.core}, 60);
  CHECK(bare.status == 3);
  CHECK(bare.err.find("glibc " + v +
                      "'s malloc layout is not in leakref's table and libc's "
                      "debuginfo is not here") != std::string::npos);
  CHECK(bare.err.find("it is not guessed") != std::string::npos);
  CHECK(bare.out.empty());
  auto dwarf = lrtest::run({"env", cache, lrtest::build_dir() + "/leakref", "heap", fc.core,
                            "--debug-dir", rel.kv.at("DEBUG"), "--json", "--list"},
                           60);
  INFO(dwarf.err);
  REQUIRE(dwarf.status == 0);
  json j = dwarf.json();
  CHECK(j["glibc"]["release"] == v);
  CHECK(j["glibc"]["layout"].get<std::string>().rfind("libc's DWARF (" + rel.kv.at("DEBUG"), 0) ==
        0);
  check_heap_is_manifest(fc, j);
}

// A core from another machine: fx_heap (built here) runs in a mount
// namespace where Debian unstable's ld.so and libc.so.6 (2.43) sit at this
// machine's own paths, as on an unstable machine, and is gcore'd there. Out
// here those paths hold Debian 12's files, another build: leakref must not
// read them for the core's libc, and says why; with --sysroot the unstable
// tree, build-ids pick its files and the walk is exact.
TEST_CASE("a core from another machine: its libc by build-id under --sysroot",
          "[core][heap][glibc-releases]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  if (::geteuid() != 0) LR_SKIP("not root: the other machine is a mount namespace");
  const Release rel = glibc_release("sid");
  if (!rel.why.empty()) LR_SKIP(rel.why);
  const std::string root = rel.kv.at("ROOT"), dir = lrtest::tmp_dir() + "/other-machine";
  std::filesystem::create_directories(dir);
  // Both files in one process (python's mount()), then every process it
  // starts loads unstable's pair; Debian 12's processes never mix them.
  const std::string py = R"(
import ctypes, os, subprocess, sys, time
root, fx, out = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)
lib = '/usr/lib/x86_64-linux-gnu/'
for f in ('ld-linux-x86-64.so.2', 'libc.so.6'):
    if libc.mount((root + lib + f).encode(), (lib + f).encode(), None, 4096, None):
        sys.exit('mount %s: %s' % (f, os.strerror(ctypes.get_errno())))
p = subprocess.Popen([fx, out + '/manifest.json'], stdout=open(out + '/ready', 'w'))
for _ in range(300):
    if b'READY' in open(out + '/ready', 'rb').read(): break
    time.sleep(0.1)
g = subprocess.run(['gcore', '-o', out + '/core', str(p.pid)], capture_output=True)
p.kill()
print(out + '/core.%d' % p.pid)
sys.exit(g.returncode)
)";
  auto made = lrtest::run({"unshare", "-m", "--propagation", "private", "python3", "-c", py, root,
                           lrtest::fixture_path("fx_heap"), dir},
                          300);
  INFO(made.err);
  REQUIRE(made.status == 0);
  const std::string core = made.out.substr(0, made.out.find('\n'));
  auto here = lrtest::leakref({"heap", core});
  CHECK(here.status == 3);
  CHECK(here.err.find("libc.so.6: no glibc release string in its image (not in core; "
                      "file-backed page of /usr/lib/x86_64-linux-gnu/libc.so.6 (build-id "
                      "mismatch: build-id on disk") != std::string::npos);
  auto there = lrtest::leakref({"heap", core, "--sysroot", root, "--json", "--list"});
  INFO(there.err);
  REQUIRE(there.status == 0);
  json j = there.json();
  CHECK(j["glibc"]["release"] == "2.43");
  CHECK(j["glibc"]["layout"].get<std::string>().rfind("libc's DWARF (" + root, 0) == 0);
  lrtest::FixtureCore fc;
  fc.manifest = json::parse(lrtest::read_file(dir + "/manifest.json"));
  check_heap_is_manifest(fc, j);
  // Its leaks as well: the same files, the same walk.
  auto leaks = lrtest::leakref({"leaks", core, "--sysroot", root, "--json"});
  CHECK(leaks.status == 0);
}
