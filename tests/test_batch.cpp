// leakref batch over an archive of real dumps: fixture cores of several
// programs, a series of one live process, compressed cores (zstd as
// systemd-coredump names them, xz, lz4, gzip), GlusterFS client and brick
// cores with GlusterFS's own statedump, the kernel guest's ELF and kdump
// vmcores, and corrupt files. The truth is the single-dump commands' own
// JSON; a batch killed with SIGKILL and rerun, and the same archive through a
// real single-node Slurm, must give the same database.
#include <fmt/format.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <tuple>

#include "doc_checks.hpp"
#include "harness.hpp"

using nlohmann::json;

namespace {

struct Archive {
  std::string dir, debug_dir;
  std::vector<std::string> cores, corrupt, statedumps, vmcores;
  std::map<std::string, std::string> expanded_from;  // compressed dump -> the core it holds
  std::string series_dir, locks_core;
  size_t dumps = 0, others = 0;
  std::vector<std::string> skipped;  // parts left out, and why
  std::string broken;                // our own set-up failed
};

std::string sh(const std::string& cmd) {
  auto r = lrtest::run({"/bin/sh", "-c", cmd}, 300);
  if (r.status != 0) throw std::runtime_error(cmd + ": " + r.err);
  return r.out;
}

std::string real(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? buf : p;
}

const Archive& archive() {
  static Archive a = [] {
    Archive x;
    try {
      x.dir = lrtest::tmp_dir() + "/archive";
      for (const char* d : {"fixtures", "series", "coredump", "gluster", "kernel", "corrupt"})
        sh("mkdir -p '" + x.dir + "/" + d + "'");
      // Six programs' cores.
      std::map<std::string, std::string> cores;
      for (const char* f :
           {"structs", "structs_pie", "threads", "heap", "locks", "locks_nodebug"}) {
        const auto& fc = lrtest::fixture_core(f, lrtest::fixture_path(std::string("fx_") + f));
        std::string link = x.dir + "/fixtures/core." + f;
        sh("ln -sf '" + fc.core + "' '" + link + "'");
        cores[f] = real(fc.core);
        x.cores.push_back(real(fc.core));
      }
      x.locks_core = cores["locks"];
      // A series: 25 cores of one live process that keeps growing.
      x.series_dir = x.dir + "/series";
      auto fx = lrtest::spawn({lrtest::fixture_path("fx_steady")});
      if (!lrtest::wait_for_text(fx.out_path, "READY", 30)) throw std::runtime_error("fx_steady");
      for (int i = 1; i <= 25; ++i) {
        std::string out = fmt::format("{}/core.steady.{:02}", x.series_dir, i);
        auto g = lrtest::run({"gcore", "-o", out, std::to_string(fx.pid)}, 120);
        if (g.status != 0) throw std::runtime_error("gcore: " + g.err);
        x.cores.push_back(real(out + "." + std::to_string(fx.pid)));
      }
      lrtest::finish(fx, SIGKILL);
      // Compressed: systemd-coredump's .zst name, and xz, lz4, gzip.
      std::string cd = x.dir + "/coredump/";
      std::string zst =
          cd + "core.fx_locks.0.5f1d2c0e6a2b4a8e9d0c1b2a3f4e5d6c.4242.1764057600000000.zst";
      sh("zstd -q -c '" + cores["locks"] + "' > '" + zst + "'");
      sh("xz -T1 -c '" + cores["structs"] + "' > '" + cd + "core.structs.xz'");
      sh("lz4 -q -c '" + cores["heap"] + "' > '" + cd + "core.heap.lz4'");
      sh("gzip -c '" + cores["threads"] + "' > '" + cd + "core.threads.gz'");
      x.expanded_from = {{zst, cores["locks"]},
                         {cd + "core.structs.xz", cores["structs"]},
                         {cd + "core.heap.lz4", cores["heap"]},
                         {cd + "core.threads.gz", cores["threads"]}};
      // Not dumps: skipped, not rows.
      sh("echo notes > '" + x.dir + "/notes.txt' && echo log | gzip -c > '" + x.dir +
         "/app.log.gz'");
      x.others = 2;
      // Corrupt and truncated.
      std::string cr = x.dir + "/corrupt/";
      sh("head -c 1000 '" + cores["structs"] + "' > '" + cr + "core.cut'");
      sh(": > '" + cr + "core.empty'");
      sh("head -c 4096 /dev/urandom > '" + cr + "core.garbage'");
      sh("head -c $(( $(stat -c %s '" + zst + "') / 2 )) '" + zst + "' > '" + cr +
         "core.half.zst'");
      for (const char* c : {"core.cut", "core.empty", "core.garbage", "core.half.zst"})
        x.corrupt.push_back(cr + c);
      // GlusterFS and the kernel, when this machine can run them.
      auto g = lrtest::gluster_dumps();
      if (g.broken) x.broken = g.why;
      if (g.paths.empty()) x.skipped.push_back(g.why);
      for (const auto& p : g.paths) {
        std::string link = x.dir + "/gluster/" + std::to_string(&p - &g.paths[0]) +
                           (p.find("dump1") != std::string::npos ? ".glusterdump.dump" : ".core");
        sh("ln -sf '" + p + "' '" + link + "'");
        (p.find("dump1") != std::string::npos ? x.statedumps : x.cores).push_back(real(p));
      }
      auto k = lrtest::kernel_dumps();
      if (k.broken) x.broken = k.why;
      if (k.paths.empty()) x.skipped.push_back(k.why);
      for (const auto& p : k.paths) {
        sh("ln -sf '" + p + "' '" + x.dir + "/kernel/vmcore." + std::to_string(&p - &k.paths[0]) +
           "'");
        x.vmcores.push_back(real(p));
      }
      if (!k.paths.empty()) {
        x.debug_dir = k.debug_dir;
        // A kdump file cut after its headers.
        sh("head -c 65536 '" + k.paths[1] + "' > '" + cr + "vmcore.cut'");
        x.corrupt.push_back(cr + "vmcore.cut");
      }
    } catch (const std::exception& e) {
      x.broken = e.what();
    }
    x.dumps = x.cores.size() + x.statedumps.size() + x.vmcores.size() + x.corrupt.size() +
              x.expanded_from.size();
    return x;
  }();
  return a;
}

#define NEED_ARCHIVE(a)                                                 \
  do {                                                                  \
    if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed"); \
    if (!(a).broken.empty()) FAIL("batch archive: " << (a).broken);     \
    for (const auto& s : (a).skipped) WARN("archive without: " << s);   \
  } while (0)

std::string profiles_dir() {
  return std::string(LR_SOURCE_DIR) + "/tests/profiles";
}

std::vector<std::string> run_args(const Archive& a, const std::string& db) {
  std::vector<std::string> v = {"batch", "run", a.dir, "--db", db, "-q"};
  if (!a.debug_dir.empty()) v.insert(v.end(), {"--debug-dir", a.debug_dir});
  return v;
}

// The database's rows: path -> the stored leakref.batch-result/1.
// (Handles are closed on every path: sqlite3_open_v2 allocates one even when
// it fails, and a failed REQUIRE throws.)
std::map<std::string, json> rows(const std::string& db) {
  std::map<std::string, json> m;
  sqlite3* h = nullptr;
  const int rc = sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> hold(h, sqlite3_close);
  REQUIRE(rc == SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  const int prc = sqlite3_prepare_v2(h, "SELECT path, result FROM dumps", -1, &s, nullptr);
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> hold_s(s, sqlite3_finalize);
  REQUIRE(prc == SQLITE_OK);
  while (sqlite3_step(s) == SQLITE_ROW) {
    std::string p = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    CHECK(m.count(p) == 0);  // every dump once
    m[p] = json::parse(reinterpret_cast<const char*>(sqlite3_column_text(s, 1)));
  }
  return m;
}

int64_t count_rows(const std::string& db) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    return -1;
  }
  sqlite3_busy_timeout(h, 5000);
  sqlite3_stmt* s = nullptr;
  int64_t n = -1;
  if (sqlite3_prepare_v2(h, "SELECT count(*) FROM dumps", -1, &s, nullptr) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW)
    n = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return n;
}

// The local -j 2 database of the archive, made once.
const std::string& local_db() {
  static std::string db = [] {
    std::string p = lrtest::tmp_dir() + "/batch-local.db";
    setenv("LEAKREF_PROFILE_PATH", profiles_dir().c_str(), 1);
    auto args = run_args(archive(), p);
    args.insert(args.end(), {"-j", "2"});
    auto r = lrtest::leakref(args, 1800);
    unsetenv("LEAKREF_PROFILE_PATH");
    INFO(r.err);
    REQUIRE(r.status == 0);
    return p;
  }();
  return db;
}

json classes_of(const json& j) {
  json c = j["classes"];
  std::sort(c.begin(), c.end(), [](const json& a, const json& b) {
    return a["kind"].get<std::string>() + a["name"].get<std::string>() <
           b["kind"].get<std::string>() + b["name"].get<std::string>();
  });
  return c;
}

}  // namespace

TEST_CASE("batch: a 40-dump archive; each row equals the single-dump commands' JSON", "[batch]") {
  const Archive& a = archive();
  NEED_ARCHIVE(a);
  REQUIRE(a.dumps >= 40 - (a.skipped.empty() ? 0 : 6));
  auto db = rows(local_db());
  REQUIRE(db.size() == a.dumps);
  // Corrupt files: one row each, an error naming the file, never the end of the batch.
  for (const auto& c : a.corrupt) {
    INFO(c);
    REQUIRE(db.count(real(c)));
    const json& r = db[real(c)];
    CHECK(r["status"] == "error");
    CHECK(r["error"].get<std::string>().find(real(c)) != std::string::npos);
    CHECK(r["classes"].empty());
  }
  // Cores and statedumps: classes exactly as `leakref snapshot --json` has them.
  std::vector<std::string> check = a.statedumps;
  for (size_t i = 0; i < a.cores.size(); ++i)
    if (a.cores[i].find("core.steady") == std::string::npos || i % 8 == 0)
      check.push_back(a.cores[i]);
  for (const auto& p : check) {
    INFO(p);
    REQUIRE(db.count(p));
    const json& r = db[p];
    INFO("row: " << r["status"] << " " << r["error"] << " (code " << r["error_code"] << ")");
    REQUIRE(r["status"] == "ok");
    auto s = lrtest::leakref({"snapshot", p, "--json"}, 300);
    REQUIRE(s.status == 0);
    json snap = s.json(), mine = json::array();
    for (const auto& c : r["classes"])
      if (c["kind"] != "profile") mine.push_back(c);
    json sj = snap;
    sj["classes"] = snap["classes"];
    json m2{{"classes", mine}};
    CHECK(classes_of(m2) == classes_of(sj));
    CHECK(r["objects"] == snap["objects"].size());
    CHECK(r["kind"] == snap["kind"]);
    // The largest retainer is the top's largest child in `leakref retained`.
    if (snap["kind"] != "statedump") {
      auto t = lrtest::leakref({"retained", p, "--tree", "top", "--depth", "1", "--json"}, 300);
      REQUIRE(t.status == 0);
      const json tj = t.json();
      REQUIRE(tj["tree"].size() > 1);
      REQUIRE(!r["retainers"].empty());
      CHECK(r["retainers"][0]["node"] == tj["tree"][1]["node"]);
      CHECK(r["retainers"][0]["retained"] == tj["tree"][1]["retained"]);
    } else {
      CHECK(r["retainers"].empty());
    }
    if (snap["build_id"].is_string()) CHECK(r["build_id"] == snap["build_id"]);
  }
  // Compressed dumps hold the same core: the same classes, the same program.
  for (const auto& [z, core] : a.expanded_from) {
    INFO(z);
    const json& r = db[real(z)];
    REQUIRE(r["status"] == "ok");
    CHECK(r["compression"] != "none");
    CHECK(classes_of(r) == classes_of(db[core]));
    CHECK(r["program"] == db[core]["program"]);
    CHECK(r["flagged"] == db[core]["flagged"]);
  }
  // systemd-coredump's name gives the time of death.
  CHECK(db[real(a.expanded_from.begin()->first)]["taken"].get<double>() == Approx(1764057600.0));
  // The profile picked by what the core is: fx_locks' flagged objects as
  // `leakref profile --flagged` lists them.
  {
    const json& r = db[a.locks_core];
    REQUIRE(r["profiles"] == json::array({"fx_locks"}));
    auto p = lrtest::leakref({"profile", a.locks_core, "--profile",
                              profiles_dir() + "/fx_locks.toml", "--flagged", "--json"});
    REQUIRE(p.status == 0);
    json want = json::array(), pj = p.json();
    for (const auto& set : pj["sets"])
      for (auto o : set["objects"]) {
        o["profile"] = "fx_locks";
        o["set"] = set["name"];
        want.push_back(o);
      }
    CHECK(want.size() > 0);
    CHECK(r["flagged"] == want);
    CHECK(r["flagged_total"] == want.size());
    CHECK(db[a.cores[0]]["profiles"].empty());  // fx_structs: no profile is meant for it
  }
  // GlusterFS: findings as `leakref gluster --json` has them.
  for (const auto& p : a.cores) {
    if (p.find("snap-") == std::string::npos) continue;
    INFO(p);
    auto g = lrtest::leakref({"gluster", p, "--json"}, 300);
    REQUIRE(g.status == 0);
    json want = json::array(), gj = g.json();
    for (auto f : gj["findings"]) {
      f["source"] = "gluster";
      want.push_back(f);
    }
    CHECK(db[p]["findings"] == want);
    CHECK(db[p]["classes"].size() > 50);
  }
  // Kernel: the violations of `leakref kernel check`, and both dump forms agree.
  for (const auto& p : a.vmcores) {
    INFO(p);
    const json& r = db[p];
    REQUIRE(r["status"] == "ok");
    CHECK(r["kind"] == "vmcore");
    CHECK(r["program"].get<std::string>().rfind("linux 6.", 0) == 0);
    // Every installed profile that matches a kernel: the kernel reports' own
    // (linux-kernel) and linux-vfs.
    CHECK(r["profiles"] == json::array({"linux-kernel", "linux-vfs"}));
    auto k = lrtest::leakref(
        {"kernel", "--vmcore", p, "--debug-dir", a.debug_dir, "check", "--json"}, 600);
    REQUIRE(k.status == 0);
    size_t bad = 0;
    json kj = k.json();
    for (const auto& c : kj["checks"]) bad += c["violations"].get<uint64_t>() > 0;
    CHECK(r["findings"].size() == bad);
    CHECK(classes_of(r) == classes_of(db[a.vmcores[0]]));
  }
  // `batch one` prints what the database keeps.
  auto one = lrtest::leakref({"batch", "one", a.cores[1]});
  REQUIRE(one.status == 0);
  CHECK(one.json() == db[a.cores[1]]);
}

TEST_CASE("batch: report buckets like dumps and finds the class the series grows", "[batch]") {
  const Archive& a = archive();
  NEED_ARCHIVE(a);
  auto r = lrtest::leakref({"batch", "report", "--db", local_db(), "--json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  CHECK(j["schema"] == "leakref.batch.report/1");
  CHECK(j["totals"]["dumps"] == a.dumps);
  CHECK(j["totals"]["status"]["error"] == a.corrupt.size());
  // The 25 cores of fx_steady are one bucket; 200-byte blocks grow over them.
  json steady;
  for (const auto& b : j["buckets"])
    if (b["signature_text"].get<std::string>().find("|fx_steady|") != std::string::npos) steady = b;
  REQUIRE(steady.is_object());
  CHECK(steady["dumps"] == 25);
  bool grows = false;
  for (const auto& g : steady["growing"]) grows = grows || g["name"] == "200 B";
  CHECK(grows);
  // The same fx_locks core, plain and zstd-compressed: one bucket of two.
  size_t locks = 0;
  for (const auto& b : j["buckets"])
    if (b["signature_text"].get<std::string>().find("|fx_locks|") != std::string::npos)
      locks = b["dumps"].get<size_t>();
  CHECK(locks == 2);
  // Plain SQL through batch query, read-only.
  auto q = lrtest::leakref({"batch", "query", "--db", local_db(),
                            "SELECT count(*) AS n FROM dumps WHERE status = 'ok'", "--json"});
  REQUIRE(q.status == 0);
  CHECK(q.json()["rows"][0]["n"] == std::to_string(a.dumps - a.corrupt.size()));
  // Which dumps have a global retaining its 50 blocks: every fx_steady
  // core (its `constant` array), by SQL over the retainers table.
  auto big = lrtest::leakref(
      {"batch", "query", "--db", local_db(),
       "SELECT count(DISTINCT d.id) AS n FROM dumps d JOIN retainers r ON r.dump_id = d.id "
       "WHERE d.program = 'fx_steady' AND r.node = 'global constant [fx_steady]' AND "
       "r.retained_blocks = 50",
       "--json"});
  REQUIRE(big.status == 0);
  CHECK(big.json()["rows"][0]["n"] == "25");
  auto w = lrtest::leakref({"batch", "query", "--db", local_db(), "DELETE FROM dumps"});
  CHECK(w.status == 2);
  CHECK(count_rows(local_db()) == static_cast<int64_t>(a.dumps));
  // The HTML report renders.
  std::string html = lrtest::tmp_dir() + "/batch-report.html";
  auto h = lrtest::leakref({"batch", "report", "--db", local_db(), "--html", html});
  REQUIRE(h.status == 0);
  CHECK(h.out.find("fx_steady") != std::string::npos);
  if (!lrtest::have_program("chromium")) FAIL("chromium is not installed (make test installs it)");
  long blank = lrtest::screenshot("about:blank", lrtest::tmp_dir() + "/b-blank.png");
  long shot = lrtest::screenshot("file://" + html, lrtest::tmp_dir() + "/b-report.png");
  REQUIRE(blank > 0);
  CHECK(shot > 4 * blank);
}

TEST_CASE("batch: killed with SIGKILL and run again, every dump exactly once; then no work",
          "[batch]") {
  const Archive& a = archive();
  NEED_ARCHIVE(a);
  std::string db = lrtest::tmp_dir() + "/batch-killed.db";
  setenv("LEAKREF_PROFILE_PATH", profiles_dir().c_str(), 1);
  std::vector<std::string> args = {lrtest::build_dir() + "/leakref"};
  for (auto& x : run_args(a, db)) args.push_back(x);
  args.insert(args.end(), {"-j", "2"});
  auto bg = lrtest::spawn(args);
  for (int i = 0; i < 600 && count_rows(db) < 10; ++i) usleep(100000);
  int64_t before = count_rows(db);
  kill(bg.pid, SIGKILL);
  lrtest::finish(bg, SIGKILL);
  INFO("rows when killed: " << before);
  REQUIRE(before >= 10);
  REQUIRE(before < static_cast<int64_t>(a.dumps));
  sleep(1);  // the workers die with it (PR_SET_PDEATHSIG)
  auto left = lrtest::run({"pgrep", "-f", "leakref batch one"});
  CHECK(left.out.empty());
  auto again = lrtest::leakref(run_args(a, db), 1800);
  INFO(again.err);
  REQUIRE(again.status == 0);
  auto got = rows(db), want = rows(local_db());
  REQUIRE(got.size() == want.size());
  for (const auto& [p, r] : want) {
    INFO(p);
    CHECK(got[p] == r);
  }
  auto third = lrtest::leakref(run_args(a, db), 600);
  unsetenv("LEAKREF_PROFILE_PATH");
  REQUIRE(third.status == 0);
  CHECK(third.out.find(fmt::format("0 analysed now (0 ok, 0 not), {} already", a.dumps)) !=
        std::string::npos);
}

TEST_CASE("batch: through a real single-node Slurm equals a local -j 2 run",
          "[batch][slurm][root]") {
  const Archive& a = archive();
  NEED_ARCHIVE(a);
  if (geteuid() != 0) LR_SKIP("not root: slurmd runs jobs as root here");
  for (const char* p : {"slurmctld", "slurmd", "munged", "sbatch"})
    if (!lrtest::have_program(p) && access((std::string("/usr/sbin/") + p).c_str(), X_OK) != 0)
      LR_SKIP(std::string(p) + " is not installed (make test installs slurm-wlm and munge)");
  std::string env = std::string(LR_SOURCE_DIR) + "/tests/slurm/slurm-env.sh";
  std::string dir = lrtest::tmp_dir() + "/slurm";
  auto up = lrtest::run({env, "start", dir}, 180);
  INFO(up.err);
  REQUIRE(up.status == 0);  // our own set-up: a failure, not a skip
  struct Down {
    std::string env, dir;
    ~Down() { lrtest::run({env, "stop", dir}, 60); }
  } down{env, dir};
  setenv("SLURM_CONF", (dir + "/slurm.conf").c_str(), 1);
  setenv("LEAKREF_PROFILE_PATH", profiles_dir().c_str(), 1);
  std::string db = lrtest::tmp_dir() + "/batch-slurm.db";
  auto args = run_args(a, db);
  args.insert(args.end(), {"--slurm", "--chunk", "6"});
  auto r = lrtest::leakref(args, 1800);
  unsetenv("LEAKREF_PROFILE_PATH");
  unsetenv("SLURM_CONF");
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto mode = lrtest::leakref({"batch", "query", "--db", db, "SELECT mode FROM runs"});
  CHECK(mode.out == "mode\nslurm\n");
  auto got = rows(db), want = rows(local_db());
  REQUIRE(got.size() == want.size());
  for (const auto& [p, w] : want) {
    INFO(p);
    CHECK(got[p] == w);
  }
}

TEST_CASE("batch: hostile databases, limits and arguments give one clear error", "[batch]") {
  std::string d = lrtest::tmp_dir() + "/batch-hostile";
  lrtest::run({"/bin/mkdir", "-p", d});
  lrtest::write_file(d + "/not.db",
                     "this is not sqlite, but it is long enough to be a header.....");
  const auto& fc = lrtest::fixture_core("structs", lrtest::fixture_path("fx_structs"));
  const std::string sha = lrtest::sha256_file(fc.core);
  auto r = lrtest::leakref({"batch", "run", fc.core, "--db", d + "/not.db"});
  CHECK(r.status == 3);
  CHECK(r.err.find("not an SQLite database") != std::string::npos);
  // Another schema version is refused, not written into.
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open((d + "/v7.db").c_str(), &h) == SQLITE_OK);
  sqlite3_exec(h, "CREATE TABLE dumps(x); PRAGMA user_version = 7", nullptr, nullptr, nullptr);
  sqlite3_close(h);
  r = lrtest::leakref({"batch", "run", fc.core, "--db", d + "/v7.db"});
  CHECK(r.status == 3);
  CHECK(r.err.find("schema version 7") != std::string::npos);
  r = lrtest::leakref({"batch", "report", "--db", d + "/missing.db"});
  CHECK(r.status == 3);
  r = lrtest::leakref({"batch", "run", d + "/no-such-dir", "--db", d + "/x.db"});
  CHECK(r.status == 3);
  CHECK(r.err.find("no-such-dir") != std::string::npos);
  r = lrtest::leakref({"batch", "run", fc.core, "--db", d + "/x.db", "-j", "0"});
  CHECK(r.status == 2);
  // A dump that runs over its time is one row saying so.
  r = lrtest::leakref({"batch", "run", fc.core, "--db", d + "/t.db", "--timeout", "0.001"});
  INFO(r.err);
  CHECK(r.status == 0);
  auto t = rows(d + "/t.db");
  REQUIRE(t.size() == 1);
  CHECK(t.begin()->second["status"] == "timeout");
  // A dump whose analysis needs more heap than allowed is one row saying so
  // (the heap walk of 600,000 chunks and its classes do not fit in 8 MiB; a
  // core of a few dozen chunks does).
  // (Not under AddressSanitizer: its shadow memory cannot be mapped under an
  // address-space limit, so the worker dies before it starts.)
#ifndef LR_SANITIZE
  const auto& big = lrtest::fixture_core("big300k", lrtest::fixture_path("fx_big"), {"300000"});
  r = lrtest::leakref({"batch", "run", big.core, "--db", d + "/m.db", "--mem-limit", "8"});
  INFO(r.err);
  auto m = rows(d + "/m.db");
  REQUIRE(m.size() == 1);
  CHECK(m.begin()->second["status"] == "memory");
  CHECK(m.begin()->second["error"].get<std::string>().find("memory limit (8 MiB)") !=
        std::string::npos);
#endif
  // Nothing in the archive is written: the core is unchanged, and no
  // worker left a core of its own beside it.
  CHECK(lrtest::sha256_file(fc.core) == sha);
  CHECK(lrtest::read_file(d + "/not.db").rfind("this is not sqlite", 0) == 0);
}

// The README's batch example, executed as written on an archive made the same
// way (times, counts, pids, build-ids and the directory aside).
TEST_CASE("README: the batch example runs as written", "[batch][docs]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  std::string part = lrtest::readme_section("batch");
  REQUIRE(!part.empty());
  std::string dir = lrtest::tmp_dir() + "/readme-batch";
  std::string dumps = dir + "/dumps";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", dumps}).status == 0);
  auto fx = lrtest::spawn({lrtest::fixture_path("fx_steady")});
  REQUIRE(lrtest::wait_for_text(fx.out_path, "READY", 30));
  for (int i = 1; i <= 3; ++i) {
    REQUIRE(lrtest::run({"gcore", "-o", dumps + "/core.steady." + std::to_string(i),
                         std::to_string(fx.pid)},
                        120)
                .status == 0);
    usleep(300000);
  }
  lrtest::finish(fx, SIGKILL);
  const auto& lk = lrtest::fixture_core("locks", lrtest::fixture_path("fx_locks"));
  sh("zstd -q -c '" + lk.core + "' > '" + dumps + "/core.fx_locks.0.5f1d2c0e6a2b4a8e." +
     std::to_string(lk.pid) + ".1764057600000000.zst'");
  sh("head -c 1000 '" + lk.core + "' > '" + dumps + "/core.cut'");
  auto norm = [&](std::string s) {
    for (size_t at; (at = s.find(dir)) != std::string::npos;)
      s.replace(at, dir.size(), "/srv/cases");
    s = std::regex_replace(s, std::regex("[0-9a-f]{16,}"), "H");
    s = std::regex_replace(s, std::regex("[0-9]+(\\.[0-9]+)?"), "N");
    return std::regex_replace(s, std::regex(" +"), " ");
  };
  CHECK(lrtest::check_doc_commands(part, dir, norm) == 4);
}

// An ARCHIVE that is not a directory or a dump is refused before a database
// is made (a FIFO or a text file said "0 dumps", exit 0; a missing one left
// an empty database); --work is made when it is not there (every compressed
// dump was an io error row).
TEST_CASE("batch: archives that are not, and a --work not there yet", "[batch]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  std::string d = lrtest::tmp_dir() + "/batch-args";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", d}).status == 0);
  std::string fifo = d + "/fifo", text = d + "/notes.txt", db = d + "/x.db";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  lrtest::write_file(text, "notes\n");
  for (auto [archive, says] : {std::pair{fifo, "not a directory or a regular file"},
                               std::pair{text, "not a dump leakref reads"},
                               std::pair{d + "/missing", "No such file or directory"}}) {
    auto r = lrtest::leakref({"batch", "run", archive, "--db", db, "-q"});
    INFO(archive << ": " << r.err);
    CHECK(r.status == 3);
    CHECK(r.err.find(archive + ": " + says) != std::string::npos);
    CHECK(access(db.c_str(), F_OK) != 0);
  }
  const auto& fc = lrtest::fixture_core("structs", lrtest::fixture_path("fx_structs"));
  std::string zst = d + "/core.structs.zst";
  REQUIRE(lrtest::run({"zstd", "-q", "-f", fc.core, "-o", zst}).status == 0);
  auto one = lrtest::leakref({"batch", "one", zst, "--work", d + "/work/not/yet"});
  REQUIRE(one.status == 0);
  CHECK(one.json()["status"] == "ok");
}

// Round two of the batch's trust: a dump stored with a transient failure
// (here a timeout) was never analysed again; --retry does it, and a run
// without it says how many wait. A database with garbled pages is refused by
// report and query as by run. A name that is not UTF-8 is stored as the
// file's name (it was stored mangled, called "a Slurm task failed" and
// analysed again on every run). FIFOs and broken links named like dumps are
// rows saying why (they were no row at all). A symlink loop given to
// `batch one` is its row, not a usage error. A `batch one` killed while it
// decompresses leaves nothing in --work.
TEST_CASE("batch: retried failures, damaged databases, names that are no files", "[batch]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  std::string d = lrtest::tmp_dir() + "/batch-trust";
  REQUIRE(lrtest::run({"/bin/mkdir", "-p", d + "/a"}).status == 0);
  const auto& fc = lrtest::fixture_core("structs", lrtest::fixture_path("fx_structs"));
  std::string odd = d + "/a/core.\xff\xfe";
  REQUIRE(lrtest::run({"/bin/cp", fc.core, odd}).status == 0);
  std::string db = d + "/t.db";
  auto r = lrtest::leakref({"batch", "run", d + "/a", "--db", db, "-q", "--timeout", "0.001"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(rows(db).begin()->second["status"] == "timeout");
  r = lrtest::leakref({"batch", "run", d + "/a", "--db", db, "-q"});
  CHECK(r.status == 0);
  CHECK(r.err.find("1 dumps are stored with a transient failure") != std::string::npos);
  r = lrtest::leakref({"batch", "run", d + "/a", "--db", db, "-q", "--retry"});
  INFO(r.err);
  CHECK(r.status == 0);
  auto m = rows(db);
  REQUIRE(m.size() == 1);
  CHECK(m.begin()->first == odd);
  CHECK(m.begin()->second["status"] == "ok");
  r = lrtest::leakref({"batch", "run", d + "/a", "--db", db});
  CHECK(r.status == 0);
  CHECK(r.err.find("1 already in") != std::string::npos);
  CHECK(r.err.find("0 to analyse") != std::string::npos);
  CHECK(r.err.find("Slurm") == std::string::npos);

  // Names like dumps that are no files: a row each, saying why.
  REQUIRE(mkfifo((d + "/a/core.fifo").c_str(), 0600) == 0);
  REQUIRE(symlink("nowhere", (d + "/a/core.dangling").c_str()) == 0);
  REQUIRE(symlink("vmcore.loop", (d + "/a/vmcore.loop").c_str()) == 0);
  // A link to a device: its row is stored under the link's own identity
  // (it was stored under /dev/zero's, "missing" on every run, and blamed on
  // a Slurm task in a local run).
  REQUIRE(symlink("/dev/zero", (d + "/a/core.zero").c_str()) == 0);
  r = lrtest::leakref({"batch", "run", d + "/a", "--db", db, "-q"}, 120);
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(r.err.find("Slurm") == std::string::npos);
  m = rows(db);
  CHECK(m.size() == 5);
  r = lrtest::leakref({"batch", "run", d + "/a", "--db", db}, 120);
  CHECK(r.status == 0);
  CHECK(r.err.find("0 to analyse") != std::string::npos);
  for (const char* n : {"core.fifo", "core.dangling", "vmcore.loop", "core.zero"}) {
    INFO(n);
    REQUIRE(m.count(d + "/a/" + n));
    CHECK(m[d + "/a/" + n]["status"] == "error");
  }
  auto one = lrtest::leakref({"batch", "one", d + "/a/vmcore.loop"});
  CHECK(one.status == 0);
  CHECK(one.json()["status"] == "error");
  CHECK(lrtest::leakref({"batch", "one", d + "/a/none"}).status == 3);

  // A dump deeper than PATH_MAX is found, and its row says why it cannot
  // be read (it was "0 dumps found").
  std::string deep = d + "/deep";
  REQUIRE(lrtest::run({"python3", "-c",
                       "import os, shutil, sys\nos.makedirs(sys.argv[1])\nos.chdir(sys.argv[1])\n"
                       "for i in range(25):\n  os.mkdir('d' * 200)\n  os.chdir('d' * 200)\n"
                       "shutil.copy(sys.argv[2], 'core.deep')\n",
                       deep, fc.core})
              .status == 0);
  r = lrtest::leakref({"batch", "run", deep, "--db", d + "/deep.db", "-q"}, 120);
  INFO(r.err);
  CHECK(r.status == 0);
  auto dr = rows(d + "/deep.db");
  REQUIRE(dr.size() == 1);
  CHECK(dr.begin()->second["status"] == "error");
  CHECK(dr.begin()->second["error"].get<std::string>().find("too long") != std::string::npos);

  // Garbled pages: every page but the first overwritten.
  std::string bytes = lrtest::read_file(db);
  REQUIRE(bytes.size() > 8192);
  for (size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131);
  lrtest::write_file(d + "/garbled.db", bytes);
  for (std::vector<std::string> a : {std::vector<std::string>{"batch", "report", "--db"},
                                     std::vector<std::string>{"batch", "query", "--db"}}) {
    a.push_back(d + "/garbled.db");
    if (a[1] == "query") a.push_back("SELECT path FROM dumps");
    r = lrtest::leakref(a);
    INFO(a[1] << ": " << r.err);
    CHECK(r.status == 3);
    CHECK(r.out.empty());
    CHECK(r.err.find("garbled.db: ") != std::string::npos);
  }

  // Decompression bombs stop at once: zeros are no dump at all, and an ELF
  // core's own headers say how long it is (both wrote gigabytes before).
  const std::string elf_head =
      "import struct, sys\n"
      "size = int(sys.argv[1])\n"
      "eh = b'\\x7fELF' + bytes([2, 1, 1]) + bytes(9) + struct.pack('<HHIQQQIHHHHHH', 4, 62, 1, "
      "0, 64, 0, 0, 64, 56, 1, 0, 0, 0)\n"
      "ph = struct.pack('<IIQQQQQQ', 1, 6, 4096, 0x10000000, 0, size, size, 4096)\n"
      "sys.stdout.buffer.write((eh + ph).ljust(4096, b'\\0'))\n";
  for (auto [name, cmd, says] :
       {std::tuple<std::string, std::string, std::string>{
            "zeros", "head -c 1G /dev/zero", "does not decompress to a dump leakref reads"},
        {"longer", "(python3 -c \"$0\" 8192; head -c 1G /dev/zero)",
         "decompresses past the 12288 bytes its own headers describe"}}) {
    std::string z = d + "/core." + name + ".zst";
    REQUIRE(lrtest::run({"/bin/sh", "-c", cmd + " | zstd -q -1 -o '" + z + "'", elf_head}, 300)
                .status == 0);
    auto b = lrtest::leakref({"batch", "one", z, "--work", d + "/bombwork"}, 60);
    INFO(name << ": " << b.out << b.err);
    REQUIRE(b.status == 0);
    CHECK(b.json()["status"] == "error");
    CHECK(b.json()["error"].get<std::string>().find(says) != std::string::npos);
    CHECK(lrtest::run({"/bin/sh", "-c", "ls -A '" + d + "/bombwork' | wc -l"}).out == "0\n");
  }

  // Killed while decompressing 4 GiB (a core whose headers say 4 GiB):
  // --work is left empty.
  std::string big = d + "/core.big.zst", work = d + "/work";
  REQUIRE(lrtest::run(
              {"/bin/sh", "-c",
               "(python3 -c \"$0\" 4294967296; head -c 4G /dev/zero) | zstd -q -1 -o '" + big + "'",
               elf_head},
              300)
              .status == 0);
  auto bg = lrtest::spawn({lrtest::build_dir() + "/leakref", "batch", "one", big, "--work", work});
  // SIGTERM once the expansion is under way (its file is there), so the
  // handler, not the end of the analysis, is what empties --work.
  bool expanding = false;
  for (int i = 0; i < 500 && !expanding; ++i) {
    expanding =
        lrtest::run({"/bin/sh", "-c", "ls '" + work + "'/leakref-batch-*/dump"}).status == 0;
    if (!expanding) ::usleep(20 * 1000);
  }
  CHECK(expanding);
  CHECK(lrtest::finish(bg, SIGTERM, 30) == 128 + SIGTERM);
  CHECK(lrtest::run({"/bin/sh", "-c", "ls -A '" + work + "' | wc -l"}).out == "0\n");
}
