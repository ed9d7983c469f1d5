// Test harness: runs fixture programs, takes real cores of them with gcore,
// and runs the leakref binary. Cores are taken once per fixture per test run.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace lrtest {

struct RunResult {
  int status = -1;  // exit code, or 128+signal, or -1 on timeout
  std::string out, err;
  bool timed_out = false;
  nlohmann::json json() const;  // parses `out`; throws on bad JSON
};

// Runs argv[0] with arguments; kills it after `timeout_s`.
RunResult run(const std::vector<std::string>& argv, int timeout_s = 60);
// Runs build/leakref with arguments.
RunResult leakref(const std::vector<std::string>& args, int timeout_s = 60);

// A program left running (a tracer, a fixture waiting for its go file);
// stdout and stderr go to files.
struct Background {
  int pid = -1;
  std::string out_path, err_path;
};
Background spawn(const std::vector<std::string>& argv);
// Sends `sig`, waits up to `timeout_s` (then SIGKILL); returns the exit code.
int finish(Background& b, int sig, int timeout_s = 60);
bool wait_for_file(const std::string& path, int timeout_s);
bool wait_for_text(const std::string& path, const std::string& text, int timeout_s);
bool have_program(const std::string& name);  // on PATH
// Waits until `path` has kept its size for about a second (at most timeout_s).
void wait_for_stable_size(const std::string& path, int timeout_s);

struct FixtureCore {
  std::string core;  // path of the gcore core
  std::string exe;   // the fixture binary that ran
  nlohmann::json manifest;
  int pid = 0;
};

// Starts `exe args... MANIFEST` (manifest path inserted first), waits for
// READY, takes its core with gcore, kills it. Cached by `key`.
// File offset of virtual address `va` in the ELF core image `img`; 0 when
// no PT_LOAD holds it (tests that damage a core in one place).
uint64_t core_offset(const std::string& img, uint64_t va);

// `launcher` runs before exe (an interpreter, a chroot): the manifest's
// "pid" then names the process cored, and it is killed with the launcher.
const FixtureCore& fixture_core(const std::string& key, const std::string& exe,
                                const std::vector<std::string>& extra_args = {},
                                const std::vector<std::string>& launcher = {});
// The same for an aarch64 fixture run by qemu-aarch64 on the arm64 libc in
// `sysroot`: once a stdout line starts with `ready`, the guest is sent
// SIGABRT and the core is the one qemu writes. `guest_env` ("K=V") is set
// for the guest only. Cached by `key`.
const FixtureCore& qemu_fixture_core(const std::string& key, const std::string& exe,
                                     const std::string& sysroot,
                                     const std::vector<std::string>& extra_args = {},
                                     const std::string& ready = "READY",
                                     const std::vector<std::string>& guest_env = {});

std::string build_dir();       // absolute build directory
std::string json_spool_dir();  // where leakref()'s JSON outputs are kept for the schema check
std::string fixture_path(const std::string& name);  // build/fixtures/NAME
std::string tmp_dir();                              // per-run scratch directory (removed at exit)
bool have_gcore();
std::string read_file(const std::string& path);
// The `ptr` of every item of a fixture manifest (fx_leaks's "items") whose
// kind is one of `kinds`.
std::set<std::string> manifest_items(const nlohmann::json& m,
                                     std::initializer_list<const char*> kinds);
void write_file(const std::string& path, const std::string& data);
std::string sha256_file(const std::string& path);
// A copy of ELF core `core` at `out` with values of `width` bytes (little
// endian: 1 to 8) written at virtual addresses (the PT_LOAD that holds
// each); the original is never modified. Fails the test when a copy or a
// write fails.
// The file offset of `len` bytes at virtual address `va` of the ELF file
// open at `fd` (PN_XNUM program header counts too); 0 when no PT_LOAD holds them.
uint64_t elf_offset(int fd, uint64_t va, size_t len);
std::string patched(const std::string& core, const std::string& out,
                    const std::vector<std::pair<uint64_t, uint64_t>>& writes, int width = 8);
// The physical address of virtual address `va` in an ELF dump whose
// PT_LOADs carry both (QEMU's paging dump); 0 when none holds it.
uint64_t elf_phys(const std::string& dump, uint64_t va);
// A copy of ELF dump `dump` at `out` without the 4 KiB page at physical
// address `pa`, as makedumpfile leaves a page it filtered out: the PT_LOAD
// holding it split in two around it (a new program header table at the
// end of the copy). Fails the test when no PT_LOAD holds the page.
std::string holed(const std::string& dump, const std::string& out, uint64_t pa);

// Skipping is loud: the reason is printed and counted in the closing line.
// README.md and every docs/*.md, one after the other.
std::string docs_text();
// The README or a docs page between <!-- test:NAME-begin --> and
// <!-- test:NAME-end -->; "" when the markers are missing.
std::string readme_section(const std::string& name);
// Each "```\n$ CMD\nOUTPUT```" block of a README section, in order.
struct ReadmeCommand {
  std::string cmd, want;
};
std::vector<ReadmeCommand> readme_commands(const std::string& section);
// The command lines of man/PAGE's EXAMPLES section, roff escapes undone and
// continued lines joined; empty when the page has none.
std::vector<std::string> man_examples(const std::string& page);
void note_skip(const std::string& reason);
// A PNG screenshot of `url` by headless chromium (as root: no sandbox); its
// size, or -1 when chromium failed.
long screenshot(const std::string& url, const std::string& png);

// Dumps other test files make, shared with the batch archive test. `why`
// says why there are none (`broken`: our own set-up failed, a failure).
struct SharedDumps {
  std::vector<std::string> paths;
  std::string debug_dir;  // where their debuginfo (vmlinux) is, when needed
  std::string why;
  bool broken = false;
};
// test_gluster.cpp: a FUSE client's core and its own statedump, a brick's core.
SharedDumps gluster_dumps();
// test_kernel.cpp: the guest's ELF and kdump-compressed vmcores.
SharedDumps kernel_dumps();
int skipped_count();
// Every skip of this run, in order: the test case and the reason.
struct Skip {
  std::string test, reason;
};
const std::vector<Skip>& skips();
// tests/allowed-skips.txt: "TEST CASE NAME | why it may skip" lines (# comments);
// `error` says what is wrong with the file, when something is.
std::map<std::string, std::string> allowed_skips(const std::string& path, std::string* error);

}  // namespace lrtest

#define LR_SKIP(reason)          \
  do {                           \
    ::lrtest::note_skip(reason); \
    return;                      \
  } while (0)
