#include "corelib/dump/pagecache.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lr {

namespace {
constexpr size_t kSlab = 2u << 20;
constexpr size_t kPagesPerSlab = kSlab / PagedMemory::kPage;
}  // namespace

PagedMemory::PagedMemory(ReadFn fn, void* ctx, std::string name, uint64_t cache_limit, MapFn map)
    : fn_(fn), map_(map), ctx_(ctx), name_(std::move(name)), limit_(cache_limit) {}

PagedMemory::~PagedMemory() = default;

const uint8_t* PagedMemory::page(uint64_t pa) const {
  if (pa == last_page_) return last_data_;
  auto it = pages_.find(pa);
  if (it != pages_.end()) {
    last_page_ = pa;
    last_data_ = it->second;
    return it->second;
  }
  ++fills_;
  if (map_) {
    if (const uint8_t* direct = map_(ctx_, pa)) {
      pages_.emplace(pa, direct);
      last_page_ = pa;
      last_data_ = direct;
      return direct;
    }
  }
  if (copied_ * kPage >= limit_) return nullptr;  // full: callers use read()
  if (slabs_.empty() || slab_used_ == kPagesPerSlab) {
    slabs_.emplace_back(new uint8_t[kSlab]);
    slab_used_ = 0;
  }
  uint8_t* slot = slabs_.back().get() + slab_used_ * kPage;
  const uint8_t* data = nullptr;
  if (fn_(ctx_, pa, slot, kPage)) {
    data = slot;
    ++slab_used_;
    ++copied_;
  } else {
    ++faults_;
  }
  pages_.emplace(pa, data);
  last_page_ = pa;
  last_data_ = data;
  return data;
}

const uint8_t* PagedMemory::span(uint64_t addr, size_t len) const {
  uint64_t off = addr & (kPage - 1);
  if (len == 0 || off + len > kPage) return nullptr;
  const uint8_t* p = page(addr - off);
  return p ? p + off : nullptr;
}

bool PagedMemory::window(uint64_t addr, Window* w) const {
  uint64_t pa = addr & ~(kPage - 1);
  const uint8_t* p = page(pa);
  if (!p) return false;
  w->start = pa;
  w->end = pa + kPage;
  w->data = p;
  return true;
}

Result<void> PagedMemory::read(uint64_t addr, void* buf, size_t len) const {
  auto* out = static_cast<uint8_t*>(buf);
  while (len) {
    uint64_t off = addr & (kPage - 1);
    size_t n = std::min<uint64_t>(len, kPage - off);
    const uint8_t* p = page(addr - off);
    if (p) {
      std::memcpy(out, p + off, n);
    } else if (!fn_(ctx_, addr, out, n)) {
      return make_error(Errc::kFault, fmt::format("{}: 0x{:x} is not readable", name_, addr));
    }
    addr += n;
    out += n;
    len -= n;
  }
  return {};
}

std::string PagedMemory::why_unreadable(uint64_t addr) const {
  uint8_t b;
  if (read(addr, &b, 1).ok()) return "";
  return fmt::format("not in {} (unmapped, or excluded from the dump)", name_);
}

}  // namespace lr
