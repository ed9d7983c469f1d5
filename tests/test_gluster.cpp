// GlusterFS integration: a real 10.3 volume on loopback (glusterd, a brick in
// a temp dir, a FUSE mount), a workload, then statedumps and gcore of the
// FUSE client and the brick at one quiescent moment. leakref's view of each
// core must equal GlusterFS's own statedump exactly. Root and FUSE needed.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "harness.hpp"

using nlohmann::json;

namespace {

std::string env_sh() {
  return std::string(LR_SOURCE_DIR) + "/tests/gluster/env.sh";
}

// The statedump items compared, from either GlusterFS or leakref.
struct Dump {
  std::vector<std::vector<std::string>> pools;  // name, xlator, active, sizeof, padded
  std::map<std::string, std::string> memusage;  // "xl - usage-type T" -> num_allocs
  std::map<std::string, std::string> itable;    // "<table name>|key" -> value
  bool operator==(const Dump& o) const {
    return pools == o.pools && memusage == o.memusage && itable == o.itable;
  }
};

Dump parse_dump(const std::string& text) {
  Dump d;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> secs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > 2 && line.front() == '[' && line.back() == ']')
      secs.push_back({line.substr(1, line.size() - 2), {}});
    else if (auto eq = line.find('='); eq != std::string::npos && !secs.empty())
      secs.back().second.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  std::map<std::string, std::string> table_of;  // key prefix -> table name
  for (auto& [name, kv] : secs)
    for (auto& [k, v] : kv)
      if (k.size() > 5 && k.compare(k.size() - 5, 5, ".name") == 0 && v.size() > 6 &&
          v.compare(v.size() - 6, 6, "/inode") == 0)
        table_of[k.substr(0, k.size() - 5)] = v;
  static const char* tkeys[] = {"dentry_hashsize", "inode_hashsize", "lru_limit",
                                "active_size",     "lru_size",       "purge_size",
                                "invalidate_size"};
  for (auto& [name, kv] : secs) {
    if (name == "mempool") {
      for (auto& [k, v] : kv) {
        if (k == "-----")
          d.pools.emplace_back();
        else if (!d.pools.empty() &&
                 (k == "pool-name" || k == "xlator-name" || k == "active-count" ||
                  k == "sizeof-type" || k == "padded-sizeof"))
          d.pools.back().push_back(k + "=" + v);
      }
    }
    if (auto p = name.find(" - usage-type "); p != std::string::npos && name.size() > 9 &&
                                              name.compare(name.size() - 9, 9, " memusage") == 0)
      for (auto& [k, v] : kv)
        if (k == "num_allocs") d.memusage[name] = v;
    for (auto& [prefix, tname] : table_of) {
      for (auto& [k, v] : kv)
        for (const char* tk : tkeys)
          if (k == prefix + "." + tk) d.itable[tname + "|" + tk] = v;
      if (name.rfind(prefix + ".", 0) == 0) {
        std::string rest = name.substr(prefix.size() + 1);  // active.3
        bool inode = false;
        for (auto& [k, v] : kv) inode |= k == "gfid";
        if (!inode) continue;
        for (auto& [k, v] : kv) d.itable[tname + "|" + rest + "|" + k] = v;
      }
    }
  }
  return d;
}

std::string diff(const Dump& real, const Dump& lr) {
  std::ostringstream o;
  if (real.pools != lr.pools)
    o << "mempool sections differ (" << real.pools.size() << " vs " << lr.pools.size() << ")\n";
  for (auto& [k, v] : real.memusage)
    if (!lr.memusage.count(k) || lr.memusage.at(k) != v)
      o << "memusage " << k << ": statedump " << v << ", leakref "
        << (lr.memusage.count(k) ? lr.memusage.at(k) : "none") << "\n";
  for (auto& [k, v] : lr.memusage)
    if (!real.memusage.count(k)) o << "memusage " << k << " only in leakref\n";
  for (auto& [k, v] : real.itable)
    if (!lr.itable.count(k) || lr.itable.at(k) != v)
      o << "itable " << k << ": statedump " << v << ", leakref "
        << (lr.itable.count(k) ? lr.itable.at(k) : "none") << "\n";
  for (auto& [k, v] : lr.itable)
    if (!real.itable.count(k)) o << "itable " << k << " only in leakref\n";
  return o.str();
}

struct Volume {
  std::string dir, why_not, volume;
  bool up = false;
  bool broken = false;  // the facilities exist but the volume could not be set up: a failure
  Volume() {
    if (geteuid() != 0) {
      why_not = "not root: the GlusterFS tests start glusterd and mount FUSE";
      return;
    }
    struct stat st;
    if (::stat("/usr/sbin/glusterd", &st) != 0) {
      why_not = "glusterfs-server is not installed (make test installs it)";
      return;
    }
    if (::stat("/dev/fuse", &st) != 0) {
      why_not = "/dev/fuse is missing: FUSE mounts impossible here";
      return;
    }
    if (!lrtest::have_gcore()) {
      why_not = "gcore (gdb) is not installed";
      return;
    }
    // Its own directory, not under tmp_dir(): that one is removed with rm -rf
    // at exit and must never meet a live mount.
    char tmpl[] = "/tmp/leakref-gluster-XXXXXX";
    if (!mkdtemp(tmpl)) {
      why_not = "mkdtemp failed";
      return;
    }
    dir = tmpl;
    auto r = lrtest::run({env_sh(), "start", dir}, 240);
    if (r.status != 0) {
      why_not = "could not start the GlusterFS volume: " + r.err;
      broken = true;
      return;
    }
    volume = lrtest::read_file(dir + "/state/volume");
    while (!volume.empty() && volume.back() == '\n') volume.pop_back();
    r = lrtest::run({env_sh(), "workload", dir}, 240);
    if (r.status != 0) {
      why_not = "the workload failed: " + r.err;
      broken = true;
      return;
    }
    up = true;
  }
  // Cleanup even when a check failed: this runs at exit.
  ~Volume() {
    if (!dir.empty()) lrtest::run({env_sh(), "stop", dir}, 180);
  }
  // A statedump, gcore, statedump of `who`; retried until both dumps agree on
  // every compared item, i.e. the process was quiescent around the core.
  std::string snapshot(const std::string& who, Dump* real) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      auto r = lrtest::run({env_sh(), "snapshot", dir, who}, 300);
      if (r.status != 0) {
        FAIL("snapshot of " << who << " failed: " << r.err);
      }
      std::string snap = r.out.substr(0, r.out.find('\n'));
      Dump d1 = parse_dump(lrtest::read_file(snap + "/dump1"));
      Dump d2 = parse_dump(lrtest::read_file(snap + "/dump2"));
      if (d1 == d2) {
        *real = d1;
        return snap;
      }
      WARN("process " << who << " was not quiescent around the core; retrying:\n" << diff(d1, d2));
      sleep(3);
    }
    FAIL("process " << who << " never became quiescent");
    return "";
  }
};

Volume& volume() {
  static Volume v;
  return v;
}

// Skips only when a facility is truly absent; a setup failure fails.
#define NEED_VOLUME(v)                                          \
  do {                                                          \
    if (!(v).up) {                                              \
      if ((v).broken) FAIL("GlusterFS setup: " << (v).why_not); \
      LR_SKIP("GlusterFS integration: " + (v).why_not);         \
    }                                                           \
  } while (0)

json gluster_json(const std::string& core) {
  auto r = lrtest::leakref({"gluster", core, "--json"}, 300);
  INFO("leakref gluster " << core << ": " << r.err);
  REQUIRE(r.status == 0);
  return r.json();
}

// leakref's counters must equal what it finds in the heap, for every pool
// and every accounting record.
void check_heap_agrees(const json& j) {
  for (const auto& p : j["mempool"]) {
    INFO("mempool " << p["name"] << " of " << p["xlator"]);
    CHECK(p["active"] == p["live"]);
  }
  for (const auto& f : j["findings"]) CHECK(f["kind"] != "counter-mismatch");
  CHECK(j["warnings"].size() <= 1);  // FUSE-only fdtable note on non-FUSE processes
}

void compare_with_statedump(const std::string& who) {
  Volume& v = volume();
  NEED_VOLUME(v);
  Dump real;
  std::string snap = v.snapshot(who, &real);
  auto r = lrtest::leakref({"gluster", snap + "/core", "--format", "statedump"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  Dump mine = parse_dump(r.out);
  INFO(diff(real, mine));
  CHECK(real.pools.size() > 10);
  CHECK(real.memusage.size() > 50);
  CHECK(real.itable.size() > 50);
  CHECK(real == mine);
  json j = gluster_json(snap + "/core");
  check_heap_agrees(j);
  REQUIRE(j["itables"].size() >= 1);
}

}  // namespace

// For the batch archive: a quiescent FUSE client's core and GlusterFS's own
// statedump of it, and a brick's core (taken once per run).
lrtest::SharedDumps lrtest::gluster_dumps() {
  static SharedDumps d = [] {
    SharedDumps r;
    Volume& v = volume();
    if (!v.up) {
      r.why = "GlusterFS: " + v.why_not;
      r.broken = v.broken;
      return r;
    }
    Dump real;
    std::string fuse = v.snapshot("fuse", &real), brick = v.snapshot("brick", &real);
    r.paths = {fuse + "/core", fuse + "/dump1", brick + "/core"};
    return r;
  }();
  return d;
}

TEST_CASE("gluster: FUSE client core equals its own statedump", "[gluster][root]") {
  compare_with_statedump("fuse");
  Volume& v = volume();
  if (!v.up) return;
  // The holder process keeps 5 files open: the FUSE fdtable holds them.
  std::string snap = v.dir + "/snap-fuse.0";
  json j = gluster_json(snap + "/core");
  CHECK(j["fuse_fdtable"].size() == 5);
  size_t with_fds = 0;
  for (const auto& in : j["itables"][0]["active"]) with_fds += in["fds"].size();
  CHECK(with_fds == 5);
  CHECK(j["dicts"].size() > 0);
  for (const auto& d : j["dicts"]) CHECK(d["count"] == d["pairs"].size());
}

namespace {

// The statedump's iobuf arenas ([arena.N], [purge.N], [filled.N]: mem_base,
// page_size, active_cnt, passive_cnt) against the report's, whose buffers'
// refs must say as many are in use as the arena's counter; and the
// account's iobuf entries (live and pooled) against the same counters.
void check_iobufs(const json& gj, const json& aj, const std::string& dump) {
  std::map<std::string, std::map<std::string, std::string>> want;  // "arena.3" -> field -> value
  std::istringstream in(dump);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    static const std::regex re(R"(^((?:arena|purge|filled)\.\d+)\.(\w+)=(.*)$)");
    if (std::regex_match(line, m, re)) want[m[1]][m[2]] = m[3];
  }
  REQUIRE(want.size() >= 8);  // GlusterFS 10 starts with one arena per buffer size
  std::set<std::string> real, mine;
  uint64_t active_bytes = 0, passive_bytes = 0;
  for (const auto& [name, f] : want) {
    real.insert(fmt::format("{:#x} {} {} {}", std::stoull(f.at("mem_base"), nullptr, 16),
                            f.at("page_size"), f.at("active_cnt"), f.at("passive_cnt")));
    active_bytes += std::stoull(f.at("active_cnt")) * std::stoull(f.at("page_size"));
    passive_bytes += std::stoull(f.at("passive_cnt")) * std::stoull(f.at("page_size"));
  }
  for (const auto& a : gj["iobuf_arenas"]) {
    mine.insert(fmt::format("{} {} {} {}", a["mem_base"].get<std::string>(),
                            a["page_size"].get<uint64_t>(), a["active_cnt"].get<int>(),
                            a["passive_cnt"].get<int>()));
    CHECK(a["buffers_read"] == true);
    CHECK(a["active_buffers"] == a["active_cnt"]);
  }
  CHECK(real == mine);
  uint64_t live = 0, pooled = 0;
  auto iobufs = [](const json& node) {
    uint64_t n = 0;
    for (const auto& k : node["children"])
      if (k["name"].get<std::string>().rfind("iobufs of ", 0) == 0) n += k["bytes"].get<uint64_t>();
    return n;
  };
  for (const auto& cat : aj["categories"]) {
    if (cat["name"] == "live") live = iobufs(cat);
    if (cat["name"] == "free")
      for (const auto& k : cat["children"])
        if (k["name"] == "pooled") pooled = iobufs(k);
  }
  CHECK(live == active_bytes);
  CHECK(pooled == passive_bytes);
  CHECK(pooled > 12'000'000);  // the eight arenas GlusterFS 10 maps at start: 12976128 bytes
}

}  // namespace

// account on a real FUSE client: each mem-pool's objects in use (live or
// leaked, named by their pool) are the statedump's active-count for it, and
// the objects put back on the pools' free lists (reachable from them or
// not) are `pooled` free memory, as many as the report finds; the table
// adds up to the writable memory.
TEST_CASE("gluster: account's pool objects against the statedump's mem-pools",
          "[gluster][root][account]") {
  Volume& v = volume();
  NEED_VOLUME(v);
  // Objects put back on the pools just before the core: GlusterFS's pool
  // sweeper frees what was put back a minute or more ago, so a quiet client
  // may have none.
  REQUIRE(lrtest::run({env_sh(), "io", v.dir, "account"}, 300).status == 0);
  Dump real;
  const std::string snap = v.snapshot("fuse", &real);
  auto a = lrtest::leakref({"account", snap + "/core", "--json"}, 300);
  INFO(a.err);
  REQUIRE(a.status == 0);
  const json aj = a.json();
  CHECK(aj["total_bytes"] == aj["writable_bytes"]);
  std::map<std::string, uint64_t> in_use;  // "dict_t (pool, glusterfs)" -> blocks
  uint64_t pooled = 0;
  for (const auto& cat : aj["categories"]) {
    // "inode_t (pool, fuse) kept by the inode LRU of ...": an inode_t too.
    if (cat["name"] == "live" || cat["name"] == "leaked")
      for (const auto& k : cat["children"]) {
        const std::string name = k["name"];
        in_use[name.substr(0, name.find(" kept by the "))] += k["blocks"].get<uint64_t>();
      }
    if (cat["name"] == "free")  // pooled objects, not the iobufs waiting in their arenas
      for (const auto& k : cat["children"])
        if (k["name"] == "pooled")
          for (const auto& e : k["children"])
            if (e["name"].get<std::string>().rfind("iobufs of ", 0) != 0)
              pooled += e["blocks"].get<uint64_t>();
  }
  std::map<std::string, uint64_t> want;
  for (const auto& p : real.pools) {
    std::map<std::string, std::string> f;
    for (const auto& kv : p) f[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    want[f["pool-name"] + " (pool, " + f["xlator-name"] + ")"] += std::stoull(f["active-count"]);
  }
  REQUIRE(want.size() > 10);
  size_t active = 0;
  for (const auto& [k, n] : want) {
    INFO(k);
    CHECK(in_use[k] == n);
    active += n > 0;
  }
  CHECK(active > 3);
  const json gj = gluster_json(snap + "/core");
  CHECK(pooled == gj["heap"]["pooled_free"].get<uint64_t>());
  CHECK(pooled > 0);
  check_iobufs(gj, aj, lrtest::read_file(snap + "/dump1"));
}

namespace {

// What the inode table retains: the table with its inodes as one group
// (one inode alone retains little: the others' LRU and hash links and the
// FUSE request buffers naming it by nodeid reach it too), against what
// GlusterFS's own statedump lists for the table: its inodes, the
// write-behind context of each (with the inode's address), its hash arrays.
// Every fact is checked on one quiescent snapshot; "" when all hold, else
// what did not.
std::string table_retains(Volume& v) {
  Dump real;
  const std::string snap = v.snapshot("fuse", &real);
  const std::string dump = lrtest::read_file(snap + "/dump1");
  std::map<std::string, uint64_t> table;  // "active_size" -> 12
  std::set<std::string> wb_inodes;        // the write-behind contexts' inode= addresses
  std::istringstream in(dump);
  std::string section;
  for (std::string line; std::getline(in, line);) {
    static const std::regex kv(R"(^xlator\.mount\.fuse\.itable\.(\w+)=(\d+)$)");
    std::smatch m;
    if (!line.empty() && line.front() == '[') section = line;
    if (std::regex_match(line, m, kv)) table[m[1]] = std::stoull(m[2]);
    if (section == "[xlator.performance.write-behind.wb_inode]" && line.rfind("inode=", 0) == 0)
      wb_inodes.insert(line.substr(6));
  }
  const uint64_t inodes =
      table["active_size"] + table["lru_size"] + table["purge_size"] + table["invalidate_size"];
  REQUIRE(inodes > 50);
  REQUIRE(wb_inodes.size() > 50);
  const json gj = gluster_json(snap + "/core");
  REQUIRE(gj["itables"].size() == 1);
  const json& it = gj["itables"][0];
  std::set<std::string> addrs;
  uint64_t dentries = 0;
  for (const char* list : {"active", "lru", "purge", "invalidate"})
    for (const auto& i : it[list])
      addrs.insert(i["addr"].get<std::string>()), dentries += i["dentries"].size();
  REQUIRE(addrs.size() == inodes);
  for (const auto& a : wb_inodes) CHECK(addrs.count(a) == 1);
  CHECK(dentries + 1 >= inodes);  // every inode but the root has a name
  CHECK(gj["fuse_fdtable"].size() == 5);

  auto r = lrtest::leakref({"retained", snap + "/core", "--json", "--group", "inode_t (pool, fuse)",
                            "--group", it["addr"].get<std::string>()},
                           300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json g = r.json()["group"];
  CHECK(g["blocks"] == inodes + 1);
  uint64_t sum = 0;
  std::map<std::string, uint64_t> in_set, shared, bytes;
  for (const auto& row : g["by_type"]) {
    in_set[row["type"]] = row["count"].get<uint64_t>();
    bytes[row["type"]] = row["bytes"].get<uint64_t>();
    sum += row["bytes"].get<uint64_t>();
  }
  for (const auto& row : g["shared"]) shared[row["type"]] = row["count"].get<uint64_t>();
  CHECK(g["retained"] == sum);
  CHECK(in_set["inode_t (pool, fuse)"] == inodes);
  CHECK(in_set["gf_common_mt_inode_table_t (GF_MALLOC, fuse)"] == 1);
  // The open files' fds point at their inodes, and the FUSE fdtable holds
  // them: at the set's edge, each one.
  CHECK(shared["fd_t (pool, fuse)"] == gj["fuse_fdtable"].size());
  // What the table owns, in its set.
  const std::string wb = "gf_wb_mt_wb_inode_t (GF_MALLOC, " + v.volume + "-write-behind)";
  const std::string heads = "gf_common_mt_list_head (GF_MALLOC, fuse)";
  std::string why;
  // In the set; or, for what a stale word can reach in every snapshot (a
  // FUSE receive buffer's old bytes pointing at one live dentry take the
  // dentry hash and every dentry with it, seen in CI), at the set's edge,
  // where the holder around the group is named with its path.
  auto want = [&](const std::string& type, uint64_t n, bool edge) {
    const uint64_t got = in_set[type] + (edge ? shared[type] : 0);
    if (got != n)
      why += fmt::format("{}: {} in the set{}, {} listed\n", type, in_set[type],
                         edge ? fmt::format(" and {} at its edge", shared[type]) : "", n);
  };
  want("dentry_t (pool, fuse)", dentries, true);
  want(heads, 2, true);  // the inode and dentry hash arrays, list heads of 16 bytes
  // A context held from outside the table as well (write-behind's own
  // list of an inode with a write still open, seen in the sanitized suite
  // after the earlier tests' writes) is at the edge, named there too.
  want("gf_common_mt_inode_ctx (GF_MALLOC, fuse)", inodes, true);
  // A context at the edge holds its write-behind context past the edge
  // (a FUSE receive buffer's stale word on a thread's stack pointing at one
  // ctx, seen in CI): neither in the set nor at its edge, at most one per
  // such ctx.
  const uint64_t beyond = shared["gf_common_mt_inode_ctx (GF_MALLOC, fuse)"];
  const uint64_t wb_got = in_set[wb] + shared[wb];
  if (wb_got > wb_inodes.size() || wb_got + beyond < wb_inodes.size())
    why += fmt::format(
        "{}: {} in the set and {} at its edge, {} past {} contexts at the edge, "
        "{} listed\n",
        wb, in_set[wb], shared[wb], wb_inodes.size() - std::min(wb_got, wb_inodes.size()), beyond,
        wb_inodes.size());
  if (why.empty() && !shared.count(heads) &&
      bytes[heads] < (table["inode_hashsize"] + table["dentry_hashsize"]) * 16)
    why += fmt::format("the hash arrays hold {} bytes\n", bytes[heads]);
  if (!why.empty()) why += "held around the group: " + g["shared"].dump(1);
  return why;
}

}  // namespace

// A stale word that points at a context (a dead stack slot) takes it and
// what it reaches out of the set: then another quiescent snapshot is
// taken, as for the statedumps, after the client's threads have served a
// listing of the mount (an idle thread's dead slot stays as it is until
// the thread runs again).
TEST_CASE("gluster: the inode table retains every inode, dentry and ctx its statedump lists",
          "[gluster][root][retained]") {
  Volume& v = volume();
  NEED_VOLUME(v);
  std::string why;
  for (int attempt = 0; attempt < 5; ++attempt) {
    why = table_retains(v);
    if (why.empty()) break;
    WARN("snapshot " << attempt << ": " << why);
    lrtest::run({"/bin/ls", "-lR", v.dir + "/mnt"}, 120);
    sleep(2);  // let what the client has in flight finish (a loaded machine)
  }
  INFO(why);
  CHECK(why.empty());
}

TEST_CASE("gluster: brick core equals its own statedump", "[gluster][root]") {
  compare_with_statedump("brick");
  Volume& v = volume();
  if (!v.up) return;
  json j = gluster_json(v.dir + "/snap-brick.0/core");
  REQUIRE(j["clients"].size() >= 1);
  bool bound = false;
  size_t fds = 0;
  for (const auto& c : j["clients"]) {
    bound |= c["bound_xl"] == v.dir + "/brick";
    fds += c["fdtable"].size();
  }
  CHECK(bound);
  // The holder read or wrote through 3 of its files, so the brick opened
  // them: every brick fd is in the client's fdtable.
  CHECK(fds >= 3);
  for (const auto& p : j["mempool"])
    if (p["name"] == "fd_t") CHECK(p["active"] == fds);
}

TEST_CASE("gluster: layouts built without atomic builtins are refused on a real core",
          "[gluster][root]") {
  Volume& v = volume();
  NEED_VOLUME(v);
  std::string bad = lrtest::tmp_dir() + "/types-no-atomics.so";
  auto b = lrtest::leakref({"types", "gluster", "-o", bad, "--omit-define", "HAVE_ATOMIC_BUILTINS",
                            "--omit-define", "HAVE_SYNC_BUILTINS"},
                           120);
  REQUIRE(b.status == 0);
  Dump real;
  std::string snap = v.snapshot("fuse", &real);
  auto r = lrtest::leakref({"gluster", snap + "/core", "--types", bad});
  CHECK(r.status == 3);
  CHECK(r.out.empty());
  CHECK(r.err.find("do not match this core") != std::string::npos);
  CHECK(r.err.find("HAVE_ATOMIC_BUILTINS") != std::string::npos);
  // The correctly built file is accepted on the same core.
  std::string good = lrtest::tmp_dir() + "/types-good.so";
  REQUIRE(lrtest::leakref({"types", "gluster", "-o", good}, 120).status == 0);
  auto ok = lrtest::leakref({"gluster", snap + "/core", "--types", good, "--json"});
  CHECK(ok.status == 0);
}

TEST_CASE("gluster: a gfapi program's inode table equals what the program reports",
          "[gluster][root]") {
  Volume& v = volume();
  NEED_VOLUME(v);
  struct stat st;
  if (::stat(lrtest::fixture_path("fx_gfapi").c_str(), &st) != 0)
    LR_SKIP(
        "fx_gfapi was not built: /usr/include/glusterfs/api/glfs.h (libglusterfs-dev) is missing");
  const auto& fc =
      lrtest::fixture_core("gfapi", lrtest::fixture_path("fx_gfapi"), {v.volume, "localhost"});
  json j = gluster_json(fc.core);
  check_heap_agrees(j);
  const json& want = fc.manifest["itable"];
  const json* got = nullptr;
  for (const auto& t : j["itables"])
    if (t["addr"] == want["addr"]) got = &t;
  REQUIRE(got);
  CHECK((*got)["name"] == want["name"]);
  for (const char* k : {"active_size", "lru_size", "purge_size", "invalidate_size"})
    CHECK((*got)[k] == want[k]);
  for (const char* list : {"active", "lru"}) {
    INFO("list " << list);
    REQUIRE((*got)[list].size() == want[list].size());
    for (size_t i = 0; i < want[list].size(); ++i) {
      const json& w = want[list][i];
      const json& g = (*got)[list][i];
      INFO("inode " << w["gfid"]);
      for (const char* k : {"addr", "gfid", "ref", "nlookup", "fd_count", "ia_type"})
        CHECK(g[k] == w[k]);
    }
  }
  size_t fds = 0;
  for (const auto& in : (*got)["active"]) fds += in["fds"].size();
  CHECK(fds == fc.manifest["open"].get<size_t>());
  // The account names what the LRU keeps: the program's own count of those
  // blocks and of their usable bytes (malloc_usable_size).
  auto a = lrtest::leakref({"account", fc.core, "--json"}, 300);
  INFO(a.err);
  REQUIRE(a.status == 0);
  REQUIRE(want["lru"].size() > 0);
  // Each type the LRU keeps is an entry of its own: "inode_t (pool, gfapi)
  // kept by the inode LRU of ... (N inodes, lru_limit L)".
  const std::string key = fmt::format(" kept by the inode LRU of {} ({} inodes, lru_limit {})",
                                      want["name"].get<std::string>(), want["lru"].size(),
                                      want["lru_limit"].get<uint64_t>());
  const json aj = a.json();
  uint64_t blocks = 0, bytes = 0, entries = 0;
  for (const auto& cat : aj["categories"])
    for (const auto& k : cat["children"]) {
      const std::string name = k["name"];
      if (name.size() < key.size() || name.compare(name.size() - key.size(), key.size(), key))
        continue;
      CHECK(cat["name"] == "live");
      blocks += k["blocks"].get<uint64_t>(), bytes += k["bytes"].get<uint64_t>(), ++entries;
    }
  INFO(key);
  CHECK(entries >= 2);  // inodes and dentries at least
  CHECK(blocks == want["lru_blocks"].get<uint64_t>());
  CHECK(bytes == want["lru_bytes"].get<uint64_t>());
}

// ---- trace capture x core (issue: trace correlation) ----------------------

namespace {

std::string field3(const std::string& sym_out) {  // "name = 0x... [mod] ..." -> "0x..."
  std::istringstream in(sym_out);
  std::string a, b, c;
  in >> a >> b >> c;
  return c;
}

// gdb's `call` first (what a user would do); on kernels where gdb cannot
// write the XSAVE area back (and kills the inferior) the ptrace helper does
// the same call without touching it. Probed on a throwaway process.
std::string pick_injector() {
  auto sleeper = lrtest::spawn({"sleep", "600"});
  usleep(200000);
  auto g = lrtest::run(
      {"gdb", "-p", std::to_string(sleeper.pid), "-batch", "-nx", "-ex", "call (int)getpid()"}, 60);
  lrtest::finish(sleeper, SIGKILL, 10);
  if (g.out.find("$1 = " + std::to_string(sleeper.pid)) != std::string::npos) return "gdb";
  std::string why = g.err.find("extended state") != std::string::npos
                        ? "gdb cannot write the XSAVE state on this kernel"
                        : "gdb's call failed";
  WARN("injecting with fixtures/lr_inject instead of gdb: " << why);
  return lrtest::fixture_path("lr_inject");
}

}  // namespace

TEST_CASE("gluster: injected inode and dict leaks are named by trace x core correlation",
          "[gluster][root][trace]") {
  Volume& v = volume();
  NEED_VOLUME(v);
  if (!lrtest::have_program("bpftrace"))
    LR_SKIP("bpftrace is not installed (make test installs it)");
  auto pg =
      lrtest::run({"pgrep", "-f", "glusterfs.*--volfile-id=" + v.volume + " " + v.dir + "/mnt"});
  REQUIRE(pg.status == 0);
  std::string pid = pg.out.substr(0, pg.out.find('\n'));
  std::string d = v.dir, trace = d + "/capture.lrt", ready = d + "/capture.ready";

  auto cap = lrtest::spawn({std::string(LR_SOURCE_DIR) + "/scripts/leakref-trace", "-p", pid, "-o",
                            trace, "--ready", ready});
  if (!lrtest::wait_for_file(ready, 120)) {
    lrtest::finish(cap, SIGINT, 30);
    FAIL("the capture did not attach: " << lrtest::read_file(cap.err_path));
  }
  auto io = lrtest::run({env_sh(), "io", d, "trace"}, 300);
  INFO(io.err);
  REQUIRE(io.status == 0);

  // Targets from a core of the live process: an idle inode (lru, ref 0)
  // and a long-lived dict (an xlator's options, refcount 1).
  std::string pre = d + "/pre";
  REQUIRE(lrtest::run({"gcore", "-o", pre, pid}, 300).status == 0);
  pre += "." + pid;
  json gj = gluster_json(pre);
  std::string inode, dict, inode_gfid;
  for (const auto& t : gj["itables"])
    for (const auto& in : t["lru"])
      if (inode.empty() && in["ref"] == 0 && in["gfid"] != "00000000-0000-0000-0000-000000000001") {
        inode = in["addr"];
        inode_gfid = in["gfid"];
      }
  for (const auto& dj : gj["dicts"])
    if (dict.empty() && dj["refcount"] == 1) dict = dj["addr"];
  REQUIRE(!inode.empty());
  REQUIRE(!dict.empty());
  std::string f_inode = field3(lrtest::leakref({"sym", pre, "inode_ref"}).out);
  std::string f_dict = field3(lrtest::leakref({"sym", pre, "dict_ref"}).out);
  REQUIRE(f_inode.rfind("0x", 0) == 0);

  std::string inj = "INJECT=" + pick_injector();
  auto i1 = lrtest::run({"env", inj, env_sh(), "inject", d, pid, f_inode, inode, "3"}, 180);
  INFO(i1.err);
  REQUIRE(i1.status == 0);
  auto i2 = lrtest::run({"env", inj, env_sh(), "inject", d, pid, f_dict, dict, "2"}, 180);
  INFO(i2.err);
  REQUIRE(i2.status == 0);
  sleep(1);  // let bpftrace drain its ring buffers
  int rc = lrtest::finish(cap, SIGINT, 120);
  std::string cap_err = lrtest::read_file(cap.err_path);
  INFO("leakref-trace: " << cap_err);
  REQUIRE(rc == 0);

  std::string post = d + "/post";
  REQUIRE(lrtest::run({"gcore", "-o", post, pid}, 300).status == 0);
  post += "." + pid;
  auto r = lrtest::leakref({"correlate", post, trace, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["schema"] == "leakref.correlate/1");
  CHECK(j["traces"][0]["lost"] == 0);
  CHECK(j["traces"][0]["complete"] == true);
  CHECK(j["events_nested"].get<int>() > 0);  // inode_ref -> __inode_ref counted once
  std::map<std::string, json> flagged;
  for (const auto& o : j["objects"])
    if (o["verdict"] == "flagged") flagged[o["addr"]] = o;
  INFO("flagged: " << json(flagged).dump(1));
  REQUIRE(flagged.count(inode));
  REQUIRE(flagged.count(dict));
  CHECK(flagged[inode]["kind"] == "inode");
  CHECK(flagged[inode]["excess"] == 3);
  CHECK(flagged[inode]["refcount"] == 3);
  CHECK(flagged[dict]["kind"] == "dict");
  CHECK(flagged[dict]["excess"] == 2);
  CHECK(flagged[dict]["refcount"] == 3);
  CHECK(flagged.size() == 2);  // nothing else: the workload's references all balanced
  REQUIRE(j["sites"].size() >= 1);
  CHECK(j["sites"][0]["site"].get<std::string>().find("_start") != std::string::npos);
  CHECK(j["sites"][0]["refs"] == 5);
  CHECK(j["sites"][0]["objects"] == 2);
  CHECK(j["counts"]["balanced"].get<int>() > 0);
  for (const auto& o : j["objects"])
    if (o["refs"] == o["unrefs"] && o["unmatched"].empty()) CHECK(o["verdict"] != "flagged");

  // One pointer's history, in the SystemTap script's Ref Traces shape too.
  auto h = lrtest::leakref({"correlate", post, trace, "--ptr", inode}, 300);
  REQUIRE(h.status == 0);
  CHECK(h.out.find("Ref Traces :") != std::string::npos);
  CHECK(h.out.find("HISTORY of " + inode) != std::string::npos);
  // --fail-on turns the finding into exit code 1.
  CHECK(lrtest::leakref({"correlate", post, trace, "--fail-on", "flagged"}, 300).status == 1);

  // Without any trace, the two cores compared: the inode (by gfid) and the
  // dict (by address) climbed by exactly the references injected.
  auto df = lrtest::leakref({"diff", pre, post, "--json"}, 300);
  INFO(df.err);
  REQUIRE(df.status == 0);
  std::map<std::string, json> climbed;
  json dj = df.json();  // not a temporary in the range-for
  for (const auto& o : dj["objects"])
    if (o["change"] == "climbed") climbed[o["key"]] = o;
  INFO("climbed: " << json(climbed).dump(1));
  REQUIRE(climbed.count("gfid:" + inode_gfid));
  CHECK(climbed["gfid:" + inode_gfid]["before"] == 0);
  CHECK(climbed["gfid:" + inode_gfid]["after"] == 3);
  CHECK(climbed["gfid:" + inode_gfid]["class"].get<std::string>().find(" active") !=
        std::string::npos);
  REQUIRE(climbed.count("dict@" + dict));
  CHECK(climbed["dict@" + dict]["before"] == 1);
  CHECK(climbed["dict@" + dict]["after"] == 3);
  CHECK(climbed.size() == 2);
  CHECK(lrtest::leakref({"diff", pre, post, "--fail-on", "climbed"}, 300).status == 1);
}

// Two moments of a FUSE client, with five more files held open at the
// second: GlusterFS's own statedumps and the cores taken between them give
// the same classes and inodes, and fd_t grew by exactly five.
TEST_CASE("gluster: diff of two moments, from statedumps and from cores", "[gluster][root][diff]") {
  Volume& v = volume();
  NEED_VOLUME(v);
  Dump real_a, real_b;
  std::string a = v.snapshot("fuse", &real_a);
  std::string held = v.dir + "/mnt/diff-held";
  auto holder = lrtest::spawn(
      {"/bin/bash", "-c",
       "mkdir -p '" + held + "' && cd '" + held +
           "' && for i in 1 2 3 4 5; do echo x > h$i || exit 1; done && exec 3<h1 4<h2 5<h3 "
           "6<h4 7<h5 && echo HELD && exec sleep 100000"});
  REQUIRE(lrtest::wait_for_text(holder.out_path, "HELD", 60));
  // ... and four dicts that nothing will ever unref: dict_new() called
  // inside the client, as gdb's `call` would (their addresses come back).
  auto pg =
      lrtest::run({"pgrep", "-f", "glusterfs.*--volfile-id=" + v.volume + " " + v.dir + "/mnt"});
  REQUIRE(pg.status == 0);
  std::string pid = pg.out.substr(0, pg.out.find('\n'));
  std::string f_new = field3(lrtest::leakref({"sym", a + "/core", "dict_new"}).out);
  REQUIRE(f_new.rfind("0x", 0) == 0);
  auto inj = lrtest::run(
      {"env", "INJECT=" + pick_injector(), env_sh(), "inject", v.dir, pid, f_new, "0", "4"}, 180);
  INFO(inj.err);
  REQUIRE(inj.status == 0);
  std::set<std::string> left;  // gdb: "$1 = (void *) 0x...", lr_inject: "call 1: ... = 0x..."
  std::regex ret(R"((?:\$\d+ = \(void \*\) |\) = )(0x[0-9a-f]+))");
  std::string log = lrtest::read_file(v.dir + "/inject.log");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), ret); it != std::sregex_iterator();
       ++it)
    left.insert((*it)[1]);
  REQUIRE(left.size() == 4);
  sleep(3);  // let open-behind and the brick settle
  std::string b = v.snapshot("fuse", &real_b);
  lrtest::finish(holder, SIGKILL);
  auto from_dumps = lrtest::leakref({"diff", a + "/dump1", b + "/dump1", "--json"}, 300);
  auto from_cores = lrtest::leakref({"diff", a + "/core", b + "/core", "--json"}, 300);
  INFO(from_dumps.err << from_cores.err);
  REQUIRE(from_dumps.status == 0);
  REQUIRE(from_cores.status == 0);
  json jd = from_dumps.json(), jc = from_cores.json();
  CHECK(jd["old"]["kind"] == "statedump");
  CHECK(jc["old"]["kind"] == "core");
  // GlusterFS's classes: the same names, counts and moves either way.
  auto gluster_classes = [](const json& j) {
    std::map<std::string, std::pair<long, long>> m;
    for (const auto& c : j["classes"])
      if (c["kind"] != "heap" && c["kind"] != "account")  // a core's heap; no statedump's
        m[c["kind"].get<std::string>() + " " + c["name"].get<std::string>()] = {c["before"],
                                                                                c["after"]};
    return m;
  };
  auto cd = gluster_classes(jd), cc = gluster_classes(jc);
  CHECK(cd.size() > 50);
  CHECK(cd == cc);
  auto gfid_moves = [](const json& j) {
    std::set<std::string> m;
    for (const auto& o : j["objects"])
      if (o["key"].get<std::string>().rfind("gfid:", 0) == 0)
        m.insert(o["change"].get<std::string>() + " " + o["key"].get<std::string>() + " " +
                 o["before"].dump() + "->" + o["after"].dump());
    return m;
  };
  CHECK(gfid_moves(jd) == gfid_moves(jc));
  REQUIRE(cd.count("mempool fd_t@fuse"));
  CHECK(cd["mempool fd_t@fuse"].second - cd["mempool fd_t@fuse"].first == 5);
  size_t fresh = 0;
  for (const auto& o : jd["objects"])
    fresh +=
        o["change"] == "new" && o["class"].get<std::string>().find(" active") != std::string::npos;
  CHECK(fresh >= 6);  // the directory and its five held files
  // The cores add heap classes and the dicts/fds statedumps do not list.
  size_t heap = 0, fds = 0;
  for (const auto& c : jc["classes"]) heap += c["kind"] == "heap";
  for (const auto& o : jc["objects"])
    fds += o["change"] == "new" && o["key"].get<std::string>().rfind("fd@", 0) == 0;
  CHECK(heap > 10);
  CHECK(fds >= 5);
  // The four dicts left behind: new, refcount 1, by address (cores); the
  // dict pool grew by at least as much, equally in GlusterFS's statedumps.
  std::set<std::string> new_dicts;
  for (const auto& o : jc["objects"])
    if (o["change"] == "new" && o["key"].get<std::string>().rfind("dict@", 0) == 0 &&
        o["after"] == 1)
      new_dicts.insert(o["key"].get<std::string>().substr(5));
  for (const auto& d : left) CHECK(new_dicts.count(d));
  int64_t dict_growth = 0;
  for (const auto& [k, ba] : cd)
    if (k.rfind("mempool dict_t@", 0) == 0) dict_growth += ba.second - ba.first;
  CHECK(dict_growth >= 4);
  // With no trace: the reference index finds no leaked block in the client
  // but the injected dicts (named by their pool), and each injected dict it
  // does not call leaked has a chain of references from a root (a stale
  // word in a live block is enough: the scan is conservative, as chap's is;
  // the chain may run along a long list, so its length is not bounded here).
  auto lk = lrtest::leakref({"leaks", b + "/core", "--json"}, 300);
  INFO(lk.err);
  REQUIRE(lk.status == 0);
  std::set<std::string> leaked_dicts;
  const json lkj = lk.json();  // (a range-for over lk.json()[...] would dangle)
  for (const auto& blk : lkj["blocks"]) {
    // A pooled dict_t's block starts 40 bytes (pooled_obj_hdr_t) before it.
    uint64_t p = std::stoull(blk["ptr"].get<std::string>(), nullptr, 16) + 40;
    char obj_s[32];
    std::snprintf(obj_s, sizeof obj_s, "0x%llx", static_cast<unsigned long long>(p));
    std::string obj = obj_s;
    INFO(blk.dump());
    CHECK(left.count(obj) == 1);
    CHECK(blk["type"] == "dict_t (pool, glusterfs)");
    leaked_dicts.insert(obj);
  }
  for (const auto& d : left) {
    if (leaked_dicts.count(d)) continue;
    auto rf = lrtest::leakref({"refs", b + "/core", d, "--depth", "1000000", "--json"}, 300);
    INFO(d << ": " << rf.out);
    REQUIRE(rf.status == 0);
    CHECK(!rf.json()["objects"][0]["anchor_chain"].empty());
  }
}

namespace {

// A set's objects from `profile --json`: addr -> the object.
std::map<std::string, json> set_objects(const json& pj, const std::string& set) {
  std::map<std::string, json> m;
  for (const auto& s : pj["sets"])
    if (s["name"] == set)
      for (const auto& o : s["objects"]) m[o["addr"].get<std::string>()] = o;
  return m;
}

// A member's offset in a GlusterFS type, as gdb reads it from the types
// leakref builds (outside truth for where a patch goes).
uint64_t gdb_offset(const std::string& types, const std::string& type, const std::string& member) {
  auto r = lrtest::run({"gdb", "-batch", "-nx", "-ex",
                        "print/x (unsigned long)&((" + type + " *)0)->" + member, types});
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(= (0x[0-9a-f]+))")));
  return std::stoull(m[1].str(), nullptr, 16);
}

}  // namespace

// The built-in glusterfs profile (data: targets/glusterfs/
// glusterfs.toml) walks the same inodes, fds and dentries as the C++ report
// on a real FUSE client core; its invariants are the ones the report checks
// (a patched core breaks one, and both say so); the report attributes
// references held by operations in flight.
TEST_CASE("gluster: the built-in profile equals the report; its invariants judge both",
          "[gluster][root][profile]") {
  Volume& v = volume();
  NEED_VOLUME(v);
  Dump real;
  std::string snap = v.snapshot("fuse", &real);
  const std::string core = snap + "/core";
  json j = gluster_json(core);
  auto p = lrtest::leakref({"profile", core, "--profile", "glusterfs", "--json"}, 300);
  INFO(p.err);
  REQUIRE(p.status == 0);
  json pj = p.json();
  REQUIRE(j["itables"].size() == 1);
  const json& t = j["itables"][0];
  // Inodes: each list, address for address and ref for ref (the root
  // directory is its own set).
  std::map<std::string, int64_t> active, lru;
  for (const auto& in : t["active"]) active[in["addr"]] = in["ref"];
  for (const auto& in : t["lru"]) lru[in["addr"]] = in["ref"];
  std::map<std::string, int64_t> p_active, p_lru;
  for (const auto& [a, o] : set_objects(pj, "active")) p_active[a] = o["refcount"];
  for (const auto& [a, o] : set_objects(pj, "root")) p_active[a] = o["refcount"];
  for (const auto& [a, o] : set_objects(pj, "lru")) p_lru[a] = o["refcount"];
  CHECK(active.size() > 5);
  CHECK(p_active == active);
  CHECK(p_lru == lru);
  CHECK(set_objects(pj, "purge").size() == t["purge"].size());
  // fds open on active inodes, and every dentry of the table by name.
  std::set<std::string> fds, p_fds;
  std::multiset<std::string> names, p_names;
  for (const char* l : {"active", "lru", "purge", "invalidate"})
    for (const auto& in : t[l]) {
      for (const auto& d : in["dentries"]) names.insert(d["name"]);
      if (std::string(l) == "active")
        for (const auto& f : in["fds"]) fds.insert(f["addr"]);
    }
  for (const auto& [a, o] : set_objects(pj, "fds")) p_fds.insert(a);
  for (const auto& [a, o] : set_objects(pj, "dentries")) p_names.insert(o["labels"]["name"]);
  CHECK(fds.size() == 5);  // the holder's open files
  CHECK(p_fds == fds);
  CHECK(p_names == names);
  // The inode-state rules hold on the client, either way. (An inode an
  // earlier test gave references with inode_ref() from outside, a leak on
  // purpose, breaks only the report's per-xlator sum, which the profile
  // does not declare.)
  for (const auto& s : pj["sets"]) CHECK(s["summary"]["violations"].empty());
  std::set<std::string> unexplained, in_flight, extra;
  for (const auto& f : j["findings"])
    if (f["kind"] == "unexplained-refs") unexplained.insert(f["addr"]);
  for (const auto& f : j["findings"]) {
    INFO(f.dump());
    if (f["kind"] == "invariant") {
      CHECK(unexplained.count(f["addr"]));
      CHECK(f["message"].get<std::string>().find("per-xlator refs sum") != std::string::npos);
    }
  }
  // The profile's holders are fds and child dentries: left with extra
  // references are exactly the inodes the report finds held by operations
  // in flight (named, not flagged) and those it flags.
  for (const auto& in : t["active"])
    if (!in["in_flight"].empty()) in_flight.insert(in["addr"]);
  for (const auto& a : in_flight) CHECK(!unexplained.count(a));
  std::set<std::string> want = in_flight;
  want.insert(unexplained.begin(), unexplained.end());
  for (const auto& [a, o] : set_objects(pj, "active"))
    if (o["verdict"] == "extra") extra.insert(a);
  CHECK(extra == want);

  // An inode on the lru list with references is against the lru rule of
  // glusterfs.toml (ref == 0 && in_lru_list): the report and the profile
  // both name it.
  REQUIRE(!lru.empty());
  std::string types = lrtest::tmp_dir() + "/gluster-types.so";
  REQUIRE(lrtest::leakref({"types", "gluster", "-o", types}, 120).status == 0);
  uint64_t ref_off = gdb_offset(types, "inode_t", "ref");
  std::string victim = lru.begin()->first;
  std::string bad = lrtest::patched(core, lrtest::tmp_dir() + "/gluster-lru-ref.core",
                                    {{std::stoull(victim, nullptr, 16) + ref_off, 3}}, 4);
  json bj = gluster_json(bad);
  bool named = false;
  for (const auto& f : bj["findings"])
    named |= f["kind"] == "invariant" && f["addr"] == victim &&
             f["message"].get<std::string>().find(
                 "on lru: on-lru (ref == 0 && in_lru_list) "
                 "does not hold: ref=3") != std::string::npos;
  CHECK(named);
  auto bp = lrtest::leakref({"profile", bad, "--profile", "glusterfs", "--json", "--flagged"}, 300);
  REQUIRE(bp.status == 0);
  auto flagged = set_objects(bp.json(), "lru");
  REQUIRE(flagged.count(victim));
  CHECK(flagged[victim]["violations"] == json::array({"on-lru"}));
  CHECK(flagged.size() == 1);
}

// A core taken while the brick does not answer: the FUSE client's lookup of
// a new name waits in its call pool. Beside it wait the opens open-behind
// deferred for the two files the workload's holder opened and never read
// (their inodes: ref 2 = 1 fd + 1 held by the deferred open's call stub).
// The report lists the operations and names the references they hold; it
// calls none of them unexplained.
TEST_CASE("gluster: references held by operations in flight are named, never flagged",
          "[gluster][root]") {
  Volume& v = volume();
  NEED_VOLUME(v);
  auto brick = lrtest::run({"pgrep", "-f", "glusterfsd.*--brick-name " + v.dir + "/brick"});
  auto fuse =
      lrtest::run({"pgrep", "-f", "glusterfs.*--volfile-id=" + v.volume + " " + v.dir + "/mnt"});
  REQUIRE(brick.status == 0);
  REQUIRE(fuse.status == 0);
  const std::string bpid = brick.out.substr(0, brick.out.find('\n'));
  const std::string fpid = fuse.out.substr(0, fuse.out.find('\n'));
  std::string dir = lrtest::tmp_dir() + "/in-flight";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir}).status == 0);
  REQUIRE(lrtest::run({"kill", "-STOP", bpid}).status == 0);
  // A new name in a directory: the lookup goes to the brick and waits.
  auto waiter = lrtest::spawn({"/bin/sh", "-c", "echo x > '" + v.dir + "/mnt/top/in-flight-new'"});
  sleep(2);
  auto g = lrtest::run({"gcore", "-o", dir + "/core", fpid}, 120);
  lrtest::run({"kill", "-CONT", bpid});
  CHECK(lrtest::finish(waiter, 0, 120) == 0);
  REQUIRE(g.status == 0);
  json j = gluster_json(dir + "/core." + fpid);
  REQUIRE(!j["stacks"].empty());
  std::set<std::string> ops;
  for (const auto& s : j["stacks"]) ops.insert(s["op"]);
  INFO(json(ops).dump());
  CHECK(ops.count("LOOKUP"));
  CHECK(ops.count("OPEN"));
  // The held references: inodes whose refs only an operation explains.
  size_t held = 0;
  for (const auto& in : j["itables"][0]["active"])
    for (const auto& f : in["in_flight"]) {
      INFO(f.dump());
      CHECK(f["op"] == "OPEN");
      CHECK(f["what"].get<std::string>().find("open-behind") != std::string::npos);
      ++held;
    }
  CHECK(held == 2);
  // None of them is flagged (an inode an earlier test leaked on purpose,
  // with no operation holding it, still is).
  size_t named = 0;
  for (const auto& f : j["findings"]) {
    INFO(f.dump());
    if (f["kind"] == "unexplained-refs")
      CHECK(f["message"].get<std::string>().find("in flight (0)") != std::string::npos);
    named += f["kind"] == "in-flight";
  }
  CHECK(named == 2);
}
