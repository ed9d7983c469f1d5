// `batch run --slurm`: the dumps to analyse are split into chunks, one Slurm
// array task per chunk. Each task runs `leakref batch worker`, which
// analyses its chunk (each dump still in its own limited process) and
// appends one result per line to its own file, synced after each. Only this
// process writes the database: it merges the files when the array is done,
// and on the next run merges whatever an interrupted one left.
#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "frontend/base/out.hpp"
#include "frontend/batch/batch.hpp"
#include "frontend/batch/batch_slurm.hpp"

namespace lrcli {

namespace {

using nlohmann::json;

// File names are bytes; JSON is UTF-8. A name that is not UTF-8 travels
// between the run, its Slurm tasks and their results as hex beside a
// readable copy, so that it still names its file when it comes back.
bool is_utf8(const std::string& s) {
  try {
    (void)json(s).dump();  // throws on invalid UTF-8: the test itself
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

void put_path(json& j, const std::string& path) {
  if (is_utf8(path)) {
    j["path"] = path;
    return;
  }
  j["path"] = json(path).dump(-1, ' ', false, json::error_handler_t::replace);
  std::string hex;
  for (unsigned char c : path) hex += fmt::format("{:02x}", c);
  j["path_hex"] = hex;
}

std::string get_path(const json& j) {
  if (!j.contains("path_hex") || !j["path_hex"].is_string()) return j.value("path", std::string());
  const std::string& h = j["path_hex"].get_ref<const std::string&>();
  auto nib = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    int hi = nib(h[i]), lo = nib(h[i + 1]);
    if (hi < 0 || lo < 0) return j.value("path", std::string());  // not ours: as written
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

namespace fs = std::filesystem;

// Runs argv, returning (status, stdout). Never through a shell.
std::pair<int, std::string> capture(const std::vector<std::string>& args) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {-1, ""};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = -1;
  if (pid > 0) ::waitpid(pid, &st, 0);
  return {pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool job_alive(const std::string& job) {
  auto [st, out] = capture({"squeue", "-h", "-j", job, "-o", "%i"});
  return st == 0 && out.find_first_not_of(" \n") != std::string::npos;
}

}  // namespace

lr::Result<uint64_t> merge_slurm_results(const std::string& work, BatchDb& db, int64_t run,
                                         const std::function<void(const json&)>& stored) {
  uint64_t merged = 0;
  std::error_code ec;
  if (!fs::is_directory(work, ec)) return merged;
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(work, ec))
    if (e.is_directory() && e.path().filename().string().rfind("run-", 0) == 0)
      runs.push_back(e.path());
  std::sort(runs.begin(), runs.end());
  for (const auto& r : runs) {
    std::ifstream jf(r / "jobid");
    std::string job;
    std::getline(jf, job);
    if (!job.empty() && job_alive(job))
      return lr::make_error(lr::Errc::kUnsupported,
                            fmt::format("{}: Slurm job {} of an earlier batch is still running; "
                                        "wait for it or 'scancel {}'",
                                        r.string(), job, job));
    for (const auto& e : fs::directory_iterator(r, ec)) {
      std::string name = e.path().filename().string();
      if (name.rfind("results.", 0) != 0) continue;
      std::ifstream in(e.path());
      std::string line;
      while (std::getline(in, line)) {
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) continue;  // a line cut by a killed task
        j["path"] = get_path(j);
        j.erase("path_hex");
        LR_ASSIGN(bool fresh, db.store(j, run));
        if (fresh) {
          ++merged;
          stored(j);
        }
      }
    }
    fs::remove_all(r, ec);
  }
  return merged;
}

lr::Result<void> submit_slurm(const std::vector<DumpFile>& todo, const SlurmOptions& so,
                              const BatchOptions& o, int64_t run) {
  std::string dir = fmt::format("{}/run-{:06}", so.work, run);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return lr::make_error(lr::Errc::kIo, dir + ": " + ec.message());
  json list = json::array();
  for (const auto& d : todo) {
    json e{{"size", d.size}, {"mtime_ns", d.mtime_ns}};
    put_path(e, d.path);
    list.push_back(std::move(e));
  }
  std::ofstream(dir + "/dumps.json") << json_text(list) << "\n";
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return lr::make_error(lr::Errc::kIo, "cannot find this executable");
  std::string cmd = shell_quote(std::string(exe, static_cast<size_t>(n))) +
                    " batch worker --list " + shell_quote(dir + "/dumps.json") +
                    " --task \"$SLURM_ARRAY_TASK_ID\" --chunk " + std::to_string(so.chunk) +
                    " --out " + shell_quote(dir + "/results.") + "\"$SLURM_ARRAY_TASK_ID\"" +
                    shell_quote(".jsonl");
  for (const auto& a : batch_option_args(o)) cmd += " " + shell_quote(a);
  std::ofstream(dir + "/task.sh") << "#!/bin/sh\n# one chunk of leakref batch run " << run
                                  << "\nexec " << cmd << "\n";
  ::chmod((dir + "/task.sh").c_str(), 0755);
  size_t tasks = (todo.size() + so.chunk - 1) / so.chunk;
  std::vector<std::string> sb = {"sbatch", "--parsable", "--job-name=leakref-batch",
                                 fmt::format("--array=0-{}", tasks - 1),
                                 "--output=" + dir + "/slurm-%A_%a.out"};
  if (!so.partition.empty()) sb.push_back("--partition=" + so.partition);
  if (o.mem_limit_mib) sb.push_back(fmt::format("--mem={}M", o.mem_limit_mib + 512));
  sb.push_back(dir + "/task.sh");
  auto [st, out] = capture(sb);
  std::string job = out.substr(0, out.find_first_of(";\n"));
  if (st != 0 || job.empty())
    return lr::make_error(lr::Errc::kIo,
                          fmt::format("sbatch failed (exit {}){}", st,
                                      st == -1 ? ": is Slurm's sbatch on PATH?" : ""));
  std::ofstream(dir + "/jobid") << job << "\n";
  if (so.on_submit) so.on_submit(job, tasks);
  while (job_alive(job)) std::this_thread::sleep_for(std::chrono::seconds(1));
  return {};
}

int worker_main(const std::string& list, size_t task, size_t chunk, const std::string& out,
                const BatchOptions& o) {
  std::ifstream in(list);
  json l = json::parse(in, nullptr, false);
  if (l.is_discarded() || !l.is_array()) {
    out_stderr().print("leakref: error: {}: not a batch dump list\n", list);
    return 3;
  }
  std::set<std::string> done;  // a requeued task goes on where it stopped
  {
    std::ifstream prev(out);
    std::string line;
    while (std::getline(prev, line)) {
      json j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.is_object() && j.contains("path")) done.insert(get_path(j));
    }
  }
  std::vector<DumpFile> mine;
  for (size_t i = task * chunk; i < l.size() && i < (task + 1) * chunk; ++i) {
    DumpFile d{get_path(l[i]), l[i]["size"], l[i]["mtime_ns"]};
    if (!done.count(d.path)) mine.push_back(d);
  }
  int fd = ::open(out.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    out_stderr().print("leakref: error: {}: cannot write: {}\n", out, std::strerror(errno));
    return 3;
  }
  // A task killed mid-line left a partial line: the next one starts afresh.
  if (off_t end = ::lseek(fd, 0, SEEK_END); end > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, end - 1) == 1 && last != '\n') (void)!::write(fd, "\n", 1);
  }
  bool ok = true;
  run_dumps(mine, o, 1, [&](json j) {
    put_path(j, j["path"].get<std::string>());
    std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    ok = ok && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
         ::fsync(fd) == 0;
    out_stderr().print("{} {}\n", j["status"].get<std::string>(), j["path"].get<std::string>());
  });
  ::close(fd);
  if (!ok) out_stderr().print("leakref: error: {}: write failed\n", out);
  return ok ? 0 : 3;
}

}  // namespace lrcli
