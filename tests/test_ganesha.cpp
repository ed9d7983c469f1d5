// The bundled nfs-ganesha profile on a real nfs-ganesha 4.3 (Debian's
// package) on loopback, with user-space NFSv4 clients holding files open.
// Types come from Debian's own source (leakref-debsrc, then the profile's
// [build]); the outside truth is gdb reading the same structures through its
// own evaluator (tests/ganesha/oracle.gdb) and ganesha's own per-partition
// entry counts, on the same core.
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "harness.hpp"

using nlohmann::json;

namespace {

std::string src(const std::string& rel) {
  return std::string(LR_SOURCE_DIR) + "/" + rel;
}

// The cache for Debian's source and the built types: kept across runs (a
// download saved), under /var/cache like the kernel images.
const char* kCache = "/var/cache/leakref/xdg";

lrtest::RunResult with_env(std::vector<std::string> argv, int timeout_s) {
  std::vector<std::string> full = {"env", std::string("XDG_CACHE_HOME=") + kCache,
                                   "NFS_HOLD=" + lrtest::fixture_path("nfs_hold")};
  full.insert(full.end(), argv.begin(), argv.end());
  return lrtest::run(full, timeout_s);
}

lrtest::RunResult lr(std::vector<std::string> args, int timeout_s = 120) {
  args.insert(args.begin(), lrtest::build_dir() + "/leakref");
  return with_env(std::move(args), timeout_s);
}

lrtest::RunResult env(std::vector<std::string> args, int timeout_s = 120) {
  args.insert(args.begin(), src("tests/ganesha/env.sh"));
  return with_env(std::move(args), timeout_s);
}

std::string why_not_here() {
  if (geteuid() != 0) return "not root: the nfs-ganesha test starts rpcbind and ganesha";
  struct stat st;
  if (::stat("/usr/bin/ganesha.nfsd", &st) != 0)
    return "nfs-ganesha is not installed (make test installs it)";
  if (::stat(lrtest::fixture_path("nfs_hold").c_str(), &st) != 0)
    return "nfs_hold was not built: libnfs-dev is missing (make test installs it)";
  if (!lrtest::have_program("nfs-ls"))
    return "libnfs-utils is not installed (make test installs it)";
  if (!lrtest::have_gcore()) return "gcore (gdb) is not installed";
  return "";
}

// "SET ADDR" -> refcount, and each object's count of its children, from the
// gdb oracle's lines.
struct Truth {
  std::map<std::string, long> refcount;
  long recorded = -1;
};

Truth oracle(const std::string& core, const std::string& types) {
  auto r = lrtest::run({"gdb", "-batch", "-nx", "-q", "/usr/bin/ganesha.nfsd", core, "-ex",
                        "add-symbol-file " + types, "-x", src("tests/ganesha/oracle.gdb")},
                       120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  Truth t;
  std::istringstream in(r.out);
  std::string set, addr;
  while (in >> set) {
    if (set == "recorded") {
      in >> t.recorded;
    } else if (set == "clients" || set == "openowners" || set == "states") {
      long rc, n;
      in >> addr >> rc >> n;
      t.refcount[set + " " + addr] = rc;
    } else {
      std::string rest;
      std::getline(in, rest);
    }
  }
  return t;
}

// The refcounts of the sets gdb's oracle reads (clients, open owners,
// states), by "SET ADDR".
std::map<std::string, long> reported(const json& j) {
  std::map<std::string, long> m;
  for (const auto& s : j["sets"])
    if (s["name"] == "clients" || s["name"] == "openowners" || s["name"] == "states")
      for (const auto& o : s["objects"])
        m[s["name"].get<std::string>() + " " + o["addr"].get<std::string>()] = o["refcount"];
  return m;
}

const json& set_of(const json& j, const std::string& name) {
  for (const auto& s : j["sets"])
    if (s["name"] == name) return s;
  FAIL("no set " << name);
  static json none;
  return none;
}

}  // namespace

TEST_CASE("nfs-ganesha: clients, open owners and states equal gdb's reading", "[ganesha][root]") {
  std::string why = why_not_here();
  if (!why.empty()) LR_SKIP(why);
  // Debian's source of the installed ganesha; our own script, so a failure
  // here is a failure (the archive is reachable in CI), not a skip.
  auto ds = with_env({src("scripts/leakref-debsrc"), "nfs-ganesha"}, 300);
  INFO(ds.err);
  REQUIRE(ds.status == 0);

  char tmpl[] = "/tmp/leakref-ganesha-XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  std::string dir = tmpl;
  struct Stop {
    std::string d;
    ~Stop() { env({"stop", d}, 60); }
  } stop{dir};
  auto r = env({"start", dir});
  INFO(r.err);
  REQUIRE(r.status == 0);
  // Client a holds 3 files open, b 2; a third client only lists the export.
  REQUIRE(env({"hold", dir, "a", "/f1", "/f2", "/f3"}).status == 0);
  REQUIRE(env({"hold", dir, "b", "/f4", "/f5"}).status == 0);
  REQUIRE(env({"list", dir}).status == 0);
  auto snap = env({"snapshot", dir}, 180);
  INFO(snap.err);
  REQUIRE(snap.status == 0);
  std::string core = snap.out.substr(0, snap.out.find('\n'));

  // The first run builds the types from the profile's [build] and says so.
  auto p = lr({"profile", core, "--profile", "nfs-ganesha", "--json"}, 300);
  INFO(p.err);
  REQUIRE(p.status == 0);
  json j = p.json();
  std::string types;
  {
    auto i = lr({"info", core, "--json"});
    REQUIRE(i.status == 0);
    json ij = i.json();  // (a temporary's member would not outlive the loop's start)
    // Each library once: the dynamic linker's /lib/... soname paths are the
    // NT_FILE's /usr/lib/... files, not more modules with empty ranges.
    std::map<std::string, int> seen;
    for (const auto& m : ij["modules"])
      if (m["build_id"].is_string() && !m["build_id"].get<std::string>().empty()) {
        INFO(m["path"]);
        CHECK(++seen[m["build_id"].get<std::string>()] == 1);
        CHECK(m["base"] != m["end"]);
      }
    CHECK(seen.size() >= 30);
    // The profile's types, cached by the executable's build-id and the
    // recipe (the newest of such files: an older recipe's may be there).
    std::string bid;
    for (const auto& m : ij["modules"])
      if (m.value("is_exe", false)) bid = m["build_id"];
    const std::string prefix = "types-" + bid + "-";
    std::filesystem::file_time_type newest{};
    for (const auto& f : std::filesystem::directory_iterator(std::string(kCache) + "/leakref")) {
      const std::string n = f.path().filename();
      if (n.rfind(prefix, 0) == 0 && (types.empty() || f.last_write_time() >= newest)) {
        newest = f.last_write_time();
        types = f.path();
      }
    }
  }
  REQUIRE(!types.empty());
  REQUIRE(lrtest::read_file(types).size() > 0);
  Truth t = oracle(core, types);
  CHECK(reported(j) == t.refcount);
  CHECK(t.recorded == 3);
  CHECK(set_of(j, "clients")["objects"].size() == 3);
  CHECK(set_of(j, "openowners")["objects"].size() == 2);
  CHECK(set_of(j, "states")["objects"].size() == 5);
  for (const auto& s : j["sets"]) {
    INFO(s["name"]);
    CHECK(s["summary"]["warnings"].empty());
    for (const auto& o : s["objects"]) {
      CHECK((o["verdict"] == "ok" || o["verdict"].is_null()));
      CHECK(o["violations"].empty());
    }
  }
  // Tables no symbol names, found by content: the state-id table holds the
  // very states the clients' owners list, with the same refcounts; no
  // client is unconfirmed.
  std::map<std::string, json> by_owner, by_table;
  for (const auto& o : set_of(j, "states")["objects"]) by_owner[o["addr"]] = o["refcount"];
  for (const auto& o : set_of(j, "state-ids")["objects"]) by_table[o["addr"]] = o["refcount"];
  CHECK(by_table.size() == 5);
  CHECK(by_table == by_owner);
  CHECK(set_of(j, "unconfirmed")["objects"].empty());
  // The object-handle cache's LRU (17 lanes found by content): every open
  // state's object is one of its entries, and each entry is on the queue
  // it says (the sets' invariants above).
  CHECK(set_of(j, "lru-lanes")["objects"].size() == 17);
  std::vector<uint64_t> entries;
  for (const char* q : {"lru-l1", "lru-l2"})
    for (const auto& o : set_of(j, q)["objects"])
      entries.push_back(std::stoull(o["addr"].get<std::string>(), nullptr, 16));
  CHECK(entries.size() >= 6);  // the export's root and the five open files at least
  uint64_t entry_size = 0;
  {
    auto sz = lrtest::run({"gdb", "-batch", "-nx", "-ex", "print sizeof(mdcache_entry_t)", types});
    std::smatch m;
    REQUIRE(std::regex_search(sz.out, m, std::regex(R"(= (\d+))")));
    entry_size = std::stoull(m[1].str());
  }
  for (const auto& o : set_of(j, "states")["objects"]) {
    const uint64_t obj = std::stoull(o["labels"]["state_obj"].get<std::string>(), nullptr, 16);
    INFO("state_obj " << o["labels"]["state_obj"]);
    CHECK(std::any_of(entries.begin(), entries.end(),
                      [&](uint64_t e) { return obj >= e && obj < e + entry_size; }));
  }

  // walk --hashtable: the same clients; a value type of another size is refused
  auto w = lr({"walk", core, "--type", "nfs_client_id_t", "--head", "ht_confirmed_client_id",
               "--hashtable", "--refcount", "cid_refcount", "--json"});
  INFO(w.err);
  REQUIRE(w.status == 0);
  std::map<std::string, long> got, want;
  json wj = w.json();
  for (const auto& o : wj["objects"])
    got["clients " + o["addr"].get<std::string>()] = o["refcount"];
  for (const auto& [k, v] : t.refcount)
    if (k.rfind("clients ", 0) == 0) want[k] = v;
  CHECK(got == want);
  auto bad = lr({"walk", core, "--type", "struct state_t", "--head", "ht_confirmed_client_id",
                 "--hashtable"});
  CHECK(bad.status != 0);
  CHECK(bad.err.find("ganesha recorded 1216 bytes") != std::string::npos);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);

  // hostile: a tree node that is its own left child, a partition count
  // from garbage: a stopped walk and one error line, never a hang
  {
    lrtest::write_file(dir + "/find.gdb",
                       "set $ht = *(hash_table_t **)&ht_confirmed_client_id\n"
                       "set $i = 0\n"
                       "while !$ht->partitions[$i].rbt.root\n  set $i = $i + 1\nend\n"
                       "printf \"node 0x%lx 0x%lx 0x%lx\\n\", $ht->partitions[$i].rbt.root, "
                       "&$ht->partitions[$i].rbt.root->left, &$ht->parameter.index_size\n");
    auto g = lrtest::run({"gdb", "-batch", "-nx", "-q", "/usr/bin/ganesha.nfsd", core, "-ex",
                          "add-symbol-file " + types, "-x", dir + "/find.gdb"},
                         120);
    INFO(g.out << g.err);
    REQUIRE(g.status == 0);
    size_t at = g.out.find("node 0x");
    REQUIRE(at != std::string::npos);
    std::istringstream in(g.out.substr(at + 5));
    uint64_t node, left, idx;
    in >> std::hex >> node >> left >> idx;
    std::string cyc = lrtest::patched(core, dir + "/cyclic.core", {{left, node}});
    auto c = lr({"walk", cyc, "--type", "nfs_client_id_t", "--head", "ht_confirmed_client_id",
                 "--hashtable", "--json", "--fail-on", "cycle"});
    INFO(c.err);
    CHECK(c.status == 1);
    CHECK(c.json()["summary"]["stop"] == "cycle");
    ::unlink(cyc.c_str());
    std::string huge = lrtest::patched(core, dir + "/huge.core", {{idx, 0xffffffffull}});
    auto hz = lr({"walk", huge, "--type", "nfs_client_id_t", "--head", "ht_confirmed_client_id",
                  "--hashtable"});
    CHECK(hz.status != 0);
    CHECK(hz.err.find("parameter.index_size is 4294967295: not a partition count") !=
          std::string::npos);
    ::unlink(huge.c_str());
  }

  // a leaked client reference is flagged, with nothing holding it
  // One more reference on the listing-only client (refcount 1 = the
  // table), written into the live ganesha as a missed release would leave it.
  std::string victim;
  for (const auto& o : set_of(j, "clients")["objects"])
    if (o["refcount"] == 1) victim = o["addr"];
  REQUIRE(!victim.empty());
  std::string pid = lrtest::read_file(dir + "/state/ganesha");
  pid.erase(pid.find_last_not_of("\n") + 1);
  auto g = lrtest::run({"gdb", "-batch", "-nx", "-q", "-p", pid, "-ex", "add-symbol-file " + types,
                        "-ex", "set var ((nfs_client_id_t *)" + victim + ")->cid_refcount += 1"},
                       120);
  INFO(g.err);
  REQUIRE(g.status == 0);
  std::string before = core;
  // Kept for diff: gcore names the next core by pid too.
  std::string first = dir + "/first.core";
  REQUIRE(::rename(core.c_str(), first.c_str()) == 0);
  auto snap2 = env({"snapshot", dir}, 180);
  REQUIRE(snap2.status == 0);
  std::string core2 = snap2.out.substr(0, snap2.out.find('\n'));
  REQUIRE(core2 == before);  // gcore names the core by pid: overwritten
  auto p2 = lr({"profile", core2, "--profile", "nfs-ganesha", "--json", "--fail-on", "flagged"});
  CHECK(p2.status == 1);
  json j2 = p2.json();
  CHECK(reported(j2) == oracle(core2, types).refcount);
  for (const auto& o : set_of(j2, "clients")["objects"]) {
    if (o["addr"] == victim) {
      CHECK(o["verdict"] == "extra");
      CHECK(o["unexplained"] == 1);
      CHECK(o["refcount"] == 2);
    } else {
      CHECK(o["verdict"] == "ok");
    }
  }

  // The two cores compared through the profile: exactly the victim's
  // reference climbed, matched by its client id (the set's key).
  auto df = lr({"diff", first, core2, "--profile", "nfs-ganesha", "--json"});
  INFO(df.err);
  REQUIRE(df.status == 0);
  json dj = df.json();
  std::string victim_id;
  for (const auto& o : set_of(j2, "clients")["objects"])
    if (o["addr"] == victim) victim_id = o["key"].dump();
  std::vector<json> moved;
  for (const auto& o : dj["objects"]) moved.push_back(o);
  INFO("moved: " << json(moved).dump(1) << " victim key " << victim_id);
  REQUIRE(moved.size() == 1);
  CHECK(moved[0]["change"] == "climbed");
  CHECK(moved[0]["key"] == "clients:" + victim_id);
  CHECK(moved[0]["before"] == 1);
  CHECK(moved[0]["after"] == 2);
  CHECK(dj["summary"]["same"].get<long>() >= 9);  // 3 clients, 2 owners, 5 states less the victim
  ::unlink(first.c_str());

  // The README's example, executed as written, on this core (addresses and
  // client ids, which ganesha makes from its start time, aside).
  std::string part = lrtest::readme_section("ganesha");
  REQUIRE(!part.empty());
  std::string rd = dir + "/readme";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", rd}).status == 0);
  REQUIRE(lrtest::run({"/bin/ln", "-sf", core2, rd + "/core.ganesha"}).status == 0);
  const char* home = std::getenv("HOME");
  std::string h = home ? home : "/root";
  auto norm = [&](std::string t) {
    while (!t.empty() && t.back() == '\n') t.pop_back();
    for (auto [from, to] : {std::pair{lrtest::build_dir() + "/profiles/",
                                      std::string("/usr/local/share/leakref/profiles/")},
                            {h + "/.cache/", std::string("/root/.cache/")}})
      for (size_t at = 0; (at = t.find(from, at)) != std::string::npos; at += to.size())
        t.replace(at, from.size(), to);
    t = std::regex_replace(t, std::regex("0x[0-9a-f]{6,}"), "0xADDR");
    return std::regex_replace(t, std::regex("\\b[0-9]{19}\\b"), "CLIENTID");
  };
  size_t commands = 0;
  for (const auto& [cmd, want] : lrtest::readme_commands(part)) {
    INFO(cmd);
    auto r = lrtest::run({"/usr/bin/env", "-u", "XDG_CACHE_HOME", "/bin/bash", "-c",
                          "cd '" + rd + "' && PATH='" + lrtest::build_dir() + ":" + src("scripts") +
                              "':$PATH " + cmd},
                         300);
    CHECK(norm(r.out) == norm(want));
    ++commands;
  }
  CHECK(commands == 3);
}
