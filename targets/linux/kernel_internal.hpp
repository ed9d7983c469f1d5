// Shared by the kernel report files: what they know of Linux (the built-in
// linux-kernel profile, bound once per target), type layouts resolved
// through it, and the scan of tasks, open files, super blocks and mounts
// that several reports need.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "corelib/objects/expr.hpp"
#include "corelib/objects/objects.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/profiles/profile.hpp"
#include "corelib/profiles/profile_bind.hpp"
#include "targets/linux/kernel.hpp"

namespace lr {

// targets/linux/linux-kernel.toml bound to one kernel's types.
struct KernelKnowledge {
  Profile profile;
  std::unique_ptr<ProfileBinder> binder;
  // [symbols] resolved once per target: inside crash every lookup is a gdb
  // symbol search, and a session runs many commands on one unchanging image.
  std::map<std::string, Result<Variable>> variables;
  // The slab heads of the struct page array, from the first whole scan on
  // this target (kernel_slab.cpp). A target's image never changes (crash
  // makes a new target for each command on a live system), so later scans
  // read only these pages instead of all of them.
  struct SlabPages {
    uint64_t pages = 0, unreadable = 0;  // what the whole scan saw
    // Each head's struct page address and the kmem_cache it names, in page
    // order: a later scan reads only the pages of the caches it lists.
    std::vector<std::pair<uint64_t, uint64_t>> heads;
  };
  std::optional<SlabPages> slab_pages;
};

namespace kint {

// The text of the built-in linux-kernel profile.
std::string_view linux_kernel_profile_text();
// It, bound to `k`'s types (once; kept in the target).
Result<KernelKnowledge*> knowledge(KernelTarget& k);

// A type the linux-kernel profile declares, with its member alternatives.
struct Layout {
  const Type* type = nullptr;
  uint64_t size = 0;
  const BoundType* bound = nullptr;
  ExprScope scope;  // aliases and declared enums, for paths and expressions
  // `name` is a [types] name of linux-kernel.toml ("dentry"). kNotFound names
  // what this kernel lacks (the type, or every alternative of a member).
  static Result<Layout> of(KernelTarget& k, const std::string& name);
  // A member path's offset inside the object (aliases applied at each step);
  // kInvalidArgument for a path that crosses a pointer.
  Result<uint64_t> off(std::string_view path) const;
  // An integer field; `refcount` descends atomic_t/refcount_t/lockref/...
  Result<IntField> field(std::string_view path, bool refcount = false) const;
  // A member's offset and byte size (char arrays: comm, s_id, module name).
  Result<std::pair<uint64_t, uint64_t>> bytes(std::string_view path) const;
  // Whether list member `path` is an hlist_head (else a list_head);
  // kInvalidArgument when it is neither.
  Result<bool> hlist(std::string_view path) const;
  // The profile's named expression `name` on this type (first alternative
  // that compiles here).
  Result<std::unique_ptr<Expr>> expr(KernelTarget& k, const std::string& name) const;
  // A named expression of this type that is a constant (a literal, or an
  // enumerator the type's enums declare).
  Result<int64_t> constant(KernelTarget& k, const std::string& name) const;
  // The constants of this type whose names start with `prefix` ("I_": the
  // bits of i_state), by value.
  Result<std::vector<std::pair<uint64_t, std::string>>> constants(KernelTarget& k,
                                                                  const std::string& prefix) const;

 private:
  Result<FieldLoc> loc(std::string_view path, bool refcount) const;
};

// A [symbols] name of linux-kernel.toml: the first alternative this kernel
// has (its address; kvariable: with its DWARF type when known).
Result<uint64_t> ksymbol(KernelTarget& k, const std::string& name);
Result<Variable> kvariable(KernelTarget& k, const std::string& name);
// An unsigned integer variable (a [symbols] name) of the width its DWARF
// type gives (8 without); kFault when the dump lacks it.
Result<uint64_t> read_uint_var(KernelTarget& k, const std::string& name);

// The kernel's release as major * 1000 + minor (5010 for "5.10.0-32-amd64"):
// VMCOREINFO's OSRELEASE, else init_uts_ns's; 0 when neither is readable.
uint64_t release_number(KernelTarget& k);

// The direct map of physical memory and the struct page array, as bases
// for frame 0: frame pfn is at page_offset + pfn * 4096, its struct page at
// vmemmap + pfn * sizeof(struct page) (x86-64's variables or fixed
// addresses; arm64's from VMCOREINFO).
struct MemoryBases {
  uint64_t page_offset = 0, vmemmap = 0;
  uint64_t min_pfn = 0;  // the first frame that can be RAM (arm64: PHYS_OFFSET's)
};
Result<MemoryBases> memory_bases(KernelTarget& k);
// The kernel image's virtual address less its physical one (__pa_symbol):
// x86-64's __START_KERNEL_map less phys_base, arm64's kimage_voffset.
Result<uint64_t> image_voffset(KernelTarget& k);

// Static per-CPU variables: their section as the symbol table gives it
// (KASLR applied) and how a CPU's instance is found. x86-64 links the
// section at 0, so a variable's link value is its offset in a CPU's area
// and KASLR does not move it; arm64 links it at its template in the image
// (which KASLR moves, and the kernel frees after boot). Either way the
// instance is at the link value plus __per_cpu_offset[cpu].
struct PerCpuSection {
  uint64_t start = 0, end = 0;  // [start, end): the symbols of per-CPU variables
  uint64_t link_delta = 0;      // symbol-table address less link value (x86-64: KASLR's)
  bool holds(uint64_t sym) const { return sym >= start && sym < end; }
};
struct PerCpu : PerCpuSection {
  uint64_t offsets = 0;  // __per_cpu_offset
  uint64_t ncpu = 0;     // nr_cpu_ids
};
// The section alone, from vmlinux's symbols (reads no memory); kBadFormat
// for a range no kernel has.
Result<PerCpuSection> per_cpu_section(KernelTarget& k);
Result<PerCpu> per_cpu(KernelTarget& k);
// CPU `cpu`'s instance of the per-CPU variable whose symbol-table address is
// `sym`; kInvalidArgument past nr_cpu_ids or for a symbol outside the section.
Result<uint64_t> per_cpu_var(KernelTarget& k, const PerCpu& pc, uint64_t sym, uint64_t cpu);

// A loaded module's sections (/sys/module/M/sections): name and address.
struct ModSection {
  std::string name;
  uint64_t addr = 0;
};
Result<std::vector<ModSection>> module_sections(KernelTarget& k, uint64_t module);

uint64_t ptr_at(const uint8_t* obj, uint64_t off);
std::string cstr_at(const uint8_t* obj, uint64_t off, size_t max);
bool interrupted(const KernelLimits& lim);
uint64_t now_ns();
// The objects of a list every report starts from (init_task.tasks,
// super_blocks, modules): kNotFound when not even its head is readable (a
// cut-off or excluded dump), which would otherwise read as an empty list.
Result<std::vector<uint64_t>> root_objects(const Memory& mem, uint64_t head, uint64_t member_off,
                                           const KernelLimits& lim, const std::string& what,
                                           std::vector<std::string>* warnings, WalkResult* out);
std::vector<uint64_t> list_objects(const Memory& mem, uint64_t head, uint64_t member_off,
                                   const KernelLimits& lim, const std::string& what,
                                   std::vector<std::string>* warnings, WalkResult* out);

struct FileLayout {
  IntField f_count;
  uint64_t inode = 0, dentry = 0, mnt = 0, op = 0, size = 0;
};

struct Scan {
  FileLayout fl;
  uint64_t tasks = 0, mounts = 0;
  std::vector<KFile> files;  // distinct struct files in task fd tables
  std::unordered_map<uint64_t, std::vector<size_t>> files_by_dentry, files_by_inode;
  std::unordered_map<uint64_t, uint64_t> mount_refs;  // dentry -> refs held by mounts
  std::unordered_map<uint64_t, uint64_t> fs_refs;     // dentry -> task root/pwd refs
  std::unordered_map<uint64_t, std::pair<int, std::string>> mm_owner;  // mm -> (pid, comm)
  std::unordered_map<uint64_t, size_t> file_index;  // struct file -> index in files
  std::vector<uint64_t> super_blocks;
  std::unordered_map<uint64_t, std::vector<std::string>> sb_mounts;  // sb -> mount paths
  WalkResult tasks_walk, sb_walk;  // how those lists ended (objects cleared)
  std::vector<uint8_t> scratch;    // object_bytes buffer for hold_file
  std::vector<std::string> warnings;
};

// Records holder `h` of struct file `f`, reading and indexing (by dentry and
// inode) the file on first sight.
void hold_file(const Memory& mem, Scan& s, uint64_t f, const KFileHolder& h);

// Tasks (init_task.tasks), their fd tables and fs_structs, super blocks and,
// with `want_mounts`, every mount on each super block's s_mounts.
Result<Scan> scan(KernelTarget& k, const KernelLimits& lim, bool want_mounts);

// The reports over a scan already made (kernel_check shares one scan). The
// inode report adds the files it finds through mappings to `s` and then
// takes them over: call modules_from first.
Result<KInodeReport> inodes_from(KernelTarget& k, Scan& s, const KInodeFilter& f,
                                 const KernelLimits& lim);
// `walk` (optional) receives how the modules list walk ended, objects cleared.
Result<KModuleReport> modules_from(KernelTarget& k, const Scan& s, const KernelLimits& lim,
                                   WalkResult* walk = nullptr);

}  // namespace kint
}  // namespace lr
