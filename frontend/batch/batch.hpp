// `leakref batch`: dump archives. Shared between the parts of the command:
// finding dumps (batch_find.cpp), analysing one in a child process under
// limits (batch_analyze.cpp, batch_worker.cpp), keeping results in SQLite
// (batch_db.cpp), and the commands (cmd_batch.cpp, batch_report.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"

namespace lrcli {

// How each dump is analysed; every field is passed on to the child.
struct BatchOptions {
  std::string sysroot;
  std::vector<std::string> debug_dirs;
  std::vector<std::string> profiles;  // forced profiles; empty: every installed one that matches
  double timeout = 900;               // wall-clock seconds per dump
  uint64_t mem_limit_mib = 0;         // data (heap) limit per dump; 0: none
  uint64_t max_core_mib = 65536;      // largest decompressed core
  std::string work_dir;               // where compressed cores are decompressed ("": $TMPDIR)
};

// A file of the archive that is, or claims to be, a dump. Its identity in
// the database is (path, size, mtime_ns): a file rewritten in place is a
// new dump.
struct DumpFile {
  std::string path;  // absolute, symlinks resolved
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

// Every dump under `roots` (files and directories, walked without following
// directory symlinks, at most 1,000,000 entries): ELF cores, kdump files,
// compressed files, GlusterFS statedumps, and names like dumps (core,
// core.*, *.core, vmcore*) whatever they hold, FIFOs and broken links
// included (their rows say why they cannot be read). `skipped` counts other
// files; `unreachable` other names that could not be examined (a FIFO, a
// broken link, a path past PATH_MAX). Sorted by path. kIo naming a root that
// does not exist.
lr::Result<std::vector<DumpFile>> find_dumps(const std::vector<std::string>& roots,
                                             uint64_t* skipped, uint64_t* unreachable = nullptr);

// One dump analysed in this process (`leakref batch one`): a
// leakref.batch-result/1 document. Never fails: an unreadable dump is a
// result with status "error" and the message.
nlohmann::json analyze_dump(const DumpFile& d, const BatchOptions& o);

// Each dump of `todo` analysed in a child process (this executable's `batch
// one`) under the time and memory limits of `o`, at most `jobs` at a time;
// `done` is called in this process, one result at a time, as each finishes,
// with seconds, peak_rss_kib and worker added. A child that dies or runs out
// of time or memory gives a result with status "crashed", "memory" or
// "timeout". Children die with this process (PR_SET_PDEATHSIG).
void run_dumps(const std::vector<DumpFile>& todo, const BatchOptions& o, unsigned jobs,
               const std::function<void(nlohmann::json)>& done);

// The options as `batch one` takes them, for the child's command line.
std::vector<std::string> batch_option_args(const BatchOptions& o);

// A stable short hash (16 hex digits) of a signature text.
std::string signature_hash(const std::string& text);

}  // namespace lrcli
