// Each dump in its own process: a core that makes the analysis crash, loop
// or swell costs that dump, not the batch. The child is this executable's
// `batch one`, with a data-size limit (RLIMIT_DATA counts the heap, not the
// read-only mapping of the core) and a wall-clock deadline the parent
// enforces with SIGKILL.
#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <map>

#include "frontend/batch/batch.hpp"

namespace lrcli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;  // read ends
  std::string out_text, err_text;
  const DumpFile* dump = nullptr;
  Clock::time_point start, deadline;
  bool killed = false;
};

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "leakref";
}

Child spawn(const DumpFile& d, const BatchOptions& o, const std::string& exe) {
  std::vector<std::string> args = {exe, "batch", "one", d.path};
  for (auto& a : batch_option_args(o)) args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int po[2], pe[2];
  Child c;
  c.dump = &d;
  if (::pipe2(po, O_CLOEXEC) != 0) return c;
  if (::pipe2(pe, O_CLOEXEC) != 0) {
    ::close(po[0]);
    ::close(po[1]);
    return c;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a deadline kills whatever it started too
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the batch died before prctl
    ::dup2(po[1], 1);
    ::dup2(pe[1], 2);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    struct rlimit no_core {
      0, 0
    };  // a crashing worker must not write a core into the archive
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (o.mem_limit_mib) {
      rlim_t b = static_cast<rlim_t>(o.mem_limit_mib) << 20;
      struct rlimit rl {
        b, b
      };
      ::setrlimit(RLIMIT_DATA, &rl);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(po[1]);
  ::close(pe[1]);
  if (pid < 0) {
    ::close(po[0]);
    ::close(pe[0]);
    return c;
  }
  c.pid = pid;
  c.out = po[0];
  c.err = pe[0];
  c.start = Clock::now();
  c.deadline = c.start + std::chrono::milliseconds(static_cast<int64_t>(o.timeout * 1000));
  return c;
}

// Reads what is there; false at end of file.
bool drain(int fd, std::string& into, size_t cap) {
  char buf[1 << 16];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n <= 0) return n < 0 && (errno == EINTR || errno == EAGAIN);
  if (into.size() < cap)
    into.append(buf, std::min<size_t>(static_cast<size_t>(n), cap - into.size()));
  return true;
}

// What a process says when an allocation fails: C++'s bad_alloc (leakref's
// own "internal error"), glibc's and the kernel's ENOMEM text, and a
// sanitizer runtime's (under ASan the limit stops the shadow mapping itself).
bool out_of_memory(const std::string& err) {
  for (const char* w :
       {"bad_alloc", "Cannot allocate memory", "out of memory", "failed to allocate"})
    if (err.find(w) != std::string::npos) return true;
  return false;
}

// The child's result, or one that says how it ended.
json finish(Child& c, const BatchOptions& o, int status, const struct rusage& ru) {
  double secs = std::chrono::duration<double>(Clock::now() - c.start).count();
  json j = json::parse(c.out_text, nullptr, false);
  bool good =
      !j.is_discarded() && j.is_object() && j.value("schema", "") == "leakref.batch-result/1";
  if (!good || c.killed || !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    std::string why, st;
    if (c.killed) {
      st = "timeout";
      why = fmt::format("{}: analysis ran over {} s and was killed", c.dump->path, o.timeout);
    } else if (o.mem_limit_mib && out_of_memory(c.err_text)) {
      st = "memory";
      why = fmt::format("{}: analysis needed more than the memory limit ({} MiB)", c.dump->path,
                        o.mem_limit_mib);
    } else if (o.mem_limit_mib && WIFSIGNALED(status) &&
               (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS ||
                WTERMSIG(status) == SIGABRT)) {
      // Under the limit a library whose allocation fails (libdw's does)
      // dies instead of saying so: the limit is the likely cause, and the
      // signal is said too.
      st = "memory";
      why = fmt::format(
          "{}: analysis needed more than the memory limit ({} MiB): it died of signal {} ({}) "
          "under the limit, as a library does when an allocation fails",
          c.dump->path, o.mem_limit_mib, WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
      st = "crashed";
      std::string tail = c.err_text.substr(c.err_text.size() > 300 ? c.err_text.size() - 300 : 0);
      while (!tail.empty() && tail.back() == '\n') tail.pop_back();
      why = WIFSIGNALED(status)
                ? fmt::format("{}: analysis died of signal {} ({})", c.dump->path, WTERMSIG(status),
                              strsignal(WTERMSIG(status)))
                : fmt::format("{}: analysis exited {} without a result: {}", c.dump->path,
                              WIFEXITED(status) ? WEXITSTATUS(status) : -1, tail);
    }
    j = json{{"schema", "leakref.batch-result/1"},
             {"path", c.dump->path},
             {"size", c.dump->size},
             {"mtime_ns", c.dump->mtime_ns},
             {"compression", nullptr},
             {"kind", nullptr},
             {"status", st},
             {"error", why},
             {"error_code", st},
             {"program", nullptr},
             {"build_id", nullptr},
             {"taken", static_cast<double>(c.dump->mtime_ns) / 1e9},
             {"profiles", json::array()},
             {"objects", 0},
             {"classes", json::array()},
             {"findings", json::array()},
             {"flagged", json::array()},
             {"flagged_total", 0},
             {"warnings", json::array()}};
    std::string sig = fmt::format("?|?|-|{}|{}", st, st);
    j["signature_text"] = sig;
    j["signature"] = signature_hash(sig);
  }
  // The dump's identity is this process's: the child's JSON carries a name
  // that is not UTF-8 with U+FFFD in it, which would match no file again,
  // and the child stats what a link points to (a link to /dev/zero is size
  // 0 there), where the run found the link itself: the row must carry the
  // key the run looks for, or it is "missing" on every run.
  j["path"] = c.dump->path;
  j["size"] = c.dump->size;
  j["mtime_ns"] = c.dump->mtime_ns;
  j["seconds"] = secs;
  j["peak_rss_kib"] = ru.ru_maxrss;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  j["worker"] = host;
  return j;
}

}  // namespace

std::vector<std::string> batch_option_args(const BatchOptions& o) {
  std::vector<std::string> a;
  if (!o.sysroot.empty()) a.insert(a.end(), {"--sysroot", o.sysroot});
  for (const auto& d : o.debug_dirs) a.insert(a.end(), {"--debug-dir", d});
  for (const auto& p : o.profiles) a.insert(a.end(), {"--profile", p});
  a.insert(a.end(), {"--max-core-mib", std::to_string(o.max_core_mib)});
  if (!o.work_dir.empty()) a.insert(a.end(), {"--work", o.work_dir});
  return a;
}

void run_dumps(const std::vector<DumpFile>& todo, const BatchOptions& o, unsigned jobs,
               const std::function<void(json)>& done) {
  std::string exe = self_exe();
  std::deque<const DumpFile*> queue;
  for (const auto& d : todo) queue.push_back(&d);
  std::vector<Child> running;
  if (jobs == 0) jobs = 1;
  while (!queue.empty() || !running.empty()) {
    while (running.size() < jobs && !queue.empty()) {
      Child c = spawn(*queue.front(), o, exe);
      if (c.pid < 0) {
        struct rusage ru {};
        c.start = Clock::now();
        c.err_text = "fork failed: " + std::string(std::strerror(errno));
        done(finish(c, o, 127 << 8, ru));
      } else {
        running.push_back(std::move(c));
      }
      queue.pop_front();
    }
    std::vector<pollfd> fds;
    for (auto& c : running) {
      fds.push_back({c.out, POLLIN, 0});
      fds.push_back({c.err, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 200);
    for (size_t i = 0; i < running.size(); ++i) {
      Child& c = running[i];
      if (c.out >= 0 && (fds[2 * i].revents & (POLLIN | POLLHUP)) &&
          !drain(c.out, c.out_text, 64u << 20)) {
        ::close(c.out);
        c.out = -1;
      }
      if (c.err >= 0 && (fds[2 * i + 1].revents & (POLLIN | POLLHUP)) &&
          !drain(c.err, c.err_text, 64u << 10)) {
        ::close(c.err);
        c.err = -1;
      }
      // Over time: SIGTERM first (the child removes what it decompressed),
      // SIGKILL 2 s later.
      if (!c.killed && Clock::now() > c.deadline) {
        ::kill(c.pid, SIGTERM);
        c.killed = true;
      }
      if (c.killed && Clock::now() > c.deadline + std::chrono::seconds(2)) {
        ::kill(-c.pid, SIGKILL);
        ::kill(c.pid, SIGKILL);
      }
      // Something it started may still hold the pipes: stop waiting on them.
      if (c.killed && Clock::now() > c.deadline + std::chrono::seconds(5))
        for (int* fd : {&c.out, &c.err})
          if (*fd >= 0) {
            ::close(*fd);
            *fd = -1;
          }
    }
    for (size_t i = 0; i < running.size();) {
      Child& c = running[i];
      if (c.out >= 0 || c.err >= 0) {
        ++i;
        continue;
      }
      int status = 0;
      struct rusage ru {};
      ::wait4(c.pid, &status, 0, &ru);
      done(finish(c, o, status, ru));
      running.erase(running.begin() + static_cast<long>(i));
    }
  }
}

}  // namespace lrcli
