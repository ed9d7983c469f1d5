// libFuzzer target: the kdump-compressed file check that stands between a
// file and libkdumpfile (which crashes on malformed headers), and, for
// inputs that pass it, libkdumpfile's own open through KernelTarget (the
// vmlinux lookup then fails, which ends the run).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "targets/linux/kernel.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("fuzz-kdump", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, data, size) == static_cast<ssize_t>(size)) {
    auto layout = lr::check_kdump_file(fd, "fuzz");
    if (layout.ok() && size >= 8 &&
        std::string(reinterpret_cast<const char*>(data), 8) == "KDUMP   ")
      (void)lr::KernelTarget::open("/proc/self/fd/" + std::to_string(fd), "/nonexistent/vmlinux");
  }
  ::close(fd);
  return 0;
}
