// A zero-filled sparse address space for the allocator fuzzers: records
// "u32 offset, u8 length, bytes" from the input written over kSpan bytes at
// kBase, every unwritten byte reading as zero.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>

#include "corelib/dump/memory.hpp"

namespace lrfuzz {

constexpr uint64_t kBase = 0x10000000, kSpan = 256ull << 20, kPage = 4096;

// Zero-filled sparse memory of kSpan bytes at kBase.
class SparseMemory : public lr::Memory {
 public:
  // Writes the input's records over the space.
  void load(const uint8_t* data, size_t size) {
    for (size_t at = 0; at + 5 <= size;) {
      uint32_t off = 0;
      std::memcpy(&off, data + at, 4);
      const size_t n = std::min<size_t>(data[at + 4], size - at - 5);
      write(kBase + off % kSpan, data + at + 5, std::min<uint64_t>(n, kSpan - off % kSpan));
      at += 5 + n;
    }
  }
  // Every byte zero again (a fuzzer that keeps one space across inputs).
  void clear() { pages_.clear(); }
  void write(uint64_t a, const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) page(a + i)[(a + i) % kPage] = p[i];
  }
  void put64(uint64_t a, uint64_t v) {
    uint8_t b[8];
    std::memcpy(b, &v, 8);
    write(a, b, 8);
  }
  const uint8_t* span(uint64_t addr, size_t len) const override {
    if (!inside(addr, len) || addr / kPage != (addr + len - 1) / kPage) return nullptr;
    auto it = pages_.find(addr / kPage);
    return it == pages_.end() ? zero_ + addr % kPage : it->second.get() + addr % kPage;
  }
  lr::Result<void> read(uint64_t addr, void* buf, size_t len) const override {
    if (!inside(addr, len)) return lr::make_error(lr::Errc::kFault, "outside the fuzz space");
    auto* out = static_cast<uint8_t*>(buf);
    for (size_t done = 0; done < len;) {
      const uint64_t a = addr + done, n = std::min<uint64_t>(len - done, kPage - a % kPage);
      std::memcpy(out + done, span(a, n), n);
      done += n;
    }
    return {};
  }

 private:
  static bool inside(uint64_t a, size_t n) {
    return a >= kBase && n <= kSpan && a - kBase <= kSpan - n;
  }
  uint8_t* page(uint64_t a) {
    auto& p = pages_[a / kPage];
    if (!p) p.reset(new uint8_t[kPage]());
    return p.get();
  }
  std::map<uint64_t, std::unique_ptr<uint8_t[]>> pages_;
  uint8_t zero_[kPage] = {};
};

}  // namespace lrfuzz
