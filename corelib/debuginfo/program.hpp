// The engine facade: a core (memory), its modules (symbols, debuginfo) and
// their types, opened together with one set of options. Front ends (CLI,
// tests, the crash extension via its own Memory) build on this.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/types.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/dump/residency.hpp"

namespace lr {

struct ProgramOptions {
  std::string exe;                      // --exe
  std::string sysroot;                  // --sysroot
  std::vector<std::string> debug_dirs;  // --debug-dir
};

class Program {
 public:
  static Result<std::unique_ptr<Program>> open_core(const std::string& core_path,
                                                    const ProgramOptions& opts);
  // For front ends with their own memory (crash): the caller owns `mem`.
  Program(const Memory* mem, std::unique_ptr<ModuleSet> mods);

  const Memory& mem() const { return *mem_; }
  CoreFile* core() const { return core_.get(); }
  ModuleSet& modules() const { return *mods_; }
  TypeRegistry& types() const { return *types_; }
  // Where resolve() looks for a name that no module's symbol table has (the
  // crash extension asks crash, which also knows kernel modules' symbols).
  // Returns false when the host does not know the name either.
  using SymbolFallback = bool (*)(void* ctx, const char* name, uint64_t* addr);
  void set_symbol_fallback(SymbolFallback fn, void* ctx) {
    fallback_ = fn;
    fallback_ctx_ = ctx;
  }
  // The host's per-CPU variables (a target's): resolve() hands it each
  // symbol's address with the CPU written after it ("runqueues:1"; -1 for
  // none). With a CPU it returns that CPU's instance or refuses a variable
  // that is not per-CPU; without, it returns `addr` and says in *is_per_cpu
  // whether the variable is one. Without a host, a CPU is refused.
  using PerCpu = Result<uint64_t> (*)(void* ctx, uint64_t addr, int64_t cpu, bool* is_per_cpu);
  void set_per_cpu(PerCpu fn, void* ctx) {
    per_cpu_ = fn;
    per_cpu_ctx_ = ctx;
  }
  // Which pages were resident when the core was taken, when the capture
  // saved that beside it (residency.hpp); null otherwise. Heap walks of this
  // program count resident bytes with it.
  const Residency* residency() const { return residency_.get(); }
  void set_residency(std::unique_ptr<Residency> r) { residency_ = std::move(r); }
  // Warnings from every layer, in order (core, modules).
  std::vector<std::string> warnings() const;

  // Parses a place as gdb/crash/drgn users write it (head_expr.cpp): "0x1234",
  // "SYMBOL", "SYMBOL@module", "&SYMBOL", "*SYMBOL" (what the pointer at the
  // symbol points to), "SYMBOL[3]", "a.b", "a->b", "*(struct T *)ADDR",
  // "X+0x10", "VAR:CPU" (a per-CPU variable on that CPU, as crash writes
  // it). kNotFound names the symbol; kInvalidArgument a bad
  // expression. A place to read from (resolve_place's rules).
  Result<uint64_t> resolve_address(const std::string& spec) const;
  // The same, with the DWARF type of what the address holds when known (a
  // symbol's type, a member's, the pointee for "*SYMBOL", a cast's); null for
  // plain addresses and "+offset" forms.
  Result<Variable> resolve(const std::string& spec) const;
  // The variable symbol `h` (with its module) names, looked up by that
  // name, never read as an expression: an LTO build's static
  // "x.lto_priv.0" is one name, not members of x (and a lookup of x that
  // fails costs a "did you mean" over every symbol).
  Result<Variable> symbol_variable(const SymbolHit& h) const;
  // resolve() for a place to read from: a per-CPU variable named without a
  // CPU is refused (its link value holds no CPU's instance).
  Result<Variable> resolve_place(const std::string& spec) const;

 private:
  Program() = default;
  void find_thread_pointers();
  std::unique_ptr<CoreFile> core_;
  std::vector<std::string> warnings_;  // the program's own (thread pointers)
  const Memory* mem_ = nullptr;
  std::unique_ptr<ModuleSet> mods_;
  std::unique_ptr<TypeRegistry> types_;
  SymbolFallback fallback_ = nullptr;
  void* fallback_ctx_ = nullptr;
  PerCpu per_cpu_ = nullptr;
  void* per_cpu_ctx_ = nullptr;
  std::unique_ptr<Residency> residency_;
};

// Finds the thread pointers a core does not hold (aarch64 cores QEMU writes
// have no NT_ARM_TLS) in a C library's own thread list: (tid, thread
// pointer) pairs, none when the library is not its own; `why` says what it
// lacked. Targets register one each; Program::open_core asks them in turn.
using ThreadPointerFinder = std::vector<std::pair<int, uint64_t>> (*)(Program& prog,
                                                                      std::string* why);
void register_thread_pointer_finder(const std::string& name, ThreadPointerFinder f);

// What a C library knows of its threads' memory that the core does not say:
// each live thread's static TLS block and control block (and the rest of
// what the library placed there), and the stacks it keeps of threads that
// no longer exist (a cache for reuse; in a fork child, the parent's other
// threads'): their words are stale, never roots. `source` names what said it
// ("the C library's DWARF"); empty when no library knew.
struct ThreadMemory {
  struct Range {
    uint64_t start = 0, end = 0;
    int tid = 0;       // the live thread (tls), 0 for a dead stack
    std::string what;  // "static TLS and thread control block", "stack of an exited thread"
  };
  std::vector<Range> tls;
  std::vector<Range> dead_stacks;
  std::vector<std::string> warnings;
  std::string source;
  // False when the library's lists could not be read (whole): dead stacks
  // may then be taken for live ones.
  bool complete = true;
};
// A C library's reader: fills `out` and returns true when the library is its
// own (its warnings say what it could not read).
using ThreadMemoryReader = bool (*)(Program& prog, ThreadMemory* out);
void register_thread_memory_reader(const std::string& name, ThreadMemoryReader f);
// The first registered reader's answer for `prog` (a process core); an empty
// ThreadMemory when none knew.
ThreadMemory thread_memory(Program& prog);

// Parses a number with optional 0x prefix; false if it is not one.
bool parse_u64(const std::string& s, uint64_t* out);

}  // namespace lr
