// Ref/unref and malloc/free trace captures
// read into one model. Parsers exist for leakref-trace v1 (our bpftrace
// capture), bpftrace printf+ustack text, the SystemTap ref-leak script's
// rounds, mmleak logs, bcc memleak reports and the C library's mtrace() logs. Every parser is
// line-based, skips what it cannot read (counted in bad_lines) and never fails on garbage; only an
// input with nothing recognisable at all is an error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "corelib/base/result.hpp"

namespace lr {

enum class TraceOp : uint8_t { kRef, kUnref, kNew, kFree, kAlloc };
const char* trace_op_name(TraceOp op);  // "ref", "unref", "new", "free", "alloc"
// The inverse of trace_op_name; false for any other word.
bool trace_op_from_name(std::string_view name, TraceOp* op);

enum class TraceFormat { kAuto, kLeakref, kBpftrace, kStap, kMmleak, kBccMemleak, kMtrace, kMaps };
const char* trace_format_name(TraceFormat f);  // "leakref", "bpftrace", "stap", ...
// "auto", "leakref", "bpftrace", "stap", "mmleak", "bcc"/"memleak", "mtrace", "maps";
// kInvalidArgument for anything else.
Result<TraceFormat> trace_format_from_name(const std::string& name);

// One stack frame as a tool printed it; any subset of the forms may be known.
struct TraceFrame {
  uint64_t addr = 0;    // absolute address in the traced process; 0 = unknown
  std::string module;   // module as printed (basename or path); "" = unknown
  uint64_t modoff = 0;  // offset from the module's load base (valid if has_modoff)
  bool has_modoff = false;
  std::string sym;      // symbol; "" = unknown
  uint64_t symoff = 0;  // offset from sym
};

// An executable mapping of the traced process (M lines, /proc/PID/maps).
struct TraceMapping {
  uint64_t start = 0, end = 0, offset = 0;
  std::string build_id;  // hex, "" unknown
  std::string path;
};

// A probed function and what a call to it means.
struct TraceFunction {
  std::string name, kind;  // "dict_unref", "dict"
  TraceOp op = TraceOp::kRef;
};

// One call. Records without a pointer (NULL) are dropped by the parsers.
struct TraceEvent {
  uint64_t ts = 0;      // ns (monotonic); 0 when the format has none
  uint64_t seq = 0;     // position in the input; orders events without ts
  uint64_t ptr = 0;     // the object (ref/unref/new/free) or block (alloc/free)
  int64_t before = -1;  // refcount read at entry; -1 unknown (advisory: racy)
  uint64_t size = 0;    // bytes, for kAlloc
  uint32_t tid = 0;
  uint32_t fn = 0;     // index into Trace::functions
  uint32_t stack = 0;  // index into Trace::stacks; frame 0 = the caller
  uint32_t round = 0;  // SystemTap round; 0 otherwise
};

// A refcount value without the events behind it (SystemTap "Net ref counts").
struct TraceAggregate {
  uint32_t round = 0;
  uint64_t ptr = 0;
  int64_t value = 0;
};

// A bcc memleak stack block: bytes and allocations outstanding from a stack.
struct TraceAllocStack {
  uint64_t bytes = 0, count = 0;
  uint32_t stack = 0;
};

struct TraceLoss {
  uint64_t seq = 0;    // events before this position are unaffected
  uint64_t ts = 0;     // last timestamp seen before the loss (0 unknown)
  uint64_t count = 0;  // records lost
};

struct Trace {
  std::string source;  // the file name, for messages
  TraceFormat format = TraceFormat::kAuto;
  std::map<std::string, std::string> header;  // H line keys (pid, exe, source, ...)
  std::vector<TraceFunction> functions;
  std::vector<TraceMapping> mappings;
  std::vector<std::vector<TraceFrame>> stacks{{}};  // [0] is the empty stack
  std::vector<TraceEvent> events;
  std::vector<TraceAggregate> aggregates;
  std::vector<TraceAllocStack> alloc_stacks;
  std::vector<TraceLoss> losses;
  uint64_t bad_lines = 0;    // lines that were not understood (skipped)
  bool truncated = false;    // the input ended inside a record
  bool has_trailer = false;  // an X trailer (the capture ended normally)
  std::vector<std::string> warnings;

  uint64_t lost() const;
  // Index of function `name`, added with a role guessed from the name (or
  // the given one) when new.
  uint32_t function(const std::string& name, const std::string& kind = {},
                    TraceOp op = TraceOp::kRef, bool explicit_role = false);
  uint32_t add_stack(std::vector<TraceFrame> frames);

 private:
  std::unordered_map<std::string, uint32_t> fn_index_;  // name -> index in functions
};

// Guesses (kind, op) from a ref-API name: "__inode_unref" -> (inode, unref),
// "fd_create_uint64" -> (fd, new), "obj_put" -> (obj, unref). False when
// the name does not look like a ref/unref/new/free function.
bool guess_function_role(const std::string& name, std::string* kind, TraceOp* op);

// The format `text` is in; kAuto when it is none we know.
TraceFormat detect_trace_format(std::string_view text);

// Parses `text`. `source` names the input in warnings and errors. kBadFormat
// only when not a single record could be read.
Result<Trace> parse_trace(std::string_view text, TraceFormat fmt, const std::string& source);

// Reads `path` (mapped read-only) and parses it. For mmleak logs the
// "<prefix>.maps" snapshot next to the log is read too, if present.
Result<Trace> load_trace(const std::string& path, TraceFormat fmt = TraceFormat::kAuto);

// /proc/PID/maps text (also "# maps: " prefixed lines) to file-backed mappings.
std::vector<TraceMapping> parse_proc_maps(std::string_view text);

// "libfoo.so.0.0.1", "(/usr/lib/x86_64-*-gnu/libfoo.so.0)" ->
// "libfoo.so"; libc and libpthread (any version) -> "libc". The key two
// tools' frames are matched by.
std::string module_key(std::string_view module);

namespace trace_detail {  // the per-format parsers, exposed for tests and fuzzing
void parse_leakref(std::string_view text, Trace& t);
void parse_bpftrace(std::string_view text, Trace& t);
void parse_stap(std::string_view text, Trace& t);
void parse_mmleak(std::string_view text, Trace& t);
void parse_bcc(std::string_view text, Trace& t);
void parse_mtrace(std::string_view text, Trace& t);
}  // namespace trace_detail

}  // namespace lr
