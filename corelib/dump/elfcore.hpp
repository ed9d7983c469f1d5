// A memory backend: an ELF core file (gcore output or a kernel-written core),
// opened read-only and mmapped. Pages the core left out are filled from the
// mapped files on disk (NT_FILE) when their build-ids match the core's.
#pragma once

#include <elf.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/dump/memory.hpp"

namespace lr {

// Whether `path` is a kdump-compressed kernel dump (its "KDUMP   " magic);
// an ELF vmcore opens as a CoreFile and says so with is_kernel(). Never
// blocks on a FIFO (not a regular file: false).
bool is_kdump_file(const std::string& path);
// Whether the file open at `fd` (`size` bytes) is a kernel dump: kdump-
// compressed (or makedumpfile's flattened form), or an ELF core with kernel
// virtual addresses in a PT_LOAD or a VMCOREINFO note (a physical-only
// dump). Reads at most the program headers and one note; bounded by `size`.
bool is_kernel_dump(int fd, uint64_t size);

struct CoreOptions {
  std::string sysroot;   // prefix for NT_FILE paths when reading files on disk ("" = /)
  std::string exe_path;  // overrides the executable's on-disk path (--exe); "" = from NT_FILE
  bool fill_from_files = true;
};

// A thread's general registers as its core's NT_PRSTATUS holds them:
// x86_64's `struct user_regs_struct` (27) or aarch64's `struct
// user_pt_regs` (x0-x30, sp, pc, pstate: 34).
inline int register_count(uint16_t machine) {
  return machine == EM_AARCH64 ? 34 : 27;
}

struct ThreadInfo {
  static constexpr int kMaxRegs = 34;
  int tid = 0;
  int signo = 0;         // pending/current signal (pr_cursig)
  uint16_t machine = 0;  // EM_X86_64 or EM_AARCH64
  uint64_t regs[kMaxRegs] = {};
  // The thread pointer: x86_64's fs_base (a register), aarch64's TPIDR_EL0
  // (its own note, NT_ARM_TLS); 0 when the core does not hold it (QEMU's
  // user-mode cores write no NT_ARM_TLS).
  uint64_t tp = 0;
  // The vector registers' words, 8 bytes a lane, as the core holds them:
  // x86-64's XMM (NT_FPREGSET's or NT_X86_XSTATE's legacy area), the upper
  // halves of YMM and ZMM and ZMM16-31 when XSTATE says they are in use;
  // aarch64's V0-V31 (NT_FPREGSET). A pointer a thread keeps only in one of
  // them (a vectorized copy) is a root like a general register's.
  struct VectorLane {
    uint64_t value = 0;
    uint16_t reg = 0;   // its register: xmm/ymm/zmm N, or v N
    uint16_t byte = 0;  // the lane's offset in it
  };
  std::vector<VectorLane> vregs;
  int nregs() const { return register_count(machine); }
  uint64_t pc() const { return machine == EM_AARCH64 ? regs[32] : regs[16]; }
  uint64_t sp() const { return machine == EM_AARCH64 ? regs[31] : regs[19]; }
};

// The names of a thread's registers, in ThreadInfo::regs order (nregs() of
// them, register_count); "x86_64" or "aarch64" for arch_name.
const char* const* register_names(uint16_t machine);
// A register by the index a reference records: a general register (below
// nregs()), else the vector lane nregs() places on ("xmm8", "zmm3+40").
std::string register_name(const ThreadInfo& t, uint64_t index);
const char* arch_name(uint16_t machine);

// One NT_FILE entry (one VMA backed by a file).
struct MappedRange {
  uint64_t start = 0, end = 0;  // [start, end)
  uint64_t file_offset = 0;     // byte offset in the file
  std::string path;             // as the process saw it (" (deleted)" stripped)
};

// What we know about one distinct file mapped in the process.
struct MappedFileInfo {
  enum class Status {
    kVerified,      // on-disk build-id equals the core's: holes filled from it
    kMismatch,      // build-ids differ: never used to fill
    kNoFile,        // the file could not be opened on this machine
    kUnverifiable,  // the core does not hold the file's ELF header/build-id note
    kNotElf,        // mapped file is not an ELF object (data file, font, ...)
  };
  std::string path;           // process path
  std::string host_path;      // path opened on this machine (sysroot/--exe applied)
  uint64_t base = 0;          // lowest mapped address of the file
  std::string core_build_id;  // hex, from the core's memory; "" if not there
  std::string disk_build_id;  // hex, from the file on disk; "" if none/unreadable
  Status status = Status::kNoFile;
  std::string detail;      // why, for the user
  bool looked_up = false;  // the host's file was tried (Status says with what result)
};

const char* mapped_status_name(MappedFileInfo::Status s);

struct SegmentInfo {
  enum class Kind { kCore, kFile, kMissing };
  uint64_t start = 0, end = 0;
  Kind kind = Kind::kMissing;
  std::string why;          // for kMissing: reason; for kFile: the file
  bool writable = false;    // the mapping was writable (PT_LOAD PF_W)
  bool executable = false;  // the mapping was executable (PF_X): code, never data
};

class CoreFile final : public Memory {
 public:
  ~CoreFile() override;
  CoreFile(const CoreFile&) = delete;
  CoreFile& operator=(const CoreFile&) = delete;

  // Opens `path` read-only. Fails (kIo/kBadFormat/kUnsupported) only when the
  // file cannot be used at all; damage that still allows partial analysis is
  // reported through warnings().
  static Result<std::unique_ptr<CoreFile>> open(const std::string& path, const CoreOptions& opts);

  // Parses an in-memory image (the caller keeps it alive). No files are read
  // from disk. Used by the fuzzer and tests.
  static Result<std::unique_ptr<CoreFile>> open_memory(const uint8_t* data, size_t size,
                                                       const std::string& name);

  const uint8_t* span(uint64_t addr, size_t len) const override;
  Result<void> read(uint64_t addr, void* buf, size_t len) const override;
  std::string why_unreadable(uint64_t addr) const override;
  bool window(uint64_t addr, Window* w) const override;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  const std::vector<ThreadInfo>& threads() const { return threads_; }
  // Sets thread `tid`'s thread pointer when the core did not hold it (a
  // finder read it from the C library's thread list); no-op otherwise.
  void set_thread_pointer(int tid, uint64_t tp) {
    for (auto& t : threads_)
      if (t.tid == tid && t.tp == 0) t.tp = tp;
  }
  const std::vector<MappedRange>& mapped_ranges() const { return ranges_; }
  const std::vector<MappedFileInfo>& mapped_files() const { return files_; }
  const std::vector<std::pair<uint64_t, uint64_t>>& auxv() const { return auxv_; }
  uint64_t auxv_value(uint64_t type) const;                 // 0 if absent
  const std::string& prog_name() const { return fname_; }   // NT_PRPSINFO pr_fname
  const std::string& prog_args() const { return psargs_; }  // NT_PRPSINFO pr_psargs
  int pid() const { return pid_; }
  uint16_t machine() const { return machine_; }  // the ELF header's e_machine
  // Why a core without an NT_FILE note lists no mapped files (no executable
  // named, or not the core's); "" otherwise.
  const std::string& mapped_files_why() const { return no_files_why_; }
  bool is_kernel() const { return has_vmcoreinfo_; }
  const std::string& vmcoreinfo() const { return vmcoreinfo_; }

  std::vector<SegmentInfo> segments() const;
  uint64_t bytes_in_core() const;
  uint64_t bytes_from_files() const;
  uint64_t bytes_missing() const;
  bool truncated() const { return truncated_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // The file mapped at `addr` (NT_FILE), or nullptr.
  const MappedRange* range_at(uint64_t addr) const;

 private:
  struct Seg {
    uint64_t start, end;
    SegmentInfo::Kind kind;
    const uint8_t* data;      // at `start`; null for kMissing
    int why;                  // index into whys_ (kMissing) or files_ (kFile)
    bool writable = false;    // its PT_LOAD had PF_W
    bool executable = false;  // and PF_X
  };
  struct Mapping {
    void* addr;
    size_t len;
  };
  CoreFile() = default;
  Result<void> parse(const CoreOptions* opts);
  void parse_notes(const uint8_t* p, size_t n);
  void add_thread(const uint8_t* d, size_t dn);
  // No NT_FILE: the mapped files from the link map (linkmap_files.cpp).
  void ranges_from_link_map(const CoreOptions& opts);
  void link_map_object(const std::string& name, uint64_t bias, uint64_t ld,
                       const std::string& sysroot);
  uint64_t page_size() const { return auxv_value(AT_PAGESZ) ? auxv_value(AT_PAGESZ) : 4096; }
  void load_phdr(const Elf64_Phdr& ph, size_t i, std::vector<Seg>& core, std::vector<Seg>& missing);
  // `core` less the bytes two program headers claim (in memory or in the
  // file) or that are the file's own (`reserved`: headers, notes); those
  // become `missing`, said in a warning.
  std::vector<Seg> without_overlaps(std::vector<Seg> core,
                                    const std::vector<std::pair<uint64_t, uint64_t>>& reserved,
                                    std::vector<Seg>* missing);
  std::vector<Seg> first_of_overlaps(std::vector<Seg> core);
  std::vector<std::pair<uint64_t, uint64_t>> note_spans_;  // the notes' bytes in the file
  void fill_from_files(const CoreOptions& opts);
  void verify_file(size_t fidx, const std::vector<size_t>& rs,
                   std::map<std::string, bool>& dir_exists, std::vector<Seg>& file_segs);
  void build_segments(std::vector<Seg> core, std::vector<Seg> missing, std::vector<Seg> file);
  const Seg* find(uint64_t addr) const;

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::vector<Mapping> mappings_;  // owned mmaps (core, files)
  std::vector<Seg> segs_;          // sorted, non-overlapping
  std::vector<Seg> core_segs_;     // core-backed only (for reading ELF headers pre-fill)
  mutable const Seg* last_ = nullptr;
  std::vector<std::string> whys_;
  std::vector<ThreadInfo> threads_;
  std::vector<MappedRange> ranges_;
  std::vector<MappedFileInfo> files_;
  std::vector<std::pair<uint64_t, uint64_t>> auxv_;
  std::vector<Seg> raw_missing_;
  std::string fname_, psargs_, vmcoreinfo_, no_files_why_;
  int pid_ = 0;
  uint16_t machine_ = 0;
  bool truncated_ = false;
  bool has_vmcoreinfo_ = false;
  std::vector<std::string> warnings_;
  std::set<std::string> dynamic_matched_;  // files whose dynamic section is the core's
};

// Maps a whole regular file read-only (the caller munmaps it); `what` names
// its role in errors: kIo when it cannot be opened or mapped, kBadFormat
// when it is empty.
Result<std::pair<void*, size_t>> map_file(const std::string& path, const char* what);

// Reads the GNU build-id of an ELF image loaded at `base` in `mem` (its
// headers and note must be readable there). Returns "" when it cannot.
std::string build_id_from_memory(const Memory& mem, uint64_t base);

// Build-id of an ELF file on disk as lower-case hex; kNotFound if it has none.
Result<std::string> build_id_of_file(const std::string& path);

std::string hex_bytes(const uint8_t* p, size_t n);

}  // namespace lr
