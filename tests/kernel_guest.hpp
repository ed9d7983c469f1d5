// The kernel tests' guests: real Debian kernels (6.1 and 6.12) under QEMU
// TCG (scripts/kernel-vmcore), what each guest says it set up (its serial
// log), and helpers shared by the kernel test files: the CLI's JSON, the
// checks against the guest's manifest, crash sessions on the 6.1 dump (crash
// 8.0.2 cannot open 6.12 dumps).
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.hpp"

namespace kguest {

using nlohmann::json;

// The guests' RAM (scripts/kernel-vmcore's default --mem).
constexpr uint64_t kGuestMiB = 512;

// One kernel's guest dumps (scripts/kernel-vmcore --kernel KERNEL), made once.
struct Dump {
  std::string kernel;  // "6.1", "6.12"; "kmemleak": scripts/kernel-kmemleak's (pelf only);
                       // "arm64": Debian 12's arm64 kernel (pelf is its physical ELF dump)
  bool ok = false;
  bool broken = false;  // our own set-up failed: a failure, not a skip
  std::string why;
  std::string vmlinux, pelf, kdump, pelf_b, serial, ko, kver;
  std::string ko_leak;  // fixtures/kernel/lrkleak.c, as loaded in the guest
  std::string elf;      // QEMU's default ELF dump: physical addresses only
  std::string kdump_z;  // arm64: QEMU's -z dump, which leakref refuses (kdump is "")
};
const Dump& dump(const std::string& kernel = "6.1");
// struct file's count member on the dump's kernel: f_count, f_ref since 6.13.
inline std::string file_count_member(const Dump& d) {
  return d.kernel == "7.x" ? "f_ref" : "f_count";
}
// The kernels the tests run on: "5.10" (Debian 11's), "6.1" and "6.12"
// (Debian 12's), "7.x" (sid's), all x86-64, and "arm64" (Debian 12's 6.1
// for arm64).
const std::vector<std::string>& kernels();
// The dump read through libkdumpfile: the kdump file, or arm64's
// physical-address ELF (QEMU's -z dump of an arm64 guest is refused).
inline const std::string& kdump_or_elf(const Dump& d) {
  return d.kdump.empty() ? d.elf : d.kdump;
}
// openat(2)'s frames in an allocation stack, innermost first, from the
// allocation down to the architecture's syscall dispatch (7.x renamed
// do_filp_open do_file_open), and the entry frame that ends the stack.
std::vector<std::string> openat_frames(const Dump& d);
std::string syscall_entry(const Dump& d);

// What the guest said it set up (fixtures/kernel/lrholder.c and init).
struct Hold {
  std::string comm, name;
  int pid = 0, fd = 0;
  uint64_t ino = 0;
};
struct Guest {
  std::vector<Hold> holds;
  std::map<std::string, std::pair<int64_t, std::vector<std::string>>> modules;  // users, used-by
  int holder_pid = 0;
  uint64_t files = 0;
};
Guest guest(const Dump& d);

// `leakref kernel --vmcore VMCORE --vmlinux ... ARGS` must exit 0: its JSON.
json kernel_json(const Dump& d, const std::string& vmcore, const std::vector<std::string>& args);
// The same report from two sources: everything but the dump's path and timings.
json comparable(json j);
const json* find_inode(const json& sb, uint64_t ino);
// The tmpfs holding the guest's files (FILES + its root).
const json& leak_sb(const json& inodes, uint64_t files);
// An inodes report / a modules report against the guest's manifest.
void check_inodes(const json& j, const Guest& g);
void check_modules(const json& j, const Guest& g);
// The bundled linux-vfs profile (data, no C++) against the C++ inode report:
// the same super blocks, every inode with the same i_count and as many
// aliases as that report lists dentries; the kdump file (where the guest has
// one leakref reads) gives the same answer.
void vfs_profile_agrees(const Dump& d);

// What the lrlocks module (fixtures/kernel/lrlocks.c) logged about itself:
// per object set, addresses in walk order, refcounts, leaked references and
// the invariants it broke on purpose.
struct LockObj {
  std::string addr;
  int64_t refcount = 0, leaked = 0, granted = 0;
  std::vector<std::string> violates;
};
std::map<std::string, std::vector<LockObj>> lrlocks_truth(const Dump& d);
// A profile set against the module's truth (objects, order, refcounts,
// verdicts, violations).
void check_lock_set(const json& set, const std::vector<LockObj>& want, bool counted);
const json& named_set(const json& j, const std::string& name);

// /proc/slabinfo as the guest printed it right before dump A (`b`: dump B):
// cache -> {active_objs, num_objs, objperslab, num_slabs}.
struct SlabInfo {
  int64_t active = 0, objs = 0, per_slab = 0, slabs = 0;
};
std::map<std::string, SlabInfo> slabinfo(const Dump& d, bool b = false);
// Every cache of one slab report by name.
std::map<std::string, json> caches_of(const json& j);
// The slab report of a dump against the slabinfo the guest printed before it.
void check_slabinfo(const json& j, const std::map<std::string, SlabInfo>& si);

// crash 8.0.2 in batch mode on a kernel's ELF dump (6.1's unless told),
// reading `cmdfile`.
std::vector<std::string> crash_argv(const std::string& cmdfile, const std::string& kernel = "6.1");
std::string write_cmds(const std::vector<std::string>& cmds);
void crash_session(const std::vector<std::string>& cmds, lrtest::RunResult* out,
                   const std::string& kernel = "6.1");
// sid's crash (9.x) in a tree of sid's packages (scripts/debian-root): it
// opens the 6.12 dumps 8.0.2 cannot. The tree (built once per run), or ""
// with why it could not be built.
const std::string& sid_crash_root(std::string* why);
// The extension built against sid's crash's defs.h (make extension-other),
// loadable in sid_crash_session; "" with why when it could not be built.
std::string sid_extension(std::string* why);
// As crash_session, with sid's crash; status -1 and err when the tree could
// not be built.
void sid_crash_session(const std::vector<std::string>& cmds, lrtest::RunResult* out,
                       const std::string& kernel);
// Values crash prints for `struct TYPE.a,b ADDR`: the last "NAME = N" per name.
std::map<std::string, int64_t> crash_values(const std::string& text);
// Runs each command of the docs section `name` (README's or docs/'s
// test:NAME-begin markers) in a directory holding `links` (file name ->
// target), checking its exit status and its output against the text, both
// through `norm`; returns how many commands ran.
size_t run_doc_section(const std::string& name, const std::map<std::string, std::string>& links,
                       const std::function<std::string(std::string)>& norm);
// Splits output at "MARK name" lines printed with crash's shell escape.
std::map<std::string, std::string> sections(const std::string& out);

}  // namespace kguest

// Skips only when a facility is missing (QEMU, crash, ...); a failure of
// scripts/kernel-vmcore itself fails the test.
#define NEED_KERNEL(d)                                                       \
  do {                                                                       \
    if ((d).broken) FAIL("kernel " << (d).kernel << " vmcore: " << (d).why); \
    if (!(d).ok) LR_SKIP("kernel " + (d).kernel + " vmcore: " + (d).why);    \
  } while (0)
#define NEED_DUMP() NEED_KERNEL(::kguest::dump("6.1"))
#define NEED_CRASH()                                             \
  do {                                                           \
    NEED_DUMP();                                                 \
    if (!::lrtest::have_program("crash"))                        \
      LR_SKIP("crash is not installed (make deps installs it)"); \
  } while (0)
