// Opening input files (cores, executables, debuginfo, traces, dumps) safely.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <string>

#include "corelib/base/result.hpp"

namespace lr {

// Opens `path` read-only for reading as `what` ("core", "executable", ...),
// never blocking: a FIFO, socket, device or directory is refused (kIo,
// naming the kind) instead of waiting forever for a writer. Returns the
// descriptor (blocking mode restored); the caller closes it.
Result<int> open_input(const std::string& path, const char* what);

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// The whole of `path` (opened as open_input does), refused with kBadFormat
// naming `what` when it is larger than `max_bytes`.
Result<std::string> read_input(const std::string& path, const char* what, uint64_t max_bytes);

// Whether `path` is a regular file, checked without opening it for reading.
bool is_regular_file(const std::string& path);

}  // namespace lr
