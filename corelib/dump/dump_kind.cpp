// Telling dumps apart (dump_kind.hpp): ELF cores, kdump files, registered
// text dumps, compressed files.
#include "corelib/dump/dump_kind.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "corelib/base/fileio.hpp"
#include "corelib/base/registry.hpp"
#include "corelib/dump/elfcore.hpp"

namespace lr {

namespace {

using LooksLike = bool (*)(std::string_view);
NamedRegistry<LooksLike> g_text_dumps;

bool elf_core(std::string_view h) {
  return h.size() >= 18 && h.substr(0, 4) == "\177ELF" && h[16] == 4 && h[17] == 0;  // ET_CORE
}

}  // namespace

std::string DumpId::name() const {
  switch (kind) {
    case DumpKind::kProcessCore:
      return "core";
    case DumpKind::kKernelDump:
      return "vmcore";
    case DumpKind::kText:
      return text_kind;
    case DumpKind::kNone:
      break;
  }
  return "";
}

void register_text_dump(const std::string& name, bool (*looks_like)(std::string_view)) {
  g_text_dumps.add(name, looks_like);
}

DumpId identify_dump_head(std::string_view h, int fd, uint64_t size) {
  DumpId id;
  id.compression = sniff_compression(h);
  if (elf_core(h)) {
    id.kind = fd >= 0 && is_kernel_dump(fd, size) ? DumpKind::kKernelDump : DumpKind::kProcessCore;
  } else if (h.substr(0, 8) == "KDUMP   " || h.substr(0, 12) == "makedumpfile") {
    id.kind = DumpKind::kKernelDump;
  } else {
    for (const auto& [name, looks_like] : g_text_dumps.items())
      if (looks_like(h)) {
        id.kind = DumpKind::kText;
        id.text_kind = name;
        break;
      }
  }
  return id;
}

Result<DumpId> identify_dump(const std::string& path) {
  LR_ASSIGN(int fd, open_input(path, "dump"));
  struct stat st {};
  ::fstat(fd, &st);
  char head[64] = {};
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  DumpId id = identify_dump_head(std::string_view(head, n > 0 ? static_cast<size_t>(n) : 0), fd,
                                 static_cast<uint64_t>(st.st_size));
  ::close(fd);
  return id;
}

Result<uint64_t> dump_extent(std::string_view head) {
  if (identify_dump_head(head, -1, 0).kind == DumpKind::kNone)
    return make_error(Errc::kBadFormat,
                      "does not decompress to a dump leakref reads (no ELF core, kdump or text "
                      "dump starts it)");
  Elf64_Ehdr eh;
  if (head.size() < sizeof eh || std::memcmp(head.data(), ELFMAG, SELFMAG) != 0 ||
      head[EI_CLASS] != ELFCLASS64)
    return uint64_t{0};
  std::memcpy(&eh, head.data(), sizeof eh);
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum == PN_XNUM ||
      eh.e_phoff > head.size() || eh.e_phnum > (head.size() - eh.e_phoff) / sizeof(Elf64_Phdr))
    return uint64_t{0};
  auto end_of = [](uint64_t off, uint64_t n) {
    return n > UINT64_MAX - off ? UINT64_MAX : off + n;
  };
  uint64_t end = end_of(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr));
  if (eh.e_shoff && eh.e_shnum)
    end = std::max(end, end_of(eh.e_shoff, uint64_t{eh.e_shnum} * eh.e_shentsize));
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, head.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_filesz) end = std::max(end, end_of(ph.p_offset, ph.p_filesz));
  }
  return end;
}

}  // namespace lr
