// What a capture of a live process probes. Resolves ref/unref
// function names in the process's modules (exported or static), and writes
// the bpftrace program and the leakref-trace v1 header (mappings with
// build-ids, probed functions and their roles) that `leakref-trace` runs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "corelib/analyses/trace.hpp"
#include "corelib/base/result.hpp"

namespace lr {

struct ProbeSpec {
  std::string name;  // the function, as records name it
  std::string kind;  // "inode"
  TraceOp op = TraceOp::kRef;
  std::string path;      // the module file the uprobe attaches to
  std::string build_id;  // of that file
  uint64_t vaddr = 0;    // ELF virtual address of the function
  uint64_t size = 0;
  bool by_address = false;  // not in any symbol table: probed by address
  std::string how;          // "dynsym", "symtab", "first call in inode_ref"
  int64_t refoff = -1;      // refcount offset in the object; -1: not read
  int refwidth = 0;         // 4 or 8
};

struct TracePlan {
  int pid = 0;
  std::string exe;
  std::vector<ProbeSpec> probes;
  std::vector<TraceMapping> mappings;  // executable mappings, build-ids filled
  std::vector<std::string> warnings;   // functions not found (skipped), ...
};

// True when `path` is only letters, digits and /._-+ (safe inside a command).
bool shell_safe_path(const std::string& path);

// Resolves `functions` in process `pid`. Each entry is "NAME", "NAME@MODULE"
// or either followed by ":OP[:KIND]" (OP: ref, unref, new, free); without an
// OP the role is guessed from the name. A NAME in no symbol table that starts
// with "__" is looked for as the first direct call made by the function
// without the underscores (inode_ref calling __inode_ref).
// `refoffs` maps a kind to (offset, width) of its refcount; a target's
// dict/fd/inode are known. kNotFound when no function resolves at all;
// kIo when /proc/PID is not readable.
Result<TracePlan> plan_trace(int pid, const std::vector<std::string>& functions,
                             const std::map<std::string, std::pair<int64_t, int>>& refoffs);

// The bpftrace program for `plan`: a PID predicate on every probe, literal
// function names, ref_before and the return address read at entry, no
// user-space symbolisation; prints "# attached" once every probe is in and,
// when `ready_file` is set, creates that file then (bpftrace runs BEGIN after
// attaching; the capture's output is block-buffered, so a file is the
// reliable signal).
std::string bpftrace_program(const TracePlan& plan, const std::string& ready_file = {});

// The leakref-trace v1 header lines (#leakref-trace 1, H, K, P, M).
std::string trace_header(const TracePlan& plan, const std::string& source);

}  // namespace lr
