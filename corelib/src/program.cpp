#include "leakref/program.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "leakref/fileio.hpp"

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
    if (!elf)
      return make_error(Errc::kBadFormat, opts.exe + ": executable is not an ELF file");
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
  return p;
}

Program::Program(const Memory* mem, std::unique_ptr<ModuleSet> mods)
    : mem_(mem), mods_(std::move(mods)), types_(std::make_unique<TypeRegistry>(mods_.get())) {}

std::vector<std::string> Program::warnings() const {
  std::vector<std::string> w;
  if (core_) w = core_->warnings();
  for (const auto& s : mods_->warnings()) w.push_back(s);
  return w;
}

Result<Variable> Program::resolve(const std::string& raw) const {
  std::string spec = raw;
  bool deref = false;
  if (!spec.empty() && spec[0] == '*') {
    deref = true;
    spec = spec.substr(1);
  }
  uint64_t add = 0;
  if (auto plus = spec.find('+'); plus != std::string::npos) {
    if (!parse_u64(spec.substr(plus + 1), &add))
      return make_error(Errc::kInvalidArgument, fmt::format("bad offset in '{}'", raw));
    spec = spec.substr(0, plus);
  }
  Variable v;
  if (!parse_u64(spec, &v.addr)) {
    auto found = types_->find_variable(spec);
    size_t dot = spec.find('.');
    if (!found.ok() && found.error().code == Errc::kNotFound && dot != std::string::npos &&
        dot > 0) {
      // SYMBOL.member.path: the member's address inside the variable.
      LR_ASSIGN(Variable base, types_->find_variable(spec.substr(0, dot)));
      if (!base.type)
        return make_error(Errc::kNotFound,
                          fmt::format("'{}' has no type to find '{}' in", spec.substr(0, dot),
                                      spec.substr(dot + 1)));
      LR_ASSIGN(FieldLoc loc, resolve_path(base.type, spec.substr(dot + 1)));
      base.addr += loc.offset;
      base.type = loc.type;
      found = base;
    }
    uint64_t host_addr = 0;
    if (!found.ok() && found.error().code == Errc::kNotFound && fallback_ &&
        fallback_(fallback_ctx_, spec.c_str(), &host_addr)) {
      Variable hv;  // known to the host only: an address without a type
      hv.name = spec;
      hv.addr = host_addr;
      found = hv;
    }
    LR_ASSIGN(v, std::move(found));
  }
  if (add) v.type = nullptr;  // an offset lands inside the object: type unknown
  v.addr += add;
  if (deref) {
    LR_ASSIGN(v.addr, mem_->read_u64(v.addr));
    const Type* t = v.type ? v.type->strip() : nullptr;
    v.type = t && t->kind == TypeKind::kPointer ? t->target : nullptr;
  }
  return v;
}

Result<uint64_t> Program::resolve_address(const std::string& spec) const {
  LR_ASSIGN(Variable v, resolve(spec));
  return v.addr;
}

}  // namespace lr
