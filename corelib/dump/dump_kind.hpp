// What a file is, told from its first bytes (and an ELF core's notes): a
// process core, a kernel dump, a text dump a target registers (a program's
// own state dump), each perhaps compressed. The engine's one answer, so every
// front end (snapshots, batch's finder and worker) tells dumps apart alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "corelib/base/decompress.hpp"
#include "corelib/base/result.hpp"

namespace lr {

enum class DumpKind { kNone, kProcessCore, kKernelDump, kText };

struct DumpId {
  DumpKind kind = DumpKind::kNone;
  std::string text_kind;                         // kText: the name its target registered
  Compression compression = Compression::kNone;  // the file's; kind is then unknown
  // "core", "vmcore", the text kind, or "" (none leakref reads).
  std::string name() const;
};

// A text dump a target reads, told by its first bytes (at most 64).
void register_text_dump(const std::string& name, bool (*looks_like)(std::string_view head));

// From a file's first bytes; an ELF core is a kernel dump when its notes say
// so, read through `fd` (-1: not read, the core is taken for a process's).
DumpId identify_dump_head(std::string_view head, int fd, uint64_t size);

// What a decompressed dump's first bytes say its whole is (ExtentOf for
// decompress_file): an ELF file's end by its headers (program headers,
// their segments' bytes, section headers); 0 when the head does not say (a
// kdump file, a text dump, headers past the head); an error when the bytes
// are no dump leakref reads.
Result<uint64_t> dump_extent(std::string_view head);

// The file at `path` (opened as an input: never blocks on a FIFO).
Result<DumpId> identify_dump(const std::string& path);

}  // namespace lr
