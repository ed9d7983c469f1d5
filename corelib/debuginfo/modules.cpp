#include "corelib/debuginfo/modules.hpp"

#include "corelib/base/fileio.hpp"
#include "corelib/base/names.hpp"
#include "corelib/base/saturate.hpp"

#include <elf.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "corelib/dump/elfcore.hpp"

namespace lr {

namespace {

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dirname_of(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? "." : (s == 0 ? "/" : p.substr(0, s));
}

bool elf_has_debug_info(Elf* e) {
  size_t shstrndx;
  if (elf_getshdrstrndx(e, &shstrndx) != 0) return false;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* n = elf_strptr(e, shstrndx, sh.sh_name);
    if (n && (std::strcmp(n, ".debug_info") == 0 || std::strcmp(n, ".zdebug_info") == 0) &&
        sh.sh_type != SHT_NOBITS && sh.sh_size > 0)
      return true;
  }
  return false;
}

struct OpenElf {
  int fd = -1;
  Elf* elf = nullptr;
  void close() {
    if (elf) elf_end(elf);
    if (fd >= 0) ::close(fd);
    elf = nullptr;
    fd = -1;
  }
};

OpenElf open_elf(const std::string& path) {
  OpenElf o;
  auto fd = open_input(path, "ELF file");  // never waits on a FIFO
  if (!fd.ok()) return o;
  o.fd = fd.value();
  elf_version(EV_CURRENT);
  o.elf = elf_begin(o.fd, ELF_C_READ_MMAP, nullptr);
  if (!o.elf || elf_kind(o.elf) != ELF_K_ELF) o.close();
  return o;
}

std::string file_build_id(Elf* e) {
  const void* p = nullptr;
  ssize_t n = dwelf_elf_gnu_build_id(e, &p);
  return n > 0 ? hex_bytes(static_cast<const uint8_t*>(p), n) : "";
}

// Load bias from the ELF header in memory at `base`, else from the file.
bool bias_from_phdrs(const std::vector<GElf_Phdr>& ph, uint64_t base, uint64_t* bias) {
  for (const auto& p : ph) {
    if (p.p_type == PT_LOAD && p.p_offset == 0) {
      *bias = base - (p.p_vaddr & ~uint64_t{4095});
      return true;
    }
  }
  uint64_t mn = UINT64_MAX;
  for (const auto& p : ph)
    if (p.p_type == PT_LOAD) mn = std::min<uint64_t>(mn, p.p_vaddr - p.p_offset);
  if (mn == UINT64_MAX) return false;
  *bias = base - (mn & ~uint64_t{4095});
  return true;
}

}  // namespace

Module::~Module() {
  if (cfi_ && cfi_owned_) dwarf_cfi_end(cfi_);
  if (dwfl_)
    dwfl_end(dwfl_);  // frees the Dwarf it made
  else if (dwarf_)
    dwarf_end(dwarf_);
  if (debug_elf_ && debug_elf_ != main_elf_) elf_end(debug_elf_);
  if (main_elf_) elf_end(main_elf_);
  if (debug_fd_ >= 0 && debug_fd_ != main_fd_) ::close(debug_fd_);
  if (main_fd_ >= 0) ::close(main_fd_);
}

std::string Module::basename() const {
  auto s = path.rfind('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

// The debug file's ELF only: symbols need no DWARF, and dwarf_begin_elf
// decompresses every compressed .debug_* section (half of `info`'s time on a
// core mapping Debian's libc6-dbg).
Elf* Module::open_debug_elf() {
  if (debug_elf_tried_) return debug_elf_;
  debug_elf_tried_ = true;
  if (debug_path.empty()) return nullptr;
  auto fd = open_input(debug_path, "debuginfo");  // never waits on a FIFO
  if (!fd.ok()) return nullptr;
  debug_fd_ = fd.value();
  elf_version(EV_CURRENT);
  debug_elf_ = elf_begin(debug_fd_, ELF_C_READ_MMAP, nullptr);
  return debug_elf_;
}

Dwarf* Module::dwarf() {
  if (dwarf_tried_) return dwarf_;
  dwarf_tried_ = true;
  if (!open_debug_elf()) return nullptr;
  GElf_Ehdr eh;
  if (gelf_getehdr(debug_elf_, &eh) && eh.e_type == ET_REL) return open_relocated_dwarf();
  dwarf_ = dwarf_begin_elf(debug_elf_, DWARF_C_READ, nullptr);
  return dwarf_;
}

namespace {
// The .ko has its DWARF; never search elsewhere (no debuginfod, no paths).
int no_debuginfo_search(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*,
                        GElf_Word, char**) {
  return -1;
}
}  // namespace

// In a relocatable file every DW_FORM_strp and section reference in
// .debug_info is 0 plus a relocation addend; dwarf_begin_elf would read every
// name as the first string. libdwfl's offline reporting applies them.
Dwarf* Module::open_relocated_dwarf() {
  static const Dwfl_Callbacks cb = {nullptr, no_debuginfo_search, dwfl_offline_section_address,
                                    nullptr};
  dwfl_ = dwfl_begin(&cb);
  if (!dwfl_) return nullptr;
  // dwfl opens the file itself (privately mapped: relocation never writes it).
  Dwfl_Module* dm = dwfl_report_offline(dwfl_, basename().c_str(), debug_path.c_str(), -1);
  dwfl_report_end(dwfl_, nullptr, nullptr);
  Dwarf_Addr bias = 0;
  if (dm) dwarf_ = dwfl_module_getdwarf(dm, &bias);
  return dwarf_;
}

void Module::set_symbols(std::vector<Symbol> syms) {
  syms_ = std::move(syms);
  by_name_.clear();
  syms_loaded_ = true;
  std::sort(syms_.begin(), syms_.end(), [](const Symbol& a, const Symbol& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.name < b.name;
  });
}

namespace {

// Each address symbol of `e`'s symbol tables (functions and objects; not
// TLS offsets, not undefined ones), biased, that `wanted(name)` accepts.
template <typename Wanted, typename Add>
void scan_symbols(Elf* e, uint64_t bias, Wanted wanted, Add add) {
  GElf_Ehdr eh;
  if (gelf_getehdr(e, &eh) && eh.e_type == ET_REL) return;  // values are section offsets
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || sh.sh_entsize == 0) continue;
    size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < n; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(data, static_cast<int>(i), &s)) break;
      int type = GELF_ST_TYPE(s.st_info);
      if (s.st_shndx == SHN_UNDEF || s.st_value == 0) continue;
      if (type != STT_FUNC && type != STT_OBJECT && type != STT_NOTYPE && type != STT_GNU_IFUNC)
        continue;
      const char* name = elf_strptr(e, sh.sh_link, s.st_name);
      if (!name || !*name || !wanted(name)) continue;
      // ARM's and AArch64's mapping symbols ($x code, $d data, "$x.12")
      // mark where code and data start; they name nothing.
      if (type == STT_NOTYPE && name[0] == '$') continue;
      Symbol sym;
      sym.addr = s.st_value + bias;
      sym.size = s.st_size;
      sym.name = name;
      sym.is_func = type == STT_FUNC || type == STT_GNU_IFUNC;
      sym.is_object = type == STT_OBJECT;
      add(std::move(sym));
    }
  }
}

}  // namespace

void Module::load_symbols_from(Elf* e) {
  scan_symbols(
      e, bias, [](const char*) { return true; },
      [&](Symbol&& s) { syms_.push_back(std::move(s)); });
}

const Symbol* Module::find_one_symbol(const std::string& name) {
  if (syms_loaded_) return find_symbol(name);
  auto [it, fresh] = one_symbol_.try_emplace(name);
  if (!fresh) return it->second.get();
  std::vector<Symbol> hits;
  auto want = [&](const char* n) { return name == n; };
  auto add = [&](Symbol&& s) { hits.push_back(std::move(s)); };
  if (Elf* main = open_main_elf()) scan_symbols(main, bias, want, add);
  if (!debug_path.empty() && debug_path != host_path && open_debug_elf())
    scan_symbols(debug_elf_, bias, want, add);
  // As find_symbol chooses: an object before others, then the lowest address.
  auto best = std::min_element(hits.begin(), hits.end(), [](const Symbol& a, const Symbol& b) {
    return a.is_object != b.is_object ? a.is_object : a.addr < b.addr;
  });
  if (best != hits.end()) it->second = std::make_unique<Symbol>(*best);
  return it->second.get();
}

namespace {

bool tls_symbol_in(Elf* e, const std::string& name, uint64_t* offset) {
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || sh.sh_entsize == 0) continue;
    for (size_t i = 0, n = sh.sh_size / sh.sh_entsize; i < n; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(data, static_cast<int>(i), &s)) break;
      if (GELF_ST_TYPE(s.st_info) != STT_TLS || s.st_shndx == SHN_UNDEF) continue;
      const char* nm = elf_strptr(e, sh.sh_link, s.st_name);
      if (nm && name == nm) {
        *offset = s.st_value;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

bool Module::find_tls_symbol(const std::string& name, uint64_t* offset) {
  if (Elf* main = open_main_elf(); main && tls_symbol_in(main, name, offset)) return true;
  return !debug_path.empty() && debug_path != host_path && open_debug_elf() &&
         tls_symbol_in(debug_elf_, name, offset);
}

Elf* Module::open_main_elf() {
  if (!host_path.empty() && !main_elf_) {
    OpenElf o = open_elf(host_path);
    main_fd_ = o.fd;
    main_elf_ = o.elf;
  }
  return main_elf_;
}

Dwarf_CFI* Module::cfi() {
  if (cfi_tried_) return cfi_;
  cfi_tried_ = true;
  if (open_main_elf() && (cfi_ = dwarf_getcfi_elf(main_elf_))) {
    cfi_owned_ = true;
    return cfi_;
  }
  if (Dwarf* d = dwarf()) cfi_ = dwarf_getcfi(d);  // owned by the Dwarf
  return cfi_;
}

const std::vector<Symbol>& Module::symbols() {
  if (types_only) return syms_;
  if (syms_loaded_) return syms_;
  syms_loaded_ = true;
  if (Elf* main = open_main_elf()) load_symbols_from(main);
  if (!debug_path.empty() && debug_path != host_path) {
    if (open_debug_elf()) load_symbols_from(debug_elf_);
  }
  std::sort(syms_.begin(), syms_.end(), [](const Symbol& a, const Symbol& b) {
    return a.addr != b.addr ? a.addr < b.addr
                            : (a.size != b.size ? a.size > b.size : a.name < b.name);
  });
  syms_.erase(std::unique(syms_.begin(), syms_.end(),
                          [](const Symbol& a, const Symbol& b) {
                            return a.addr == b.addr && a.name == b.name;
                          }),
              syms_.end());
  return syms_;
}

namespace {

// A C++ variable's name as its source writes it: "g_list" for
// _Z6g_listB5cxx11 (demangled "g_list[abi:cxx11]": a global of a type with
// an ABI tag, std::list or std::string), "ns::g" for _ZN2ns1gE; "" when the
// symbol is no mangled C++ name or says nothing more.
std::string cxx_variable_name(const Symbol& s) {
  if (!s.is_object || s.name.rfind("_Z", 0) != 0) return "";
  std::string d = demangle(s.name);
  for (size_t at; (at = d.find("[abi:")) != std::string::npos;) {
    const size_t end = d.find(']', at);
    if (end == std::string::npos) return "";
    d.erase(at, end + 1 - at);
  }
  return d == s.name || d.find_first_of("()<> ") != std::string::npos ? "" : d;
}

}  // namespace

const Symbol* Module::find_symbol(const std::string& name) {
  const auto& syms = symbols();
  if (by_name_.empty() && !syms.empty()) {
    by_name_.reserve(syms.size());
    for (size_t i = 0; i < syms.size(); ++i) {
      auto [it, fresh] = by_name_.emplace(syms[i].name, i);
      if (!fresh && syms[i].is_object && !syms[it->second].is_object) it->second = i;
    }
    // Mangled variables by their source names too, never over a real name.
    for (size_t i = 0; i < syms.size(); ++i)
      if (std::string n = cxx_variable_name(syms[i]); !n.empty()) by_name_.emplace(n, i);
  }
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &syms[it->second];
}

std::string SymbolHit::format() const {
  if (!module) return "";
  if (sym) {
    if (offset == 0) return fmt::format("{} [{}]", sym->name, module->basename());
    return fmt::format("{}+{:#x} [{}]", sym->name, offset, module->basename());
  }
  return fmt::format("{}+{:#x}", module->basename(), offset);
}

std::unique_ptr<ModuleSet> ModuleSet::empty(const DebugOptions& opts) {
  auto s = std::make_unique<ModuleSet>();
  s->opts_ = opts;
  return s;
}

Module* ModuleSet::add(const std::string& path, const std::string& host_path, uint64_t base,
                       uint64_t end, uint64_t bias, const std::string& build_id, bool is_exe) {
  auto m = std::make_unique<Module>();
  m->path = path;
  m->host_path = host_path;
  m->base = base;
  m->end = end;
  m->bias = bias;
  m->build_id = build_id;
  m->is_exe = is_exe;
  find_debuginfo(*m);
  mods_.push_back(std::move(m));
  return mods_.back().get();
}

Module* ModuleSet::add_debug(const std::string& path, const std::string& debug_path,
                             const std::string& how) {
  auto m = std::make_unique<Module>();
  m->path = path;
  m->debug_path = debug_path;
  m->debug_how = how;
  mods_.push_back(std::move(m));
  return mods_.back().get();
}

Module* ModuleSet::add_types(const std::string& file) {
  Module* m = add_debug(file, file, "types file");
  m->types_only = true;
  return m;
}

void ModuleSet::find_debuginfo(Module& m) {
  std::vector<std::string> looked;
  auto accept = [&](const std::string& cand, const std::string& how) -> bool {
    if (!file_exists(cand)) {
      looked.push_back(cand);
      return false;
    }
    OpenElf o = open_elf(cand);
    if (!o.elf) {
      looked.push_back(cand + " (not ELF)");
      return false;
    }
    bool dbg = elf_has_debug_info(o.elf);
    std::string bid = file_build_id(o.elf);
    o.close();
    if (!dbg) {
      looked.push_back(cand + " (no .debug_info)");
      return false;
    }
    if (!m.build_id.empty() && !bid.empty() && bid != m.build_id) {
      looked.push_back(cand + " (build-id " + bid + " differs)");
      return false;
    }
    m.debug_path = cand;
    m.debug_how = how;
    return true;
  };

  // 1. Embedded in the file itself.
  std::string debuglink;
  if (!m.host_path.empty()) {
    OpenElf o = open_elf(m.host_path);
    if (o.elf) {
      if (m.build_id.empty()) m.build_id = file_build_id(o.elf);
      bool dbg = elf_has_debug_info(o.elf);
      GElf_Word crc = 0;
      const char* dl = dwelf_elf_gnu_debuglink(o.elf, &crc);
      if (dl) debuglink = dl;
      o.close();
      if (dbg) {
        m.debug_path = m.host_path;
        m.debug_how = "embedded";
        return;
      }
      looked.push_back(m.host_path + " (no .debug_info)");
    }
  }
  std::vector<std::string> dirs = opts_.debug_dirs;
  dirs.push_back(opts_.sysroot + "/usr/lib/debug");
  // 2. Build-id directories.
  if (m.build_id.size() > 2) {
    for (const auto& d : dirs) {
      std::string cand =
          d + "/.build-id/" + m.build_id.substr(0, 2) + "/" + m.build_id.substr(2) + ".debug";
      if (accept(cand, "build-id dir " + d)) return;
    }
  }
  // 3. .gnu_debuglink next to the file, in .debug/, and under each debug dir.
  if (!debuglink.empty()) {
    std::string dir = dirname_of(m.host_path.empty() ? m.path : m.host_path);
    std::string pdir = dirname_of(m.path);
    std::vector<std::string> cands = {dir + "/" + debuglink, dir + "/.debug/" + debuglink};
    for (const auto& d : dirs) {
      cands.push_back(d + pdir + "/" + debuglink);
      cands.push_back(d + "/" + debuglink);
    }
    for (const auto& c : cands)
      if (c != m.host_path && accept(c, "debuglink " + c)) return;
  }
  // 4. debuginfod, only when the user configured it.
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  if (opts_.use_debuginfod && urls && *urls && m.build_id.size() >= 2) {
    if (debuginfod_client* c = debuginfod_begin()) {
      char* path = nullptr;
      int fd = debuginfod_find_debuginfo(
          c, reinterpret_cast<const unsigned char*>(m.build_id.c_str()), 0, &path);
      if (fd >= 0) {
        ::close(fd);
        std::string p = path ? path : "";
        free(path);
        debuginfod_end(c);
        if (!p.empty() && accept(p, "debuginfod")) return;
      } else {
        looked.push_back(fmt::format("debuginfod ({}): {}", urls, strerror(-fd)));
        debuginfod_end(c);
      }
    }
  } else {
    looked.push_back("debuginfod (DEBUGINFOD_URLS not set)");
  }
  std::string looked_s;
  for (const auto& l : looked) looked_s += (looked_s.empty() ? "" : ", ") + l;
  m.debug_missing = fmt::format("no debuginfo for {} (build-id {}); looked in: {}", m.path,
                                m.build_id.empty() ? "unknown" : m.build_id, looked_s);
}

std::unique_ptr<ModuleSet> ModuleSet::from_core(const CoreFile& core, const DebugOptions& opts) {
  auto set = empty(opts);
  uint64_t entry = core.auxv_value(AT_ENTRY);
  // Extent of each file's mappings.
  std::map<std::string, std::pair<uint64_t, uint64_t>> extent;
  for (const auto& r : core.mapped_ranges()) {
    auto [it, fresh] = extent.emplace(r.path, std::make_pair(r.start, r.end));
    if (!fresh) {
      it->second.first = std::min(it->second.first, r.start);
      it->second.second = std::max(it->second.second, r.end);
    }
  }
  // Only ELF objects with an ELF header mapping (offset 0) are modules.
  // (Looked up, not rescanned per file: cores may list 200,000 mappings.)
  std::set<std::string_view> with_hdr;
  for (const auto& r : core.mapped_ranges())
    if (r.file_offset == 0) with_hdr.insert(r.path);
  for (const auto& fi : core.mapped_files()) {
    if (fi.status == MappedFileInfo::Status::kNotElf) continue;
    if (!with_hdr.count(fi.path)) continue;
    std::vector<GElf_Phdr> ph;
    // Prefer program headers from the core's memory; fall back to the file.
    Elf64_Ehdr eh;
    bool elf_in_mem = core.read(fi.base, &eh, sizeof eh).ok() &&
                      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_phnum < 512 &&
                      eh.e_phentsize == sizeof(Elf64_Phdr);
    if (elf_in_mem) {
      std::vector<Elf64_Phdr> raw(eh.e_phnum);
      if (core.read(fi.base + eh.e_phoff, raw.data(), raw.size() * sizeof(Elf64_Phdr)).ok())
        for (auto& p : raw) ph.push_back(p);
    }
    bool is_elf_file = false;
    // A file the core's mapping check found missing is not tried again:
    // a core from another machine may name thousands.
    if (ph.empty() && !fi.host_path.empty() &&
        !(fi.looked_up && fi.status == MappedFileInfo::Status::kNoFile)) {
      OpenElf o = open_elf(fi.host_path);
      if (o.elf) {
        is_elf_file = true;
        size_t n = 0;
        elf_getphdrnum(o.elf, &n);
        for (size_t i = 0; i < n; ++i) {
          GElf_Phdr p;
          if (gelf_getphdr(o.elf, static_cast<int>(i), &p)) ph.push_back(p);
        }
        o.close();
      }
    }
    if (!elf_in_mem && !is_elf_file) continue;
    uint64_t bias = 0;
    if (!bias_from_phdrs(ph, fi.base, &bias)) continue;
    auto ext = extent[fi.path];
    bool is_exe = entry && entry >= ext.first && entry < ext.second;
    std::string bid = fi.core_build_id.empty() ? fi.disk_build_id : fi.core_build_id;
    std::string host = fi.host_path;
    if (fi.status == MappedFileInfo::Status::kMismatch ||
        fi.status == MappedFileInfo::Status::kNoFile) {
      // An executable given in place of the core's was warned about when
      // the core was opened, by its own name; other files by the name on
      // disk, which may not be the core's.
      bool given_exe = is_exe && fi.host_path != fi.path;
      if (!given_exe)
        set->warnings_.push_back(
            fmt::format("{}{}: {}: symbols and types from it are not used", fi.host_path,
                        fi.host_path == fi.path ? "" : " (mapped as " + fi.path + ")", fi.detail));
      host.clear();
    }
    Module* m = set->add(fi.path, host, ext.first, ext.second, bias, bid, is_exe);
    for (const auto& p : ph)
      if (p.p_type == PT_LOAD)
        m->mem_end = std::max(m->mem_end, sat_add(bias, sat_add(p.p_vaddr, p.p_memsz)));
  }
  // Executables come first: their symbols win lookups by name.
  std::stable_sort(set->mods_.begin(), set->mods_.end(),
                   [](const auto& a, const auto& b) { return a->is_exe > b->is_exe; });
  // Cross-check with the dynamic linker's own list; it also names modules
  // that NT_FILE lacks (truncated notes).
  if (Module* exe = set->exe()) {
    auto lm = read_link_map(core, exe->base, &set->warnings_);
    for (const auto& [laddr, name] : lm) {
      if (name.empty()) continue;
      Module* known = nullptr;
      // The dynamic linker names what it opened (/lib/x86_64-*-gnu/libacl.so.1
      // under usrmerge, through the soname link), NT_FILE the mapped file
      // (/usr/lib/x86_64-*-gnu/libacl.so.1.1.2301): a non-zero load bias
      // identifies the module, as no two objects are loaded at one address.
      for (auto& m : set->mods_)
        if (m->path == name || (laddr != 0 && m->bias == laddr)) known = m.get();
      if (known) {
        if (known->bias != laddr)
          set->warnings_.push_back(fmt::format(
              "{}: link_map says load bias {:#x}, mappings say {:#x}", name, laddr, known->bias));
        continue;
      }
      std::string host = opts.sysroot.empty() ? name : opts.sysroot + "/" + name;
      Module* m = set->add(name, file_exists(host) ? host : "", laddr, laddr, laddr, "", false);
      m->from_link_map = true;
    }
  }
  return set;
}

Module* ModuleSet::exe() const {
  for (const auto& m : mods_)
    if (m->is_exe) return m.get();
  return nullptr;
}

Module* ModuleSet::module_at(uint64_t addr) const {
  for (const auto& m : mods_)
    if (addr >= m->base && addr < m->end) return m.get();
  return nullptr;
}

Module* ModuleSet::by_name(const std::string& name) const {
  for (const auto& m : mods_)
    if (m->path == name || m->basename() == name) return m.get();
  for (const auto& m : mods_)
    if (m->basename().rfind(name, 0) == 0) return m.get();
  return nullptr;
}

Result<std::pair<Module*, const Symbol*>> ModuleSet::lookup(const std::string& spec) const {
  std::string name = spec, mod;
  auto at = spec.find('@');
  if (at != std::string::npos) {
    name = spec.substr(0, at);
    mod = spec.substr(at + 1);
  }
  for (const auto& m : mods_) {
    if (!mod.empty() && m->path != mod && m->basename() != mod && m->basename().rfind(mod, 0) != 0)
      continue;
    if (const Symbol* s = m->find_symbol(name)) return std::make_pair(m.get(), s);
  }
  std::vector<std::string> names;  // for "did you mean": the data symbols searched
  for (const auto& m : mods_) {
    if (!mod.empty() && m->path != mod && m->basename() != mod && m->basename().rfind(mod, 0) != 0)
      continue;
    for (const auto& s : m->symbols())
      if (s.is_object) names.push_back(s.name);
  }
  return make_error(Errc::kNotFound,
                    fmt::format("symbol '{}' not found{}{}", name,
                                mod.empty() ? "" : " in module " + mod, did_you_mean(name, names)));
}

bool ModuleSet::defines(const std::string& name) const {
  for (const auto& m : mods_)
    if (m->find_one_symbol(name)) return true;
  return false;
}

SymbolHit ModuleSet::symbolize(uint64_t addr) const {
  SymbolHit h;
  h.module = module_at(addr);
  if (!h.module) return bss_symbol(addr);
  const auto& syms = h.module->symbols();
  auto it = std::upper_bound(syms.begin(), syms.end(), addr,
                             [](uint64_t a, const Symbol& s) { return a < s.addr; });
  // Walk back over symbols at or below addr; take the first whose extent
  // contains addr. A symbol whose size does not reach addr (unsized ones
  // included: _fini, assembly labels) is rejected rather than reporting a
  // bogus nearest-symbol offset; module+offset is the honest answer then.
  int budget = 64;
  while (it != syms.begin() && budget-- > 0) {
    --it;
    if (addr < it->addr + std::max<uint64_t>(it->size, 1)) {
      h.sym = &*it;
      h.offset = addr - it->addr;
      return h;
    }
  }
  h.offset = addr - h.module->bias;
  return h;
}

// A variable in .bss past its module's last file mapping (an anonymous
// mapping the loader added): named only when a symbol of the module whose
// PT_LOADs cover `addr` holds it, never as module+offset (the extent comes
// from the file's headers, not from what the core maps).
SymbolHit ModuleSet::bss_symbol(uint64_t addr) const {
  SymbolHit h;
  for (const auto& m : mods_) {
    if (addr < m->end || addr >= m->mem_end) continue;
    const auto& syms = m->symbols();
    auto it = std::upper_bound(syms.begin(), syms.end(), addr,
                               [](uint64_t a, const Symbol& s) { return a < s.addr; });
    if (it == syms.begin()) continue;
    --it;
    if (it->size && addr - it->addr < it->size) {
      h.module = m.get(), h.sym = &*it, h.offset = addr - it->addr;
      return h;
    }
  }
  return h;
}

std::vector<std::pair<uint64_t, std::string>> read_link_map(const Memory& mem, uint64_t exe_base,
                                                            std::vector<std::string>* warnings) {
  std::vector<std::pair<uint64_t, std::string>> out;
  Elf64_Ehdr eh;
  if (!mem.read(exe_base, &eh, sizeof eh).ok() || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_phnum > 512 || eh.e_phentsize != sizeof(Elf64_Phdr))
    return out;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!mem.read(exe_base + eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr)).ok()) return out;
  uint64_t bias = 0;
  std::vector<GElf_Phdr> gph(ph.begin(), ph.end());
  if (!bias_from_phdrs(gph, exe_base, &bias)) return out;
  uint64_t dyn = 0;
  for (auto& p : ph)
    if (p.p_type == PT_DYNAMIC) dyn = p.p_vaddr + bias;
  if (!dyn) return out;
  uint64_t rdebug = 0;
  for (int i = 0; i < 1024; ++i) {
    Elf64_Dyn d;
    if (!mem.read(dyn + i * sizeof d, &d, sizeof d).ok() || d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_DEBUG) rdebug = d.d_un.d_ptr;
  }
  if (!rdebug) return out;
  auto lm = mem.read_u64(rdebug + offsetof(struct r_debug, r_map));
  if (!lm.ok()) return out;
  std::set<uint64_t> seen;
  uint64_t cur = lm.value();
  while (cur && out.size() < 4096) {
    if (!seen.insert(cur).second) {
      if (warnings) warnings->push_back(fmt::format("link_map list has a cycle at {:#x}", cur));
      break;
    }
    struct link_map l;
    if (!mem.read(cur, &l, sizeof l).ok()) {
      if (warnings) warnings->push_back(fmt::format("link_map entry {:#x} not readable", cur));
      break;
    }
    std::string name;
    if (l.l_name) {
      auto s = mem.read_cstring(reinterpret_cast<uint64_t>(l.l_name), 4096);
      if (s.ok()) name = s.value();
    }
    out.emplace_back(l.l_addr, name);
    cur = reinterpret_cast<uint64_t>(l.l_next);
  }
  return out;
}

}  // namespace lr
