// The executable and shared libraries of a process image, their load
// bias and build-ids, debuginfo search, and ELF symbol tables.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/dump/memory.hpp"

typedef struct Elf Elf;
typedef struct Dwarf Dwarf;
typedef struct Dwfl Dwfl;
typedef struct Dwarf_CFI_s Dwarf_CFI;

namespace lr {

class CoreFile;

struct DebugOptions {
  std::string sysroot;                  // prefix for default debug dirs and module paths
  std::vector<std::string> debug_dirs;  // --debug-dir, searched before /usr/lib/debug
  bool use_debuginfod = true;           // only if DEBUGINFOD_URLS is set
};

struct Symbol {
  uint64_t addr = 0;  // runtime address (bias applied)
  uint64_t size = 0;
  std::string name;
  bool is_func = false;
  bool is_object = false;
};

// One loaded ELF object. Opening its files and DWARF is lazy; a Module owns
// its Elf/Dwarf handles and file descriptors.
class Module {
 public:
  Module() = default;
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  std::string path;       // as the process saw it
  std::string host_path;  // the file opened on this machine ("" if none)
  uint64_t base = 0;      // lowest mapped address
  uint64_t end = 0;       // one past the highest mapped address
  // One past the highest address its PT_LOADs cover (.bss past the last
  // file mapping, in an anonymous one); 0 when not known.
  uint64_t mem_end = 0;
  uint64_t bias = 0;     // runtime address = ELF vaddr + bias
  std::string build_id;  // from the core when present, else from the file
  bool is_exe = false;
  bool from_link_map = false;
  // A types file (headers compiled to DWARF): its types describe the program,
  // but its symbols and variable locations are addresses in that file, never
  // in the dump, so it has no symbols.
  bool types_only = false;

  // Debuginfo: where DWARF came from ("embedded", "build-id dir ...",
  // "debuglink ...", "debuginfod"), or why there is none (`debug_missing`
  // names the build-id and every place looked).
  std::string debug_path;
  std::string debug_how;
  std::string debug_missing;
  bool has_dwarf() const { return !debug_path.empty(); }

  // The module's DWARF, opened on first use; nullptr when there is none. A
  // relocatable debug file (a kernel module's .ko) is opened through libdwfl,
  // which applies its .rela.debug_* sections in private memory.
  Dwarf* dwarf();
  // The module's call frame information (.eh_frame of the file the process
  // ran, else the debug file's .debug_frame), opened on first use; nullptr
  // when there is none. Addresses in it are ELF vaddrs (subtract `bias`).
  Dwarf_CFI* cfi();
  // Symbols sorted by address (.symtab of debug file and main file, .dynsym).
  const std::vector<Symbol>& symbols();
  // The symbol named `name` (an object preferred over others); nullptr if none.
  const Symbol* find_symbol(const std::string& name);
  // The same for a caller that needs one name and no other symbol: the
  // tables are scanned for it, not indexed (indexing libc6-dbg's 20,000
  // symbols costs ~15 ms a core, which a batch pays per dump).
  const Symbol* find_one_symbol(const std::string& name);
  // A thread-local variable's offset in this module's TLS block (its
  // STT_TLS symbol's value, in the file or its debug file); false when
  // neither names it.
  bool find_tls_symbol(const std::string& name, uint64_t* offset);
  // Symbols given by the caller (a kernel module's kallsyms read from the
  // dump) instead of read from the module's files, which are then not read.
  void set_symbols(std::vector<Symbol> syms);
  std::string basename() const;

 private:
  friend class ModuleSet;
  void load_symbols_from(Elf* e);
  Elf* open_main_elf();  // nullptr: no file the process ran, or not ELF
  Dwarf* open_relocated_dwarf();
  Elf* open_debug_elf();  // nullptr: no debug file, or not ELF
  int main_fd_ = -1, debug_fd_ = -1;
  Elf* main_elf_ = nullptr;
  Elf* debug_elf_ = nullptr;
  Dwarf* dwarf_ = nullptr;
  Dwfl* dwfl_ = nullptr;      // owns dwarf_ when set (relocatable debug file)
  Dwarf_CFI* cfi_ = nullptr;  // from main_elf_ (freed with dwarf_cfi_end) or dwarf_ (not)
  bool cfi_owned_ = false, cfi_tried_ = false;
  bool dwarf_tried_ = false, debug_elf_tried_ = false;
  bool syms_loaded_ = false;
  std::vector<Symbol> syms_;
  std::unordered_map<std::string, size_t> by_name_;  // name -> index in syms_, built on first use
  std::unordered_map<std::string, std::unique_ptr<Symbol>> one_symbol_;  // find_one_symbol's
};

struct SymbolHit {
  Module* module = nullptr;
  const Symbol* sym = nullptr;  // null when only the module is known
  uint64_t offset = 0;          // from sym->addr, or from module bias if no symbol
  std::string format() const;   // "sym+0x1f [libfoo.so.1]" or "libfoo.so.1+0x1234"
};

class ModuleSet {
 public:
  // Builds modules from the core's NT_FILE note and its r_debug link_map.
  static std::unique_ptr<ModuleSet> from_core(const CoreFile& core, const DebugOptions& opts);
  // An empty set the caller fills with add() (crash extension, kernel).
  static std::unique_ptr<ModuleSet> empty(const DebugOptions& opts);

  // Adds a module whose file is `host_path`, loaded with `bias`. Debuginfo is
  // searched immediately (cheap: stat calls); DWARF is opened lazily.
  Module* add(const std::string& path, const std::string& host_path, uint64_t base, uint64_t end,
              uint64_t bias, const std::string& build_id, bool is_exe);
  // Adds a module known by name whose DWARF is `debug_path` as given (no
  // search, no symbol file); `how` says where it came from ("--ko").
  Module* add_debug(const std::string& path, const std::string& debug_path, const std::string& how);
  // Adds a types file: DWARF types for the program, no addresses.
  Module* add_types(const std::string& file);

  const std::vector<std::unique_ptr<Module>>& modules() const { return mods_; }
  Module* exe() const;
  Module* module_at(uint64_t addr) const;          // nullptr if no module maps addr
  Module* by_name(const std::string& name) const;  // basename or path match

  // Symbol by name; "name@module" restricts the module. kNotFound if absent.
  Result<std::pair<Module*, const Symbol*>> lookup(const std::string& name) const;
  // Whether some module's symbol tables name `name` (scanned, as
  // Module::find_one_symbol does, not indexed).
  bool defines(const std::string& name) const;
  // Address to symbol; `module` null when the address is in no module.
  SymbolHit symbolize(uint64_t addr) const;
  // symbolize() for .bss past a module's file mappings (Module::mem_end).
  SymbolHit bss_symbol(uint64_t addr) const;

  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  void find_debuginfo(Module& m);
  DebugOptions opts_;
  std::vector<std::unique_ptr<Module>> mods_;
  std::vector<std::string> warnings_;
};

// Reads r_debug's link_map from an executable loaded at `exe_bias`;
// returns (l_addr, name) pairs, bounded and cycle-safe.
std::vector<std::pair<uint64_t, std::string>> read_link_map(const Memory& mem, uint64_t exe_base,
                                                            std::vector<std::string>* warnings);

}  // namespace lr
