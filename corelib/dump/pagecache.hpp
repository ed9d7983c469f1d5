// A memory backend for targets read through a callback (crash's readmem,
// libkdumpfile): whole pages are fetched once and kept, so walkers get the
// same pointer fast path (span/window) as with an mmapped core.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "corelib/dump/memory.hpp"

namespace lr {

class PagedMemory final : public Memory {
 public:
  // Reads `len` bytes at `addr` (never crossing a page) into `buf`; returns
  // false when they are not readable. Must not throw.
  using ReadFn = bool (*)(void* ctx, uint64_t addr, void* buf, size_t len);
  // Optional zero-copy source: a pointer to the page at `pageaddr` that stays
  // valid for this object's lifetime (an mmapped dump), or nullptr to fall
  // back to ReadFn. Must not throw.
  using MapFn = const uint8_t* (*)(void* ctx, uint64_t pageaddr);

  // `cache_limit` bytes of pages are kept for the lifetime of this object
  // (pointers handed out stay valid, as span() promises); past it, reads
  // still work but go through `fn` every time. `name` labels errors.
  PagedMemory(ReadFn fn, void* ctx, std::string name, uint64_t cache_limit = 1ull << 30,
              MapFn map = nullptr);
  ~PagedMemory() override;

  const uint8_t* span(uint64_t addr, size_t len) const override;
  Result<void> read(uint64_t addr, void* buf, size_t len) const override;
  bool window(uint64_t addr, Window* w) const override;
  std::string why_unreadable(uint64_t addr) const override;

  // Counters for diagnostics and benchmarks.
  uint64_t page_fills() const { return fills_; }
  uint64_t page_faults() const { return faults_; }
  uint64_t cached_bytes() const { return copied_ * kPage; }
  static constexpr uint64_t kPage = 4096;

 private:
  // The cached page holding `addr`, fetching it if needed; nullptr if the
  // page is unreadable or the cache is full (then `bounce_` is used).
  const uint8_t* page(uint64_t pageaddr) const;

  ReadFn fn_;
  MapFn map_;
  void* ctx_;
  std::string name_;
  uint64_t limit_;
  // Pages live in 2 MiB slabs so a large walk makes few allocations.
  mutable std::vector<std::unique_ptr<uint8_t[]>> slabs_;
  mutable size_t slab_used_ = 0;
  mutable std::unordered_map<uint64_t, const uint8_t*>
      pages_;  // page -> data, nullptr = unreadable
  mutable uint64_t last_page_ = ~0ull;
  mutable const uint8_t* last_data_ = nullptr;
  mutable uint64_t fills_ = 0, faults_ = 0, copied_ = 0;
};

}  // namespace lr
