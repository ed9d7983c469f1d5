// A Linux kernel image (vmcore + vmlinux DWARF) and the
// walks kernel engineers ask of it: super blocks and their inodes with the
// dentries and open files that hold them, modules and their holders, and
// invariant checks. The same code runs under crash (memory from readmem) and
// standalone (memory from an ELF vmcore or libkdumpfile).
#pragma once

#include <elf.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/registry/target.hpp"

namespace lr {

struct KernelKnowledge;  // targets/linux/kernel_internal.hpp

// What the kernel target registers with the engine: the refcount types that
// count from zero (file_ref_t since 6.13, rcuref_t since 6.4), and the
// opener of kernel dumps the engine's snapshots and batch use
// (linux_target.cpp).
TargetSpec linux_target();

// A loaded module's symbol (its kallsyms) with its type letter: 'b' .bss,
// 'd' .data, 'r' read-only, 't' text (capital when global), '?' unknown.
struct KModSymbol {
  uint64_t addr = 0, size = 0;
  std::string name, module;
  char type = '?';
};
class KRefIndex;  // targets/linux/kernel_refs.hpp

// What check_kdump_file found in a kdump-compressed file.
struct KdumpLayout {
  int header_version = 0;
  uint64_t dumped_pages = 0;    // pages the bitmap says are in the file
  uint64_t pages_past_end = 0;  // of those, pages whose data is not (a cut-off file)
  uint32_t block_size = 0;      // bytes per dumped page
  std::string vmcoreinfo;       // the sub-header's text ("" when it has none)
};
// Checks a kdump-compressed file's header, sub-header, bitmaps and page
// table against the file's size before libkdumpfile reads it (it crashes on
// some malformed headers): kBadFormat naming the first thing wrong.
Result<KdumpLayout> check_kdump_file(int fd, const std::string& path);

class KernelTarget {
 public:
  ~KernelTarget();
  KernelTarget(const KernelTarget&) = delete;
  KernelTarget& operator=(const KernelTarget&) = delete;

  // Standalone: opens `vmcore` read-only (an ELF dump with virtual addresses
  // through the engine's ELF reader; kdump-compressed and physical-only ELF
  // dumps through libkdumpfile) and `vmlinux` (DWARF; "" = found from the
  // dump's BUILD-ID under each of dbg.debug_dirs' .build-id, then by its
  // OSRELEASE under those dirs, dbg.sysroot and / in /usr/lib/debug/boot,
  // /usr/lib/debug/lib/modules, /boot; then debuginfod). The KASLR offset
  // comes from the dump's VMCOREINFO. Errors name the file at fault
  // (kNotFound lists where vmlinux was looked for).
  static Result<std::unique_ptr<KernelTarget>> open(const std::string& vmcore,
                                                    const std::string& vmlinux,
                                                    const DebugOptions& dbg = {});
  // Hosted (crash): `mem` is borrowed and must outlive the target; the
  // runtime address of a vmlinux symbol is its ELF value + `kaslr_offset`.
  static Result<std::unique_ptr<KernelTarget>> attach(const Memory* mem, const std::string& vmlinux,
                                                      uint64_t kaslr_offset);

  Program& prog() { return *prog_; }
  const Memory& mem() const { return prog_->mem(); }
  uint64_t kaslr_offset() const { return kaslr_offset_; }
  const std::string& dump_format() const { return format_; }  // "elf", "kdump", "crash"
  const std::string& vmlinux() const { return vmlinux_; }
  // The kernel's architecture, from vmlinux's ELF header.
  bool aarch64() const { return machine_ == EM_AARCH64; }
  // A VMCOREINFO line's value ("OSRELEASE", "BUILD-ID"); "" when the dump
  // has none (always "" under crash, which keeps VMCOREINFO itself).
  std::string vmcoreinfo(const std::string& key) const;
  // Runtime address of a vmlinux symbol; kNotFound names it.
  Result<uint64_t> symbol(const std::string& name) const;
  std::vector<std::string> warnings() const;

  // Types of a loaded kernel module from its .ko (DWARF), and its symbols
  // from the dump's kallsyms, so "name@module" and the module's struct types
  // resolve. The module is named by the file's .modinfo; kNotFound when it is
  // not loaded in the dump, kBadFormat when the file is not the build that
  // was loaded (a symbol of another size). Adding the same module again is a
  // no-op.
  Result<void> add_module_debuginfo(const std::string& ko);
  // Loaded modules (name, struct module address), read once.
  Result<std::vector<std::pair<std::string, uint64_t>>> loaded_modules();
  // A loaded module's kallsyms symbols (`module`: its struct module), and
  // with `types` each one's kallsyms type letter ('b' .bss, 'd' .data, 't'
  // text, 'r' read-only; capital when global), in the same order.
  Result<std::vector<Symbol>> module_symbols(const std::string& name, uint64_t module,
                                             std::string* types);
  // The loaded module symbol covering `addr` (every module's kallsyms, read
  // once); null when none does. Valid as long as the target.
  const KModSymbol* module_symbol_at(uint64_t addr);
  // Where the kernel reports (targets/linux) keep what they know
  // of this kernel once bound to its types; empty until first used.
  std::shared_ptr<KernelKnowledge>& knowledge_slot() { return knowledge_; }
  // The reference index of this image, once built (a crash session's next
  // leaks or refs reuses it: the image of a dump never changes).
  std::shared_ptr<KRefIndex>& refs_slot() { return refs_; }

 private:
  KernelTarget() = default;
  Result<std::vector<Symbol>> module_kallsyms(const std::string& name, uint64_t module,
                                              std::string* types = nullptr);
  static bool module_symbol_fallback(void* self, const char* spec, uint64_t* addr);
  // Program::PerCpu for this kernel ("runqueues:1").
  static Result<uint64_t> per_cpu_hook(void* self, uint64_t addr, int64_t cpu, bool* is_per_cpu);
  // The static per-CPU variables' symbols, [first, second) as
  // kint::per_cpu_section gives them; {0, 0} when the vmlinux has no such
  // section. Busy while being looked up (the lookup resolves names through
  // the same hook).
  std::optional<std::pair<uint64_t, uint64_t>> pcpu_range_;
  bool pcpu_busy_ = false;
  std::optional<std::vector<std::pair<std::string, uint64_t>>> loaded_;
  std::optional<std::unordered_map<std::string, uint64_t>> modsyms_;  // standalone fallback
  std::optional<std::vector<KModSymbol>> modsym_table_;  // by address (module_symbol_at)
  std::vector<KModSymbol> ko_placed_;  // .ko symbols kallsyms lacks, placed by section
  Result<void> load_vmlinux(const Memory* mem, const std::string& vmlinux, uint64_t kaslr_offset);
  Result<void> check_banner(const std::string& vmcore, bool pages_missing);
  Result<std::string> open_kdump(int fd, const std::string& vmcore, uint16_t machine);
  std::unique_ptr<Memory> owned_mem_;  // standalone only; attach() borrows
  struct Kdump;
  std::unique_ptr<Kdump> kdump_;
  std::unique_ptr<Program> prog_;
  uint64_t kaslr_offset_ = 0;
  uint16_t machine_ = 0;  // vmlinux's e_machine
  std::string format_, vmlinux_, vmcoreinfo_;
  std::vector<std::string> warnings_;
  std::shared_ptr<KernelKnowledge> knowledge_;
  std::shared_ptr<KRefIndex> refs_;
};

// Bounds shared by the kernel walks.
struct KernelLimits {
  uint64_t max_objects = 10'000'000;  // per list
  uint64_t max_fds = 1u << 20;        // per fd table
  const std::atomic<bool>* interrupted = nullptr;
};

// One open file (struct file) and who holds it.
struct KFileHolder {
  int pid = 0;
  std::string comm;
  int fd = -1;  // kExe: the task's executable (mm->exe_file); kMmap: a mapping
  static constexpr int kExe = -1, kMmap = -2;
};
// SLUB's struct track (slub_debug=U): who allocated (or last freed) an object.
struct KSlabTrack {
  uint64_t addr = 0;    // the caller of the allocator (return address)
  uint32_t handle = 0;  // stack depot handle; 0 = none recorded
  int cpu = 0, pid = 0;
  uint64_t when = 0;  // jiffies
  // The stack kept in the track itself (addrs[], before 5.17's stack
  // depot), innermost first; empty when the depot keeps it.
  std::vector<uint64_t> frames;
};

struct KFile {
  uint64_t addr = 0;
  int64_t f_count = 0;
  uint64_t inode = 0, dentry = 0, mnt = 0, f_op = 0;
  std::vector<KFileHolder> holders;  // every fd slot, executable and mapping using this file
  // Found only among the file cache's objects (no fd, exe or mapping holds
  // it: an SCM_RIGHTS message in flight, or a leak), for a flagged dentry.
  bool unheld = false;
  bool has_alloc = false;             // its cache stores allocation tracks (slub_debug=U)
  KSlabTrack alloc;                   // with has_alloc
  std::vector<uint64_t> alloc_stack;  // the allocation's stack, innermost first
  std::string alloc_stack_error;      // why alloc_stack is empty (no depot, bad handle)
};

struct KDentry {
  uint64_t addr = 0;
  std::string name;
  // As crash's `files -d` shows it: the super block's first mount point and
  // the names up to its root ("/mnt/leak/f00060"); "FSTYPE:/..." when the
  // file system is not mounted where a path reaches (pipefs, sockfs, ...).
  std::string path;
  int64_t count = 0;        // d_lockref.count
  uint64_t children = 0;    // d_subdirs entries (each holds a reference)
  uint64_t files = 0;       // struct files whose f_path.dentry is this
  uint64_t mount_refs = 0;  // mnt_root of mounts + mountpoint pins
  uint64_t fs_refs = 0;     // task root/pwd (per fs_struct)
  uint64_t pinned = 0;      // filesystems that pin their dentries (tmpfs, ramfs, ...)
  int64_t unexplained = 0;  // count - everything above
  // Of a flagged dentry: files of the file cache on it that no task holds
  // (indexes into KInodeReport::files), each with who allocated it.
  std::vector<size_t> unheld_files;
};

struct KInode {
  uint64_t addr = 0;
  uint64_t ino = 0;
  int64_t i_count = 0;
  uint64_t i_nlink = 0;
  uint64_t i_state = 0;
  uint64_t i_mode = 0;
  std::vector<KDentry> dentries;  // i_dentry aliases
  std::vector<uint64_t> files;    // indexes into KInodeReport::files
  int64_t unexplained = 0;        // i_count - aliases (each alias holds one)
  bool flagged() const;           // inode or any of its dentries unexplained > 0
};

struct KSuperBlock {
  uint64_t addr = 0;
  std::string fstype, id;
  uint64_t root = 0;
  uint64_t s_inodes = 0;                  // address of the s_inodes list head (for walk/list -H)
  std::vector<std::string> mounts;        // where it is mounted (up to 8; internal mounts omitted)
  std::vector<KInode> inodes;             // all, or those the filter kept
  uint64_t inode_count = 0, flagged = 0;  // over every inode walked
  WalkResult inode_walk;                  // how the s_inodes walk ended (objects cleared)
};

struct KInodeFilter {
  uint64_t sb = 0;         // only this super_block (0 = all)
  std::string fstype;      // only super blocks of this type ("" = all)
  bool held_only = false;  // only inodes with open files or unexplained refs
};

struct KInodeReport {
  std::vector<KSuperBlock> sbs;
  std::vector<KFile> files;  // every open file found through task fd tables
  uint64_t tasks = 0, inodes = 0, dentries = 0, flagged = 0;
  uint64_t walk_ns = 0;
  std::vector<std::string> warnings;
  // i_state's bits by name, this kernel's (linux-kernel.toml's
  // types.inode.exprs I_*), for inode_state_names.
  std::vector<std::pair<uint64_t, std::string>> state_bits;
};

Result<KInodeReport> kernel_inodes(KernelTarget& k, const KInodeFilter& f,
                                   const KernelLimits& lim = {});

struct KModule {
  uint64_t addr = 0;
  std::string name;
  std::string state;                 // live, coming, going, unformed
  int64_t refcnt = 0;                // module.refcnt (1 = the base reference)
  std::vector<std::string> used_by;  // modules holding a reference (source_list)
  std::vector<std::string> uses;     // modules it holds (target_list)
  uint64_t superblocks = 0;          // mounted super blocks of its filesystem types
  uint64_t open_files = 0;           // struct files whose f_op it owns
  int64_t unexplained = 0;           // refcnt - 1 - the holders above
};

struct KModuleReport {
  std::vector<KModule> modules;
  uint64_t walk_ns = 0;
  std::vector<std::string> warnings;
};

Result<KModuleReport> kernel_modules(KernelTarget& k, const KernelLimits& lim = {});

// An invariant the kernel itself relies on, checked over the whole image.
struct KCheckResult {
  std::string name;         // "lists.tasks", "inode.i_count", ...
  std::string description;  // what must hold
  uint64_t checked = 0;
  uint64_t violations = 0;
  std::vector<std::string> examples;  // the first few violations, one line each
  bool skipped = false;
  std::string skip_reason;
};

Result<std::vector<KCheckResult>> kernel_check(KernelTarget& k, const KernelLimits& lim = {});

struct Snapshot;  // leakref/diff.hpp
// The dump as a snapshot for diff and trend (kind "vmcore"): classes per
// slab cache (allocated objects and bytes), per super block (inodes) and per
// command (fds held); objects dentries by path, struct files by address and
// modules by name, with their counts. What cannot be read is a warning.
Result<Snapshot> kernel_snapshot(KernelTarget& k, const std::string& source,
                                 const KernelLimits& lim = {});

// "I_DIRTY_SYNC|I_REFERENCED" for an inode i_state (Linux 6.1 values).
// "I_NEW|I_FREEING", the bits `state` has by their names in `bits`; a bit
// no name covers is shown in hex; "0" for none.
std::string inode_state_names(uint64_t state,
                              const std::vector<std::pair<uint64_t, std::string>>& bits);

}  // namespace lr
