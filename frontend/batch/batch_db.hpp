// The batch database: SQLite, schema leakref.batch/1 (PRAGMA user_version 1),
// documented in leakref(1) "BATCH DATABASE". One writer (the batch that
// runs, or merges Slurm tasks' result files); each dump's result is stored in
// one transaction, so a batch killed at any moment loses only the dumps it
// was analysing, and never stores one twice (UNIQUE(path, size, mtime_ns)).
#pragma once

#include <sqlite3.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "corelib/base/result.hpp"

namespace lrcli {

class BatchDb {
 public:
  // Opens (creating when `create`; refused when the file is not a leakref
  // batch database or has another schema version). Read-only opens take
  // nothing but SELECTs (`batch query`).
  static lr::Result<std::unique_ptr<BatchDb>> open(const std::string& path, bool create,
                                                   bool readonly);
  ~BatchDb();
  BatchDb(const BatchDb&) = delete;
  BatchDb& operator=(const BatchDb&) = delete;

  // "path\n size\n mtime_ns" of every dump stored; `transient`: only those
  // whose row says a transient failure (a timeout, the memory limit, a
  // crash, an I/O error), which a later run may analyse again.
  lr::Result<std::set<std::string>> known(bool transient = false);
  static std::string key(const std::string& path, uint64_t size, int64_t mtime_ns);
  lr::Result<int64_t> begin_run(const std::string& mode, unsigned jobs,
                                const std::string& archives);
  lr::Result<void> end_run(int64_t run, uint64_t found, uint64_t analysed, uint64_t known);
  // Stores a leakref.batch-result/1 (with seconds, peak_rss_kib, worker) and
  // its classes, findings, flagged objects and warnings. Older rows of the
  // same path (the file changed) are replaced, and so is a stored transient
  // failure. Another result already stored is left alone (false).
  lr::Result<bool> store(const nlohmann::json& result, int64_t run);
  // Runs `sql`, calling `row` with column names and values (null: nullptr).
  lr::Result<void> query(const std::string& sql,
                         const std::function<bool(const std::vector<std::string>& cols,
                                                  const std::vector<const char*>& vals)>& row);
  const std::string& path() const { return path_; }

 private:
  BatchDb() = default;
  lr::Result<void> exec(const std::string& sql);
  lr::Error err(const std::string& what) const;
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace lrcli
