#include "corelib/debuginfo/types_build.hpp"
#include "corelib/base/fileio.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

extern char** environ;

namespace lr {

namespace {

constexpr const char* kStampSection = ".leakref_types";

// Runs argv, capturing stdout+stderr (the first 4 KiB). Returns the exit
// status, or -1 when it could not run.
int run(const std::vector<std::string>& argv, std::string* output) {
  char tmpl[] = "/tmp/leakref-cc-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return -1;
  unlink(tmpl);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  int status = -1;
  if (rc == 0 && waitpid(pid, &status, 0) == pid)
    status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  else
    status = -1;
  char buf[4096];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n > 0) output->assign(buf, static_cast<size_t>(n));
  close(fd);
  return status;
}

bool plain_hex(const std::string& s) {
  return s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The source is written beside the output, where `#include "h"` looks
// first; a relative header that names a file from the working directory is
// made absolute so it means what the user typed. Others are left for -I.
std::string header_path(const std::string& h) {
  if (h.empty() || h[0] == '/') return h;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(h, ec)) return h;
  auto abs = std::filesystem::absolute(h, ec);
  return ec ? h : abs.lexically_normal().string();
}

}  // namespace

namespace {
std::atomic<uint64_t>& tmp_counter() {
  static std::atomic<uint64_t> n{0};
  return n;
}
}  // namespace

Result<void> build_types(const TypesBuild& o, const std::string& out_path, std::string* command) {
  if (o.source.empty() && o.headers.empty())
    return make_error(Errc::kInvalidArgument, "no headers to build types from");
  if (!plain_hex(o.target_build_id))
    return make_error(Errc::kInvalidArgument, "bad build-id '" + o.target_build_id + "'");
  std::string text = o.source;
  for (const auto& h : o.headers) {
    if (h.find_first_of("\"\n") != std::string::npos)
      return make_error(Errc::kInvalidArgument, "bad header name '" + h + "'");
    text += "#include \"" + header_path(h) + "\"\n";
  }
  // The stamp: which executable these types describe.
  text += fmt::format(
      "__attribute__((used, section(\"{}\"))) static const char leakref_types_for[] = \"{}\";\n",
      kStampSection, o.target_build_id);
  // Temporaries of this process only: two leakref processes building the
  // same cached types at once (batch -j 2 on two cores of one program) each
  // compile their own and rename it into place (a whole file either way).
  std::string tmp = fmt::format("{}.tmp.{}.{}", out_path, ::getpid(), tmp_counter()++);
  std::string src = tmp + ".c", obj = tmp;
  {
    std::ofstream f(src);
    f << text;
    if (!f) return make_error(Errc::kIo, "cannot write " + src);
  }
  // A shared object, not an object file: its DWARF needs no relocation.
  std::vector<std::string> argv = {
      o.compiler, "-g",    "-O0",      "-fno-eliminate-unused-debug-types",
      "-shared",  "-fPIC", "-nostdlib"};
  if (o.declare_variables) argv.push_back("-fno-eliminate-unused-debug-symbols");
  for (const auto& d : o.defines) argv.push_back("-D" + d);
  for (const auto& i : o.include_dirs) argv.push_back("-I" + i);
  argv.insert(argv.end(), {"-o", obj, src});
  if (command) {
    command->clear();
    for (const auto& a : argv) *command += (command->empty() ? "" : " ") + a;
  }
  std::string out;
  int st = run(argv, &out);
  ::unlink(src.c_str());
  if (st != 0) {
    ::unlink(obj.c_str());
    if (st < 0) return make_error(Errc::kNotFound, "cannot run " + o.compiler);
    // The first error line alone ("file:line:col: error: ..."), not the
    // "In file included from" chain above it.
    size_t e = out.find("error");
    size_t b = e == std::string::npos ? 0 : out.rfind('\n', e);
    b = b == std::string::npos || e == std::string::npos ? 0 : b + 1;
    std::string first = out.substr(b, out.find('\n', b) - b);
    return make_error(Errc::kIo, fmt::format("{} failed on the headers: {}", o.compiler, first));
  }
  if (::rename(obj.c_str(), out_path.c_str()) != 0)
    return make_error(Errc::kIo,
                      fmt::format("cannot create {}: {}", out_path, std::strerror(errno)));
  return {};
}

std::string types_file_target(const std::string& path) {
  auto f = open_input(path, "types file");  // never waits on a FIFO
  if (!f.ok()) return "";
  int fd = f.value();
  elf_version(EV_CURRENT);
  Elf* e = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  std::string out;
  size_t shstrndx = 0;
  if (e && elf_kind(e) == ELF_K_ELF && elf_getshdrstrndx(e, &shstrndx) == 0) {
    for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
      GElf_Shdr sh;
      const char* n = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : nullptr;
      if (!n || std::strcmp(n, kStampSection) != 0) continue;
      Elf_Data* d = elf_getdata(scn, nullptr);
      if (d && d->d_buf && d->d_size)
        out.assign(static_cast<const char*>(d->d_buf),
                   strnlen(static_cast<const char*>(d->d_buf), std::min<size_t>(d->d_size, 128)));
      break;
    }
  }
  if (e) elf_end(e);
  ::close(fd);
  return plain_hex(out) ? out : "";
}

std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/leakref";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/leakref";
  return "";
}

std::string types_cache_path(const std::string& prefix, const std::string& build_id) {
  std::string dir = cache_dir();
  if (dir.empty()) return "";
  return fmt::format("{}/{}-{}.so", dir, prefix, build_id.empty() ? "unknown" : build_id);
}

}  // namespace lr
