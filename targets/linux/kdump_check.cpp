// Validation of kdump-compressed (diskdump) files before libkdumpfile reads
// them. libkdumpfile 0.5 (Debian 12) crashes on headers it does not expect
// (a block size of 0 or 2^31-1, a sub-header or VMCOREINFO range past the end
// of the file, which it maps and then reads, PAGESIZE=0), so every size and
// range it will use is checked here first, against the file's real size.
// Layout: makedumpfile's diskdump_mod.h (disk_dump_header, kdump_sub_header).
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <string_view>
#include <vector>

#include "targets/linux/kernel.hpp"

namespace lr {

namespace {

template <class T>
T field(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

bool read_at(int fd, void* buf, size_t n, uint64_t off) {
  return ::pread(fd, buf, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
}

// Every PAGESIZE line in a VMCOREINFO text must be "PAGESIZE=N" with N a
// page size x86_64 has. A line is cut by '\n' or by NUL (libkdumpfile reads
// the text as a C string, so "PAGESIZE" then NUL is a key with no value, read
// as page size 0: a 2^63-byte malloc, found by fuzz_kdump).
Result<void> check_pagesize(const std::string& text, const std::string& path) {
  for (size_t at = text.find("PAGESIZE"); at != std::string::npos;
       at = text.find("PAGESIZE", at + 1)) {
    if (at && text[at - 1] != '\n' && text[at - 1] != '\0') continue;  // e.g. "HUGEPAGESIZE="
    if (at + 8 >= text.size() || text[at + 8] != '=') {
      char next = at + 8 < text.size() ? text[at + 8] : '\0';
      if (next == '\n' || next == '\0')
        return make_error(Errc::kBadFormat,
                          fmt::format("{}: VMCOREINFO has a PAGESIZE line with no value", path));
      continue;  // another key that starts so ("PAGESIZE_X=")
    }
    uint64_t v = std::strtoull(text.c_str() + at + 9, nullptr, 10);
    if (v < 4096 || v > (1u << 21) || !std::has_single_bit(v))
      return make_error(Errc::kBadFormat,
                        fmt::format("{}: VMCOREINFO says PAGESIZE={}, not a page size", path, v));
  }
  return {};
}

// The ELF notes region: libkdumpfile reads the VMCOREINFO note's own
// descriptor (which may end earlier than the text around it, "PAGESIZE="
// with no digits), so each VMCOREINFO descriptor is checked as it is cut.
Result<void> check_note_pagesizes(const std::string& notes, const std::string& path) {
  size_t at = 0;
  while (at <= notes.size() && notes.size() - at >= 12) {  // at passes the end after padding
    uint32_t namesz, descsz;
    std::memcpy(&namesz, notes.data() + at, 4);
    std::memcpy(&descsz, notes.data() + at + 4, 4);
    at += 12;
    const size_t name_end = at + ((uint64_t{namesz} + 3) & ~uint64_t{3});
    if (name_end > notes.size()) break;
    // Any name starting VMCOREINFO (VMCOREINFO_XEN too): checking more is safe.
    const std::string_view name(notes.data() + at, std::min<size_t>(namesz, 10));
    const size_t desc_len = std::min<size_t>(descsz, notes.size() - name_end);
    if (name == "VMCOREINFO") LR_TRY(check_pagesize(notes.substr(name_end, desc_len), path));
    at = name_end + ((uint64_t{desc_len} + 3) & ~uint64_t{3});
  }
  return {};
}

// libkdumpfile 0.5 tries the 32-bit header layout before the 64-bit one,
// little- then big-endian (diskdump.c, open_common and try_header): its
// block size at offset 416, bitmap blocks at 424 and max_mapnr at 428. In a
// 64-bit header those are tv_usec's low word, the status and the block
// size, so a timestamp can make the 32-bit reading pass; the file is then
// read by offsets this check did not validate (a fuzzed header made it
// malloc 200 GiB). Returns the 32-bit block size it would take, or 0.
uint32_t reads_as_32bit(const uint8_t* h) {
  for (bool big : {false, true}) {
    auto u32 = [&](size_t off) {
      uint32_t v = field<uint32_t>(h, off);
      return big ? __builtin_bswap32(v) : v;
    };
    const uint32_t block = u32(416), bitmap_blocks = u32(424), max_mapnr = u32(428);
    const bool page = block >= 4096 && block <= (1u << 18) && std::has_single_bit(block);
    if (page && uint64_t{8} * bitmap_blocks * block >= max_mapnr) return block;
  }
  return 0;
}

}  // namespace

Result<KdumpLayout> check_kdump_file(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error(Errc::kIo, path + ": cannot stat");
  const uint64_t fsize = static_cast<uint64_t>(st.st_size);
  auto bad = [&](const std::string& what) {
    return make_error(Errc::kBadFormat, fmt::format("{}: kdump file {}", path, what));
  };
  constexpr size_t kHdr = 464;  // sizeof(struct disk_dump_header) on x86_64
  uint8_t h[kHdr];
  if (fsize < kHdr || !read_at(fd, h, kHdr, 0))
    return bad(fmt::format("cut off in its header ({} bytes, the header has {})", fsize, kHdr));
  KdumpLayout L;
  L.header_version = field<int32_t>(h, 8);
  const uint32_t block = L.block_size = field<uint32_t>(h, 428);
  const uint32_t sub_blocks = field<uint32_t>(h, 432);
  const uint32_t bitmap_blocks = field<uint32_t>(h, 436);
  uint64_t max_mapnr = field<uint32_t>(h, 440);
  if (L.header_version < 1 || L.header_version > 6)
    return bad(fmt::format("has header version {} (1 to 6 are known)", L.header_version));
  // libkdumpfile's own range (MIN_PAGE_SIZE, MAX_PAGE_SIZE): past it, it
  // would try the header big-endian.
  if (block < 4096 || block > (1u << 18) || !std::has_single_bit(block))
    return bad(fmt::format("has block size {} (a page size is expected)", block));
  if (uint32_t b32 = reads_as_32bit(h))
    return bad(
        fmt::format("has a header that also reads as a 32-bit one (block size {}, from the "
                    "timestamp at offset 416), which libkdumpfile would take first; not opened",
                    b32));
  if (sub_blocks == 0 || bitmap_blocks == 0 || bitmap_blocks % 2)
    return bad(fmt::format("has {} sub-header and {} bitmap blocks", sub_blocks, bitmap_blocks));
  // Within the file: the header block, the sub-header and both bitmaps.
  const uint64_t bitmap_off = uint64_t{block} * (1 + uint64_t{sub_blocks});
  const uint64_t desc_off = bitmap_off + uint64_t{block} * bitmap_blocks;
  if (desc_off > fsize)
    return bad(
        fmt::format("is cut off before its page table ({} bytes; header, sub-header and "
                    "bitmaps need {})",
                    fsize, desc_off));
  // The sub-header: ranges libkdumpfile maps (VMCOREINFO, notes, erase info).
  uint8_t sh[112] = {};
  if (!read_at(fd, sh, sizeof sh, block)) return bad("has an unreadable sub-header");
  std::string vmcoreinfo;
  for (int i = 0; i < 3; ++i) {
    if (L.header_version < 3 + i) break;
    uint64_t off = field<uint64_t>(sh, 32 + 16 * i), size = field<uint64_t>(sh, 40 + 16 * i);
    static const char* kName[] = {"VMCOREINFO", "note", "erase info"};
    if (size == 0) continue;
    if (size > (64u << 20) || off > fsize || size > fsize - off)
      return bad(fmt::format("names {} bytes of {} at offset {:#x}, past its end ({} bytes)", size,
                             kName[i], off, fsize));
    if (i < 2) {  // VMCOREINFO text, and the ELF notes that carry it again
      std::string text(size, '\0');
      if (!read_at(fd, text.data(), size, off))
        return bad(std::string("has an unreadable ") + kName[i]);
      LR_TRY(check_pagesize(text, path));
      if (i == 1) LR_TRY(check_note_pagesizes(text, path));
      if (i == 0) L.vmcoreinfo = std::move(text);
    }
  }
  if (L.header_version >= 6) max_mapnr = field<uint64_t>(sh, 96);
  // Each of the two bitmaps has a bit per page frame up to max_mapnr.
  const uint64_t bitmap_bytes = uint64_t{block} * (bitmap_blocks / 2);
  if (max_mapnr == 0 || (max_mapnr + 7) / 8 > bitmap_bytes)
    return bad(
        fmt::format("says {} page frames but its bitmaps hold {}", max_mapnr, bitmap_bytes * 8));
  // Dumped pages: bits of the second bitmap; each has a 24-byte descriptor
  // (offset, size, flags, page flags) whose data must lie in the file.
  std::vector<uint8_t> bm(bitmap_bytes);
  if (!read_at(fd, bm.data(), bm.size(), bitmap_off + bitmap_bytes))
    return bad("has an unreadable bitmap");
  for (uint64_t i = 0; i < (max_mapnr + 7) / 8; ++i) L.dumped_pages += std::popcount(bm[i]);
  std::vector<uint8_t> desc(24 * 4096);
  for (uint64_t done = 0; done < L.dumped_pages;) {
    uint64_t n = std::min<uint64_t>(4096, L.dumped_pages - done);
    uint64_t at = desc_off + done * 24;
    if (at + n * 24 > fsize || !read_at(fd, desc.data(), n * 24, at)) {
      L.pages_past_end += L.dumped_pages - done;  // their descriptors are missing
      break;
    }
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t off = field<uint64_t>(desc.data(), i * 24);
      uint32_t size = field<uint32_t>(desc.data(), i * 24 + 8);
      if (size > block || off > fsize || size > fsize - off) ++L.pages_past_end;
    }
    done += n;
  }
  return L;
}

}  // namespace lr
