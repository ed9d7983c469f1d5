#include "corelib/dump/elfcore.hpp"

#include "corelib/base/decompress.hpp"
#include "corelib/base/fileio.hpp"
#include "corelib/dump/dump_kind.hpp"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>

namespace lr {

namespace {

constexpr uint64_t kPage = 4096;

bool ranges_overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  return a0 < b1 && b0 < a1;
}

}  // namespace

Result<std::pair<void*, size_t>> map_file(const std::string& path, const char* what) {
  LR_ASSIGN(int raw, open_input(path, what));
  Fd fd(raw);
  struct stat st {};
  if (fstat(fd.fd, &st) != 0)
    return make_error(Errc::kIo, fmt::format("{}: {}", path, strerror(errno)));
  if (st.st_size == 0) return make_error(Errc::kBadFormat, fmt::format("{}: empty file", path));
  void* m = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (m == MAP_FAILED)
    return make_error(Errc::kIo, fmt::format("{}: cannot map {}: {}", path, what, strerror(errno)));
  return std::make_pair(m, static_cast<size_t>(st.st_size));
}

std::string hex_bytes(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(d[p[i] >> 4]);
    s.push_back(d[p[i] & 15]);
  }
  return s;
}

const char* const* register_names(uint16_t machine) {
  static const char* const x86_64[27] = {
      "r15",    "r14", "r13", "r12",     "rbp",     "rbx", "r11",      "r10", "r9",
      "r8",     "rax", "rcx", "rdx",     "rsi",     "rdi", "orig_rax", "rip", "cs",
      "eflags", "rsp", "ss",  "fs_base", "gs_base", "ds",  "es",       "fs",  "gs"};
  static const char* const aarch64[34] = {
      "x0",  "x1",  "x2",  "x3",  "x4",  "x5",  "x6",  "x7",  "x8",  "x9",    "x10", "x11",
      "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21",   "x22", "x23",
      "x24", "x25", "x26", "x27", "x28", "x29", "x30", "sp",  "pc",  "pstate"};
  return machine == EM_AARCH64 ? aarch64 : x86_64;
}

const char* arch_name(uint16_t machine) {
  return machine == EM_AARCH64 ? "aarch64" : machine == EM_X86_64 ? "x86_64" : "unknown";
}

const char* mapped_status_name(MappedFileInfo::Status s) {
  switch (s) {
    case MappedFileInfo::Status::kVerified:
      return "verified";
    case MappedFileInfo::Status::kMismatch:
      return "build-id mismatch";
    case MappedFileInfo::Status::kNoFile:
      return "file not found";
    case MappedFileInfo::Status::kUnverifiable:
      return "unverifiable";
    case MappedFileInfo::Status::kNotElf:
      return "not ELF";
  }
  return "?";
}

CoreFile::~CoreFile() {
  for (auto& m : mappings_) munmap(m.addr, m.len);
}

// A compressed core (systemd-coredump's .zst, an archive's .gz) is
// decompressed to a temporary file, mapped and removed at once: the mapping
// keeps its pages, and nothing is left behind however the process ends.
static Result<std::pair<void*, size_t>> map_core(const std::string& path) {
  const Compression comp = file_compression(path);
  if (comp == Compression::kNone) return map_file(path, "core");
  constexpr uint64_t kLimit = uint64_t{64} << 30;
  LR_ASSIGN(std::string tmp,
            decompress_temp(path, comp, kLimit, [](std::string_view h) { return dump_extent(h); }));
  auto m = map_file(tmp, "core");
  ::unlink(tmp.c_str());
  if (!m.ok()) return make_error(m.error().code, path + " (decompressed): " + m.error().message);
  return m;
}

Result<std::unique_ptr<CoreFile>> CoreFile::open(const std::string& path, const CoreOptions& opts) {
  std::unique_ptr<CoreFile> c(new CoreFile());
  c->path_ = path;
  LR_ASSIGN(auto m, map_core(path));
  c->mappings_.push_back({m.first, m.second});
  c->base_ = static_cast<const uint8_t*>(m.first);
  c->size_ = m.second;
  LR_TRY(c->parse(&opts));
  return c;
}

Result<std::unique_ptr<CoreFile>> CoreFile::open_memory(const uint8_t* data, size_t size,
                                                        const std::string& name) {
  std::unique_ptr<CoreFile> c(new CoreFile());
  c->path_ = name;
  c->base_ = data;
  c->size_ = size;
  LR_TRY(c->parse(nullptr));
  return c;
}

bool is_kdump_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  char magic[8] = {};
  bool got = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
             ::pread(fd, magic, sizeof magic, 0) == sizeof magic;
  ::close(fd);
  return got && std::memcmp(magic, "KDUMP   ", 8) == 0;
}

bool is_kernel_dump(int fd, uint64_t size) {
  unsigned char eh[64];
  if (::pread(fd, eh, sizeof eh, 0) != sizeof eh) return false;
  if (std::memcmp(eh, "KDUMP   ", 8) == 0 || std::memcmp(eh, "makedumpfile", 12) == 0) return true;
  if (std::memcmp(eh, ELFMAG, SELFMAG) != 0 || eh[EI_CLASS] != ELFCLASS64) return false;
  uint64_t phoff, shoff;
  uint16_t phentsize, phnum;
  std::memcpy(&phoff, eh + 32, 8);
  std::memcpy(&shoff, eh + 40, 8);
  std::memcpy(&phentsize, eh + 54, 2);
  std::memcpy(&phnum, eh + 56, 2);
  if (phentsize != sizeof(Elf64_Phdr) || phoff > size) return false;
  uint64_t count = phnum;
  if (phnum == PN_XNUM) {  // the count is section 0's sh_info
    Elf64_Shdr sh;
    if (shoff > size || ::pread(fd, &sh, sizeof sh, static_cast<off_t>(shoff)) != sizeof sh)
      return false;
    count = sh.sh_info;
  }
  count = std::min<uint64_t>(count, (size - phoff) / sizeof(Elf64_Phdr));
  for (uint64_t i = 0; i < count; ++i) {
    Elf64_Phdr ph;
    if (::pread(fd, &ph, sizeof ph, static_cast<off_t>(phoff + sizeof ph * i)) != sizeof ph) break;
    // Kernel space, but not the vsyscall page every x86-64 user core maps.
    if (ph.p_type == PT_LOAD && ph.p_vaddr >= 0xffff800000000000ull &&
        ph.p_vaddr < 0xffffffffff600000ull)
      return true;
    if (ph.p_type == PT_NOTE && ph.p_offset < size && ph.p_filesz <= (1u << 20)) {
      std::string note(std::min<uint64_t>(ph.p_filesz, size - ph.p_offset), '\0');
      if (::pread(fd, note.data(), note.size(), static_cast<off_t>(ph.p_offset)) > 0 &&
          note.find("VMCOREINFO") != std::string::npos)
        return true;
    }
  }
  return false;
}

namespace {

// What an ELF header must say for leakref to read the file as a process
// core: the first thing wrong, naming the file.
Result<void> check_core_header(const Elf64_Ehdr& eh, const std::string& path_) {
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return make_error(Errc::kBadFormat, fmt::format("{}: not an ELF file (bad magic)", path_));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: only 64-bit little-endian cores are supported", path_));
  if (eh.e_type != ET_CORE) {
    const char* t = eh.e_type == ET_EXEC  ? "an executable"
                    : eh.e_type == ET_DYN ? "a shared object or PIE executable"
                    : eh.e_type == ET_REL ? "a relocatable object"
                                          : "not a core";
    return make_error(
        Errc::kBadFormat,
        fmt::format("{}: ELF file is {}, not a core dump (e_type={})", path_, t, eh.e_type));
  }
  if (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64)
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: core is for machine {}, only x86_64 and aarch64 are "
                                  "supported",
                                  path_, eh.e_machine));
  if (eh.e_phentsize != sizeof(Elf64_Phdr))
    return make_error(Errc::kBadFormat, fmt::format("{}: corrupt ELF header (e_phentsize={})",
                                                    path_, eh.e_phentsize));

  return {};
}

}  // namespace

Result<void> CoreFile::parse(const CoreOptions* opts) {
  if (size_ < sizeof(Elf64_Ehdr))
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: not an ELF core (only {} bytes)", path_, size_));
  Elf64_Ehdr eh;
  std::memcpy(&eh, base_, sizeof eh);
  LR_TRY(check_core_header(eh, path_));
  machine_ = eh.e_machine;

  elf_version(EV_CURRENT);
  // Native byte order was checked above, so libelf never converts in place
  // (the image is mapped read-only).
  Elf* elf = elf_memory(const_cast<char*>(reinterpret_cast<const char*>(base_)), size_);
  if (!elf) return make_error(Errc::kBadFormat, fmt::format("{}: {}", path_, elf_errmsg(-1)));
  struct ElfGuard {
    Elf* e;
    ~ElfGuard() { elf_end(e); }
  } guard{elf};

  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0)
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: cannot read program headers: {}", path_, elf_errmsg(-1)));
  // libelf reports 0 headers when the table lies outside the file; check the
  // raw count too so that case is an error rather than an empty core.
  if (eh.e_phnum != PN_XNUM && phnum < eh.e_phnum) phnum = eh.e_phnum;
  if (phnum == 0)
    return make_error(Errc::kBadFormat, fmt::format("{}: core has no program headers", path_));
  if (eh.e_phoff > size_ || phnum > (size_ - eh.e_phoff) / sizeof(Elf64_Phdr))
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: program header table (offset {}, {} entries) lies beyond "
                                  "the end of the file: truncated or corrupt",
                                  path_, eh.e_phoff, phnum));

  std::vector<Seg> core, missing;
  whys_.push_back("not saved in core (p_filesz < p_memsz)");     // 0
  whys_.push_back("beyond the end of the truncated core file");  // 1
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph)) {
      warnings_.push_back(fmt::format("program header {} unreadable: {}", i, elf_errmsg(-1)));
      continue;
    }
    load_phdr(ph, i, core, missing);
  }
  if (truncated_)
    warnings_.push_back(
        fmt::format("core file is truncated ({} bytes): some memory is missing", size_));

  // The file's own structures: the ELF header, the program headers and the
  // notes, which no segment's bytes may be.
  std::vector<std::pair<uint64_t, uint64_t>> reserved{
      {0, sizeof(Elf64_Ehdr)}, {eh.e_phoff, eh.e_phoff + phnum * sizeof(Elf64_Phdr)}};
  reserved.insert(reserved.end(), note_spans_.begin(), note_spans_.end());
  std::vector<Seg> clean = without_overlaps(std::move(core), reserved, &missing);
  core_segs_ = clean;
  std::sort(missing.begin(), missing.end(),
            [](const Seg& a, const Seg& b) { return a.start < b.start; });
  raw_missing_ = missing;
  build_segments(clean, missing, {});
  if (opts) ranges_from_link_map(*opts);
  if (opts && opts->fill_from_files) fill_from_files(*opts);
  return {};
}

// One program header: a note segment's notes, or a load segment's bytes in
// the file (core) and what the file lacks of it (missing).
void CoreFile::load_phdr(const Elf64_Phdr& ph, size_t i, std::vector<Seg>& core,
                         std::vector<Seg>& missing) {
  if (ph.p_type == PT_NOTE) {
    if (ph.p_offset < size_)
      note_spans_.emplace_back(ph.p_offset,
                               ph.p_offset + std::min<uint64_t>(ph.p_filesz, size_ - ph.p_offset));
    if (ph.p_offset >= size_ || ph.p_filesz > size_ - ph.p_offset) {
      truncated_ = true;
      warnings_.push_back(fmt::format(
          "note segment (offset {:#x}, {} bytes) extends past the end of the file: threads and "
          "mapped files may be missing",
          ph.p_offset, ph.p_filesz));
      if (ph.p_offset < size_) parse_notes(base_ + ph.p_offset, size_ - ph.p_offset);
    } else {
      parse_notes(base_ + ph.p_offset, ph.p_filesz);
    }
    return;
  }
  if (ph.p_type != PT_LOAD || ph.p_memsz == 0) return;
  uint64_t va = ph.p_vaddr;
  if (va + ph.p_memsz < va) {
    warnings_.push_back(
        fmt::format("segment {} at {:#x}: size {:#x} wraps the address space; "
                    "ignored (corrupt program header)",
                    i, va, ph.p_memsz));
    return;
  }
  uint64_t filesz = ph.p_filesz;
  if (filesz > ph.p_memsz) {
    warnings_.push_back(
        fmt::format("segment {} at {:#x}: p_filesz > p_memsz; using p_memsz", i, va));
    filesz = ph.p_memsz;
  }
  uint64_t avail = 0;
  if (ph.p_offset < size_) avail = std::min<uint64_t>(filesz, size_ - ph.p_offset);
  const bool w = ph.p_flags & PF_W, x = ph.p_flags & PF_X;
  if (avail < filesz) {
    truncated_ = true;
    missing.push_back({va + avail, va + filesz, SegmentInfo::Kind::kMissing, nullptr, 1, w, x});
  }
  if (avail)
    core.push_back({va, va + avail, SegmentInfo::Kind::kCore, base_ + ph.p_offset, -1, w, x});
  if (filesz < ph.p_memsz)
    missing.push_back(
        {va + filesz, va + ph.p_memsz, SegmentInfo::Kind::kMissing, nullptr, 0, w, x});
}

namespace {

using Span = std::pair<uint64_t, uint64_t>;

// Where intervals [first, second) of `v` overlap one another: each part
// that two of them claim, merged, in order. One sort and a sweep (a core
// can have 100,000 segments).
std::vector<Span> claimed_twice(std::vector<Span> v) {
  std::sort(v.begin(), v.end());
  std::vector<Span> out;
  uint64_t reach = 0;
  bool any = false;
  for (const auto& [a, b] : v) {
    if (any && a < reach) {
      const Span bad{a, std::min(b, reach)};
      if (!out.empty() && bad.first <= out.back().second)
        out.back().second = std::max(out.back().second, bad.second);
      else
        out.push_back(bad);
    }
    reach = any ? std::max(reach, b) : b;
    any = true;
  }
  return out;
}

// [a, b) less every span of sorted, disjoint `cut`: the parts kept, and
// (in `lost`) the parts cut.
std::vector<Span> keep_outside(uint64_t a, uint64_t b, const std::vector<Span>& cut,
                               std::vector<Span>* lost) {
  std::vector<Span> kept;
  auto it = std::upper_bound(cut.begin(), cut.end(), Span{a, UINT64_MAX});
  if (it != cut.begin()) --it;
  uint64_t at = a;
  for (; it != cut.end() && it->first < b; ++it) {
    if (it->second <= at) continue;
    if (it->first > at) kept.emplace_back(at, it->first);
    lost->emplace_back(std::max(at, it->first), std::min(b, it->second));
    at = std::max(at, it->second);
  }
  if (at < b) kept.emplace_back(at, b);
  return kept;
}

}  // namespace

std::vector<CoreFile::Seg> CoreFile::first_of_overlaps(std::vector<Seg> core) {
  // A kernel dump's segments that overlap in memory: the first one holds
  // each address, said once.
  std::sort(core.begin(), core.end(), [](const Seg& a, const Seg& b) { return a.start < b.start; });
  std::vector<Seg> clean;
  for (auto& s : core) {
    if (!clean.empty() && s.start < clean.back().end) {
      warnings_.push_back(
          fmt::format("segments overlap at {:#x}: corrupt program header", s.start));
      if (s.end <= clean.back().end) continue;
      s.data += clean.back().end - s.start;
      s.start = clean.back().end;
    }
    clean.push_back(s);
  }
  return clean;
}

std::vector<CoreFile::Seg> CoreFile::without_overlaps(std::vector<Seg> core,
                                                      const std::vector<Span>& reserved,
                                                      std::vector<Seg>* missing) {
  // Bytes two segments claim, in memory or in the file, or a segment's file
  // bytes that are the headers' or the notes': a corrupt program header.
  // Which one is right cannot be told, so none is read there: the address
  // range becomes missing, said once, never another object's bytes.
  // A kernel dump's segments may share bytes (QEMU's paging dump gives
  // each virtual alias of a physical page that page's one copy): only a
  // process core (an auxiliary vector, no VMCOREINFO) is held to this.
  if (auxv_.empty() || is_kernel()) return first_of_overlaps(std::move(core));
  std::vector<Span> addr, file = reserved;
  for (const auto& s : core) {
    addr.emplace_back(s.start, s.end);
    file.emplace_back(static_cast<uint64_t>(s.data - base_),
                      static_cast<uint64_t>(s.data - base_) + (s.end - s.start));
  }
  const std::vector<Span> bad_addr = claimed_twice(addr), bad_file = claimed_twice(file);
  if (bad_addr.empty() && bad_file.empty()) return core;
  const int why = static_cast<int>(whys_.size());
  whys_.push_back(
      "claimed twice in the core file (program headers that overlap in memory, or whose bytes "
      "are another segment's, the notes' or the headers'): corrupt, not read");
  std::vector<Seg> clean;
  uint64_t lost_bytes = 0;
  for (const auto& s : core) {
    const uint64_t off = static_cast<uint64_t>(s.data - base_);
    std::vector<Span> lost;
    // The file's bad spans, as addresses of this segment.
    std::vector<Span> cut = bad_addr;
    for (const auto& [a, b] : bad_file)
      if (a < off + (s.end - s.start) && off < b)
        cut.emplace_back(s.start + (std::max(a, off) - off),
                         s.start + (std::min(b, off + (s.end - s.start)) - off));
    std::sort(cut.begin(), cut.end());
    std::vector<Span> merged;
    for (const auto& c : cut)
      if (!merged.empty() && c.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, c.second);
      else
        merged.push_back(c);
    for (const auto& [a, b] : keep_outside(s.start, s.end, merged, &lost)) {
      Seg k = s;
      k.data = s.data + (a - s.start);
      k.start = a, k.end = b;
      clean.push_back(k);
    }
    for (const auto& [a, b] : lost) {
      missing->push_back(
          {a, b, SegmentInfo::Kind::kMissing, nullptr, why, s.writable, s.executable});
      lost_bytes += b - a;
    }
  }
  // Two segments at one address were both cut: one missing range each is
  // one too many.
  std::sort(missing->begin(), missing->end(),
            [](const Seg& a, const Seg& b) { return a.start < b.start; });
  std::vector<Seg> dedup;
  for (auto& m : *missing)
    if (dedup.empty() || m.start >= dedup.back().end)
      dedup.push_back(m);
    else if (m.end > dedup.back().end)
      dedup.back().end = m.end;
  *missing = std::move(dedup);
  std::sort(clean.begin(), clean.end(),
            [](const Seg& a, const Seg& b) { return a.start < b.start; });
  warnings_.push_back(fmt::format(
      "program headers overlap (in memory, or in the file's bytes: the first at {:#x}): {} bytes "
      "claimed twice are not read (corrupt core)",
      !bad_addr.empty() ? bad_addr[0].first : bad_file[0].first, lost_bytes));
  return clean;
}

// One NT_PRSTATUS: `struct elf_prstatus` has the same header on both 64-bit
// machines (pr_cursig at 12, pr_pid at 32, pr_reg at 112); the registers
// that follow are the machine's own.
void CoreFile::add_thread(const uint8_t* d, size_t dn) {
  constexpr size_t kCursig = 12, kPid = 32, kReg = 112;
  ThreadInfo t;
  t.machine = machine_;
  const size_t regs = static_cast<size_t>(t.nregs()) * 8;
  if (dn < kReg + regs) {
    warnings_.push_back(fmt::format("NT_PRSTATUS note too small ({} bytes)", dn));
    return;
  }
  int16_t sig;
  int32_t pid;
  std::memcpy(&sig, d + kCursig, 2);
  std::memcpy(&pid, d + kPid, 4);
  t.tid = pid;
  t.signo = sig;
  std::memcpy(t.regs, d + kReg, regs);
  if (machine_ == EM_X86_64) t.tp = t.regs[21];  // fs_base
  if (threads_.empty()) pid_ = pid;
  threads_.push_back(t);
}

std::string register_name(const ThreadInfo& t, uint64_t index) {
  if (index < static_cast<uint64_t>(t.nregs())) return register_names(t.machine)[index];
  index -= static_cast<uint64_t>(t.nregs());
  if (index >= t.vregs.size()) return "?";
  const ThreadInfo::VectorLane& v = t.vregs[index];
  const char* kind = t.machine == EM_AARCH64       ? "v"
                     : v.byte >= 32 || v.reg >= 16 ? "zmm"
                     : v.byte >= 16                ? "ymm"
                                                   : "xmm";
  return v.byte ? fmt::format("{}{}+{}", kind, v.reg, v.byte) : fmt::format("{}{}", kind, v.reg);
}

namespace {

// `n` registers of `size` bytes from `d`, their lanes from byte `first` on.
void add_lanes(ThreadInfo& t, const uint8_t* d, unsigned reg0, unsigned n, unsigned size,
               unsigned first) {
  for (unsigned r = 0; r < n; ++r)
    for (unsigned b = 0; b + 8 <= size; b += 8) {
      ThreadInfo::VectorLane l;
      std::memcpy(&l.value, d + r * size + b, 8);
      l.reg = static_cast<uint16_t>(reg0 + r);
      l.byte = static_cast<uint16_t>(first + b);
      t.vregs.push_back(l);
    }
}

// x86-64's XSAVE area (NT_X86_XSTATE) in the standard format the kernel
// writes: XMM in the legacy area (at 160), the header's XSTATE_BV (at 512)
// saying which components hold state, YMM_Hi128 at 576, ZMM_Hi256 at 1152,
// Hi16_ZMM at 1664. A component past the note's end is not read.
void add_xstate(ThreadInfo& t, const uint8_t* d, size_t dn) {
  if (dn < 520) return;
  uint64_t bv = 0;
  std::memcpy(&bv, d + 512, 8);
  t.vregs.clear();  // the legacy area's XMM replace NT_FPREGSET's
  add_lanes(t, d + 160, 0, 16, 16, 0);
  if (bv & (1u << 2) && dn >= 576 + 256) add_lanes(t, d + 576, 0, 16, 16, 16);
  if (bv & (1u << 6) && dn >= 1152 + 512) add_lanes(t, d + 1152, 0, 16, 32, 32);
  if (bv & (1u << 7) && dn >= 1664 + 1024) add_lanes(t, d + 1664, 16, 16, 64, 0);
}

}  // namespace

void CoreFile::parse_notes(const uint8_t* p, size_t n) {
  size_t off = 0;
  auto align4 = [](size_t v) { return (v + 3) & ~size_t{3}; };
  while (off + sizeof(Elf64_Nhdr) <= n) {
    Elf64_Nhdr nh;
    std::memcpy(&nh, p + off, sizeof nh);
    size_t name_off = off + sizeof nh;
    size_t desc_off = name_off + align4(std::min<size_t>(nh.n_namesz, n));
    // A size past the segment: the notes after it (threads, files) are lost.
    if (nh.n_namesz > n || nh.n_descsz > n || desc_off > n || nh.n_descsz > n - desc_off) {
      warnings_.push_back(fmt::format(
          "note at offset {:#x} of its segment claims {} + {} bytes, past the segment's end: "
          "truncated or corrupt; notes from there on are not read",
          off, nh.n_namesz, nh.n_descsz));
      break;
    }
    std::string name(
        reinterpret_cast<const char*>(p + name_off),
        nh.n_namesz ? strnlen(reinterpret_cast<const char*>(p + name_off), nh.n_namesz) : 0);
    const uint8_t* d = p + desc_off;
    size_t dn = nh.n_descsz;
    if (name == "CORE" && nh.n_type == NT_PRSTATUS) {
      add_thread(d, dn);
    } else if (name == "CORE" && nh.n_type == NT_FPREGSET && !threads_.empty() &&
               threads_.back().vregs.empty()) {
      // The FP and vector registers of the thread whose NT_PRSTATUS came
      // last: x86-64's FXSAVE area (XMM at 160), aarch64's
      // user_fpsimd_state (V0-V31 from 0).
      ThreadInfo& t = threads_.back();
      if (machine_ == EM_X86_64 && dn >= 160 + 256) add_lanes(t, d + 160, 0, 16, 16, 0);
      if (machine_ == EM_AARCH64 && dn >= 512) add_lanes(t, d, 0, 32, 16, 0);
    } else if (name == "LINUX" && nh.n_type == NT_X86_XSTATE && machine_ == EM_X86_64 &&
               !threads_.empty()) {
      add_xstate(threads_.back(), d, dn);
    } else if (name == "LINUX" && nh.n_type == NT_ARM_TLS && dn >= 8 && !threads_.empty()) {
      // TPIDR_EL0 of the thread whose NT_PRSTATUS came last.
      std::memcpy(&threads_.back().tp, d, 8);
    } else if (name == "CORE" && nh.n_type == NT_PRPSINFO && dn >= sizeof(struct elf_prpsinfo)) {
      struct elf_prpsinfo pi;
      std::memcpy(&pi, d, sizeof pi);
      fname_.assign(pi.pr_fname, strnlen(pi.pr_fname, sizeof pi.pr_fname));
      psargs_.assign(pi.pr_psargs, strnlen(pi.pr_psargs, sizeof pi.pr_psargs));
      while (!psargs_.empty() && psargs_.back() == ' ') psargs_.pop_back();
      if (!pid_) pid_ = pi.pr_pid;
    } else if (name == "CORE" && nh.n_type == NT_AUXV) {
      for (size_t i = 0; i + 16 <= dn; i += 16) {
        uint64_t k, v;
        std::memcpy(&k, d + i, 8);
        std::memcpy(&v, d + i + 8, 8);
        if (k == AT_NULL) break;
        auxv_.emplace_back(k, v);
      }
    } else if (name == "CORE" && nh.n_type == NT_FILE && dn >= 16) {
      uint64_t count, page;
      std::memcpy(&count, d, 8);
      std::memcpy(&page, d + 8, 8);
      if (count > (dn - 16) / 24) {
        warnings_.push_back(
            fmt::format("NT_FILE note claims {} entries but holds fewer: corrupt", count));
        count = (dn - 16) / 24;
      }
      if (page == 0 || page > (1u << 30)) page = kPage;
      size_t s = 16 + count * 24;
      std::vector<MappedRange> rs;
      for (uint64_t i = 0; i < count; ++i) {
        MappedRange r;
        uint64_t pgoff;
        std::memcpy(&r.start, d + 16 + i * 24, 8);
        std::memcpy(&r.end, d + 16 + i * 24 + 8, 8);
        std::memcpy(&pgoff, d + 16 + i * 24 + 16, 8);
        r.file_offset = pgoff * page;
        if (s >= dn) {
          warnings_.push_back("NT_FILE note: file names missing (truncated note)");
          break;
        }
        size_t len = strnlen(reinterpret_cast<const char*>(d + s), dn - s);
        r.path.assign(reinterpret_cast<const char*>(d + s), len);
        s += len + 1;
        static const std::string kDeleted = " (deleted)";
        if (r.path.size() > kDeleted.size() &&
            r.path.compare(r.path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
          r.path.resize(r.path.size() - kDeleted.size());
        if (r.end <= r.start) continue;
        rs.push_back(std::move(r));
      }
      std::stable_sort(rs.begin(), rs.end(), [](const MappedRange& a, const MappedRange& b) {
        return a.start < b.start;
      });
      ranges_ = std::move(rs);
    } else if (name == "VMCOREINFO") {
      has_vmcoreinfo_ = true;
      vmcoreinfo_.assign(reinterpret_cast<const char*>(d),
                         strnlen(reinterpret_cast<const char*>(d), dn));
    }
    off = desc_off + align4(nh.n_descsz);
  }
}

namespace {
// Parts of sorted, disjoint `a` not covered by sorted, disjoint `b`.
template <class S>
std::vector<S> subtract(const std::vector<S>& a, const std::vector<S>& b) {
  std::vector<S> out;
  size_t j = 0;
  for (S s : a) {
    while (j < b.size() && b[j].end <= s.start) ++j;
    size_t k = j;
    while (s.start < s.end) {
      if (k >= b.size() || b[k].start >= s.end) {
        out.push_back(s);
        break;
      }
      if (b[k].start > s.start) {
        S part = s;
        part.end = b[k].start;
        out.push_back(part);
      }
      uint64_t ns = std::max(s.start, b[k].end);
      if (s.data) s.data += ns - s.start;
      s.start = ns;
      ++k;
    }
  }
  return out;
}
}  // namespace

void CoreFile::build_segments(std::vector<Seg> core, std::vector<Seg> missing,
                              std::vector<Seg> file) {
  auto by_start = [](const Seg& a, const Seg& b) { return a.start < b.start; };
  std::sort(file.begin(), file.end(), by_start);
  std::vector<Seg> all = core;
  auto f = subtract(file, core);
  all.insert(all.end(), f.begin(), f.end());
  std::sort(all.begin(), all.end(), by_start);
  // Missing ranges may overlap each other; merge before subtracting.
  std::vector<Seg> m;
  for (auto& s : missing) {
    if (!m.empty() && s.start < m.back().end) {
      m.back().end = std::max(m.back().end, s.end);
      continue;
    }
    m.push_back(s);
  }
  auto mm = subtract(m, all);
  all.insert(all.end(), mm.begin(), mm.end());
  std::sort(all.begin(), all.end(), by_start);
  segs_ = std::move(all);
  last_ = nullptr;
}

const CoreFile::Seg* CoreFile::find(uint64_t addr) const {
  if (last_ && addr >= last_->start && addr < last_->end) return last_;
  auto it = std::upper_bound(segs_.begin(), segs_.end(), addr,
                             [](uint64_t a, const Seg& s) { return a < s.start; });
  if (it == segs_.begin()) return nullptr;
  --it;
  if (addr >= it->end) return nullptr;
  last_ = &*it;
  return last_;
}

const uint8_t* CoreFile::span(uint64_t addr, size_t len) const {
  const Seg* s = find(addr);
  if (!s || !s->data || len > s->end - addr) return nullptr;
  return s->data + (addr - s->start);
}

bool CoreFile::window(uint64_t addr, Window* w) const {
  const Seg* s = find(addr);
  if (!s || !s->data) return false;
  w->start = s->start;
  w->end = s->end;
  w->data = s->data;
  return true;
}

Result<void> CoreFile::read(uint64_t addr, void* buf, size_t len) const {
  auto* out = static_cast<uint8_t*>(buf);
  while (len) {
    const Seg* s = find(addr);
    if (!s || !s->data)
      return make_error(Errc::kFault, fmt::format("address {:#x}: {}", addr, why_unreadable(addr)));
    size_t n = std::min<uint64_t>(len, s->end - addr);
    std::memcpy(out, s->data + (addr - s->start), n);
    out += n;
    addr += n;
    len -= n;
    if (addr == 0 && len) return make_error(Errc::kFault, "read wraps the address space");
  }
  return {};
}

std::string CoreFile::why_unreadable(uint64_t addr) const {
  const Seg* s = find(addr);
  if (s && s->data) return "";
  if (s && s->kind == SegmentInfo::Kind::kMissing) {
    if (s->why >= 0 && static_cast<size_t>(s->why) < whys_.size()) return whys_[s->why];
    return "not in core";
  }
  if (const MappedRange* r = range_at(addr))
    return fmt::format("not in core (file-backed page of {})", r->path);
  return "not in core (no segment covers it)";
}

const MappedRange* CoreFile::range_at(uint64_t addr) const {
  // ranges_ is sorted by start (parse): the last range starting at or below.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), addr,
                             [](uint64_t a, const MappedRange& r) { return a < r.start; });
  if (it == ranges_.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

uint64_t CoreFile::auxv_value(uint64_t type) const {
  for (auto& [k, v] : auxv_)
    if (k == type) return v;
  return 0;
}

// One mapped file: mapped from the host when it is there and its build-id
// is the core's, so its pages fill what the core left out (file_segs);
// otherwise its status says why not.
void CoreFile::verify_file(size_t fidx, const std::vector<size_t>& rs,
                           std::map<std::string, bool>& dir_exists, std::vector<Seg>& file_segs) {
  MappedFileInfo& fi = files_[fidx];
  fi.looked_up = true;
  // Files in a directory that is not there are not tried one by one (a
  // core from another machine may name thousands).
  std::string dir = fi.host_path.substr(0, fi.host_path.rfind('/') + 1);
  auto [dit, dfresh] = dir_exists.emplace(dir, true);
  if (dfresh && !dir.empty()) {
    struct stat st {};
    dit->second = ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  auto m = dit->second ? map_file(fi.host_path, "mapped file")
                       : Result<std::pair<void*, size_t>>(make_error(
                             Errc::kIo, fmt::format("{}: cannot open mapped file: directory {} "
                                                    "does not exist",
                                                    fi.host_path, dir)));
  if (!m.ok()) {
    fi.status = MappedFileInfo::Status::kNoFile;
    fi.detail = m.error().message;
  } else {
    auto [addr, len] = m.value();
    bool elf = len >= 4 && std::memcmp(addr, ELFMAG, SELFMAG) == 0;
    if (!elf) {
      fi.status = MappedFileInfo::Status::kNotElf;
      fi.detail = "not an ELF file; its pages cannot be verified against the core";
      munmap(addr, len);
    } else {
      auto bid = build_id_of_file(fi.host_path);
      fi.disk_build_id = bid.ok() ? bid.value() : "";
      if (fi.core_build_id.empty() && dynamic_matched_.count(fi.path)) {
        fi.status = MappedFileInfo::Status::kVerified;
        fi.detail = "the core holds no build-id note; its dynamic section is the file's";
      } else if (fi.core_build_id.empty()) {
        fi.status = MappedFileInfo::Status::kUnverifiable;
        fi.detail = "the core does not hold this file's build-id note";
      } else if (fi.core_build_id != fi.disk_build_id) {
        fi.status = MappedFileInfo::Status::kMismatch;
        fi.detail =
            fmt::format("build-id on disk {} differs from core {}",
                        fi.disk_build_id.empty() ? "(none)" : fi.disk_build_id, fi.core_build_id);
      } else {
        fi.status = MappedFileInfo::Status::kVerified;
      }
      if (fi.status != MappedFileInfo::Status::kVerified) {
        munmap(addr, len);
      } else {
        mappings_.push_back({addr, len});
        for (size_t ri : rs) {
          const MappedRange& r = ranges_[ri];
          if (r.file_offset >= len) continue;
          uint64_t end = std::min<uint64_t>(r.end, r.start + (len - r.file_offset));
          file_segs.push_back({r.start, end, SegmentInfo::Kind::kFile,
                               static_cast<const uint8_t*>(addr) + r.file_offset,
                               static_cast<int>(fidx)});
        }
      }
    }
  }
}

void CoreFile::fill_from_files(const CoreOptions& opts) {
  // Which path is the executable: the file mapped at AT_ENTRY (or AT_PHDR).
  std::string exe_proc_path;
  for (uint64_t at : {auxv_value(AT_ENTRY), auxv_value(AT_PHDR)}) {
    if (!at) continue;
    if (const MappedRange* r = range_at(at)) {
      exe_proc_path = r->path;
      break;
    }
  }
  // One entry per file. Its base is the lowest mapping of file offset 0
  // (where the ELF header is), else its lowest mapping.
  std::map<std::string, size_t> index;
  std::vector<bool> has_hdr;
  std::vector<std::vector<size_t>> file_ranges;  // indices into ranges_, per file
  for (size_t ri = 0; ri < ranges_.size(); ++ri) {
    const MappedRange& r = ranges_[ri];
    auto [it, fresh] = index.emplace(r.path, files_.size());
    if (fresh) {
      MappedFileInfo fi;
      fi.path = r.path;
      fi.base = r.start;
      files_.push_back(fi);
      has_hdr.push_back(false);
      file_ranges.emplace_back();
    }
    size_t i = it->second;
    file_ranges[i].push_back(ri);
    bool hdr = r.file_offset == 0;
    if ((hdr && !has_hdr[i]) || (hdr == has_hdr[i] && r.start < files_[i].base))
      files_[i].base = r.start;
    has_hdr[i] = has_hdr[i] || hdr;
  }

  std::vector<Seg> file_segs;
  std::map<std::string, bool> dir_exists;
  for (size_t fidx = 0; fidx < files_.size(); ++fidx) {
    MappedFileInfo& fi = files_[fidx];
    bool is_exe = !exe_proc_path.empty() && fi.path == exe_proc_path;
    if (is_exe && !opts.exe_path.empty())
      fi.host_path = opts.exe_path;
    else
      fi.host_path = opts.sysroot.empty() ? fi.path : opts.sysroot + "/" + fi.path;
    fi.core_build_id = build_id_from_memory(*this, fi.base);
    verify_file(fidx, file_ranges[fidx], dir_exists, file_segs);
    if (is_exe && !opts.exe_path.empty() && fi.status == MappedFileInfo::Status::kMismatch)
      warnings_.push_back(
          fmt::format("the executable {} does not match the core: {}", opts.exe_path, fi.detail));
  }
  // File-backed ranges we could not fill become "missing" with a reason.
  std::vector<Seg> missing = raw_missing_;
  for (size_t fidx = 0; fidx < files_.size(); ++fidx) {
    const MappedFileInfo& fi = files_[fidx];
    if (fi.status == MappedFileInfo::Status::kVerified) continue;
    // One reason per file, shared by its ranges.
    whys_.push_back(fmt::format("not in core; file-backed page of {} ({}: {})", fi.path,
                                mapped_status_name(fi.status), fi.detail));
    for (size_t ri : file_ranges[fidx])
      missing.push_back({ranges_[ri].start, ranges_[ri].end, SegmentInfo::Kind::kMissing, nullptr,
                         static_cast<int>(whys_.size() - 1)});
  }
  std::sort(missing.begin(), missing.end(),
            [](const Seg& a, const Seg& b) { return a.start < b.start; });
  // Sort file segments; drop overlaps (corrupt NT_FILE).
  std::sort(file_segs.begin(), file_segs.end(),
            [](const Seg& a, const Seg& b) { return a.start < b.start; });
  std::vector<Seg> fclean;
  for (auto& s : file_segs) {
    if (!fclean.empty() && ranges_overlap(fclean.back().start, fclean.back().end, s.start, s.end))
      continue;
    fclean.push_back(s);
  }
  build_segments(core_segs_, missing, fclean);
}

std::vector<SegmentInfo> CoreFile::segments() const {
  std::vector<SegmentInfo> out;
  for (const auto& s : segs_) {
    SegmentInfo si;
    si.start = s.start;
    si.end = s.end;
    si.kind = s.kind;
    si.writable = s.writable;
    si.executable = s.executable;
    if (s.kind == SegmentInfo::Kind::kMissing && s.why >= 0 &&
        static_cast<size_t>(s.why) < whys_.size())
      si.why = whys_[s.why];
    else if (s.kind == SegmentInfo::Kind::kFile && s.why >= 0)
      si.why = files_[s.why].host_path;
    out.push_back(std::move(si));
  }
  return out;
}

uint64_t CoreFile::bytes_in_core() const {
  uint64_t n = 0;
  for (const auto& s : segs_)
    if (s.kind == SegmentInfo::Kind::kCore) n += s.end - s.start;
  return n;
}
uint64_t CoreFile::bytes_from_files() const {
  uint64_t n = 0;
  for (const auto& s : segs_)
    if (s.kind == SegmentInfo::Kind::kFile) n += s.end - s.start;
  return n;
}
uint64_t CoreFile::bytes_missing() const {
  uint64_t n = 0;
  for (const auto& s : segs_)
    if (s.kind == SegmentInfo::Kind::kMissing) n += s.end - s.start;
  return n;
}

std::string build_id_from_memory(const Memory& mem, uint64_t base) {
  Elf64_Ehdr eh;
  if (!mem.read(base, &eh, sizeof eh).ok()) return "";
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    return "";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 512) return "";
  if (eh.e_phoff > (1u << 20)) return "";
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!mem.read(base + eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr)).ok()) return "";
  uint64_t min_vaddr = UINT64_MAX;
  for (auto& p : ph)
    if (p.p_type == PT_LOAD) min_vaddr = std::min(min_vaddr, p.p_vaddr);
  if (min_vaddr == UINT64_MAX) return "";
  uint64_t bias = base - (min_vaddr & ~(kPage - 1));
  for (auto& p : ph) {
    if (p.p_type != PT_NOTE) continue;
    size_t n = std::min<uint64_t>(p.p_filesz, 4096);
    std::vector<uint8_t> buf(n);
    if (!mem.read(p.p_vaddr + bias, buf.data(), n).ok()) continue;
    size_t off = 0;
    while (off + 12 <= n) {
      uint32_t namesz, descsz, type;
      std::memcpy(&namesz, &buf[off], 4);
      std::memcpy(&descsz, &buf[off + 4], 4);
      std::memcpy(&type, &buf[off + 8], 4);
      size_t name_off = off + 12;
      size_t desc_off = name_off + ((namesz + 3) & ~3u);
      if (namesz > n || descsz > n || desc_off > n || descsz > n - desc_off) break;
      if (type == NT_GNU_BUILD_ID && namesz == 4 && std::memcmp(&buf[name_off], "GNU", 4) == 0 &&
          descsz > 0)
        return hex_bytes(&buf[desc_off], descsz);
      off = desc_off + ((descsz + 3) & ~3u);
    }
  }
  return "";
}

Result<std::string> build_id_of_file(const std::string& path) {
  LR_ASSIGN(int raw, open_input(path, "ELF file"));
  Fd fd(raw);
  elf_version(EV_CURRENT);
  Elf* e = elf_begin(fd.fd, ELF_C_READ_MMAP, nullptr);
  if (!e) return make_error(Errc::kBadFormat, fmt::format("{}: {}", path, elf_errmsg(-1)));
  const void* p = nullptr;
  ssize_t n = dwelf_elf_gnu_build_id(e, &p);
  std::string out;
  if (n > 0) out = hex_bytes(static_cast<const uint8_t*>(p), n);
  elf_end(e);
  if (out.empty()) return make_error(Errc::kNotFound, path + ": no build-id");
  return out;
}

}  // namespace lr
