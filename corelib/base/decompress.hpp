// Compressed dumps: systemd-coredump keeps cores as .zst (or .xz, .lz4),
// support archives hold gzip. A core must be mapped to be read, so it is
// decompressed to a file first (streamed, bounded, never touching the input).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "corelib/base/result.hpp"

namespace lr {

enum class Compression { kNone, kGzip, kXz, kZstd, kLz4 };

// By the format's magic number in `head` (a file's first bytes; 6 suffice).
Compression sniff_compression(std::string_view head);
const char* compression_name(Compression c);  // "none", "gzip", "xz", "zstd", "lz4"

// Decompresses all frames/members of `in` into `out`, which is created new
// (O_EXCL, mode 0600; an existing file is an error, never overwritten).
// Returns the bytes written. kBadFormat naming `in` when the stream is
// corrupt or cut short; kUnsupported when it would exceed `limit` bytes (a
// decompression bomb, or a core larger than the caller allows); kIo when
// `out` cannot be written (its disk is full). On error `out` is removed.
//
// `extent` (may be empty) is asked once with the first bytes (1 MiB, or all
// when shorter): the bytes the content's own headers say it has (0: they do
// not say), or an error that refuses it there (not a dump at all). Past that
// size decompression stops with kBadFormat: a 150 KB bomb is refused after
// a few bytes, not after writing gigabytes.
using ExtentOf = std::function<Result<uint64_t>(std::string_view head)>;
Result<uint64_t> decompress_file(const std::string& in, Compression c, const std::string& out,
                                 uint64_t limit, const ExtentOf& extent = {});

// `in`'s compression, by its first bytes; kNone when it is not compressed or
// cannot be read (the caller's open says why).
Compression file_compression(const std::string& in);

// Decompresses `in` into a new file under $TMPDIR (else /tmp) and returns its
// path; the caller maps it and removes it. Errors as decompress_file's.
Result<std::string> decompress_temp(const std::string& in, Compression c, uint64_t limit,
                                    const ExtentOf& extent = {});

// The first `n` bytes `in` decompresses to (fewer when it is shorter): to
// tell what a compressed file holds without decompressing all of it.
// kBadFormat when those bytes cannot be had.
Result<std::string> decompress_head(const std::string& in, Compression c, size_t n);

}  // namespace lr
