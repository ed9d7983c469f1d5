#include "corelib/base/fileio.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lr {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

}  // namespace

Result<int> open_input(const std::string& path, const char* what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return make_error(Errc::kIo,
                      fmt::format("{}: cannot open {}: {}", path, what, strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = errno;
    bool statted = S_ISREG(st.st_mode) || st.st_mode != 0;
    ::close(fd);
    return make_error(Errc::kIo, statted ? fmt::format("{}: {} is {}, not a regular file", path,
                                                       what, kind_of(st.st_mode))
                                         : fmt::format("{}: {}", path, strerror(e)));
  }
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

Result<std::string> read_input(const std::string& path, const char* what, uint64_t max_bytes) {
  LR_ASSIGN(int fd, open_input(path, what));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(Errc::kIo, fmt::format("{}: {}", path, strerror(e)));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return make_error(
        Errc::kBadFormat,
        max_bytes % (1 << 20) == 0
            ? fmt::format("{}: larger than {} MiB; not a {}", path, max_bytes >> 20, what)
            : fmt::format("{}: larger than {} bytes; not a {}", path, max_bytes, what));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace lr
