// leakref batch run|report|query|one|worker: dump archives into an SQLite
// database (batch_db.hpp), locally with -j workers or as a Slurm job array.
#include <fmt/format.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/out.hpp"
#include "frontend/batch/batch.hpp"
#include "frontend/batch/batch_db.hpp"
#include "frontend/batch/batch_report.hpp"
#include "frontend/batch/batch_slurm.hpp"

namespace lrcli {

namespace {

using nlohmann::json;

struct RunArgs {
  std::vector<std::string> archives;
  std::string db;
  unsigned jobs = 1;
  bool slurm = false, quiet = false, retry = false;
  SlurmOptions so;
};

void add_batch_options(CLI::App* sub, BatchOptions& o) {
  sub->add_option("--sysroot", o.sysroot, "where the cores' executables and libraries are");
  sub->add_option("--debug-dir", o.debug_dirs, "debuginfo (and vmlinux) directories, first");
  sub->add_option("--profile", o.profiles,
                  "run these profiles (file or installed name) instead of every matching one");
  sub->add_option("--timeout", o.timeout, "seconds one dump may take (default 900)");
  sub->add_option("--mem-limit", o.mem_limit_mib, "MiB of heap one dump may use (default: none)");
  sub->add_option("--max-core-mib", o.max_core_mib,
                  "largest core a compressed dump may expand to (default 65536)");
  sub->add_option("--work", o.work_dir,
                  "where compressed dumps are expanded, and --slurm's run files (shared)");
}

void progress(const RunArgs& a, size_t n, size_t total, const json& r) {
  if (a.quiet) return;
  std::string what =
      r["status"] == "ok"
          ? fmt::format("{} {}", r["kind"].is_string() ? r["kind"].get<std::string>() : "?",
                        r["program"].is_string() ? r["program"].get<std::string>() : "?")
          : r["error"].get<std::string>();
  out_stderr().print("[{}/{}] {:<7} {} ({:.1f} s): {}\n", n, total, r["status"].get<std::string>(),
                     r["path"].get<std::string>(), r.value("seconds", 0.0), what);
}

// Each ARCHIVE is a directory or a dump; anything else (missing, a FIFO, a
// text file) is refused before the database is made, not counted as 0 dumps.
lr::Result<void> check_archives(const std::vector<std::string>& archives) {
  for (const auto& x : archives) {
    struct stat st {};
    if (::stat(x.c_str(), &st) != 0)
      return lr::make_error(lr::Errc::kIo, fmt::format("{}: {}", x, std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) continue;
    if (!S_ISREG(st.st_mode))
      return lr::make_error(lr::Errc::kBadFormat,
                            fmt::format("{}: not a directory or a regular file", x));
    uint64_t skipped = 0;
    auto f = find_dumps({x}, &skipped, nullptr);
    if (!f.ok()) return f.error();
    if (f->empty())
      return lr::make_error(lr::Errc::kBadFormat,
                            fmt::format("{}: not a dump leakref reads, and not a directory", x));
  }
  return {};
}

// --work is made when it is not there (compressed dumps expand into it).
lr::Result<void> make_work_dir(const std::string& dir) {
  if (dir.empty()) return {};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return lr::make_error(lr::Errc::kIo, fmt::format("--work {}: cannot make it: {}", dir,
                                                     ec ? ec.message() : "not a directory"));
  return {};
}

int cmd_run(const RunArgs& a, const BatchOptions& o) {
  if (a.jobs == 0 || a.jobs > 256) return fail_usage("batch run: -j takes 1..256");
  if (o.timeout <= 0) return fail_usage("batch run: --timeout must be positive");
  if (a.so.chunk == 0) return fail_usage("batch run: --chunk must be positive");
  if (auto ok = check_archives(a.archives); !ok.ok()) return fail(ok.error());
  if (auto ok = make_work_dir(o.work_dir); !ok.ok()) return fail(ok.error());
  auto db = BatchDb::open(a.db, true, false);
  if (!db.ok()) return fail(db.error());
  std::string archives;
  for (const auto& x : a.archives) archives += (archives.empty() ? "" : " ") + x;
  auto run = db.value()->begin_run(a.slurm ? "slurm" : "local", a.jobs, archives);
  if (!run.ok()) return fail(run.error());
  BatchDb& d = *db.value();
  SlurmOptions so = a.so;
  if (a.slurm && so.work.empty()) so.work = o.work_dir.empty() ? a.db + ".work" : o.work_dir;
  uint64_t analysed = 0, ok = 0, bad = 0;
  auto keep = [&](const json& r) {
    ++analysed;
    (r["status"] == "ok" ? ok : bad)++;
  };
  // What an interrupted Slurm run left is merged first.
  if (a.slurm) {
    auto m = merge_slurm_results(so.work, d, run.value(), keep);
    if (!m.ok()) return fail(m.error());
  }
  uint64_t skipped = 0, unreachable = 0;
  auto found = find_dumps(a.archives, &skipped, &unreachable);
  if (!found.ok()) return fail(found.error());
  auto known = d.known();
  auto transient = d.known(true);
  if (!known.ok()) return fail(known.error());
  if (!transient.ok()) return fail(transient.error());
  std::vector<DumpFile> todo;
  uint64_t retriable = 0;
  for (const auto& f : found.value()) {
    const std::string k = BatchDb::key(f.path, f.size, f.mtime_ns);
    const bool again = transient->count(k) > 0;
    retriable += again;
    if (!known->count(k) || (again && a.retry)) todo.push_back(f);
  }
  uint64_t already = found->size() - todo.size();
  auto t0 = std::chrono::steady_clock::now();
  if (!a.quiet)
    out_stderr().print("batch: {} dumps found ({} other files), {} already in {}, {} to analyse\n",
                       found->size(), skipped, already, a.db, todo.size());
  if (unreachable)
    out_stderr().print(
        "leakref: warning: {} files could not be examined (FIFOs, broken links, paths "
        "past PATH_MAX)\n",
        unreachable);
  if (retriable && !a.retry)
    out_stderr().print(
        "leakref: warning: {} dumps are stored with a transient failure (timeout, memory "
        "limit, crash, I/O error); --retry analyses them again\n",
        retriable);
  lr::Result<void> stored;
  if (!todo.empty() && !a.slurm) {
    size_t n = 0;
    run_dumps(todo, o, a.jobs, [&](json r) {
      if (!stored.ok()) return;
      auto s = d.store(r, run.value());
      if (!s.ok()) stored = s.error();
      keep(r);
      progress(a, ++n, todo.size(), r);
    });
  } else if (!todo.empty()) {
    so.on_submit = [&](const std::string& job, size_t tasks) {
      if (!a.quiet)
        out_stderr().print("batch: Slurm job {}: {} array tasks of up to {} dumps\n", job, tasks,
                           so.chunk);
    };
    stored = submit_slurm(todo, so, o, run.value());
    size_t n = 0;
    auto m = merge_slurm_results(so.work, d, run.value(), [&](const json& r) {
      keep(r);
      progress(a, ++n, todo.size(), r);
    });
    if (stored.ok() && !m.ok()) stored = m.error();
  }
  if (!stored.ok()) return fail(stored.error());
  auto after = d.known();
  uint64_t missing = 0;
  if (after.ok())
    for (const auto& f : todo) missing += !after->count(BatchDb::key(f.path, f.size, f.mtime_ns));
  (void)d.end_run(run.value(), found->size(), analysed, already);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out_stdout().print(
      "batch: {} dumps, {} analysed now ({} ok, {} not), {} already in the database; "
      "{:.1f} s\n",
      found->size(), analysed, ok, bad, already, secs);
  if (missing) {
    if (a.slurm)
      out_stderr().print(
          "leakref: error: {} dumps have no result (a Slurm task failed: see {}/run-*/"
          "slurm-*.out); run the batch again to retry them\n",
          missing, so.work);
    else
      out_stderr().print(
          "leakref: error: {} dumps have no result stored in {}; run the batch again to retry "
          "them\n",
          missing, a.db);
    return kInput;
  }
  return kOk;
}

// A name that exists (a broken link, a link loop, a FIFO included) gets its
// result document, whose status says whether it could be read: the row
// `batch run` stores. Only a name that is not there at all is an error.
int cmd_one(const std::string& path, const BatchOptions& o) {
  if (auto ok = make_work_dir(o.work_dir); !ok.ok()) return fail(ok.error());
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && ::lstat(path.c_str(), &st) != 0 &&
      (errno == ENOENT || errno == ENOTDIR))
    return fail(lr::make_error(lr::Errc::kIo, fmt::format("{}: {}", path, std::strerror(errno))));
  char real[PATH_MAX];
  DumpFile d{::realpath(path.c_str(), real) ? real : path, static_cast<uint64_t>(st.st_size),
             static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  json r = analyze_dump(d, o);
  emit_json(r);
  return kOk;
}

int cmd_query(const std::string& dbpath, const std::string& sql, bool json_out) {
  auto db = BatchDb::open(dbpath, false, true);
  if (!db.ok()) return fail(db.error());
  json rows = json::array();
  bool header = false;
  auto r = db.value()->query(
      sql, [&](const std::vector<std::string>& cols, const std::vector<const char*>& vals) {
        if (json_out) {
          json row = json::object();
          for (size_t i = 0; i < cols.size(); ++i)
            row[cols[i]] = vals[i] ? json(vals[i]) : json(nullptr);
          rows.push_back(std::move(row));
          return true;
        }
        if (!header) {
          std::string h;
          for (const auto& c : cols) h += (h.empty() ? "" : "|") + c;
          out_stdout().print("{}\n", h);
          header = true;
        }
        std::string line;
        for (size_t i = 0; i < vals.size(); ++i)
          line += (i ? "|" : "") + std::string(vals[i] ? vals[i] : "");
        out_stdout().print("{}\n", line);
        return !std::ferror(stdout);
      });
  if (!r.ok()) return fail(r.error());
  if (json_out) emit_json({{"schema", "leakref.batch.query/1"}, {"rows", rows}});
  return kOk;
}

}  // namespace

Command register_batch(CLI::App& app) {
  auto* sub =
      app.add_subcommand("batch", "dump archives into an SQLite database: run, report, query");
  sub->require_subcommand(1);
  auto o = std::make_shared<BatchOptions>();
  auto ra = std::make_shared<RunArgs>();
  auto* run = sub->add_subcommand("run", "analyse every new dump under ARCHIVE... into --db");
  run->add_option("archive", ra->archives, "directories and files holding dumps")->required();
  run->add_option("--db", ra->db, "the SQLite database (created when missing)")->required();
  run->add_option("-j,--jobs", ra->jobs, "dumps analysed at once (default 1)");
  run->add_flag("--slurm", ra->slurm, "run as a Slurm job array (sbatch) instead of -j workers");
  run->add_option("--partition", ra->so.partition, "Slurm partition (default: the cluster's)");
  run->add_option("--chunk", ra->so.chunk, "dumps per Slurm array task (default 8)");
  run->add_flag("-q,--quiet", ra->quiet, "no line per dump on stderr");
  run->add_flag("--retry", ra->retry,
                "analyse again dumps stored with a transient failure (timeout, memory limit, "
                "crash, I/O error)");
  add_batch_options(run, *o);

  auto one_path = std::make_shared<std::string>();
  auto* one =
      sub->add_subcommand("one", "what batch run stores for one dump (leakref.batch-result/1)");
  one->add_option("dump", *one_path, "a core, vmcore, statedump or compressed core")->required();
  add_batch_options(one, *o);

  struct W {
    std::string list, out;
    size_t task = 0, chunk = 8;
  };
  auto w = std::make_shared<W>();
  auto* worker = sub->add_subcommand("worker", "one Slurm array task's chunk (batch run --slurm)");
  worker->add_option("--list", w->list, "the run's dumps.json")->required();
  worker->add_option("--task", w->task, "the array task id")->required();
  worker->add_option("--chunk", w->chunk, "dumps per task")->required();
  worker->add_option("--out", w->out, "results file (JSON lines, appended)")->required();
  add_batch_options(worker, *o);

  auto rep = std::make_shared<ReportOptions>();
  auto* report =
      sub->add_subcommand("report", "buckets of like dumps, with first/last seen and trends");
  report->add_option("--db", rep->db, "the batch database")->required();
  report->add_option("--html", rep->html, "also write a self-contained HTML report here");
  report->add_option("--top", rep->top, "buckets listed (default 20)");
  report->add_flag("--json", rep->json, "leakref.batch.report/1");

  struct Q {
    std::string db, sql;
    bool json = false;
  };
  auto q = std::make_shared<Q>();
  auto* query = sub->add_subcommand("query", "read-only SQL on the batch database");
  query->add_option("--db", q->db, "the batch database")->required();
  query->add_option("sql", q->sql, "SQL (SELECTs; the database is opened read-only)")->required();
  query->add_flag("--json", q->json, "rows as JSON objects");

  auto go = [=]() -> int {
    if (*run) return cmd_run(*ra, *o);
    if (*one) return cmd_one(*one_path, *o);
    if (*worker) return worker_main(w->list, w->task, w->chunk, w->out, *o);
    if (*report) return cmd_report(*rep);
    return cmd_query(q->db, q->sql, q->json);
  };
  return {sub, go, [=] { return (*report && rep->json) || (*query && q->json) || *one; }};
}

}  // namespace lrcli
