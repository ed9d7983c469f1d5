// The mapped files of a core that lists none (no NT_FILE note: QEMU's
// user-mode cores, as qemu-aarch64 writes them), rebuilt from what the
// dynamic linker kept in memory: the executable given with --exe, placed by
// the auxiliary vector, then every object on its r_debug link_map, read from
// the sysroot. Such a core also leaves out the read-only pages that hold
// each file's build-id note, so a file is matched to the core by its dynamic
// section instead (the one part of every object the core does hold).
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "corelib/base/fileio.hpp"
#include "corelib/dump/elfcore.hpp"
#include "fmt/format.h"

namespace lr {

namespace {

constexpr size_t kMaxObjects = 4096;        // link_map entries followed
constexpr uint64_t kMaxDynamic = 64 << 10;  // bytes of a dynamic section compared

// What leakref needs of an object on disk: its machine, entry point, load
// segments and dynamic section.
struct ObjectFile {
  uint16_t machine = 0;
  uint64_t entry = 0;
  uint64_t phdr_vaddr = 0;  // where the program headers are loaded (0: not loaded)
  std::vector<GElf_Phdr> loads;
  uint64_t dyn_vaddr = 0;
  std::vector<Elf64_Dyn> dynamic;
  std::string interp;  // PT_INTERP: the dynamic linker it names
};

Result<ObjectFile> read_object(const std::string& path) {
  LR_ASSIGN(int raw, open_input(path, "object file"));
  Fd fd(raw);
  elf_version(EV_CURRENT);
  Elf* e = elf_begin(fd.fd, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr eh;
  if (!e || !gelf_getehdr(e, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64) {
    if (e) elf_end(e);
    return make_error(Errc::kBadFormat, fmt::format("{}: not a 64-bit ELF object", path));
  }
  ObjectFile o;
  o.machine = eh.e_machine;
  o.entry = eh.e_entry;
  size_t n = 0;
  elf_getphdrnum(e, &n);
  GElf_Phdr dyn{};
  for (size_t i = 0; i < n && i < 512; ++i) {
    GElf_Phdr p;
    if (!gelf_getphdr(e, static_cast<int>(i), &p)) continue;
    if (p.p_type == PT_INTERP && p.p_filesz > 1 && p.p_filesz < 4096) {
      o.interp.resize(p.p_filesz);
      if (::pread(fd.fd, o.interp.data(), p.p_filesz, static_cast<off_t>(p.p_offset)) !=
          static_cast<ssize_t>(p.p_filesz))
        o.interp.clear();
      o.interp.resize(strnlen(o.interp.c_str(), o.interp.size()));
    }
    if (p.p_type == PT_LOAD) o.loads.push_back(p);
    if (p.p_type == PT_DYNAMIC) dyn = p;
    if (p.p_type == PT_LOAD && eh.e_phoff >= p.p_offset && eh.e_phoff < p.p_offset + p.p_filesz)
      o.phdr_vaddr = p.p_vaddr + (eh.e_phoff - p.p_offset);
  }
  elf_end(e);
  o.dyn_vaddr = dyn.p_vaddr;
  const uint64_t len = std::min<uint64_t>(dyn.p_filesz, kMaxDynamic) / sizeof(Elf64_Dyn);
  o.dynamic.resize(len);
  if (len &&
      ::pread(fd.fd, o.dynamic.data(), len * sizeof(Elf64_Dyn), static_cast<off_t>(dyn.p_offset)) !=
          static_cast<ssize_t>(len * sizeof(Elf64_Dyn)))
    o.dynamic.clear();
  return o;
}

// Whether the dynamic section in memory at `at` is the file's: the same tags
// in the same order, each value the file's, or the file's plus the load
// bias (the dynamic linker relocates some in place), or DT_DEBUG's (set at
// run time). Different builds differ in their string and hash table offsets.
bool dynamic_matches(const Memory& mem, uint64_t at, const ObjectFile& o, uint64_t bias) {
  if (o.dynamic.empty()) return false;
  for (size_t i = 0; i < o.dynamic.size(); ++i) {
    Elf64_Dyn d;
    if (!mem.read(at + i * sizeof d, &d, sizeof d).ok()) return false;
    const Elf64_Dyn& f = o.dynamic[i];
    if (d.d_tag != f.d_tag) return false;
    if (f.d_tag == DT_NULL) return true;
    if (f.d_tag != DT_DEBUG && d.d_un.d_val != f.d_un.d_val && d.d_un.d_val != f.d_un.d_val + bias)
      return false;
  }
  return true;
}

// The r_debug the executable's DT_DEBUG points at, read from memory.
uint64_t find_r_debug(const Memory& mem, uint64_t dyn) {
  for (uint64_t i = 0; i < 1024; ++i) {
    Elf64_Dyn d;
    if (!mem.read(dyn + i * sizeof d, &d, sizeof d).ok() || d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_DEBUG) return d.d_un.d_ptr;
  }
  return 0;
}

// The file-backed pages of `o`'s load segments, loaded with `bias`.
void add_ranges(std::vector<MappedRange>& out, const std::string& path, const ObjectFile& o,
                uint64_t bias, uint64_t page) {
  for (const auto& p : o.loads) {
    MappedRange r;
    r.start = (bias + p.p_vaddr) & ~(page - 1);
    r.end = (bias + p.p_vaddr + p.p_filesz + page - 1) & ~(page - 1);
    r.file_offset = p.p_offset & ~(page - 1);
    r.path = path;
    if (r.end > r.start) out.push_back(std::move(r));
  }
}

}  // namespace

// One object of the link map: its ranges, when its file is there and is for
// this core's machine; whether its dynamic section is the one at `ld`.
void CoreFile::link_map_object(const std::string& name, uint64_t bias, uint64_t ld,
                               const std::string& sysroot) {
  const std::string host = sysroot + name;  // names are absolute (checked by the caller)
  auto o = read_object(host);
  if (!o.ok()) {
    warnings_.push_back(
        fmt::format("{} (on the dynamic linker's list): {}", name, o.error().message));
    return;
  }
  if (o.value().machine != machine_) {
    warnings_.push_back(fmt::format("{}: an object for machine {}, the core is {}: not used", host,
                                    o.value().machine, arch_name(machine_)));
    return;
  }
  add_ranges(ranges_, name, o.value(), bias, page_size());
  // The dynamic linker's entry is placed by AT_BASE (`ld` 0): its dynamic
  // section is where its file says.
  if (!ld) ld = bias + o.value().dyn_vaddr;
  if (dynamic_matches(*this, ld, o.value(), bias)) dynamic_matched_.insert(name);
}

void CoreFile::ranges_from_link_map(const CoreOptions& opts) {
  if (!ranges_.empty() || has_vmcoreinfo_ || threads_.empty()) return;
  if (opts.exe_path.empty()) {
    no_files_why_ = fmt::format(
        "{}: the core lists no mapped files (it has no NT_FILE note, as QEMU's user-mode cores): "
        "name its executable (and the tree its libraries came from) to find them",
        path_);
    warnings_.push_back(no_files_why_);
    return;
  }
  if (!auxv_value(AT_PHDR) || !auxv_value(AT_ENTRY)) {
    no_files_why_ = fmt::format(
        "{}: the core lists no mapped files and holds no auxiliary vector to place its "
        "executable by (its notes are cut off or missing)",
        path_);
    return warnings_.push_back(no_files_why_);
  }
  auto exe = read_object(opts.exe_path);
  if (!exe.ok()) {
    no_files_why_ = exe.error().message;
    return warnings_.push_back(no_files_why_);
  }
  const ObjectFile& x = exe.value();
  const uint64_t at_phdr = auxv_value(AT_PHDR), at_entry = auxv_value(AT_ENTRY);
  const uint64_t bias = at_phdr - x.phdr_vaddr;
  if (x.machine != machine_ || !x.phdr_vaddr || at_entry != x.entry + bias) {
    no_files_why_ = fmt::format(
        "{}: not the executable of {} (its machine {}, the core's {}; entry {:#x}, the core's "
        "{:#x})",
        opts.exe_path, path_, arch_name(x.machine), arch_name(machine_), x.entry + bias, at_entry);
    warnings_.push_back(no_files_why_);
    return;
  }
  add_ranges(ranges_, opts.exe_path, x, bias, page_size());
  if (dynamic_matches(*this, bias + x.dyn_vaddr, x, bias)) dynamic_matched_.insert(opts.exe_path);
  // The dynamic linker's own entry names it by a string in the executable's
  // read-only pages, which the core lacks: it is placed by AT_BASE instead.
  const uint64_t ld_base = auxv_value(AT_BASE);
  if (ld_base && x.interp.size() > 1 && x.interp[0] == '/')
    link_map_object(x.interp, ld_base, 0, opts.sysroot);
  uint64_t lm = 0;
  if (uint64_t rd = x.dyn_vaddr ? find_r_debug(*this, bias + x.dyn_vaddr) : 0)
    if (auto v = read_u64(rd + offsetof(struct r_debug, r_map)); v.ok()) lm = v.value();
  std::set<uint64_t> seen;
  for (size_t n = 0; lm && n < kMaxObjects && seen.insert(lm).second; ++n) {
    struct link_map l;
    if (!read(lm, &l, sizeof l).ok()) break;
    auto name = l.l_name ? read_cstring(reinterpret_cast<uint64_t>(l.l_name), 4096)
                         : Result<std::string>(std::string());
    // The executable's own entry has no name; the vDSO has no file.
    if (name.ok() && !name.value().empty() && name.value()[0] == '/' && l.l_addr != ld_base)
      link_map_object(name.value(), l.l_addr, reinterpret_cast<uint64_t>(l.l_ld), opts.sysroot);
    lm = reinterpret_cast<uint64_t>(l.l_next);
  }
  std::stable_sort(ranges_.begin(), ranges_.end(),
                   [](const MappedRange& a, const MappedRange& b) { return a.start < b.start; });
}

}  // namespace lr
