#include "corelib/dump/memory.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lr {

const char* errc_name(Errc c) {
  switch (c) {
    case Errc::kInvalidArgument:
      return "invalid-argument";
    case Errc::kIo:
      return "io";
    case Errc::kBadFormat:
      return "bad-format";
    case Errc::kFault:
      return "fault";
    case Errc::kNotFound:
      return "not-found";
    case Errc::kUnsupported:
      return "unsupported";
    case Errc::kInterrupted:
      return "interrupted";
  }
  return "error";
}

Result<std::string> Memory::read_cstring(uint64_t addr, size_t max, bool* complete) const {
  std::string out;
  if (complete) *complete = false;
  // Read in chunks that never cross a 4 KiB page, so a string ending just
  // before an unreadable page is still returned whole.
  while (out.size() < max) {
    uint64_t a = addr + out.size();
    size_t chunk = std::min<uint64_t>(4096 - (a & 4095), max - out.size());
    const uint8_t* p = span(a, chunk);
    uint8_t tmp[4096];
    if (!p) {
      if (!read(a, tmp, chunk).ok()) {
        // Fall back byte by byte to find exactly where readability ends.
        size_t i = 0;
        for (; i < chunk; ++i) {
          if (!read(a + i, tmp + i, 1).ok()) break;
          if (tmp[i] == 0) break;
        }
        if (i < chunk && tmp[i] == 0 && read(a + i, tmp + i, 1).ok()) {
          out.append(reinterpret_cast<char*>(tmp), i);
          if (complete) *complete = true;
          return out;
        }
        out.append(reinterpret_cast<char*>(tmp), i);
        if (out.empty())
          return make_error(Errc::kFault, fmt::format("string at 0x{:x} not readable", addr));
        return out;
      }
      p = tmp;
    }
    const void* nul = std::memchr(p, 0, chunk);
    if (nul) {
      out.append(reinterpret_cast<const char*>(p), static_cast<const uint8_t*>(nul) - p);
      if (complete) *complete = true;
      return out;
    }
    out.append(reinterpret_cast<const char*>(p), chunk);
  }
  return out;
}

}  // namespace lr
