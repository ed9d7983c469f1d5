#include "corelib/base/decompress.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <lz4frame.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "corelib/base/fileio.hpp"

namespace lr {

Compression sniff_compression(std::string_view h) {
  auto starts = [&](std::string_view m) { return h.substr(0, m.size()) == m; };
  if (starts("\x1f\x8b")) return Compression::kGzip;
  if (starts(std::string_view("\xfd"
                              "7zXZ\0",
                              6)))
    return Compression::kXz;
  if (starts("\x28\xb5\x2f\xfd")) return Compression::kZstd;
  if (starts("\x04\x22\x4d\x18")) return Compression::kLz4;
  return Compression::kNone;
}

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kGzip:
      return "gzip";
    case Compression::kXz:
      return "xz";
    case Compression::kZstd:
      return "zstd";
    case Compression::kLz4:
      return "lz4";
    case Compression::kNone:
      break;
  }
  return "none";
}

namespace {

constexpr size_t kChunk = 1 << 20;

// Where decompressed bytes go: the output file, bounded by `limit`.
struct Sink {
  static constexpr size_t kProbe = 1 << 20;
  int fd = -1;  // -1: keep the first `limit` bytes in `head` and stop there
  uint64_t written = 0, limit = 0;
  std::string in, out, head;
  const ExtentOf* extent = nullptr;  // asked once, when `head` has kProbe bytes or at the end
  uint64_t extent_bytes = 0;         // what it said (0: nothing)

  // The content's own size, from its first bytes.
  Result<void> probe() {
    const ExtentOf* e = extent;
    extent = nullptr;
    LR_ASSIGN(extent_bytes, (*e)(head));
    head.clear();
    head.shrink_to_fit();
    if (extent_bytes && written > extent_bytes) return past_extent();
    return {};
  }
  Error past_extent() const {
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: decompresses past the {} bytes its own headers describe "
                                  "(a damaged or hostile file): stopped there",
                                  in, extent_bytes));
  }
  // At the end of the stream: a short content is probed whole.
  Result<void> finish() {
    if (extent && fd >= 0) return probe();
    return {};
  }

  Result<void> put(const uint8_t* p, size_t n) {
    if (fd >= 0 && extent && head.size() < kProbe) {
      head.append(reinterpret_cast<const char*>(p), std::min<size_t>(n, kProbe - head.size()));
      if (head.size() >= kProbe) LR_TRY(probe());
    }
    if (fd >= 0 && extent_bytes && written + n > extent_bytes) return past_extent();
    if (fd < 0) {
      head.append(reinterpret_cast<const char*>(p), std::min<uint64_t>(n, limit - head.size()));
      // Enough: stop decompressing (decompress_head takes this as success).
      if (head.size() >= limit) return make_error(Errc::kInterrupted, "enough");
      return {};
    }
    if (written + n > limit)
      return make_error(Errc::kUnsupported,
                        fmt::format("{}: decompresses to more than {} bytes", in, limit));
    while (n) {
      ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        return make_error(Errc::kIo, fmt::format("{}: write failed: {}", out,
                                                 std::strerror(w < 0 ? errno : ENOSPC)));
      p += w;
      n -= static_cast<size_t>(w);
      written += static_cast<uint64_t>(w);
    }
    return {};
  }
};

Error corrupt(const std::string& in, const char* fmtname, const std::string& why) {
  return make_error(Errc::kBadFormat, fmt::format("{}: corrupt {} data: {}", in, fmtname, why));
}

// Feeds the input file to `step` chunk by chunk; `step(data, n, eof)` consumes
// all of it or fails.
using Step = std::function<Result<void>(const uint8_t*, size_t, bool)>;
Result<void> feed(int fd, const std::string& in, const Step& step) {
  std::vector<uint8_t> buf(kChunk);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return make_error(Errc::kIo, fmt::format("{}: read failed: {}", in, std::strerror(errno)));
    LR_TRY(step(buf.data(), static_cast<size_t>(n), n == 0));
    if (n == 0) return {};
  }
}

Result<void> gunzip(int fd, Sink& s) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return make_error(Errc::kIo, "zlib: out of memory");
  std::vector<uint8_t> out(kChunk);
  bool in_member = false;  // between a member's first byte and its end
  auto r = feed(fd, s.in, [&](const uint8_t* p, size_t n, bool eof) -> Result<void> {
    if (eof) return in_member ? corrupt(s.in, "gzip", "cut short") : Result<void>();
    z.next_in = const_cast<uint8_t*>(p);
    z.avail_in = static_cast<uInt>(n);
    while (z.avail_in) {
      in_member = true;
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      int rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        return corrupt(s.in, "gzip", z.msg ? z.msg : "inflate failed");
      LR_TRY(s.put(out.data(), out.size() - z.avail_out));
      if (rc == Z_STREAM_END) {  // gzip allows members one after another
        in_member = false;
        inflateReset(&z);
      }
    }
    return {};
  });
  inflateEnd(&z);
  return r;
}

Result<void> unxz(int fd, Sink& s) {
  lzma_stream z = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&z, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
    return make_error(Errc::kIo, "liblzma: out of memory");
  std::vector<uint8_t> out(kChunk);
  auto r = feed(fd, s.in, [&](const uint8_t* p, size_t n, bool eof) -> Result<void> {
    z.next_in = p;
    z.avail_in = n;
    lzma_action act = eof ? LZMA_FINISH : LZMA_RUN;
    for (int idle = 0;;) {
      z.next_out = out.data();
      z.avail_out = out.size();
      lzma_ret rc = lzma_code(&z, act);
      LR_TRY(s.put(out.data(), out.size() - z.avail_out));
      if (rc == LZMA_STREAM_END) return {};
      if (rc == LZMA_BUF_ERROR && eof) return corrupt(s.in, "xz", "cut short");
      if (rc != LZMA_OK && rc != LZMA_BUF_ERROR)
        return corrupt(s.in, "xz", fmt::format("liblzma error {}", static_cast<int>(rc)));
      if (!eof && z.avail_in == 0 && z.avail_out != 0) return {};
      // At the end liblzma says LZMA_BUF_ERROR when a stream is cut short;
      // never loop on a decoder that makes no progress.
      if (eof && z.avail_out == out.size() && ++idle > 2) return corrupt(s.in, "xz", "cut short");
    }
  });
  lzma_end(&z);
  return r;
}

Result<void> unzstd(int fd, Sink& s) {
  ZSTD_DStream* z = ZSTD_createDStream();
  if (!z) return make_error(Errc::kIo, "libzstd: out of memory");
  std::vector<uint8_t> out(ZSTD_DStreamOutSize());
  size_t pending = 0;  // 0 at a frame boundary
  bool any = false;
  auto r = feed(fd, s.in, [&](const uint8_t* p, size_t n, bool eof) -> Result<void> {
    if (eof) return pending || !any ? corrupt(s.in, "zstd", "cut short") : Result<void>();
    any = true;
    ZSTD_inBuffer ib{p, n, 0};
    while (ib.pos < ib.size) {
      ZSTD_outBuffer ob{out.data(), out.size(), 0};
      pending = ZSTD_decompressStream(z, &ob, &ib);
      if (ZSTD_isError(pending)) return corrupt(s.in, "zstd", ZSTD_getErrorName(pending));
      LR_TRY(s.put(out.data(), ob.pos));
    }
    return {};
  });
  ZSTD_freeDStream(z);
  return r;
}

Result<void> unlz4(int fd, Sink& s) {
  LZ4F_dctx* z = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&z, LZ4F_VERSION)))
    return make_error(Errc::kIo, "liblz4: out of memory");
  std::vector<uint8_t> out(kChunk);
  size_t hint = 1;  // 0 at a frame boundary
  bool any = false;
  auto r = feed(fd, s.in, [&](const uint8_t* p, size_t n, bool eof) -> Result<void> {
    if (eof) return hint || !any ? corrupt(s.in, "lz4", "cut short") : Result<void>();
    any = true;
    while (n) {
      size_t in_n = n, out_n = out.size();
      hint = LZ4F_decompress(z, out.data(), &out_n, p, &in_n, nullptr);
      if (LZ4F_isError(hint)) return corrupt(s.in, "lz4", LZ4F_getErrorName(hint));
      LR_TRY(s.put(out.data(), out_n));
      p += in_n;
      n -= in_n;
      if (in_n == 0 && out_n == 0) return corrupt(s.in, "lz4", "no progress");
    }
    return {};
  });
  LZ4F_freeDecompressionContext(z);
  return r;
}

}  // namespace

namespace {

Result<void> run(Compression c, int ifd, Sink& s) {
  return c == Compression::kGzip   ? gunzip(ifd, s)
         : c == Compression::kXz   ? unxz(ifd, s)
         : c == Compression::kZstd ? unzstd(ifd, s)
                                   : unlz4(ifd, s);
}

}  // namespace

Result<std::string> decompress_head(const std::string& in, Compression c, size_t n) {
  if (c == Compression::kNone) return make_error(Errc::kInvalidArgument, in + ": not compressed");
  LR_ASSIGN(int ifd, open_input(in, "compressed dump"));
  Sink s;
  s.in = in;
  s.limit = n;
  Result<void> r = run(c, ifd, s);
  ::close(ifd);
  if (!r.ok() && r.error().code != Errc::kInterrupted) return r.error();
  return s.head;
}

Result<uint64_t> decompress_file(const std::string& in, Compression c, const std::string& out,
                                 uint64_t limit, const ExtentOf& extent) {
  if (c == Compression::kNone) return make_error(Errc::kInvalidArgument, in + ": not compressed");
  LR_ASSIGN(int ifd, open_input(in, "compressed dump"));
  Sink s;
  s.in = in;
  s.out = out;
  s.limit = limit;
  if (extent) s.extent = &extent;
  s.fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (s.fd < 0) {
    int e = errno;
    ::close(ifd);
    return make_error(Errc::kIo, fmt::format("{}: cannot create: {}", out, std::strerror(e)));
  }
  Result<void> r = run(c, ifd, s);
  if (r.ok()) r = s.finish();
  ::close(ifd);
  if (::close(s.fd) != 0 && r.ok())
    r = make_error(Errc::kIo, fmt::format("{}: close failed: {}", out, std::strerror(errno)));
  if (!r.ok()) {
    ::unlink(out.c_str());
    return r.error();
  }
  return s.written;
}

Compression file_compression(const std::string& in) {
  auto fd = open_input(in, "input");
  if (!fd.ok()) return Compression::kNone;
  char head[8] = {};
  ssize_t n = ::pread(fd.value(), head, sizeof head, 0);
  ::close(fd.value());
  return sniff_compression(std::string_view(head, n > 0 ? static_cast<size_t>(n) : 0));
}

Result<std::string> decompress_temp(const std::string& in, Compression c, uint64_t limit,
                                    const ExtentOf& extent) {
  const char* dir = std::getenv("TMPDIR");
  static std::atomic<uint64_t> seq{0};
  std::string out =
      fmt::format("{}/leakref-core-{}-{}", dir && *dir ? dir : "/tmp", ::getpid(), seq++);
  LR_TRY(decompress_file(in, c, out, limit, extent));
  return out;
}

}  // namespace lr
