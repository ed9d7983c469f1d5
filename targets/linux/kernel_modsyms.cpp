// Kernel modules' own symbols and types. A loaded module's symbols are read
// from the dump (struct module's core_kallsyms: a copy of its ELF symbol
// table with relocated values, kept for /proc/kallsyms), so module globals
// resolve with or without the module's files; its types come from the .ko
// given with --ko, checked against the loaded module first (its symbols'
// sizes, and its build-id note as loaded), whose loaded sections also place
// the symbols kallsyms lacks.
#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "kernel_internal.hpp"
#include "targets/linux/kernel.hpp"

namespace lr {
namespace {

// Bounds on what a module's kallsyms may claim (a corrupt dump must not make
// leakref read gigabytes): the largest modules have a few 10,000 symbols.
constexpr uint64_t kMaxModuleSyms = 1u << 20;
constexpr uint64_t kMaxModules = 1u << 16;

struct KoFile {
  int fd = -1;
  Elf* elf = nullptr;
  ~KoFile() {
    if (elf) elf_end(elf);
    if (fd >= 0) ::close(fd);
  }
};

// The named section's data; null when absent or NOBITS (stripped debug file).
Elf_Data* section_data(Elf* e, const char* want) {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(e, &shstrndx) != 0) return nullptr;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
    GElf_Shdr sh;
    const char* n = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : nullptr;
    if (n && std::strcmp(n, want) == 0 && sh.sh_type != SHT_NOBITS)
      return elf_getdata(scn, nullptr);
  }
  return nullptr;
}

// The module name the kernel will use: `.modinfo`'s name= (modpost writes
// it), else the file name with '-' made '_' as the kernel does.
std::string ko_module_name(Elf* e, const std::string& path) {
  if (Elf_Data* d = section_data(e, ".modinfo"); d && d->d_buf) {
    const char* p = static_cast<const char*>(d->d_buf);
    for (size_t i = 0; i < d->d_size;) {
      size_t len = strnlen(p + i, d->d_size - i);
      std::string_view kv(p + i, len);
      if (kv.rfind("name=", 0) == 0) return std::string(kv.substr(5));
      i += len + 1;
    }
  }
  std::string base = path.substr(path.rfind('/') + 1);
  if (auto dot = base.find(".ko"); dot != std::string::npos) base.resize(dot);
  std::replace(base.begin(), base.end(), '-', '_');
  return base;
}

// Sized object and function symbols of the .ko: name -> sizes (static
// functions of one name in several files: fat has two init_once).
using SizeMap = std::unordered_map<std::string, std::vector<uint64_t>>;
SizeMap ko_sizes(Elf* e) {
  SizeMap out;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d) continue;
    for (size_t i = 0, n = sh.sh_size / sh.sh_entsize; i < n; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(d, static_cast<int>(i), &s)) break;
      int t = GELF_ST_TYPE(s.st_info);
      if (s.st_shndx == SHN_UNDEF || s.st_size == 0 || (t != STT_OBJECT && t != STT_FUNC)) continue;
      if (const char* nm = elf_strptr(e, sh.sh_link, s.st_name); nm && *nm)
        out[nm].push_back(s.st_size);
    }
  }
  for (auto& [n, v] : out) std::sort(v.begin(), v.end());
  return out;
}

// The build-id note of a .ko, or of a loaded module read at `at` (its
// .note.gnu.build-id section): hex, "" when there is none.
std::string note_build_id(const uint8_t* p, size_t n) {
  if (n < 16) return "";
  uint32_t namesz, descsz, type;
  std::memcpy(&namesz, p, 4);
  std::memcpy(&descsz, p + 4, 4);
  std::memcpy(&type, p + 8, 4);
  const size_t desc = 12 + ((uint64_t{namesz} + 3) & ~uint64_t{3});
  if (type != NT_GNU_BUILD_ID || namesz != 4 || descsz == 0 || descsz > 64 || desc + descsz > n)
    return "";
  return fmt::format("{:02x}", fmt::join(p + desc, p + desc + descsz, ""));
}

std::string ko_build_id(Elf* e) {
  Elf_Data* d = section_data(e, ".note.gnu.build-id");
  return d && d->d_buf ? note_build_id(static_cast<const uint8_t*>(d->d_buf), d->d_size) : "";
}

// The loaded module must be this file's build where both carry a build-id.
Result<void> check_build_id(const Memory& mem, Elf* e, const std::string& ko,
                            const std::string& name, const std::vector<kint::ModSection>& sects) {
  const std::string file = ko_build_id(e);
  for (const auto& s : sects) {
    if (s.name != ".note.gnu.build-id" || file.empty()) continue;
    uint8_t note[16 + 64] = {};
    if (!mem.read(s.addr, note, sizeof note).ok()) return {};
    const std::string dump = note_build_id(note, sizeof note);
    if (!dump.empty() && dump != file)
      return make_error(Errc::kBadFormat,
                        fmt::format("{} does not match the loaded module {}: build-id {} in the "
                                    "file, {} in the dump",
                                    ko, name, file, dump));
  }
  return {};
}

// kallsyms' type letter for a symbol of section `sec` (lower case: the
// module's own).
char section_letter(const std::string& sec) {
  for (const auto& [prefix, c] :
       {std::pair{".bss", 'b'}, {".data", 'd'}, {".rodata", 'r'}, {".text", 't'}})
    if (sec.rfind(prefix, 0) == 0) return c;
  return '?';
}

// The .ko's object and function symbols kallsyms lacks, placed at their
// section's load address (kallsyms keeps no data symbols without
// CONFIG_KALLSYMS_ALL); each one's type letter goes to `letters`.
void place_ko_symbols(Elf* e, const std::vector<kint::ModSection>& sects, std::vector<Symbol>* syms,
                      std::string* letters) {
  std::unordered_map<std::string, uint64_t> at;
  for (const auto& s : sects) at.emplace(s.name, s.addr);
  std::unordered_set<std::string> known;
  for (const Symbol& s : *syms) known.insert(s.name);
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(e, &shstrndx) != 0) return;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    for (size_t i = 0, n = d ? sh.sh_size / sh.sh_entsize : 0; i < n; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(d, static_cast<int>(i), &s)) break;
      const int t = GELF_ST_TYPE(s.st_info);
      if ((t != STT_OBJECT && t != STT_FUNC) || s.st_shndx == SHN_UNDEF ||
          s.st_shndx >= SHN_LORESERVE)
        continue;
      const char* nm = elf_strptr(e, sh.sh_link, s.st_name);
      GElf_Shdr ts;
      Elf_Scn* in = elf_getscn(e, s.st_shndx);
      const char* sec = in && gelf_getshdr(in, &ts) ? elf_strptr(e, shstrndx, ts.sh_name) : nullptr;
      // Init sections are freed once the module is live: their addresses
      // may be another module's now (kallsyms drops them too).
      if (!nm || !*nm || !sec || known.count(nm) || std::strncmp(sec, ".init", 5) == 0) continue;
      auto loaded = at.find(sec);
      if (loaded == at.end()) continue;
      Symbol sym;
      sym.addr = loaded->second + s.st_value;
      sym.size = s.st_size;
      sym.name = nm;
      sym.is_func = t == STT_FUNC;
      sym.is_object = t == STT_OBJECT;
      known.insert(nm);
      syms->push_back(std::move(sym));
      letters->push_back(section_letter(sec));
    }
  }
}

}  // namespace

// Every loaded module (name, struct module address), from the `modules` list.
Result<std::vector<std::pair<std::string, uint64_t>>> KernelTarget::loaded_modules() {
  if (loaded_.has_value()) return *loaded_;
  LR_ASSIGN(kint::Layout mod, kint::Layout::of(*this, "module"));
  LR_ASSIGN(uint64_t m_list, mod.off("list"));
  LR_ASSIGN(auto m_name, mod.bytes("name"));
  LR_ASSIGN(uint64_t head, kint::ksymbol(*this, "modules"));
  KernelLimits lim;
  lim.max_objects = kMaxModules;
  std::vector<std::pair<std::string, uint64_t>> out;
  LR_ASSIGN(std::vector<uint64_t> mods,
            kint::root_objects(mem(), head, m_list, lim, "modules", &warnings_, nullptr));
  for (uint64_t m : mods) {
    auto n = mem().read_cstring(m + m_name.first, m_name.second);
    if (n.ok()) out.emplace_back(n.value(), m);
  }
  loaded_ = out;
  return out;
}

// A module's kallsyms: every named, defined symbol with its runtime address.
Result<std::vector<Symbol>> KernelTarget::module_symbols(const std::string& name, uint64_t m,
                                                         std::string* types) {
  return module_kallsyms(name, m, types);
}

Result<std::vector<Symbol>> KernelTarget::module_kallsyms(const std::string& name, uint64_t m,
                                                          std::string* types) {
  LR_ASSIGN(kint::Layout mod, kint::Layout::of(*this, "module"));
  LR_ASSIGN(uint64_t o_symtab, mod.off("core_kallsyms.symtab"));
  LR_ASSIGN(IntField o_num, mod.field("core_kallsyms.num_symtab"));
  LR_ASSIGN(uint64_t o_strtab, mod.off("core_kallsyms.strtab"));
  std::vector<uint8_t> mb(mod.size);
  LR_TRY(mem().read(m, mb.data(), mb.size()));
  uint64_t symtab = kint::ptr_at(mb.data(), o_symtab), strtab = kint::ptr_at(mb.data(), o_strtab);
  int64_t n = o_num.load(mb.data());
  if (n < 0 || static_cast<uint64_t>(n) > kMaxModuleSyms)
    return make_error(
        Errc::kBadFormat,
        fmt::format("module {} at {:#x}: {} kallsyms symbols (corrupt?)", name, m, n));
  std::vector<Elf64_Sym> raw(static_cast<size_t>(n));
  if (n) LR_TRY(mem().read(symtab, raw.data(), raw.size() * sizeof(Elf64_Sym)));
  // The type letters (kallsyms' typetab, since 5.2); '?' when unreadable.
  std::string letters(raw.size(), '?');
  if (auto o_types = mod.off("core_kallsyms.typetab"); types && o_types.ok() && n)
    if (uint64_t tt = kint::ptr_at(mb.data(), o_types.value()); tt)
      if (!mem().read(tt, letters.data(), letters.size()).ok()) letters.assign(raw.size(), '?');
  std::vector<Symbol> out;
  out.reserve(raw.size());
  if (types) types->clear();
  for (size_t i = 0; i < raw.size(); ++i) {
    const Elf64_Sym& s = raw[i];
    int t = ELF64_ST_TYPE(s.st_info);
    if (s.st_shndx == SHN_UNDEF || s.st_value == 0 || s.st_name == 0) continue;
    auto nm = mem().read_cstring(strtab + s.st_name, 512);
    if (!nm.ok() || nm.value().empty()) continue;
    Symbol sym;
    sym.addr = s.st_value;
    sym.size = s.st_size;
    sym.name = std::move(nm).value();
    sym.is_func = t == STT_FUNC;
    sym.is_object = t == STT_OBJECT;
    out.push_back(std::move(sym));
    if (types) types->push_back(letters[i]);
  }
  return out;
}

const KModSymbol* KernelTarget::module_symbol_at(uint64_t addr) {
  if (!modsym_table_.has_value()) {
    modsym_table_.emplace();
    auto mods = loaded_modules();
    std::vector<std::pair<std::string, uint64_t>> none;
    for (const auto& [name, m] : mods.ok() ? mods.value() : none) {
      std::string types;
      auto syms = module_kallsyms(name, m, &types);
      if (!syms.ok()) continue;  // module_symbol_fallback says why once
      for (size_t i = 0; i < syms.value().size(); ++i) {
        const Symbol& sy = syms.value()[i];
        KModSymbol ks;
        ks.addr = sy.addr;
        ks.size = sy.size;
        ks.name = sy.name;
        ks.module = name;
        ks.type = i < types.size() ? types[i] : '?';
        modsym_table_->push_back(std::move(ks));
      }
    }
    modsym_table_->insert(modsym_table_->end(), ko_placed_.begin(), ko_placed_.end());
    std::sort(modsym_table_->begin(), modsym_table_->end(),
              [](const KModSymbol& a, const KModSymbol& b) { return a.addr < b.addr; });
  }
  const auto& t = *modsym_table_;
  auto it = std::upper_bound(t.begin(), t.end(), addr,
                             [](uint64_t v, const KModSymbol& s) { return v < s.addr; });
  if (it == t.begin()) return nullptr;
  --it;
  return addr - it->addr < std::max<uint64_t>(it->size, 1) ? &*it : nullptr;
}

Result<void> KernelTarget::add_module_debuginfo(const std::string& ko) {
  KoFile f;
  // O_NONBLOCK: a FIFO named as the .ko must not block the open.
  f.fd = ::open(ko.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) return make_error(Errc::kIo, fmt::format("{}: {}", ko, std::strerror(errno)));
  struct stat st;
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return make_error(Errc::kIo, fmt::format("{}: not a regular file", ko));
  elf_version(EV_CURRENT);
  f.elf = elf_begin(f.fd, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr eh;
  if (!f.elf || elf_kind(f.elf) != ELF_K_ELF || !gelf_getehdr(f.elf, &eh) || eh.e_type != ET_REL)
    return make_error(Errc::kBadFormat, fmt::format("{}: not a kernel module (.ko)", ko));
  if (!section_data(f.elf, ".debug_info"))
    return make_error(Errc::kNotFound,
                      fmt::format("{}: no DWARF debuginfo (a distribution's is in its debug "
                                  "package, under /usr/lib/debug/lib/modules)",
                                  ko));
  std::string name = ko_module_name(f.elf, ko);
  for (const auto& mp : prog_->modules().modules())
    if (mp->path == name && mp->has_dwarf()) return {};  // already added (crash sessions)
  LR_ASSIGN(auto loaded, loaded_modules());
  auto it = std::find_if(loaded.begin(), loaded.end(), [&](auto& p) { return p.first == name; });
  if (it == loaded.end()) {
    std::string names;
    for (const auto& p : loaded) names += (names.empty() ? "" : ", ") + p.first;
    return make_error(Errc::kNotFound,
                      fmt::format("{}: module '{}' is not loaded in this dump (loaded: {})", ko,
                                  name, names.empty() ? "none" : names));
  }
  LR_ASSIGN(std::vector<Symbol> syms, module_kallsyms(name, it->second));
  // The file must be the build that was loaded: every sized symbol both know
  // has one size (a changed struct changes the objects of that type).
  SizeMap file = ko_sizes(f.elf), dump;
  for (const Symbol& s : syms)
    if (s.size && (s.is_object || s.is_func)) dump[s.name].push_back(s.size);
  size_t common = 0;
  for (auto& [n, v] : dump) {
    auto sz = file.find(n);
    if (sz == file.end()) continue;
    ++common;
    std::sort(v.begin(), v.end());
    if (sz->second != v)
      return make_error(Errc::kBadFormat,
                        fmt::format("{} does not match the loaded module {}: {} is {} bytes in "
                                    "the file and {} in the dump",
                                    ko, name, n, fmt::join(sz->second, "+"), fmt::join(v, "+")));
  }
  if (common == 0)
    return make_error(Errc::kBadFormat,
                      fmt::format("{} shares no symbol with the loaded module {}", ko, name));
  // The loaded sections: the build-id the kernel loaded must be the file's,
  // and they place what kallsyms does not name.
  if (auto sects = kint::module_sections(*this, it->second); sects.ok()) {
    LR_TRY(check_build_id(mem(), f.elf, ko, name, sects.value()));
    const size_t from = syms.size();
    std::string letters;
    place_ko_symbols(f.elf, sects.value(), &syms, &letters);
    for (size_t i = from; i < syms.size(); ++i)
      ko_placed_.push_back({syms[i].addr, syms[i].size, syms[i].name, name, letters[i - from]});
    modsym_table_.reset();  // module_symbol_at names them too
  } else {
    warnings_.push_back(
        fmt::format("{}: its loaded sections are not readable ({}); the file is "
                    "matched by its symbols' sizes only",
                    ko, sects.error().message));
  }
  Module* m = prog_->modules().add_debug(name, ko, "module file");
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const Symbol& s : syms) lo = std::min(lo, s.addr), hi = std::max(hi, s.addr + s.size);
  m->base = lo == UINT64_MAX ? 0 : lo;
  m->end = hi;
  m->set_symbols(std::move(syms));
  return {};
}

// Standalone symbol fallback: a name no loaded debuginfo has, looked up in
// every loaded module's kallsyms ("NAME@MODULE" restricts the module).
bool KernelTarget::module_symbol_fallback(void* self, const char* spec, uint64_t* addr) {
  auto* k = static_cast<KernelTarget*>(self);
  if (!k->modsyms_.has_value()) {
    k->modsyms_.emplace();
    auto loaded = k->loaded_modules();
    if (!loaded.ok()) return false;
    for (const auto& [name, m] : loaded.value()) {
      auto syms = k->module_kallsyms(name, m);
      if (!syms.ok()) {
        k->warnings_.push_back(syms.error().message);
        continue;
      }
      for (const Symbol& s : syms.value()) {
        k->modsyms_->emplace(s.name + "@" + name, s.addr);
        k->modsyms_->emplace(s.name, s.addr);  // the first module wins for a bare name
      }
    }
  }
  auto it = k->modsyms_->find(spec);
  if (it == k->modsyms_->end()) return false;
  *addr = it->second;
  return true;
}

}  // namespace lr
