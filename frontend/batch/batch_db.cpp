#include "frontend/batch/batch_db.hpp"
#include "frontend/base/out.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <functional>

namespace lrcli {

namespace {

using nlohmann::json;

// 2 added `retainers`; a version 1 database gains the table when opened
// for writing, and is read as it is.
constexpr int kSchemaVersion = 2;
const char* const kRetainersTable = R"(
CREATE TABLE retainers(dump_id INTEGER NOT NULL REFERENCES dumps(id) ON DELETE CASCADE,
  node TEXT, kind TEXT, type TEXT, place TEXT, retained INTEGER, retained_blocks INTEGER);
CREATE INDEX retainers_dump ON retainers(dump_id);
CREATE INDEX retainers_type ON retainers(type);
)";

// leakref.batch/1. `result` keeps the whole leakref.batch-result/1 of a dump
// (what `leakref batch one` prints); the other tables are its parts, for SQL.
const char* const kSchema = R"(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE runs(id INTEGER PRIMARY KEY, started REAL, finished REAL, mode TEXT,
  jobs INTEGER, archives TEXT, found INTEGER, analysed INTEGER, known INTEGER);
CREATE TABLE dumps(id INTEGER PRIMARY KEY, path TEXT NOT NULL, size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL, kind TEXT, compression TEXT, status TEXT NOT NULL, error TEXT,
  error_code TEXT, program TEXT, build_id TEXT, taken REAL, profiles TEXT, objects INTEGER,
  classes INTEGER, findings INTEGER, flagged INTEGER, signature TEXT, signature_text TEXT,
  seconds REAL, peak_rss_kib INTEGER, worker TEXT, run_id INTEGER REFERENCES runs(id),
  result TEXT NOT NULL, UNIQUE(path, size, mtime_ns));
CREATE INDEX dumps_signature ON dumps(signature);
CREATE TABLE classes(dump_id INTEGER NOT NULL REFERENCES dumps(id) ON DELETE CASCADE,
  kind TEXT, name TEXT, count INTEGER, bytes INTEGER);
CREATE INDEX classes_dump ON classes(dump_id);
CREATE INDEX classes_name ON classes(kind, name);
CREATE TABLE findings(dump_id INTEGER NOT NULL REFERENCES dumps(id) ON DELETE CASCADE,
  source TEXT, kind TEXT, addr TEXT, message TEXT);
CREATE INDEX findings_dump ON findings(dump_id);
CREATE TABLE flagged(dump_id INTEGER NOT NULL REFERENCES dumps(id) ON DELETE CASCADE,
  profile TEXT, set_name TEXT, addr TEXT, key TEXT, refcount INTEGER, held INTEGER,
  verdict TEXT, violations TEXT);
CREATE INDEX flagged_dump ON flagged(dump_id);
CREATE TABLE warnings(dump_id INTEGER NOT NULL REFERENCES dumps(id) ON DELETE CASCADE,
  message TEXT);
CREATE INDEX warnings_dump ON warnings(dump_id);
)";

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A prepared statement, finalized on scope exit.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  ~Stmt() { sqlite3_finalize(s); }
  void text(int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.c_str(), -1, SQLITE_TRANSIENT);
  }
  void bind(int i, const json& v) {
    if (v.is_null())
      sqlite3_bind_null(s, i);
    else if (v.is_string())
      text(i, v.get<std::string>());
    else if (v.is_number_integer() || v.is_number_unsigned())
      sqlite3_bind_int64(s, i, v.get<int64_t>());
    else if (v.is_number_float())
      sqlite3_bind_double(s, i, v.get<double>());
    else if (v.is_boolean())
      sqlite3_bind_int(s, i, v.get<bool>());
    else
      text(i, json_text(v));
  }
};

}  // namespace

lr::Error BatchDb::err(const std::string& what) const {
  return lr::make_error(lr::Errc::kIo,
                        fmt::format("{}: {}: {}", path_, what, db_ ? sqlite3_errmsg(db_) : "?"));
}

lr::Result<void> BatchDb::exec(const std::string& sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string m = msg ? msg : "?";
    sqlite3_free(msg);
    return lr::make_error(lr::Errc::kIo, fmt::format("{}: {}", path_, m));
  }
  return {};
}

lr::Result<std::unique_ptr<BatchDb>> BatchDb::open(const std::string& path, bool create,
                                                   bool readonly) {
  std::unique_ptr<BatchDb> d(new BatchDb());
  d->path_ = path;
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && !create) return lr::make_error(lr::Errc::kIo, path + ": no such batch database");
  if (exists && !S_ISREG(st.st_mode))
    return lr::make_error(lr::Errc::kIo, path + ": not a regular file");
  int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &d->db_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
    return d->err("cannot open");
  sqlite3_busy_timeout(d->db_, 30000);
  // A file that is not SQLite fails on its first read.
  int version = -1;
  {
    Stmt s;
    if (sqlite3_prepare_v2(d->db_, "PRAGMA user_version", -1, &s.s, nullptr) != SQLITE_OK ||
        sqlite3_step(s.s) != SQLITE_ROW)
      return lr::make_error(lr::Errc::kBadFormat, fmt::format("{}: not an SQLite database ({})",
                                                              path, sqlite3_errmsg(d->db_)));
    version = sqlite3_column_int(s.s, 0);
  }
  int tables = 0;
  LR_TRY(d->query("SELECT count(*) FROM sqlite_master", [&](auto&, auto& v) {
    tables = v[0] ? std::atoi(v[0]) : 0;
    return true;
  }));
  if (version == 1 && !readonly) {
    LR_TRY(d->exec("BEGIN"));
    LR_TRY(d->exec(kRetainersTable));
    LR_TRY(d->exec(fmt::format("PRAGMA user_version = {}; COMMIT", kSchemaVersion)));
    version = kSchemaVersion;
  }
  if (version == 0 && tables == 0 && !readonly) {
    LR_TRY(d->exec("BEGIN"));
    LR_TRY(d->exec(kSchema));
    LR_TRY(d->exec(kRetainersTable));
    LR_TRY(
        d->exec(fmt::format("INSERT INTO meta VALUES('schema','leakref.batch/1'),('created','{}');"
                            "PRAGMA user_version = {}; COMMIT",
                            now(), kSchemaVersion)));
  } else if (version != kSchemaVersion && !(version == 1 && readonly)) {
    return lr::make_error(
        lr::Errc::kBadFormat,
        version == 0 ? fmt::format("{}: an SQLite database, but not a leakref batch database", path)
                     : fmt::format("{}: batch database schema version {}; this leakref reads {}",
                                   path, version, kSchemaVersion));
  }
  // Garbled pages read as garbled rows (a build-id, a path): a report or a
  // query on them would print them as found. SQLite checks its own pages.
  std::string check;
  auto checked = d->query("PRAGMA quick_check(1)", [&](auto&, auto& v) {
    check = v[0] ? v[0] : "";
    return false;
  });
  if (!checked.ok() || check != "ok")
    return lr::make_error(lr::Errc::kBadFormat,
                          fmt::format("{}: the database is damaged (SQLite's quick_check: {})",
                                      path, checked.ok() ? check : checked.error().message));
  LR_TRY(d->exec("PRAGMA foreign_keys = ON"));
  if (readonly) LR_TRY(d->exec("PRAGMA query_only = ON"));
  return d;
}

BatchDb::~BatchDb() {
  sqlite3_close(db_);
}

std::string BatchDb::key(const std::string& path, uint64_t size, int64_t mtime_ns) {
  return fmt::format("{}\n{}\n{}", path, size, mtime_ns);
}

// SQL: rows whose failure may not happen again.
const char* const kTransient =
    "(status IN ('timeout', 'memory', 'crashed') OR (status = 'error' AND error_code = 'io'))";

lr::Result<std::set<std::string>> BatchDb::known(bool transient) {
  std::set<std::string> k;
  std::string sql = "SELECT path, size, mtime_ns FROM dumps";
  if (transient) sql += std::string(" WHERE ") + kTransient;
  LR_TRY(query(sql, [&](auto&, auto& v) {
    k.insert(fmt::format("{}\n{}\n{}", v[0], v[1], v[2]));
    return true;
  }));
  return k;
}

lr::Result<int64_t> BatchDb::begin_run(const std::string& mode, unsigned jobs,
                                       const std::string& archives) {
  Stmt s;
  if (sqlite3_prepare_v2(db_, "INSERT INTO runs(started, mode, jobs, archives) VALUES(?,?,?,?)", -1,
                         &s.s, nullptr) != SQLITE_OK)
    return err("cannot record the run");
  s.bind(1, now());
  s.text(2, mode);
  s.bind(3, jobs);
  s.text(4, archives);
  if (sqlite3_step(s.s) != SQLITE_DONE) return err("cannot record the run");
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

lr::Result<void> BatchDb::end_run(int64_t run, uint64_t found, uint64_t analysed, uint64_t known) {
  return exec(fmt::format(
      "UPDATE runs SET finished = {}, found = {}, analysed = {}, known = {} WHERE id = {}", now(),
      found, analysed, known, run));
}

lr::Result<bool> BatchDb::store(const json& r, int64_t run) {
  LR_TRY(exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> lr::Result<bool> {
    {
      Stmt s;
      sqlite3_prepare_v2(db_,
                         (std::string("SELECT 1 FROM dumps WHERE path = ? AND size = ? AND "
                                      "mtime_ns = ? AND NOT ") +
                          kTransient)
                             .c_str(),
                         -1, &s.s, nullptr);
      s.bind(1, r["path"]);
      s.bind(2, r["size"]);
      s.bind(3, r["mtime_ns"]);
      if (sqlite3_step(s.s) == SQLITE_ROW) return false;
    }
    {
      Stmt s;  // the file changed since it was stored: the new one replaces it
      sqlite3_prepare_v2(db_, "DELETE FROM dumps WHERE path = ?", -1, &s.s, nullptr);
      s.bind(1, r["path"]);
      if (sqlite3_step(s.s) != SQLITE_DONE) return err("cannot replace an older row");
    }
    json doc = r;
    for (const char* k : {"seconds", "peak_rss_kib", "worker"}) doc.erase(k);
    Stmt s;
    if (sqlite3_prepare_v2(
            db_,
            "INSERT INTO dumps(path, size, mtime_ns, kind, compression, status, error, error_code,"
            " program, build_id, taken, profiles, objects, classes, findings, flagged, signature,"
            " signature_text, seconds, peak_rss_kib, worker, run_id, result)"
            " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            -1, &s.s, nullptr) != SQLITE_OK)
      return err("cannot store a result");
    int i = 0;
    for (const char* k : {"path", "size", "mtime_ns", "kind", "compression", "status", "error",
                          "error_code", "program", "build_id", "taken"})
      s.bind(++i, r.value(k, json(nullptr)));
    std::string profs;
    for (const auto& p : r["profiles"]) profs += (profs.empty() ? "" : ",") + p.get<std::string>();
    s.text(++i, profs);
    s.bind(++i, r["objects"]);
    s.bind(++i, r["classes"].size());
    s.bind(++i, r["findings"].size());
    s.bind(++i, r["flagged_total"]);
    for (const char* k : {"signature", "signature_text", "seconds", "peak_rss_kib", "worker"})
      s.bind(++i, r.value(k, json(nullptr)));
    s.bind(++i, run);
    s.text(++i, doc.dump(-1, ' ', false, json::error_handler_t::replace));
    if (sqlite3_step(s.s) != SQLITE_DONE) return err("cannot store a result");
    int64_t id = sqlite3_last_insert_rowid(db_);
    auto rows = [&](const char* sql, const json& arr, auto fill) -> lr::Result<void> {
      Stmt t;
      if (sqlite3_prepare_v2(db_, sql, -1, &t.s, nullptr) != SQLITE_OK) return err("prepare");
      for (const auto& e : arr) {
        sqlite3_reset(t.s);
        sqlite3_bind_int64(t.s, 1, id);
        fill(t, e);
        if (sqlite3_step(t.s) != SQLITE_DONE) return err("cannot store a result");
      }
      return {};
    };
    LR_TRY(rows("INSERT INTO classes VALUES(?,?,?,?,?)", r["classes"], [](Stmt& t, const json& e) {
      t.bind(2, e["kind"]);
      t.bind(3, e["name"]);
      t.bind(4, e["count"]);
      t.bind(5, e["bytes"]);
    }));
    LR_TRY(
        rows("INSERT INTO findings VALUES(?,?,?,?,?)", r["findings"], [](Stmt& t, const json& e) {
          t.bind(2, e["source"]);
          t.bind(3, e["kind"]);
          t.bind(4, e["addr"]);
          t.bind(5, e["message"]);
        }));
    LR_TRY(rows("INSERT INTO flagged VALUES(?,?,?,?,?,?,?,?,?)", r["flagged"],
                [](Stmt& t, const json& e) {
                  t.bind(2, e["profile"]);
                  t.bind(3, e["set"]);
                  t.bind(4, e["addr"]);
                  t.bind(5, e.value("key", json(nullptr)));
                  t.bind(6, e["refcount"]);
                  t.bind(7, e["held"]);
                  t.bind(8, e["verdict"]);
                  t.bind(9, e["violations"]);
                }));
    LR_TRY(rows("INSERT INTO warnings VALUES(?,?)", r["warnings"],
                [](Stmt& t, const json& e) { t.bind(2, e); }));
    LR_TRY(rows("INSERT INTO retainers VALUES(?,?,?,?,?,?,?)", r.value("retainers", json::array()),
                [](Stmt& t, const json& e) {
                  t.bind(2, e["node"]);
                  t.bind(3, e["kind"]);
                  t.bind(4, e["type"]);
                  t.bind(5, e["place"]);
                  t.bind(6, e["retained"]);
                  t.bind(7, e["retained_blocks"]);
                }));
    return true;
  };
  auto stored = body();
  if (!stored.ok()) {
    (void)exec("ROLLBACK");
    return stored;
  }
  LR_TRY(exec("COMMIT"));
  return stored;
}

lr::Result<void> BatchDb::query(const std::string& sql,
                                const std::function<bool(const std::vector<std::string>&,
                                                         const std::vector<const char*>&)>& row) {
  const char* tail = sql.c_str();
  while (tail && *tail) {
    Stmt s;
    const char* next = nullptr;
    if (sqlite3_prepare_v2(db_, tail, -1, &s.s, &next) != SQLITE_OK)
      return lr::make_error(lr::Errc::kInvalidArgument,
                            fmt::format("{}: {}", path_, sqlite3_errmsg(db_)));
    tail = next;
    if (!s.s) continue;  // whitespace or a comment
    int n = sqlite3_column_count(s.s);
    std::vector<std::string> cols;
    for (int i = 0; i < n; ++i) cols.push_back(sqlite3_column_name(s.s, i));
    std::vector<const char*> vals(static_cast<size_t>(n));
    for (;;) {
      int rc = sqlite3_step(s.s);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW)
        return lr::make_error(lr::Errc::kInvalidArgument,
                              fmt::format("{}: {}", path_, sqlite3_errmsg(db_)));
      for (int i = 0; i < n; ++i)
        vals[static_cast<size_t>(i)] = reinterpret_cast<const char*>(sqlite3_column_text(s.s, i));
      if (!row(cols, vals)) return {};
    }
  }
  return {};
}

}  // namespace lrcli
