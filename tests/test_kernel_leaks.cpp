// Kernel leaks without traces: `leakref kernel … leaks` and `… refs` on the
// 5.10, 6.1, 6.12, 7.x and arm64 guests, against what the lrkleak fixture module
// (fixtures/kernel/lrkleak.c) says it left: objects on a global list,
// objects held through a kmalloc'd array, one held only by a pointer into
// its middle, objects whose last pointer was dropped, and unreferenced
// cycles. The guest's second moment, after the module freed everything,
// must show none of them.
#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstring>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "harness.hpp"
#include "kernel_guest.hpp"

using namespace lrtest;
using namespace kguest;
using nlohmann::json;

namespace {

struct LeakTruth {
  std::map<std::string, std::set<uint64_t>> by_state;  // list, array, middle, dropped, cycle
  std::vector<uint64_t> array_slots;                   // array objects in slot order
  uint64_t array = 0;
  std::map<uint64_t, int64_t> ref, id;  // each object's refcount and id
};

LeakTruth lrkleak_truth(const Dump& d) {
  LeakTruth t;
  std::istringstream in(read_file(d.serial));
  std::regex obj(R"(LRKLEAK (\w+) id=(\d+) addr=([0-9a-f]+) ref=(\d+))");
  std::regex arr(R"(LRKLEAK array addr=([0-9a-f]+) slots=)");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, obj)) {
      uint64_t a = std::stoull(m[3], nullptr, 16);
      t.by_state[m[1]].insert(a);
      if (m[1] == "array") t.array_slots.push_back(a);
      t.ref[a] = std::stoll(m[4]);
      t.id[a] = std::stoll(m[2]);
    } else if (std::regex_search(line, m, arr)) {
      t.array = std::stoull(m[1], nullptr, 16);
    }
  }
  return t;
}

// What lrkleak said it left (fixtures/kernel/lrkleak.c), all of it there.
LeakTruth checked_truth(const Dump& d) {
  LeakTruth t = lrkleak_truth(d);
  REQUIRE(t.by_state["list"].size() == 5);
  REQUIRE(t.array_slots.size() == 4);
  REQUIRE(t.by_state["dropped"].size() == 3);
  REQUIRE(t.by_state["cycle"].size() == 4);
  REQUIRE(t.by_state["middle"].size() == 1);
  REQUIRE(t.array != 0);
  return t;
}

uint64_t hexv(const json& j) {
  return std::stoull(j.get<std::string>(), nullptr, 16);
}

std::vector<std::string> args(const Dump& d, std::vector<std::string> a) {
  a.push_back("--ko");
  a.push_back(d.ko_leak);
  return a;
}

// leaks on dump A: exactly the dropped objects and the cycles, each with
// its allocation stack and typed contents.
void check_leaks(const Dump& d, const LeakTruth& t) {
  json j = kernel_json(d, d.pelf, args(d, {"leaks", "--cache", "lrk_obj", "--json"}));
  CHECK(j["schema"] == "leakref.kernel.leaks/1");
  REQUIRE(j["caches"].size() == 1);
  const json& c = j["caches"][0];
  CHECK(c["name"] == "lrk_obj");
  CHECK(c["type"] == "struct lrk_obj");
  std::set<uint64_t> got, want = t.by_state.at("dropped");
  for (uint64_t a : t.by_state.at("cycle")) want.insert(a);
  for (const auto& o : c["objects"]) {
    uint64_t a = hexv(o["addr"]);
    got.insert(a);
    INFO("object " << o["addr"]);
    // A cycle's objects are referenced (by each other); dropped ones are not.
    CHECK(o["referenced"].get<bool>() == (t.by_state.at("cycle").count(a) == 1));
    CHECK(o["size"] == 80);
    CHECK(o["alloc"]["caller"].get<std::string>().find("lrk_new") == 0);
    CHECK(o["alloc"]["stack"].dump().find("do_one_initcall") != std::string::npos);
    CHECK(o["value"]["id"].get<int64_t>() > 20);
  }
  CHECK(got == want);
  CHECK(j["summary"]["objects"] == 7);
  CHECK(j["warnings"].empty());
  // The index of the guest's RAM in at most 5 % of it.
  CHECK(j["index"]["memory_bytes"].get<uint64_t>() < (kguest::kGuestMiB << 20) / 20);
  CHECK(j["index"]["reused"] == false);
  // QEMU's ELF dump has one NT_PRSTATUS note (the guest has one CPU). The
  // arm64 dump, physical addresses only, is read through libkdumpfile,
  // which gives no registers: the running task's whole stack is scanned.
  CHECK(j["index"]["cpu_registers"] == (d.kernel == "arm64" ? 0 : 1));
  // Without --cache: the fixture's objects are among every cache's leaks.
  json all = kernel_json(d, d.pelf, args(d, {"leaks", "--json"}));
  bool found = false;
  for (const auto& cc : all["caches"])
    if (cc["name"] == "lrk_obj") found = cc["leaked"] == 7;
  CHECK(found);
  // The kdump-compressed dump of the same moment gives the same answer.
  json k = kernel_json(d, kdump_or_elf(d), args(d, {"leaks", "--cache", "lrk_obj", "--json"}));
  CHECK(k["caches"] == j["caches"]);
}

const json* referrer_named(const json& r, const std::string& prefix) {
  for (const auto& x : r["referrers"])
    if (x["name"].get<std::string>().rfind(prefix, 0) == 0) return &x;
  return nullptr;
}

void check_refs(const Dump& d, const LeakTruth& t) {
  // A list object: the list head in the module's .bss (or a neighbour).
  bool head_seen = false;
  for (uint64_t a : t.by_state.at("list")) {
    json r = kernel_json(d, d.pelf, args(d, {"refs", fmt::format("{:#x}", a), "--json"}));
    CHECK(r["reachable"] == true);
    head_seen |= referrer_named(r, "lrk_list (module lrkleak, .bss)") != nullptr;
    CHECK(referrer_named(r, "struct lrk_obj.node.") != nullptr);
  }
  CHECK(head_seen);
  // Array objects: the slot of the kmalloc'd array, by address.
  for (size_t i = 0; i < t.array_slots.size(); ++i) {
    json r = kernel_json(
        d, d.pelf,
        args(d, {"refs", fmt::format("{:#x}", t.array_slots[i]), "--json", "--depth", "4"}));
    INFO("slot " << i << ": " << r.dump());
    REQUIRE(r["referrers"].size() == 1);
    CHECK(hexv(r["referrers"][0]["from"]) == t.array + 8 * i);
    CHECK(r["referrers"][0]["name"].get<std::string>().rfind("kmalloc-", 0) == 0);
    REQUIRE(r["chain"].size() == 2);
    CHECK(r["chain"][0]["name"] == "lrk_array (module lrkleak, .bss)");
  }
  // Held only by a pointer 24 bytes into it.
  uint64_t mid = *t.by_state.at("middle").begin();
  json r = kernel_json(d, d.pelf, args(d, {"refs", fmt::format("{:#x}", mid + 30), "--json"}));
  CHECK(hexv(r["object"]["addr"]) == mid);
  REQUIRE(r["referrers"].size() == 1);
  CHECK(r["referrers"][0]["name"] == "lrk_middle (module lrkleak, .bss)");
  CHECK(hexv(r["referrers"][0]["value"]) == mid + 24);
  // A dropped object: nothing points at it, and no chain reaches it.
  uint64_t dropped = *t.by_state.at("dropped").begin();
  json dr = kernel_json(d, d.pelf,
                        args(d, {"refs", fmt::format("{:#x}", dropped), "--json", "--depth", "8"}));
  CHECK(dr["reachable"] == false);
  CHECK(dr["referrers"].empty());
  CHECK(dr["chain"].empty());
  // A sleeping task's own stack holds its task_struct: named by task, comm
  // and the frame (found as crash's `bt -t` finds return addresses).
  json task = kernel_json(d, d.pelf,
                          {"walk", "--type", "task_struct", "--head", "init_task.tasks",
                           "--list-member", "tasks", "--where", "comm == \"lrholder\"", "--json"});
  REQUIRE(task["objects"].size() == 1);
  json tr = kernel_json(d, d.pelf, {"refs", task["objects"][0]["addr"], "--json"});
  bool frame = false;
  std::regex own(R"(task [0-9]+ \(lrholder\) kernel stack, frame [a-z_]+)");
  for (const auto& x : tr["referrers"])
    frame |= std::regex_search(x["name"].get<std::string>(), own);
  CHECK(frame);
  // Symbols as places: what lrk_array points to.
  json ar = kernel_json(d, d.pelf, args(d, {"refs", "*lrk_array@lrkleak", "--json"}));
  CHECK(hexv(ar["object"]["addr"]) == t.array);
}

}  // namespace

TEST_CASE(
    "kernel leaks: exactly the dropped objects and cycles of the lrkleak module on 6.1 "
    "and 6.12 and 7.x and arm64; refs names the list head and the array slot",
    "[kernel][kleaks]") {
  for (const auto& kv : kernels()) {
    const Dump& d = dump(kv);
    NEED_KERNEL(d);
    SECTION("kernel " + kv) {
      LeakTruth t = checked_truth(d);
      check_leaks(d, t);
      check_refs(d, t);
      // Moment B: the module freed every object; none is left to report,
      // and a freed object's address is in no object any more.
      json b = kernel_json(d, d.pelf_b, args(d, {"leaks", "--cache", "lrk_obj", "--json"}));
      CHECK(b["summary"]["objects"] == 0);
      RunResult gone = leakref({"kernel", "--vmcore", d.pelf_b, "--vmlinux", d.vmlinux, "refs",
                                fmt::format("{:#x}", *t.by_state["list"].begin())});
      CHECK(gone.status == 4);
      CHECK(gone.err.find("inside no allocated slab object or vmalloc area") != std::string::npos);
    }
  }
}

TEST_CASE("kernel leaks: text output, --min-age, --type and --fail-on", "[kernel][kleaks]") {
  NEED_DUMP();
  const Dump& d = dump();
  LeakTruth t = checked_truth(d);
  RunResult r = leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "leaks", "--cache",
                         "lrk_obj", "--ko", d.ko_leak, "--fail-on", "leak"});
  CHECK(r.status == 1);
  CHECK(r.out.find("lrk_obj: 7 unreferenced, 560 bytes (struct lrk_obj)") != std::string::npos);
  CHECK(r.out.find("lrk_new+0x") != std::string::npos);
  CHECK(r.out.find("| struct lrk_obj {") != std::string::npos);
  // Every object is older than 0 jiffies; none is older than the guest.
  json old = kernel_json(d, d.pelf, {"leaks", "--cache", "lrk_obj", "--min-age", "1", "--json"});
  CHECK(old["summary"]["objects"] == 7);
  json none =
      kernel_json(d, d.pelf, {"leaks", "--cache", "lrk_obj", "--min-age", "100000000", "--json"});
  CHECK(none["summary"]["objects"] == 0);
  // --type names a cache's type; one larger than its objects is refused.
  json typed = kernel_json(d, d.pelf,
                           {"leaks", "--cache", "lrk_obj", "--type", "struct list_head", "--json"});
  CHECK(typed["caches"][0]["type"] == "struct list_head");
  RunResult big = leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "leaks", "--cache",
                           "lrk_obj", "--type", "struct task_struct"});
  CHECK(big.status != 0);
  CHECK(big.err.find("not the type of lrk_obj's 80-byte objects") != std::string::npos);
  RunResult bad = leakref(
      {"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "leaks", "--fail-on", "nonsense"});
  CHECK(bad.status == 2);
  (void)t;
}

// Inside crash: the same leaks as the CLI, refs named the same, and the
// index built once per session (the second command reuses it), timed by
// crash itself. crash's own `search -k` finds the words refs lists.
TEST_CASE("kernel leaks: crash 8.0.2 with the extension agrees with the CLI and reuses the index",
          "[kernel][kleaks]") {
  NEED_CRASH();
  const Dump& d = dump();
  LeakTruth t = checked_truth(d);
  json cli = kernel_json(d, d.pelf, args(d, {"leaks", "--cache", "lrk_obj", "--json"}));
  const uint64_t slot1 = t.array_slots[1];
  json cli_refs = kernel_json(d, d.pelf, args(d, {"refs", fmt::format("{:#x}", slot1), "--json"}));
  std::string dir = tmp_dir() + "/kleaks-crash";
  REQUIRE(run({"mkdir", "-p", dir}).status == 0);
  std::vector<std::string> cmds = {
      "extend " + build_dir() + "/leakref.so",
      "mod -s lrkleak " + d.ko_leak,
      "leakref leaks --cache lrk_obj --json > " + dir + "/leaks.json",
      fmt::format("leakref refs {:#x} --json > {}/refs.json", slot1, dir),
      "leakref leaks --cache lrk_obj --json > " + dir + "/leaks2.json",
      "!echo MARK search",
      fmt::format("search -k {:x}", slot1),
      "!echo MARK end",
  };
  RunResult r;
  crash_session(cmds, &r);
  INFO(r.err.substr(0, 4000));
  REQUIRE(r.status == 0);
  json l1 = json::parse(read_file(dir + "/leaks.json"));
  json rf = json::parse(read_file(dir + "/refs.json"));
  json l2 = json::parse(read_file(dir + "/leaks2.json"));
  CHECK(l1["caches"] == cli["caches"]);
  CHECK(l1["index"]["reused"] == false);
  CHECK(rf["index"]["reused"] == true);
  CHECK(l2["index"]["reused"] == true);
  CHECK(l2["caches"] == cli["caches"]);
  CHECK(rf["referrers"] == cli_refs["referrers"]);
  // crash's search finds the array slot refs names.
  auto sec = sections(r.out);
  CHECK(sec["search"].find(fmt::format("{:x}", t.array + 8)) != std::string::npos);
}

namespace {

// `len` bytes at virtual address `va` of ELF dump `path` (its PT_LOADs).
std::string read_virtual(const std::string& path, uint64_t va, size_t len) {
  std::string out(len, '\0');
  int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  const uint64_t off = elf_offset(fd, va, len);
  const bool done = off && ::pread(fd, out.data(), len, static_cast<off_t>(off)) == ssize_t(len);
  ::close(fd);
  REQUIRE(done);
  return out;
}

// Where in the `len` bytes at `va` the 8-byte value `v` lies (its address).
uint64_t find_word(const std::string& path, uint64_t va, size_t len, uint64_t v) {
  std::string b = read_virtual(path, va, len);
  for (size_t o = 0; o + 8 <= len; o += 8)
    if (std::memcmp(b.data() + o, &v, 8) == 0) return va + o;
  FAIL("value " << std::hex << v << " not found in " << va);
  return 0;
}

json walk_one(const Dump& d, const std::vector<std::string>& a) {
  json j = kernel_json(d, d.pelf, a);
  REQUIRE(j["objects"].size() == 1);
  return j["objects"][0];
}

}  // namespace

// Hostile dumps: a task's saved stack pointer outside its stack, a page
// full of pointers, a slab page naming a cache that does not exist. Each is
// a warning (or an exact consequence) and a bounded result, never a hang.
TEST_CASE("kernel leaks: hostile dumps give warnings and bounded results", "[kernel][kleaks]") {
  NEED_DUMP();
  const Dump& d = dump();
  LeakTruth t = checked_truth(d);
  std::string dir = tmp_dir();
  // lrholder's saved stack pointer, moved below its stack.
  json task =
      walk_one(d, {"walk", "--type", "task_struct", "--head", "init_task.tasks", "--list-member",
                   "tasks", "--show", "thread.sp", "--where", "comm == \"lrholder\"", "--json"});
  const uint64_t ta = hexv(task["addr"]);
  const uint64_t sp = task["fields"]["thread.sp"].get<uint64_t>();
  const uint64_t sp_at = find_word(d.pelf, ta, 16384, sp);
  // The lrk_array's slab page, every word pointing 8 bytes into dropped
  // object 21: the array is reachable, so that object is too.
  const uint64_t dropped = *t.by_state.at("dropped").begin();
  std::vector<std::pair<uint64_t, uint64_t>> w = {{sp_at, 0x1000}};
  for (uint64_t a = t.array & ~uint64_t{4095}; a < (t.array | 4095); a += 8)
    w.emplace_back(a, dropped + 8);
  std::string bad1 = patched(d.pelf, dir + "/dense.pelf", w);
  RunResult r1 = leakref(
      {"kernel", "--vmcore", bad1, "--vmlinux", d.vmlinux, "leaks", "--cache", "lrk_obj", "--json"},
      300);
  INFO(r1.err);
  REQUIRE(r1.status == 0);
  json j1 = r1.json();
  // Dropped object 21 is reachable now; the array's slots no longer point
  // at the array objects, which nothing else holds.
  std::set<uint64_t> want(t.by_state.at("cycle"));
  for (uint64_t a : t.by_state.at("dropped"))
    if (a != dropped) want.insert(a);
  for (uint64_t a : t.array_slots) want.insert(a);
  std::set<uint64_t> got;
  for (const auto& o : j1["caches"][0]["objects"]) got.insert(hexv(o["addr"]));
  CHECK(got == want);
  CHECK(j1["warnings"].dump().find("lrholder): saved stack pointer 0x1000 is outside its stack") !=
        std::string::npos);
  CHECK(j1["warnings"].dump().find("kmalloc-") != std::string::npos);  // its freelist is garbage
  // The lrk_obj slab's struct slab naming no cache: its objects are in no
  // cache the dump has, so they are not objects; the slab pass says so.
  json cache =
      walk_one(d, {"walk", "--type", "kmem_cache", "--head", "slab_caches", "--list-member", "list",
                   "--show", "name", "--where", "name == \"lrk_obj\"", "--json"});
  json slab = kernel_json(d, d.pelf, {"slab", "--cache", "lrk_obj", "--json"});
  const uint64_t page = hexv(slab["objects"][0]["slab"]);
  const uint64_t cache_at = find_word(d.pelf, page, 64, hexv(cache["addr"]));
  std::string bad2 = patched(d.pelf, dir + "/nocache.pelf", {{cache_at, 0xffff8b01deadbe00}});
  RunResult r2 =
      leakref({"kernel", "--vmcore", bad2, "--vmlinux", d.vmlinux, "leaks", "--json"}, 300);
  INFO(r2.err);
  REQUIRE(r2.status == 0);
  json j2 = r2.json();
  for (const auto& c : j2["caches"]) CHECK(c["name"] != "lrk_obj");
  CHECK(j2["warnings"].dump().find(fmt::format("{:#x}", page)) != std::string::npos);
}

namespace {

// The rows of `retained --tree PLACE --depth 1 --json` below the place.
std::set<uint64_t> tree_children(const json& j) {
  std::set<uint64_t> out;
  for (const auto& n : j["tree"])
    if (n["depth"] == 1 && n["kind"] == "block") out.insert(hexv(n["node"]));
  return out;
}

}  // namespace

// What holds kernel memory: the lrkleak module's list head retains exactly
// its five list objects; its array pointer the kmalloc'd array and the four
// objects in its slots; lrk_middle its one object (held by an interior
// pointer); the "leaked" node exactly the dropped objects and the cycles
// (and the sysctl headers leaks lists too). The dominators of the part of
// the graph that decides the module's objects equal networkx's (6.1), and
// crash's `leakref retained` gives the CLI's tree.
TEST_CASE("kernel retained: the lrkleak module's holders retain exactly their objects",
          "[kernel][kleaks][retained]") {
  for (const auto& kv : kernels()) {
    const Dump& d = dump(kv);
    NEED_KERNEL(d);
    SECTION("kernel " + kv) {
      LeakTruth t = checked_truth(d);
      auto tree = [&](const std::string& place) {
        return kernel_json(
            d, d.pelf,
            args(d, {"retained", "--tree", place, "--depth", "1", "--top", "100000", "--json"}));
      };
      json list = tree("lrk_list");
      CHECK(list["schema"] == "leakref.retained/1");
      CHECK(list["partial"] == false);
      REQUIRE(list["tree"].size() >= 1);
      CHECK(list["tree"][0]["node"] == "lrk_list (module lrkleak, .bss)");
      CHECK(list["tree"][0]["retained_blocks"] == 5);
      CHECK(list["tree"][0]["retained"] == 5 * 80);
      CHECK(tree_children(list) == t.by_state.at("list"));
      json arr = tree("lrk_array");
      CHECK(arr["tree"][0]["retained_blocks"] == 5);
      CHECK(tree_children(arr) == std::set<uint64_t>{t.array});
      if (kv != "6.1") continue;  // the rest on one kernel
      json slots = tree(fmt::format("{:#x}", t.array));
      CHECK(slots["tree"][0]["type"].get<std::string>().rfind("kmalloc-", 0) == 0);
      CHECK(tree_children(slots) == std::set<uint64_t>(t.array_slots.begin(), t.array_slots.end()));
      json mid = tree("lrk_middle");
      CHECK(tree_children(mid) == t.by_state.at("middle"));
      // Leaked: every dropped object at the top of the leaked part, each
      // cycle entered once (its other object below it).
      json lk = tree("leaked");
      std::set<uint64_t> want = t.by_state.at("dropped"), lrk;
      for (const auto& n : lk["tree"])
        if (n["depth"] == 1 && n["type"] == "struct lrk_obj") lrk.insert(hexv(n["node"]));
      for (uint64_t a : t.by_state.at("dropped")) CHECK(lrk.count(a) == 1);
      CHECK(lrk.size() == want.size() + 2);  // two cycles, entered once each
      CHECK(lk["tree"][0]["retained"].get<uint64_t>() >= 7 * 80);
      // A slot's object: its path names the module's variable and the array.
      json path = kernel_json(
          d, d.pelf,
          args(d, {"retained", "--path", fmt::format("{:#x}", t.array_slots[2]), "--json"}));
      REQUIRE(path["path"]["shortest"].size() == 3);
      CHECK(path["path"]["shortest"][0]["node"] == "lrk_array (module lrkleak, .bss)");
      CHECK(hexv(path["path"]["shortest"][1]["node"]) == t.array);
      CHECK(path["path"]["shortest"][2]["via"] == "+0x10");
      // networkx's dominators of the exported graph, on the part that
      // decides the module's objects (the whole takes networkx hours).
      const std::string file = tmp_dir() + "/kernel-graph.json";
      kernel_json(d, d.pelf, args(d, {"retained", "--top", "1", "--export", file, "--json"}));
      std::string only = fmt::format("{:#x}", t.array);
      for (const auto& [a, id] : t.id) only += fmt::format(",{:#x}", a);
      auto nx = run({"python3", std::string(LR_SOURCE_DIR) + "/tests/check_dominators.py", file,
                     "--only", only},
                    600);
      INFO(nx.out << nx.err);
      CHECK(nx.status == 0);
      CHECK(nx.out.find(" 0 differences") != std::string::npos);
      // Inside crash: the same tree.
      REQUIRE(have_program("crash"));
      const std::string dir = tmp_dir() + "/kretained-crash";
      REQUIRE(run({"mkdir", "-p", dir}).status == 0);
      RunResult r;
      crash_session({"extend " + build_dir() + "/leakref.so", "mod -s lrkleak " + d.ko_leak,
                     "leakref retained --tree lrk_array --depth 1 --json > " + dir + "/t.json"},
                    &r);
      INFO(r.err.substr(0, 2000));
      REQUIRE(r.status == 0);
      json in_crash = json::parse(read_file(dir + "/t.json"));
      CHECK(in_crash["tree"] == arr["tree"]);
    }
  }
}

// A page the dump does not hold (as makedumpfile leaves out a page it
// filtered, or a dump cut off) is a partial answer, never a quiet one: the
// page holding lrk_array's kmalloc'd array taken out of the physical-only
// ELF dump (read through libkdumpfile's translation; libkdumpfile 0.5.1
// itself crashed reading it) and out of the paging one (leakref's own
// reader). The four array objects lose their only holder and are listed,
// under a "partial:" headline naming what was not read; the objects of the
// missing page are not listed at all (whether they are allocated is not
// known); --fail-on fails on it; refs says partial too.
TEST_CASE("kernel leaks: a page missing from the dump makes the answer partial",
          "[kernel][kleaks][roots]") {
  NEED_DUMP();
  const Dump& d = dump();
  LeakTruth t = checked_truth(d);
  REQUIRE(!d.elf.empty());
  const uint64_t pa = elf_phys(d.pelf, t.array) & ~uint64_t{4095};
  REQUIRE(pa != 0);
  const std::string dir = tmp_dir();
  std::set<uint64_t> want = t.by_state.at("dropped");
  for (uint64_t a : t.by_state.at("cycle")) want.insert(a);
  // Intact: whole, and --fail-on partial passes.
  json whole = kernel_json(d, d.elf, args(d, {"leaks", "--cache", "lrk_obj", "--json"}));
  CHECK(whole["partial"] == false);
  CHECK(whole["partial_reasons"].empty());
  CHECK(leakref({"kernel", "--vmcore", d.elf, "--vmlinux", d.vmlinux, "leaks", "--cache", "lrk_obj",
                 "--fail-on", "partial"})
            .status == 0);
  for (const std::string& src : {d.elf, d.pelf}) {
    const std::string cut = holed(src, dir + "/holed.dump", pa);
    INFO("dump " << src);
    RunResult r = leakref(args(d, {"kernel", "--vmcore", cut, "--vmlinux", d.vmlinux, "leaks",
                                   "--cache", "lrk_obj", "--json"}),
                          300);
    INFO(r.err);
    REQUIRE(r.status == 0);
    json j = r.json();
    CHECK(j["partial"] == true);
    REQUIRE(j["partial_reasons"].size() >= 1);
    CHECK(j["partial_reasons"].dump().find("not wholly in the dump") != std::string::npos);
    std::set<uint64_t> got, with_array = want;
    for (uint64_t a : t.array_slots) with_array.insert(a);
    for (const auto& o : j["caches"][0]["objects"]) got.insert(hexv(o["addr"]));
    CHECK(got == with_array);
    // No object of the missing page is listed in any cache.
    json all = kernel_json(d, cut, args(d, {"leaks", "--json"}));
    for (const auto& c : all["caches"])
      for (const auto& o : c["objects"])
        CHECK((hexv(o["addr"]) & ~uint64_t{4095}) != t.array - t.array % 4096);
    // Text: the first line says partial; any --fail-on fails.
    RunResult txt = leakref(args(
        d, {"kernel", "--vmcore", cut, "--vmlinux", d.vmlinux, "leaks", "--cache", "lrk_obj"}));
    CHECK(txt.out.rfind("partial: ", 0) == 0);
    CHECK(leakref({"kernel", "--vmcore", cut, "--vmlinux", d.vmlinux, "leaks", "--cache",
                   "nonesuch", "--fail-on", "leak"})
              .status == 1);
    json rf =
        kernel_json(d, cut, args(d, {"refs", fmt::format("{:#x}", t.array_slots[0]), "--json"}));
    CHECK(rf["partial"] == true);
    CHECK(rf["state"] == "leaked");
    json arr = kernel_json(d, cut, args(d, {"refs", fmt::format("{:#x}", t.array), "--json"}));
    CHECK(arr["state"] == "not_in_dump");
  }
}

// --reconcile on kernel objects: each refcount against the references the
// index found. The module's list object 3 counts two references nobody
// holds, each dropped object one; the cycles' and the held objects' counts
// are explained. Struct files' f_count is explained by fd slots, mappings
// and executables on both kernels.
TEST_CASE("kernel --reconcile: refcounts above the references found are flagged, no trace",
          "[kernel][kleaks]") {
  for (const auto& kv : kernels()) {
    const Dump& d = dump(kv);
    NEED_KERNEL(d);
    SECTION("kernel " + kv) {
      LeakTruth t = checked_truth(d);
      json j = kernel_json(d, d.pelf,
                           args(d, {"slab", "--cache", "lrk_obj", "--type", "struct lrk_obj",
                                    "--refcount", "ref", "--show", "id", "--reconcile", "--json"}));
      REQUIRE(j["objects"].size() == 17);
      std::map<uint64_t, int64_t> over, want;
      for (const auto& o : j["objects"]) {
        const uint64_t a = hexv(o["addr"]);
        CHECK(o["refcount"] == t.ref.at(a));
        if (o.value("over", int64_t{0}) > 0) over[a] = o["over"];
      }
      for (const auto& [a, id] : t.id)
        if (id == 3) want[a] = 2;
      for (uint64_t a : t.by_state.at("dropped")) want[a] = 1;
      CHECK(over == want);
      CHECK(j["summary"]["over_referenced"] == 4);
      CHECK(j["summary"]["not_indexed"] == 0);
      json f = kernel_json(d, d.pelf,
                           {"slab", "--cache", "filp", "--type", "struct file", "--refcount",
                            file_count_member(d), "--reconcile", "--json"});
      CHECK(f["summary"]["matched"].get<int64_t>() > 20);
      CHECK(f["summary"]["over_referenced"] == 0);
      CHECK(f["summary"]["not_indexed"] == 0);
    }
  }
}

// docs/kernel.md's leaks example, executed as written on the 6.1 dump
// (addresses, pids, jiffies, the allocation's call site in the freed init
// text, and so which dropped object comes first, aside: they differ
// between boots).
namespace {

// The docs' leak examples against a run: addresses, pids, jiffies, the
// whole dump's counts, which dropped object comes first (by address) and
// the serial console's line ends aside: they differ between boots.
std::string doc_norm(std::string t) {
  std::erase(t, '\r');
  t = std::regex_replace(t, std::regex("0x[0-9a-f]{5,}"), "0xADDR");
  t = std::regex_replace(t, std::regex("(pid|cpu) [0-9]+"), "$1 N");
  t = std::regex_replace(t, std::regex("[0-9]+ jiffies"), "N jiffies");
  t = std::regex_replace(t, std::regex("id = 2[123],"), "id = 2N,");
  t = std::regex_replace(t, std::regex("of [0-9]+ objects; [0-9]+ references, [0-9.]+ MiB"),
                         "of N objects; N references, N MiB");
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

}  // namespace

TEST_CASE("docs: the kernel leaks example runs as written", "[kernel][kleaks][docs]") {
  const Dump& d = dump();
  NEED_KERNEL(d);
  const std::map<std::string, std::string> links = {
      {"vmcore-6.1.pelf", d.pelf}, {"vmlinux-6.1", d.vmlinux}, {"lrkleak.ko", d.ko_leak}};
  CHECK(run_doc_section("kleaks", links, doc_norm) == 5);
  CHECK(run_doc_section("kretained", links, doc_norm) == 1);
}

namespace {

// What kmemleak reported in the guest (fixtures/kernel/init-kmemleak copies
// its report to the serial console): the objects' addresses.
std::set<uint64_t> kmemleak_reported(const Dump& d) {
  std::set<uint64_t> out;
  std::istringstream in(read_file(d.serial));
  std::regex un(R"(LEAKREF-KMEMLEAK unreferenced object 0x([0-9a-f]+) \(size [0-9]+\):)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, un)) out.insert(std::stoull(m[1], nullptr, 16));
  return out;
}

}  // namespace

// kmemleak's own answer: a kernel built with it from Debian 12's kernel
// source (scripts/kernel-kmemleak), the fixture module loaded, kmemleak's
// scan in the guest, and the dump taken right after. leaks must list
// exactly the objects kmemleak reported, on the whole dump; the fixture's
// among them are its dropped objects and cycles.
TEST_CASE("kernel leaks: the same objects as kmemleak, on a kernel built with it",
          "[kernel][kleaks][kmemleak]") {
  const Dump& d = dump("kmemleak");
  NEED_KERNEL(d);
  LeakTruth t = checked_truth(d);
  const std::set<uint64_t> km = kmemleak_reported(d);
  INFO("kmemleak reported " << km.size() << " objects");
  for (const char* state : {"dropped", "cycle"})
    for (uint64_t a : t.by_state.at(state)) CHECK(km.count(a) == 1);
  json j = kernel_json(d, d.pelf, args(d, {"leaks", "--json"}));
  std::set<uint64_t> got;
  for (const auto& c : j["caches"])
    for (const auto& o : c["objects"]) got.insert(hexv(o["addr"]));
  CHECK(got == km);
  CHECK(j["warnings"].empty());
  // kmemleak's own objects are not scanned (they point at every object it
  // tracks), and its kmemleak_not_leak marks are honoured.
  CHECK(j["index"]["untracked"].get<uint64_t>() > 1000);
  CHECK(j["index"]["kmemleak_not_leak"].get<uint64_t>() > 0);
  // refs says what it makes of each: the newest entry of kmemleak's
  // object_list (the oldest are in its static pool) is its metadata.
  json u = kernel_json(d, d.pelf, {"refs", "*object_list.prev", "--json"});
  CHECK(u["state"] == "untracked");
  json l = kernel_json(
      d, d.pelf,
      args(d, {"refs", fmt::format("{:#x}", *t.by_state.at("dropped").begin()), "--json"}));
  CHECK(l["state"] == "leaked");
}

// docs/kernel.md's kmemleak comparison, as written (addresses and counts of
// the whole dump aside: they differ between builds and boots).
TEST_CASE("docs: the kmemleak comparison runs as written", "[kernel][kmemleak][docs]") {
  const Dump& d = dump("kmemleak");
  NEED_KERNEL(d);
  CHECK(run_doc_section("kmemleak",
                        {{"serial.log", d.serial},
                         {"vmcore-kmemleak.pelf", d.pelf},
                         {"vmlinux-kmemleak", d.vmlinux}},
                        doc_norm) == 2);
}

namespace {

uint64_t numval(const json& j) {
  return j.is_string() ? std::stoull(j.get<std::string>(), nullptr, 16) : j.get<uint64_t>();
}

// A symbol's address in the dump: vmlinux's (nm) plus VMCOREINFO's KASLR offset.
uint64_t symbol_in_dump(const Dump& d, const std::string& sym) {
  RunResult nm = run(
      {"/bin/sh", "-c", "nm '" + d.vmlinux + "' | awk '$3 == \"" + sym + "\" {print $1; exit}'"});
  RunResult ko = run(
      {"/bin/sh", "-c", "grep -a -m1 -o 'KERNELOFFSET=[0-9a-f]*' '" + d.pelf + "' | cut -d= -f2"});
  REQUIRE(!nm.out.empty());
  REQUIRE(!ko.out.empty());
  return std::stoull(nm.out, nullptr, 16) + std::stoull(ko.out, nullptr, 16);
}

}  // namespace

// 7.x's sheaves from a hostile dump: CPU 0's main sheaf of a cache claims
// 2^32-1 objects. It is refused with a warning naming it, never read as
// gigabytes; its objects then count as allocated, exactly as many as it held.
TEST_CASE("kernel slab: a sheaf claiming 2^32-1 objects is refused, the rest exact",
          "[kernel][slab]") {
  const Dump& d = dump("7.x");
  NEED_KERNEL(d);
  uint64_t pcpu0 = 0;  // __per_cpu_offset[0]
  std::memcpy(&pcpu0, read_virtual(d.pelf, symbol_in_dump(d, "__per_cpu_offset"), 8).data(), 8);
  json good = kernel_json(d, d.pelf, {"slab", "--json"});
  std::string cache;
  uint64_t sheaf = 0, held = 0;
  for (const auto& c : good["caches"]) {
    if (c["sheaf_free"].get<uint64_t>() == 0) continue;
    json k = walk_one(d, {"walk", "--type", "kmem_cache", "--head", "slab_caches", "--list-member",
                          "list", "--where", "name == \"" + c["name"].get<std::string>() + "\"",
                          "--show", "cpu_sheaves", "--json"});
    const uint64_t pcs = numval(k["fields"]["cpu_sheaves"]) + pcpu0;
    json m =
        walk_one(d, {"walk", "--type", "slub_percpu_sheaves", "--head", fmt::format("{:#x}", pcs),
                     "--array", "--count", "1", "--show", "main", "--json"});
    const uint64_t main = numval(m["fields"]["main"]);
    json s = walk_one(d, {"walk", "--type", "slab_sheaf", "--head", fmt::format("{:#x}", main),
                          "--array", "--count", "1", "--show", "size", "--json"});
    if (numval(s["fields"]["size"]) == 0) continue;
    cache = c["name"];
    sheaf = main;
    held = numval(s["fields"]["size"]);
    break;
  }
  REQUIRE(sheaf != 0);
  INFO(cache << "'s CPU 0 sheaf " << std::hex << sheaf << " holds " << std::dec << held);
  // struct slab_sheaf's size: a u32 at 24 in 7.2 (checked against what the walk read).
  uint32_t size_there = 0;
  std::memcpy(&size_there, read_virtual(d.pelf, sheaf + 24, 4).data(), 4);
  REQUIRE(size_there == held);
  std::string bad = patched(d.pelf, tmp_dir() + "/sheaf.pelf", {{sheaf + 24, 0xffffffffull}}, 4);
  RunResult r = leakref(
      {"kernel", "--vmcore", bad, "--vmlinux", d.vmlinux, "slab", "--cache", cache, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  json was;
  for (const auto& c : good["caches"])
    if (c["name"] == cache) was = c;
  const json& now = j["caches"][0];
  CHECK(now["sheaf_free"].get<uint64_t>() + held == was["sheaf_free"].get<uint64_t>());
  CHECK(now["allocated"].get<uint64_t>() == was["allocated"].get<uint64_t>() + held);
  CHECK(now["objects"] == was["objects"]);
  CHECK(j["warnings"].dump().find(fmt::format("sheaf {:#x} names cache", sheaf)) !=
        std::string::npos);
  CHECK(j["warnings"].dump().find("holds 4294967295 objects") != std::string::npos);
}
