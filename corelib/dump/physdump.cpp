#include "corelib/dump/physdump.hpp"

#include <elf.h>
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "corelib/dump/elfcore.hpp"

namespace lr {

PhysDump::~PhysDump() {
  if (map_) munmap(map_, size_);
}

Result<std::unique_ptr<PhysDump>> PhysDump::open(const std::string& path) {
  LR_ASSIGN(auto m, map_file(path, "dump"));
  std::unique_ptr<PhysDump> d(new PhysDump());
  d->map_ = m.first;
  d->size_ = m.second;
  LR_TRY(d->parse(static_cast<const uint8_t*>(m.first), path));
  return d;
}

Result<std::unique_ptr<PhysDump>> PhysDump::open_memory(const uint8_t* data, size_t size) {
  std::unique_ptr<PhysDump> d(new PhysDump());
  d->size_ = size;
  LR_TRY(d->parse(data, "image"));
  return d;
}

Result<void> PhysDump::parse(const uint8_t* base, const std::string& path) {
  if (size_ < sizeof(Elf64_Ehdr))
    return make_error(Errc::kBadFormat, fmt::format("{}: too small for ELF", path));
  Elf64_Ehdr eh;
  std::memcpy(&eh, base, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_CORE ||
      eh.e_phentsize != sizeof(Elf64_Phdr))
    return make_error(Errc::kBadFormat, fmt::format("{}: not an ELF64 LE core", path));
  // e_phnum may overflow into section 0's sh_info (PN_XNUM).
  uint64_t phnum = eh.e_phnum;
  if (phnum == PN_XNUM && eh.e_shoff && eh.e_shoff <= size_ - sizeof(Elf64_Shdr)) {
    Elf64_Shdr sh;
    std::memcpy(&sh, base + eh.e_shoff, sizeof sh);
    phnum = sh.sh_info;
  }
  if (eh.e_phoff > size_ || phnum > (size_ - eh.e_phoff) / sizeof(Elf64_Phdr))
    return make_error(Errc::kBadFormat, fmt::format("{}: program headers past the end", path));
  for (uint64_t i = 0; i < phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, base + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_LOAD || ph.p_offset >= size_) continue;
    uint64_t len = std::min<uint64_t>(ph.p_filesz, size_ - ph.p_offset);
    if (len == 0 || ph.p_paddr + len < ph.p_paddr) continue;
    segs_.push_back({ph.p_paddr, len, base + ph.p_offset});
  }
  if (segs_.empty())
    return make_error(Errc::kBadFormat, fmt::format("{}: no PT_LOAD with data", path));
  std::sort(segs_.begin(), segs_.end(), [](const Seg& a, const Seg& b) { return a.pa < b.pa; });
  return {};
}

const uint8_t* PhysDump::at(uint64_t pa, size_t len) const {
  auto inside = [&](const Seg& s) { return pa - s.pa < s.len && s.len - (pa - s.pa) >= len; };
  if (last_ < segs_.size() && inside(segs_[last_]))
    return segs_[last_].data + (pa - segs_[last_].pa);
  auto it = std::upper_bound(segs_.begin(), segs_.end(), pa,
                             [](uint64_t a, const Seg& s) { return a < s.pa; });
  if (it == segs_.begin()) return nullptr;
  --it;
  if (!inside(*it)) return nullptr;
  last_ = static_cast<size_t>(it - segs_.begin());
  return it->data + (pa - it->pa);
}

}  // namespace lr
