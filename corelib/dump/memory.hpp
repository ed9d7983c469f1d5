// Target memory. An address space is a set of read-only byte ranges;
// backends (ELF core, crash's readmem, libkdumpfile) implement this interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "corelib/base/result.hpp"

namespace lr {

class Memory {
 public:
  virtual ~Memory() = default;

  // Fast path: a pointer to `len` contiguous bytes at `addr`, valid for the
  // lifetime of this Memory (it points into a mapping or a stable cache page).
  // Returns nullptr when the range is not readable in one piece; callers then
  // use read(), which can span ranges and reports why it failed.
  // Not thread-safe: implementations keep a lookup cache.
  virtual const uint8_t* span(uint64_t addr, size_t len) const = 0;

  // Copy `len` bytes at `addr` into `buf`. On failure returns kFault naming the
  // first unreadable address; `buf` contents are then unspecified.
  virtual Result<void> read(uint64_t addr, void* buf, size_t len) const = 0;

  // The largest directly readable byte range containing `addr`: lets hot
  // loops do pointer arithmetic instead of a virtual call per read. Returns
  // false when `addr` is unreadable or the backend has no stable mapping.
  struct Window {
    uint64_t start = 0, end = 0;  // [start, end); empty by default
    const uint8_t* data = nullptr;
    // Pointer to `n` bytes at `a` if they lie inside this window.
    const uint8_t* at(uint64_t a, size_t n) const {
      return (a - start < end - start && end - a >= n) ? data + (a - start) : nullptr;
    }
  };
  virtual bool window(uint64_t addr, Window* w) const {
    (void)addr;
    (void)w;
    return false;
  }
  // `n` bytes at `a` through the cached window `w`, refreshed when `a` leaves
  // it; nullptr when they are not directly readable (use read() then).
  const uint8_t* direct(Window& w, uint64_t a, size_t n) const {
    const uint8_t* p = w.at(a, n);
    if (!p && window(a, &w)) p = w.at(a, n);
    return p;
  }

  // Human description of why `addr` is not readable ("not in core", "beyond
  // end of truncated core", ...); empty if it is readable.
  virtual std::string why_unreadable(uint64_t addr) const {
    (void)addr;
    return "unreadable";
  }

  // Convenience typed reads (little-endian host == target for x86_64).
  template <class T>
  Result<T> read_as(uint64_t addr) const {
    T v{};
    if (const uint8_t* p = span(addr, sizeof(T))) {
      std::memcpy(&v, p, sizeof(T));
      return v;
    }
    LR_TRY(read(addr, &v, sizeof(T)));
    return v;
  }
  Result<uint64_t> read_u64(uint64_t addr) const { return read_as<uint64_t>(addr); }

  // Reads a NUL-terminated string of at most `max` bytes. A string cut by an
  // unreadable byte or by `max` is returned as far as it goes, with `complete`
  // false; an unreadable first byte is an error.
  Result<std::string> read_cstring(uint64_t addr, size_t max, bool* complete = nullptr) const;
};

// Reads fixed-width little-endian integers out of a byte buffer.
inline uint64_t load_uint(const uint8_t* p, size_t width) {
  switch (width) {
    case 1:
      return p[0];
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default: {
      uint64_t v = 0;
      std::memcpy(&v, p, width < 8 ? width : 8);
      return v;
    }
  }
}

}  // namespace lr
