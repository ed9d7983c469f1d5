// An ELF kernel dump read by physical address (p_paddr of its PT_LOADs),
// mmapped read-only. The crash extension uses it to read pages of an ELF
// vmcore directly once crash has translated the virtual address, instead of
// one lseek+read per page through readmem.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"

namespace lr {

class PhysDump {
 public:
  ~PhysDump();
  PhysDump(const PhysDump&) = delete;
  PhysDump& operator=(const PhysDump&) = delete;

  // kBadFormat when `path` is not an ELF64 little-endian core with PT_LOADs
  // (callers then read through their other path); kIo when unreadable.
  static Result<std::unique_ptr<PhysDump>> open(const std::string& path);
  // Parses an in-memory image the caller keeps alive (fuzzing, tests).
  static Result<std::unique_ptr<PhysDump>> open_memory(const uint8_t* data, size_t size);

  // `len` bytes at physical address `pa` if they lie in one segment's file
  // data; nullptr otherwise (excluded, past a truncated end, not dumped).
  const uint8_t* at(uint64_t pa, size_t len) const;
  size_t segments() const { return segs_.size(); }

 private:
  PhysDump() = default;
  Result<void> parse(const uint8_t* base, const std::string& name);
  struct Seg {
    uint64_t pa, len;  // file-backed bytes only
    const uint8_t* data;
  };
  void* map_ = nullptr;
  size_t size_ = 0;
  std::vector<Seg> segs_;  // sorted by pa
  mutable size_t last_ = 0;
};

}  // namespace lr
