#include "harness.hpp"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#ifndef LR_BUILD_DIR
#error "LR_BUILD_DIR must be defined by the build"
#endif

namespace lrtest {

namespace {
int g_skips = 0;
std::vector<Skip> g_skip_list;
std::string g_tmp;

void cleanup_tmp() {
  if (!g_tmp.empty() && !std::getenv("LEAKREF_KEEP_TMP")) {
    std::string cmd = "rm -rf '" + g_tmp + "'";
    if (std::system(cmd.c_str()) != 0) {
    }
  }
}
}  // namespace

void note_skip(const std::string& reason) {
  ++g_skips;
  std::string test = Catch::getResultCapture().getCurrentTestName();
  g_skip_list.push_back({test, reason});
  std::fprintf(stderr, "SKIPPED: [%s] %s\n", test.c_str(), reason.c_str());
}
int skipped_count() {
  return g_skips;
}
const std::vector<Skip>& skips() {
  return g_skip_list;
}

std::map<std::string, std::string> allowed_skips(const std::string& path, std::string* error) {
  std::map<std::string, std::string> allowed;
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot be read";
    return allowed;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    size_t bar = line.find(" | ");
    if (bar == std::string::npos || bar == 0 || bar + 3 >= line.size()) {
      *error = path + ":" + std::to_string(n) + ": not 'TEST CASE NAME | why it may skip'";
      return {};
    }
    allowed[line.substr(0, bar)] = line.substr(bar + 3);
  }
  return allowed;
}

std::string build_dir() {
  return LR_BUILD_DIR;
}
std::string fixture_path(const std::string& name) {
  return build_dir() + "/fixtures/" + name;
}

std::string tmp_dir() {
  if (g_tmp.empty()) {
    char tmpl[] = "/tmp/leakref-tests-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    g_tmp = tmpl;
    // LEAKREF_KEEP_TMP=1 keeps cores and traces for a post-mortem of a failure.
    const char* keep = std::getenv("LEAKREF_KEEP_TMP");
    if (!keep || std::string(keep) != "1") std::atexit(cleanup_tmp);
  }
  return g_tmp;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

nlohmann::json RunResult::json() const {
  return nlohmann::json::parse(out);
}

RunResult run(const std::vector<std::string>& argv, int timeout_s) {
  RunResult r;
  int out_pipe[2];
  if (pipe(out_pipe) != 0) throw std::runtime_error("pipe");
  std::string errpath = tmp_dir() + "/stderr." + std::to_string(getpid()) + "." +
                        std::to_string(reinterpret_cast<uintptr_t>(&r));
  pid_t pid = fork();
  if (pid == 0) {
    // Only fds 0-2 may reach the program: a daemon it starts (glusterd)
    // would otherwise keep the pipe open and we would never see EOF.
    dup2(out_pipe[1], 1);
    int ef = open(errpath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (ef >= 0) dup2(ef, 2);
    int nf = open("/dev/null", O_RDONLY);
    if (nf >= 0) dup2(nf, 0);
    for (int fd : {out_pipe[0], out_pipe[1], ef, nf})
      if (fd > 2) close(fd);
    std::vector<char*> av;
    for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    execvp(av[0], av.data());
    _exit(127);
  }
  close(out_pipe[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{out_pipe[0], POLLIN, 0};
    int pr = poll(&p, 1, static_cast<int>(std::min<long>(left, 1000)));
    if (pr <= 0) continue;
    ssize_t n = read(out_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    r.out.append(buf, n);
  }
  close(out_pipe[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (r.timed_out)
    r.status = -1;
  else if (WIFEXITED(st))
    r.status = WEXITSTATUS(st);
  else if (WIFSIGNALED(st))
    r.status = 128 + WTERMSIG(st);
  r.err = read_file(errpath);
  unlink(errpath.c_str());
  return r;
}

std::string json_spool_dir() {
  // One directory per test process (the shards of one run, a test that runs
  // the suite itself): none clears or checks another's.
  static const std::string dir = build_dir() + "/json-spool/" + std::to_string(::getpid());
  return dir;
}

namespace {
// Keeps every --json/--jsonl output the suite sees (answers and errors
// alike) for the check against schemas/ when the run ends (tests/main.cpp).
void spool_json(const std::vector<std::string>& args, const RunResult& r) {
  bool json = false;
  for (const auto& a : args) json = json || a == "--json" || a == "--jsonl";
  // `batch one` writes JSON only (what batch run stores), with no flag for it.
  json = json || (args.size() > 1 && args[0] == "batch" && args[1] == "one");
  if (!json || r.out.empty() || r.timed_out) return;
  static unsigned n = 0;
  write_file(json_spool_dir() + "/" + std::to_string(++n) + ".json", r.out);
}
}  // namespace

RunResult leakref(const std::vector<std::string>& args, int timeout_s) {
  std::vector<std::string> av{build_dir() + "/leakref"};
  av.insert(av.end(), args.begin(), args.end());
  RunResult r = run(av, timeout_s);
  spool_json(args, r);
  return r;
}

bool have_gcore() {
  return std::system("command -v gcore >/dev/null 2>&1") == 0;
}

std::string sha256_file(const std::string& path) {
  RunResult r = run({"sha256sum", path});
  return r.out.substr(0, 64);
}

uint64_t core_offset(const std::string& img, uint64_t va) {
  Elf64_Ehdr eh;
  if (img.size() < sizeof eh) return 0;
  std::memcpy(&eh, img.data(), sizeof eh);
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (eh.e_phoff + (i + 1) * sizeof ph > img.size()) return 0;
    std::memcpy(&ph, img.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && va >= ph.p_vaddr && va < ph.p_vaddr + ph.p_filesz)
      return ph.p_offset + (va - ph.p_vaddr);
  }
  return 0;
}

namespace {

// Starts `args` (in `cwd` when given, core dumps allowed) and waits for a
// line starting with `ready` on its stdout; throws when it does not come.
pid_t start_until_ready(const std::vector<std::string>& args, const std::string& ready,
                        const std::string& cwd = "") {
  int out_pipe[2];
  if (pipe(out_pipe) != 0) throw std::runtime_error("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    struct rlimit core {
      RLIM_INFINITY, RLIM_INFINITY
    };
    if (!cwd.empty()) setrlimit(RLIMIT_CORE, &core);
    std::vector<char*> av;
    for (auto& a : args) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    execvp(av[0], av.data());
    _exit(127);
  }
  close(out_pipe[1]);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  auto has_ready = [&] {
    for (size_t at = 0; at < out.size();) {
      size_t nl = out.find('\n', at);
      if (nl == std::string::npos) return false;
      if (out.compare(at, ready.size(), ready) == 0) return true;
      at = nl + 1;
    }
    return false;
  };
  while (!has_ready() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 500) <= 0) continue;
    char c[256];
    ssize_t n = read(out_pipe[0], c, sizeof c);
    if (n <= 0) break;
    out.append(c, n);
  }
  close(out_pipe[0]);
  if (!has_ready()) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    throw std::runtime_error("fixture " + args[0] + " did not say " + ready + ": '" + out + "'");
  }
  return pid;
}

// Until every thread of PID sleeps (state S in /proc/PID/task/*/stat), for
// at most 10 s. A fixture says READY just before it pauses, and its threads
// reach their pause on their own time: a signal sent at once can catch one
// still in the fixture's own code, between its last write and its pause,
// where a test that reads the threads' places would see the wrong one.
void wait_until_asleep(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  auto all_asleep = [&] {
    std::error_code ec;
    int n = 0;
    for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
      std::string stat = read_file(t.path().string() + "/stat");
      size_t paren = stat.rfind(')');
      if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'S')
        return false;
      ++n;
    }
    return !ec && n > 0;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!all_asleep() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

const FixtureCore& fixture_core(const std::string& key, const std::string& exe,
                                const std::vector<std::string>& extra_args,
                                const std::vector<std::string>& launcher) {
  static std::map<std::string, FixtureCore> cache;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  FixtureCore fc;
  fc.exe = exe;
  std::string dir = tmp_dir();
  std::string manifest = dir + "/" + key + ".manifest.json";
  std::vector<std::string> args = launcher;
  args.insert(args.end(), {exe, manifest});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_t pid = start_until_ready(args, "READY");
  // The manifest is written before READY; a fixture whose truth is a child
  // process (fx_roots fork) names the child's pid there, and that is cored.
  fc.manifest = nlohmann::json::parse(read_file(manifest), nullptr, /*allow_exceptions=*/false);
  fc.pid = pid;
  if (fc.manifest.is_object() && fc.manifest.contains("pid") &&
      fc.manifest["pid"].is_number_integer())
    fc.pid = fc.manifest["pid"].get<int>();
  std::string prefix = dir + "/" + key;
  RunResult g = run({"gcore", "-o", prefix, std::to_string(fc.pid)}, 300);
  if (fc.pid != pid) kill(fc.pid, SIGKILL);  // a launcher's child outlives it
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  fc.core = prefix + "." + std::to_string(fc.pid);
  struct stat st {};
  if (g.status != 0 || stat(fc.core.c_str(), &st) != 0)
    throw std::runtime_error("gcore of " + exe + " failed: " + g.err);
  if (fc.manifest.is_discarded()) fc.manifest = nlohmann::json::parse(read_file(manifest));
  return cache.emplace(key, std::move(fc)).first->second;
}

const FixtureCore& qemu_fixture_core(const std::string& key, const std::string& exe,
                                     const std::string& sysroot,
                                     const std::vector<std::string>& extra_args,
                                     const std::string& ready,
                                     const std::vector<std::string>& guest_env) {
  static std::map<std::string, FixtureCore> cache;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  FixtureCore fc;
  fc.exe = exe;
  const std::string dir = tmp_dir() + "/" + key + ".qemu";
  ::mkdir(dir.c_str(), 0700);
  const std::string manifest = dir + "/manifest.json";
  std::vector<std::string> args{"qemu-aarch64", "-L", sysroot};
  for (const auto& e : guest_env) args.insert(args.end(), {"-E", e});
  args.insert(args.end(), {exe, manifest});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_t pid = start_until_ready(args, ready, dir);
  fc.pid = pid;
  wait_until_asleep(pid);  // qemu's core holds each guest thread where it was
  // The guest dies of SIGABRT: qemu writes its core (qemu_PROG_DATE_PID.core).
  kill(pid, SIGABRT);
  int status = 0;
  waitpid(pid, &status, 0);
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename();
    if (name.rfind("qemu_", 0) == 0 && name.size() > 5 && name.ends_with(".core"))
      fc.core = e.path();
    else if (name == "core" || name.rfind("core.", 0) == 0)
      std::filesystem::remove(e.path());  // the host's core of qemu itself
  }
  if (fc.core.empty())
    throw std::runtime_error("qemu-aarch64 wrote no core of " + exe + " (status " +
                             std::to_string(status) + ")");
  // A fixture stopped before it writes its manifest (fx_grow at CP1) has none.
  struct stat st {};
  if (::stat(manifest.c_str(), &st) == 0 && st.st_size > 0)
    fc.manifest = nlohmann::json::parse(read_file(manifest));
  return cache.emplace(key, std::move(fc)).first->second;
}

Background spawn(const std::vector<std::string>& argv) {
  static int n = 0;
  Background b;
  std::string base = tmp_dir() + "/bg." + std::to_string(getpid()) + "." + std::to_string(++n);
  b.out_path = base + ".out";
  b.err_path = base + ".err";
  pid_t pid = fork();
  if (pid == 0) {
    int of = open(b.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int ef = open(b.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int nf = open("/dev/null", O_RDONLY);
    if (of >= 0) dup2(of, 1);
    if (ef >= 0) dup2(ef, 2);
    if (nf >= 0) dup2(nf, 0);
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    std::vector<char*> av;
    for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    execvp(av[0], av.data());
    _exit(127);
  }
  b.pid = pid;
  return b;
}

int finish(Background& b, int sig, int timeout_s) {
  if (b.pid <= 0) return -1;
  if (sig) kill(b.pid, sig);
  int st = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (waitpid(b.pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(b.pid, SIGKILL);
      waitpid(b.pid, &st, 0);
      break;
    }
    usleep(20000);
  }
  b.pid = -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool wait_for_file(const std::string& path, int timeout_s) {
  struct stat st;
  for (int i = 0; i < timeout_s * 20; ++i) {
    if (::stat(path.c_str(), &st) == 0) return true;
    usleep(50000);
  }
  return false;
}

bool wait_for_text(const std::string& path, const std::string& text, int timeout_s) {
  for (int i = 0; i < timeout_s * 20; ++i) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    if (ss.str().find(text) != std::string::npos) return true;
    usleep(50000);
  }
  return false;
}

void wait_for_stable_size(const std::string& path, int timeout_s) {
  off_t last = -1;
  int same = 0;
  for (int i = 0; i < timeout_s * 4 && same < 4; ++i) {
    struct stat st {};
    off_t size = ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
    same = size == last ? same + 1 : 0;
    last = size;
    usleep(250000);
  }
}

std::set<std::string> manifest_items(const nlohmann::json& m,
                                     std::initializer_list<const char*> kinds) {
  std::set<std::string> out;
  for (const auto& i : m["items"])
    for (const char* k : kinds)
      if (i["kind"] == k) out.insert(i["ptr"].get<std::string>());
  return out;
}

bool have_program(const std::string& name) {
  return run({"sh", "-c", "command -v " + name}, 10).status == 0;
}

std::string docs_text() {
  std::string all = read_file(std::string(LR_SOURCE_DIR) + "/README.md");
  std::string list = run({"sh", "-c", "ls " + std::string(LR_SOURCE_DIR) + "/docs/*.md"}).out;
  std::istringstream in(list);
  for (std::string f; std::getline(in, f);)
    if (!f.empty()) all += "\n" + read_file(f);
  return all;
}

std::string readme_section(const std::string& name) {
  std::string readme = docs_text();
  size_t b = readme.find("<!-- test:" + name + "-begin -->"),
         e = readme.find("<!-- test:" + name + "-end -->");
  if (b == std::string::npos || e == std::string::npos || e < b) return "";
  return readme.substr(b, e - b);
}

std::vector<std::string> man_examples(const std::string& page) {
  std::string text = read_file(std::string(LR_SOURCE_DIR) + "/man/" + page);
  size_t b = text.find("\n.SH EXAMPLES\n");
  if (b == std::string::npos) return {};
  size_t e = text.find("\n.SH ", b + 1);
  std::istringstream in(text.substr(b, e == std::string::npos ? std::string::npos : e - b));
  std::vector<std::string> out;
  bool cont = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '.') continue;  // requests (.nf, .fi)
    std::string plain;                             // roff escapes: \- is '-', \e a backslash
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size() && (line[i + 1] == '-' || line[i + 1] == 'e')) {
        plain += line[i + 1] == '-' ? '-' : '\\';
        ++i;
      } else {
        plain += line[i];
      }
    }
    size_t first = plain.find_first_not_of(' ');
    plain = first == std::string::npos ? "" : plain.substr(first);
    bool more = !plain.empty() && plain.back() == '\\';
    if (more) plain.pop_back();
    if (cont)
      out.back() += " " + plain;
    else if (!plain.empty())
      out.push_back(plain);
    cont = more;
  }
  return out;
}

std::vector<ReadmeCommand> readme_commands(const std::string& part) {
  std::vector<ReadmeCommand> out;
  for (size_t at = 0; (at = part.find("```\n$ ", at)) != std::string::npos;) {
    size_t end = part.find("```", at + 4);
    if (end == std::string::npos) break;
    std::string block = part.substr(at + 4, end - at - 4);
    at = end + 3;
    size_t nl = block.find('\n');
    out.push_back({block.substr(2, nl - 2), block.substr(nl + 1)});
  }
  return out;
}

long screenshot(const std::string& url, const std::string& png) {
  std::string profile = tmp_dir() + "/chromium-profile";
  auto r = run({"chromium", "--headless", "--no-sandbox", "--disable-gpu",
                "--user-data-dir=" + profile, "--window-size=1200,900", "--screenshot=" + png, url},
               120);
  if (r.status != 0 || ::access(png.c_str(), F_OK) != 0) return -1;
  return static_cast<long>(read_file(png).size());
}

// The file offset of the `len` bytes at virtual address `va` of the ELF
// file open at `fd` (the PT_LOAD that holds them all); 0 when none does. A
// dump with 65,535 program headers or more keeps their count in section
// header 0 (PN_XNUM), as QEMU's paging dumps of a few GB do.
uint64_t elf_offset(int fd, uint64_t va, size_t len) {
  Elf64_Ehdr eh;
  if (::pread(fd, &eh, sizeof eh, 0) != sizeof eh) return 0;
  uint64_t phnum = eh.e_phnum;
  if (phnum == PN_XNUM) {
    Elf64_Shdr sh;
    if (::pread(fd, &sh, sizeof sh, static_cast<off_t>(eh.e_shoff)) != sizeof sh) return 0;
    phnum = sh.sh_info;
  }
  for (uint64_t i = 0; i < phnum; ++i) {
    Elf64_Phdr ph;
    if (::pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != sizeof ph)
      return 0;
    if (ph.p_type == PT_LOAD && va >= ph.p_vaddr && va + len <= ph.p_vaddr + ph.p_filesz)
      return ph.p_offset + (va - ph.p_vaddr);
  }
  return 0;
}

namespace {

std::vector<Elf64_Phdr> phdrs_of(int fd, Elf64_Ehdr* eh) {
  std::vector<Elf64_Phdr> out;
  if (::pread(fd, eh, sizeof *eh, 0) != sizeof *eh) return out;
  uint64_t phnum = eh->e_phnum;
  if (phnum == PN_XNUM) {
    Elf64_Shdr sh;
    if (::pread(fd, &sh, sizeof sh, static_cast<off_t>(eh->e_shoff)) != sizeof sh) return out;
    phnum = sh.sh_info;
  }
  out.resize(phnum);
  const ssize_t want = static_cast<ssize_t>(phnum * sizeof(Elf64_Phdr));
  if (::pread(fd, out.data(), static_cast<size_t>(want), static_cast<off_t>(eh->e_phoff)) != want)
    out.clear();
  return out;
}

}  // namespace

uint64_t elf_phys(const std::string& dump, uint64_t va) {
  int fd = ::open(dump.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  Elf64_Ehdr eh;
  uint64_t pa = 0;
  for (const auto& ph : phdrs_of(fd, &eh))
    if (ph.p_type == PT_LOAD && va >= ph.p_vaddr && va - ph.p_vaddr < ph.p_filesz) {
      pa = ph.p_paddr + (va - ph.p_vaddr);
      break;
    }
  ::close(fd);
  return pa;
}

std::string holed(const std::string& dump, const std::string& out, uint64_t pa) {
  REQUIRE(run({"/bin/cp", dump, out}, 120).status == 0);
  int fd = ::open(out.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  Elf64_Ehdr eh;
  std::vector<Elf64_Phdr> in = phdrs_of(fd, &eh), ph;
  REQUIRE(!in.empty());
  bool split = false;
  for (const Elf64_Phdr& p : in) {
    if (p.p_type != PT_LOAD || pa < p.p_paddr || pa - p.p_paddr + 4096 > p.p_filesz) {
      ph.push_back(p);
      continue;
    }
    const uint64_t k = pa - p.p_paddr;
    Elf64_Phdr a = p, b = p;
    a.p_filesz = a.p_memsz = k;
    b.p_offset += k + 4096;
    b.p_paddr += k + 4096;
    if (b.p_vaddr) b.p_vaddr += k + 4096;
    b.p_filesz = b.p_memsz = p.p_filesz - k - 4096;
    if (a.p_filesz) ph.push_back(a);
    if (b.p_filesz) ph.push_back(b);
    split = true;
  }
  INFO("no PT_LOAD of " << dump << " holds physical page " << std::hex << pa);
  REQUIRE(split);
  const off_t end = (::lseek(fd, 0, SEEK_END) + 7) & ~off_t{7};
  const ssize_t n = static_cast<ssize_t>(ph.size() * sizeof(Elf64_Phdr));
  REQUIRE(::pwrite(fd, ph.data(), static_cast<size_t>(n), end) == n);
  eh.e_phoff = static_cast<uint64_t>(end);
  if (ph.size() < PN_XNUM) {
    eh.e_phnum = static_cast<uint16_t>(ph.size());
  } else {  // the count in section header 0's sh_info
    Elf64_Shdr sh;
    REQUIRE(eh.e_shoff != 0);
    REQUIRE(::pread(fd, &sh, sizeof sh, static_cast<off_t>(eh.e_shoff)) == sizeof sh);
    sh.sh_info = static_cast<uint32_t>(ph.size());
    eh.e_phnum = PN_XNUM;
    REQUIRE(::pwrite(fd, &sh, sizeof sh, static_cast<off_t>(eh.e_shoff)) == sizeof sh);
  }
  REQUIRE(::pwrite(fd, &eh, sizeof eh, 0) == sizeof eh);
  ::close(fd);
  return out;
}

// (patched: see harness.hpp)
std::string patched(const std::string& core, const std::string& out,
                    const std::vector<std::pair<uint64_t, uint64_t>>& writes, int width) {
  REQUIRE(run({"/bin/cp", core, out}, 120).status == 0);
  int fd = ::open(out.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  for (auto [va, v] : writes) {
    const uint64_t off = elf_offset(fd, va, static_cast<size_t>(width));
    INFO("patching " << std::hex << va);
    CHECK(off != 0);
    if (off) CHECK(::pwrite(fd, &v, width, static_cast<off_t>(off)) == width);
  }
  ::close(fd);
  return out;
}

}  // namespace lrtest
