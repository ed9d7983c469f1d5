// leakref account on fx_account's core, against what nobody here wrote:
// glibc's own mallinfo2() and the kernel's /proc/self/maps, both taken by
// the fixture at the moment of the core, and the fixture's own list of
// the blocks it leaked (with malloc_usable_size).
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "harness.hpp"

using nlohmann::json;

namespace {

const json* find_child(const json& node, const std::string& name) {
  for (const auto& c : node["children"])
    if (c["name"] == name) return &c;
  return nullptr;
}

const json& category(const json& cats, const std::string& name) {
  for (const auto& c : cats)
    if (c["name"] == name) return c;
  FAIL("no category " << name);
  throw std::logic_error("unreachable");
}

uint64_t bytes_of(const json& cats, const std::string& name) {
  return category(cats, name)["bytes"].get<uint64_t>();
}

// Every node's bytes and blocks are its children's sums.
void check_sums(const json& n) {
  if (n["children"].empty()) return;
  uint64_t b = 0, k = 0;
  for (const auto& c : n["children"]) {
    check_sums(c);
    b += c["bytes"].get<uint64_t>();
    k += c["blocks"].get<uint64_t>();
  }
  INFO(n["name"]);
  CHECK(n["bytes"].get<uint64_t>() == b);
  CHECK(n["blocks"].get<uint64_t>() == k);
}

}  // namespace

TEST_CASE("account: every byte in one category, against mallinfo2 and the kernel's maps",
          "[core][account]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("account", lrtest::fixture_path("fx_account"));
  auto r = lrtest::leakref({"account", fc.core, "--json"});
  INFO(r.err << "\ncore " << fc.core);
  REQUIRE(r.status == 0);
  json j = r.json();
  REQUIRE(j["schema"] == "leakref.account/1");
  CHECK(j["warnings"].empty());
  const json& cats = j["categories"];
  const json& mi = fc.manifest["mallinfo2"];

  // The total is the core's writable memory, which is the kernel's.
  uint64_t sum = 0;
  for (const auto& c : cats) {
    check_sums(c);
    sum += c["bytes"].get<uint64_t>();
  }
  CHECK(sum == j["total_bytes"].get<uint64_t>());
  CHECK(j["total_bytes"] == j["writable_bytes"]);
  CHECK(j["total_bytes"] == fc.manifest["writable_bytes"]);

  // The heap: its arenas' system memory and the mmapped chunks, exactly.
  const uint64_t heap = bytes_of(cats, "live") + bytes_of(cats, "leaked") + bytes_of(cats, "free") +
                        bytes_of(cats, "overhead") + bytes_of(cats, "unknown");
  CHECK(heap == mi["arena"].get<uint64_t>() + mi["hblkhd"].get<uint64_t>());
  CHECK(bytes_of(cats, "unknown") == 0);
  // Free as mallinfo2 counts it (tcache entries are in use to it).
  const json* free_ = &category(cats, "free");
  uint64_t fordblks = 0;
  for (const char* k : {"bins", "fastbins", "top"}) {
    const json* n = find_child(*free_, k);
    INFO(k);
    REQUIRE(n);
    fordblks += (*n)["bytes"].get<uint64_t>();
  }
  CHECK(fordblks == mi["fordblks"].get<uint64_t>());
  CHECK((*find_child(*free_, "fastbins"))["bytes"] == mi["fsmblks"]);
  REQUIRE(find_child(*free_, "tcache"));
  CHECK((*find_child(*free_, "top"))["children"].size() == 3);  // one top chunk per arena

  // Leaked: exactly the fixture's dropped blocks, their usable bytes.
  uint64_t leaked = 0;
  for (const auto& b : fc.manifest["leaked"]) leaked += b[1].get<uint64_t>();
  REQUIRE(fc.manifest["leaked"].size() == 93);
  CHECK(category(cats, "leaked")["bytes"].get<uint64_t>() == leaked);
  CHECK(category(cats, "leaked")["blocks"].get<uint64_t>() == fc.manifest["leaked"].size());
  uint64_t live = 0;
  for (const auto& b : fc.manifest["live"]) live += b[1].get<uint64_t>();
  CHECK(bytes_of(cats, "live") >= live);
  CHECK(bytes_of(cats, "live") < live + 8192);  // and only a few of libc's own blocks

  // The rest: three stacks, each module's data, the main thread's TLS.
  CHECK(category(cats, "stacks")["children"].size() == 3);
  CHECK(bytes_of(cats, "data") > 0);
  CHECK(bytes_of(cats, "tls") > 0);

  // Text: the same table, adding up to the same total.
  auto t = lrtest::leakref({"account", fc.core});
  REQUIRE(t.status == 0);
  CHECK(t.out.find(fmt::format("\n{:<44} {:>14}\n", "total", j["total_bytes"].get<uint64_t>())) !=
        std::string::npos);
  CHECK(t.out.find(fmt::format("\n{:<44} {:>14} {:>10}", "leaked", leaked,
                               fc.manifest["leaked"].size())) != std::string::npos);
}

TEST_CASE("account: a site breakdown needs a trace; a wrong --by is refused", "[core][account]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("account", lrtest::fixture_path("fx_account"));
  auto r = lrtest::leakref({"account", fc.core, "--by", "site"});
  CHECK(r.status != 0);
  CHECK(r.err.find("--by site needs the allocations' trace (--trace FILE)") != std::string::npos);
  r = lrtest::leakref({"account", fc.core, "--by", "colour"});
  CHECK(r.status == 2);
  CHECK(r.err.find("'colour' is not one of type, set, site, module") != std::string::npos);
  r = lrtest::leakref({"account", fc.core, "--by", "set"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--by set needs a profile") != std::string::npos);
  r = lrtest::leakref({"account", fc.core, "--trace", fc.core});
  CHECK(r.status == 2);
  CHECK(r.err.find("--trace is for --by site or module") != std::string::npos);
}

// A broken chunk chain: what the walk did not see is `unknown` (with the
// heap's warning), never live or free, and the table still adds up.
TEST_CASE("account: a damaged heap's unwalked bytes are unknown, and the total holds",
          "[core][account][hostile]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("account", lrtest::fixture_path("fx_account"));
  const auto& live = fc.manifest["live"];
  REQUIRE(live.size() > 10);
  const uint64_t block = std::stoull(live[5][0].get<std::string>(), nullptr, 16);
  const std::string bad =
      lrtest::patched(fc.core, lrtest::tmp_dir() + "/account-broken.core", {{block - 8, 0x7}});
  auto r = lrtest::leakref({"account", bad, "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  const json& cats = j["categories"];
  CHECK(j["total_bytes"] == j["writable_bytes"]);
  CHECK(j["total_bytes"] == fc.manifest["writable_bytes"]);
  const json& mi = fc.manifest["mallinfo2"];
  CHECK(bytes_of(cats, "live") + bytes_of(cats, "leaked") + bytes_of(cats, "free") +
            bytes_of(cats, "overhead") + bytes_of(cats, "unknown") ==
        mi["arena"].get<uint64_t>() + mi["hblkhd"].get<uint64_t>());
  CHECK(bytes_of(cats, "unknown") > 0);
  bool said = false;
  for (const auto& w : j["warnings"])
    said |= w.get<std::string>().find("chunk chain breaks at") != std::string::npos;
  CHECK(said);
}

// --html: one page with no scripts, an SVG treemap whose columns are each
// category's share of the total, that a real browser renders.
TEST_CASE("account --html: a treemap page, rendered in a real browser", "[core][account][html]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const auto& fc = lrtest::fixture_core("account", lrtest::fixture_path("fx_account"));
  const std::string d = lrtest::tmp_dir(), html = d + "/account.html";
  auto r = lrtest::leakref({"account", fc.core, "--json", "--html", html});
  REQUIRE(r.status == 0);
  const json j = r.json();
  const std::string page = lrtest::read_file(html);
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("http://") == page.find("http://www.w3.org/2000/svg"));  // the namespace only
  // The category columns (the pale rectangles, full height) against the JSON.
  auto cols = lrtest::run({"python3", "-c",
                           "import sys,xml.dom.minidom as m,re\n"
                           "p=open(sys.argv[1]).read()\n"
                           "s=m.parseString(re.search(r'<svg.*?</svg>',p,re.S).group(0))\n"
                           "for r in s.getElementsByTagName('rect'):\n"
                           "  if r.getAttribute('fill-opacity')=='0.35':\n"
                           "    t=r.getElementsByTagName('title')[0].firstChild.data\n"
                           "    print(t.split(':')[0], r.getAttribute('width'))",
                           html});
  INFO(cols.err);
  REQUIRE(cols.status == 0);
  std::map<std::string, double> width;
  std::istringstream in(cols.out);
  for (std::string name, w; in >> name >> w;) width[name] = std::stod(w);
  const double total = j["total_bytes"].get<double>();
  size_t shown = 0;
  for (const auto& c : j["categories"]) {
    const double bytes = c["bytes"].get<double>();
    if (bytes == 0) continue;
    INFO(c["name"]);
    REQUIRE(width.count(c["name"]));
    CHECK(std::abs(width[c["name"]] - 1160 * bytes / total) < 0.1);
    ++shown;
  }
  CHECK(shown == width.size());
  CHECK(shown >= 5);  // the heap's categories, stacks, data
  if (!lrtest::have_program("chromium"))
    FAIL("chromium is not installed (make test installs it): the page's rendering is untested");
  long blank = lrtest::screenshot("about:blank", d + "/account-blank.png");
  long shot = lrtest::screenshot("file://" + html, d + "/account.png");
  INFO("screenshot bytes: page " << shot << ", blank page " << blank);
  REQUIRE(blank > 0);
  CHECK(shot > 4 * blank);
}

namespace {

// The Rss line of /proc/PID/smaps_rollup, in bytes.
uint64_t rollup_rss(int pid) {
  std::istringstream in(lrtest::read_file(fmt::format("/proc/{}/smaps_rollup", pid)));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Rss:", 0) == 0) return std::stoull(line.substr(4)) * 1024;
  FAIL("no Rss line in smaps_rollup");
  return 0;
}

// Every node's resident bytes: at most its bytes, its children's sum.
void check_resident(const json& n) {
  INFO(n["name"]);
  REQUIRE(n.contains("resident_bytes"));
  CHECK(n["resident_bytes"].get<uint64_t>() <= n["bytes"].get<uint64_t>());
  if (n["children"].empty()) return;
  uint64_t r = 0;
  for (const auto& c : n["children"]) {
    check_resident(c);
    r += c["resident_bytes"].get<uint64_t>();
  }
  CHECK(n["resident_bytes"].get<uint64_t>() == r);
}

uint64_t manifest_resident(const json& blocks) {
  uint64_t r = 0;
  for (const auto& b : blocks) r += b[2].get<uint64_t>();
  return r;
}

}  // namespace

// leakref-snap saves smaps and pagemap beside the core; the RESIDENT figures
// are checked against the kernel: each block's pages by mincore() in the
// fixture, and the whole by smaps_rollup. malloc_trim(0) has given the
// free pages back, so free bytes are mostly not resident.
TEST_CASE("account: resident bytes from leakref-snap's smaps and pagemap, against mincore",
          "[core][account][resident]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed: core tests need it");
  const std::string dir = lrtest::tmp_dir(), manifest = dir + "/resident.manifest.json";
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_account"), manifest, "trim"});
  REQUIRE(lrtest::wait_for_text(fx.out_path, "READY", 60));
  const json m = json::parse(lrtest::read_file(manifest));
  const uint64_t rss = rollup_rss(fx.pid);  // before the core is written, which reads every page
  const std::string core = dir + "/resident.core";
  auto snap = lrtest::run(
      {std::string(LR_SOURCE_DIR) + "/scripts/leakref-snap", "--out", core, std::to_string(fx.pid)},
      300);
  lrtest::finish(fx, SIGKILL);
  INFO(snap.err);
  REQUIRE(snap.status == 0);
  REQUIRE(lrtest::read_file(core + ".smaps").find("[heap]") != std::string::npos);

  auto r = lrtest::leakref({"account", core, "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["warnings"].empty());
  const json& cats = j["categories"];
  uint64_t resident = 0;
  for (const auto& c : cats) {
    check_resident(c);
    resident += c["resident_bytes"].get<uint64_t>();
  }
  // The whole: the pagemap's pages are smaps' Rss, which is the kernel's.
  CHECK(j["resident"]["total_bytes"] == resident);
  CHECK(j["resident"]["smaps_rss_bytes"] == rss);
  CHECK(resident == j["resident"]["smaps_writable_rss_bytes"].get<uint64_t>());
  // Each block, as mincore() saw it: the untouched mmapped ones are mostly
  // not resident, and neither are the free bytes malloc_trim gave back.
  CHECK(category(cats, "leaked")["resident_bytes"].get<uint64_t>() ==
        manifest_resident(m["leaked"]));
  const uint64_t live_res = category(cats, "live")["resident_bytes"].get<uint64_t>();
  CHECK(live_res >= manifest_resident(m["live"]));
  CHECK(live_res < manifest_resident(m["live"]) + 8192);  // libc's own few blocks
  CHECK(bytes_of(cats, "live") - live_res > 3 * 140000);  // three untouched 150000-byte blocks
  const json& free_ = category(cats, "free");
  CHECK(free_["resident_bytes"].get<uint64_t>() < free_["bytes"].get<uint64_t>() / 2);

  // Text: the RESIDENT column and smaps' figures beside the total.
  auto t = lrtest::leakref({"account", core});
  REQUIRE(t.status == 0);
  CHECK(t.out.find("RESIDENT") != std::string::npos);
  CHECK(t.out.find(fmt::format("{} in all", rss)) != std::string::npos);

  // A pagemap of another size, or smaps of another process, is refused when
  // named and said (no resident figures) when only found beside the core.
  const std::string bad = dir + "/resident.bad.pagemap",
                    pagemap = lrtest::read_file(core + ".pagemap");
  REQUIRE(pagemap.size() >= 8);  // partly resident mappings: stacks, untouched mmapped blocks
  lrtest::write_file(bad, pagemap.substr(8));
  auto e = lrtest::leakref({"account", core, "--smaps", core + ".smaps", "--pagemap", bad});
  CHECK(e.status != 0);
  CHECK(e.err.find("not their pagemap") != std::string::npos);
  // A maps file given as smaps says nothing of residency: refused, not read as "none".
  const std::string maps_only = dir + "/resident.maps";
  lrtest::write_file(maps_only, "10000-12000 rw-p 00000000 00:00 0\n");
  e = lrtest::leakref({"account", core, "--smaps", maps_only, "--pagemap", bad});
  CHECK(e.status != 0);
  CHECK(e.err.find("has no Rss line") != std::string::npos);
  const std::string other = dir + "/resident.other.core";
  REQUIRE(lrtest::run({"cp", core, other}).status == 0);
  // One mapping, below the core's, not resident (so no pagemap entries): a
  // well-formed pair of another process.
  lrtest::write_file(other + ".smaps", "10000-12000 rw-p 00000000 00:00 0\nRss:    0 kB\n");
  lrtest::write_file(other + ".pagemap", "");
  auto w = lrtest::leakref({"account", other, "--json"});
  INFO(w.err);
  REQUIRE(w.status == 0);
  CHECK(!w.json().contains("resident"));
  CHECK(w.json()["warnings"][0].get<std::string>().find(
            "not this core's process; no resident figures") != std::string::npos);
}
