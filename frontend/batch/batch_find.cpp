// Finding the dumps of an archive: what a file holds decides, not its name,
// except that a file named like a dump is one (its row says why it cannot be
// read) so that a truncated core is reported rather than silently skipped.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "corelib/analyses/diff.hpp"
#include "corelib/base/decompress.hpp"
#include "corelib/dump/dump_kind.hpp"
#include "frontend/batch/batch.hpp"

namespace lrcli {

namespace {

constexpr uint64_t kMaxEntries = 1'000'000;

bool named_like_dump(const std::string& path) {
  std::string b = path.substr(path.rfind('/') + 1);
  auto ends = [&](const char* e) {
    std::string_view v(e);
    return b.size() >= v.size() && b.compare(b.size() - v.size(), v.size(), v) == 0;
  };
  return b == "core" || b.rfind("core.", 0) == 0 || ends(".core") || b.rfind("vmcore", 0) == 0 ||
         b.find(".dump") != std::string::npos;
}

// Whether these first bytes start a dump leakref reads (the engine's kinds).
bool dump_head(std::string_view h) {
  return lr::identify_dump_head(h, -1, 0).kind != lr::DumpKind::kNone;
}

bool is_dump(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return named_like_dump(path);
  char head[64] = {};
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  std::string_view h(head, n > 0 ? static_cast<size_t>(n) : 0);
  if (dump_head(h)) return true;
  if (auto c = lr::sniff_compression(h); c != lr::Compression::kNone) {
    // A compressed dump, or a compressed log beside it: the first bytes tell.
    auto inner = lr::decompress_head(path, c, 64);
    if (!inner.ok()) return named_like_dump(path);  // corrupt: a row if it claims to be a dump
    return dump_head(inner.value()) || named_like_dump(path);
  }
  return named_like_dump(path);
}

// A name that is no readable regular file (a FIFO, a dangling link, a link
// loop, a path past PATH_MAX): a row saying why when it is named like a dump,
// else counted among the files not examined.
void add_unreachable(const std::string& p, std::set<std::string>& seen, std::vector<DumpFile>& out,
                     uint64_t* unreachable) {
  if (!named_like_dump(p)) {
    ++*unreachable;
    return;
  }
  if (!seen.insert(p).second) return;
  struct stat st {};
  ::lstat(p.c_str(), &st);
  out.push_back({p, static_cast<uint64_t>(st.st_size),
                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
}

void add_file(const std::string& p, std::set<std::string>& seen, std::vector<DumpFile>& out,
              uint64_t* skipped, uint64_t* unreachable) {
  char real[PATH_MAX];
  struct stat st {};
  if (!::realpath(p.c_str(), real) || ::stat(real, &st) != 0 || !S_ISREG(st.st_mode))
    return add_unreachable(p, seen, out, unreachable);
  if (!seen.insert(real).second) return;
  if (!is_dump(real)) {
    ++*skipped;
    return;
  }
  out.push_back({real, static_cast<uint64_t>(st.st_size),
                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
}

}  // namespace

lr::Result<std::vector<DumpFile>> find_dumps(const std::vector<std::string>& roots,
                                             uint64_t* skipped, uint64_t* unreachable) {
  namespace fs = std::filesystem;
  std::vector<DumpFile> out;
  std::set<std::string> seen;
  uint64_t entries = 0, skip = 0, unreach = 0;
  for (const auto& root : roots) {
    std::error_code ec;
    auto st = fs::status(root, ec);
    if (ec || !fs::exists(st))
      return lr::make_error(lr::Errc::kIo, root + ": no such file or directory");
    if (!fs::is_directory(st)) {
      add_file(root, seen, out, &skip, &unreach);
      continue;
    }
    // Directory symlinks are not followed (no loops); file symlinks are.
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec),
        end;
    for (; !ec && it != end; it.increment(ec)) {
      if (++entries > kMaxEntries)
        return lr::make_error(lr::Errc::kUnsupported,
                              root + ": more than 1,000,000 entries; give smaller parts");
      std::error_code e2;
      if (!it->is_directory(e2)) add_file(it->path().string(), seen, out, &skip, &unreach);
    }
    if (ec) return lr::make_error(lr::Errc::kIo, root + ": " + ec.message());
  }
  std::sort(out.begin(), out.end(),
            [](const DumpFile& a, const DumpFile& b) { return a.path < b.path; });
  if (skipped) *skipped = skip;
  if (unreachable) *unreachable = unreach;
  return out;
}

}  // namespace lrcli
