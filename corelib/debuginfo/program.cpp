#include "corelib/debuginfo/program.hpp"

#include "corelib/base/registry.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "corelib/base/fileio.hpp"

namespace lr {

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  int base = 10;
  const char* p = s.c_str();
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    p += 2;
  }
  for (const char* q = p; *q; ++q)
    if (!(base == 16 ? std::isxdigit(static_cast<unsigned char>(*q))
                     : std::isdigit(static_cast<unsigned char>(*q))))
      return false;
  if (!*p) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(p, &end, base);
  if (errno || *end) return false;
  *out = v;
  return true;
}

Result<std::unique_ptr<Program>> Program::open_core(const std::string& core_path,
                                                    const ProgramOptions& opts) {
  std::unique_ptr<Program> p(new Program());
  if (!opts.exe.empty()) {
    // An executable the user names must be one: a typo or a wrong file
    // would otherwise only be a warning, and every lookup would then fail.
    LR_ASSIGN(int fd, open_input(opts.exe, "executable"));
    char magic[4] = {};
    bool elf = ::pread(fd, magic, 4, 0) == 4 && std::memcmp(magic, "\177ELF", 4) == 0;
    ::close(fd);
    if (!elf) return make_error(Errc::kBadFormat, opts.exe + ": executable is not an ELF file");
  }
  CoreOptions co;
  co.sysroot = opts.sysroot;
  co.exe_path = opts.exe;
  LR_ASSIGN(p->core_, CoreFile::open(core_path, co));
  p->mem_ = p->core_.get();
  DebugOptions dopt;
  dopt.sysroot = opts.sysroot;
  dopt.debug_dirs = opts.debug_dirs;
  p->mods_ = ModuleSet::from_core(*p->core_, dopt);
  if (!p->mods_->exe() && !opts.exe.empty()) {
    // No NT_FILE (truncated notes): place --exe using AT_PHDR if we have it.
    p->mods_->add(opts.exe, opts.exe, 0, 0, 0, "", true);
  }
  p->types_ = std::make_unique<TypeRegistry>(p->mods_.get());
  p->find_thread_pointers();
  return p;
}

namespace {
NamedRegistry<ThreadPointerFinder>& tp_finders() {
  static NamedRegistry<ThreadPointerFinder> r;
  return r;
}
}  // namespace

namespace {
NamedRegistry<ThreadMemoryReader>& tm_readers() {
  static NamedRegistry<ThreadMemoryReader> r;
  return r;
}
}  // namespace

void register_thread_memory_reader(const std::string& name, ThreadMemoryReader f) {
  tm_readers().add(name, f);
}

ThreadMemory thread_memory(Program& prog) {
  ThreadMemory out;
  if (!prog.core()) return out;
  for (ThreadMemoryReader f : tm_readers().all()) {
    ThreadMemory t;
    if (f(prog, &t)) return t;
  }
  return out;
}

void register_thread_pointer_finder(const std::string& name, ThreadPointerFinder f) {
  tp_finders().add(name, f);
}

// Thread pointers the core lacks, from the first finder that knows them.
void Program::find_thread_pointers() {
  // x86_64's thread pointer is a register (fs_base): always in the core.
  if (core_->machine() != EM_AARCH64) return;
  const auto& th = core_->threads();
  if (std::all_of(th.begin(), th.end(), [](const ThreadInfo& t) { return t.tp != 0; })) return;
  std::string why = "no C library's thread list was found";
  for (const auto& [name, find] : tp_finders().items()) {
    std::string w;
    auto found = find(*this, &w);
    for (const auto& [tid, tp] : found) core_->set_thread_pointer(tid, tp);
    if (!found.empty()) return;
    if (!w.empty()) why = w;
  }
  warnings_.push_back("the core holds no thread pointers (" + why +
                      "): TLS is scanned as plain memory, not named as TLS");
}

Program::Program(const Memory* mem, std::unique_ptr<ModuleSet> mods)
    : mem_(mem), mods_(std::move(mods)), types_(std::make_unique<TypeRegistry>(mods_.get())) {}

std::vector<std::string> Program::warnings() const {
  std::vector<std::string> w;
  if (core_) w = core_->warnings();
  for (const auto& s : mods_->warnings()) w.push_back(s);
  for (const auto& s : warnings_) w.push_back(s);
  return w;
}

Result<Variable> Program::resolve_place(const std::string& spec) const {
  LR_ASSIGN(Variable v, resolve(spec));
  if (v.per_cpu)
    return make_error(
        Errc::kInvalidArgument,
        fmt::format("'{}': {} is a per-CPU variable: name a CPU, as {}:0", spec, v.name, v.name));
  return v;
}

Result<uint64_t> Program::resolve_address(const std::string& spec) const {
  LR_ASSIGN(Variable v, resolve_place(spec));
  return v.addr;
}

Result<Variable> Program::symbol_variable(const SymbolHit& h) const {
  if (!h.sym || !h.module) return make_error(Errc::kNotFound, "no symbol");
  return types().find_variable(h.sym->name + "@" + h.module->basename());
}

}  // namespace lr
