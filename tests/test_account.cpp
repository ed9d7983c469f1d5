// leakref account on fx_account's core, against what nobody here wrote:
// glibc's own mallinfo2() and the kernel's /proc/self/maps, both taken by
// the fixture at the moment of the core, and the fixture's own list of
// the blocks it leaked (with malloc_usable_size).
#include <fmt/format.h>

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
  CHECK(r.err.find("'colour' is not one of type, site") != std::string::npos);
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
