// Joins ref/unref traces with the objects live in a core. For each
// object: its trace history split into lifetimes (an address is reused once
// its count reaches 0), the balance of the last lifetime, whether the core's
// refcount agrees, and — when the core cannot account for some references
// and the trace shows them taken and never dropped — which calls took them.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "corelib/analyses/trace.hpp"
#include "corelib/blocks/heap.hpp"

namespace lr {

class ModuleSet;
class CoreFile;
class RefIndex;

// An object live in the core, as a profile or walk reports it.
struct CoreObject {
  uint64_t addr = 0;
  std::string kind;  // "inode", "dict", "fd", or a walk's kind; "any" matches every trace kind
  int64_t refcount = 0;
  int64_t explained = -1;    // refs the core accounts for (holders found); -1 unknown
  std::string explained_by;  // "1 fd, 2 child dentries", "3 pointers in live memory"
  std::string label;         // "gfid 3f2e…", "count=4" — shown next to the address
  std::string holders;       // "fuse=3, md-cache=1" when the profile knows them
  bool ignore = false;       // pinned objects (the root inode): never flagged
};

// A frame as the user should read it, and the key frames are matched by.
struct ResolvedFrame {
  std::string key;   // "libfoo.so+0x3607b" (module key + ELF vaddr) or what is known
  std::string text;  // "inode_link+0x3b [libfoo.so.0.0.1]"
  std::string func;  // the containing function's symbol, "" unknown
};

// Maps trace frames onto the core's modules. Absolute addresses go through
// the trace's own mapping snapshot (M lines, maps files) to the module with
// the same build-id (or name) in the core, so a trace of an earlier instance
// of the program still resolves; without mappings they are taken as
// addresses of the core's process.
class FrameResolver {
 public:
  // Either may be null (no core): frames then keep what the tool printed.
  // The caller keeps `mods` and `core` alive.
  FrameResolver(const ModuleSet* mods, const CoreFile* core);
  // Absolute frames are resolved once per (trace, address) and cached: a
  // capture repeats a few thousand callers across millions of records.
  ResolvedFrame resolve(const Trace& t, const TraceFrame& f) const;
  // The address in the core's process a trace frame stands for; 0 unknown.
  uint64_t core_address(const Trace& t, const TraceFrame& f) const;

 private:
  ResolvedFrame resolve_uncached(const Trace& t, const TraceFrame& f) const;
  const ModuleSet* mods_;
  const CoreFile* core_;
  uint64_t entry_ = 0;  // AT_ENTRY: gdb's `call` returns here
  mutable std::map<std::pair<const Trace*, uint64_t>, ResolvedFrame> cache_;
};

enum class Verdict {
  kFlagged,       // refs the core cannot account for, taken in the trace and never dropped
  kExplained,     // unmatched refs in the trace, all held by holders the core shows
  kBalanced,      // every ref in the last lifetime was dropped again
  kBeforeWindow,  // refs the core cannot account for, but taken before the trace began
  kUnreliable,    // continuity breaks or lost records: not judged
  kDisagree,      // the trace's count differs from the core's refcount
  kNotInTrace,    // no event for this address
};
const char* verdict_name(Verdict v);

struct TraceRef {
  uint32_t trace = 0;  // index into the traces passed to correlate()
  uint32_t event = 0;  // index into that trace's events
};

struct ObjectResult {
  CoreObject obj;
  Verdict verdict = Verdict::kNotInTrace;
  uint32_t lifetimes = 0;        // lifetimes the trace shows for this address
  uint32_t events = 0;           // counted events, all lifetimes
  int64_t start_count = -1;      // refcount when the last lifetime's first event ran; -1 unknown
  int64_t refs = 0, unrefs = 0;  // in the last lifetime
  int64_t predicted = -1;        // the count the trace predicts; -1 unknown
  uint32_t breaks = 0;           // continuity breaks (ref_before jumps) in the last lifetime
  bool closed = false;           // the last lifetime ended (count 0 / freed) before the trace did
  int64_t excess = 0;            // flagged: refs the trace explains (<= unexplained)
  std::vector<TraceRef> unmatched;  // refs of the last lifetime never dropped, oldest first
  std::vector<TraceRef> blamed;     // the newest `excess` of them
  std::string reason;
  std::string alloc_site;  // from an allocation trace, when one covers the object's chunk
};

struct CallSite {
  std::string key, text;
  uint64_t refs = 0;  // unmatched references blamed on this site
  uint32_t objects = 0;
  std::map<std::string, uint64_t> by_kind;
  std::vector<std::string> example;  // a deeper stack of one blamed event, when the trace has one
};

struct OutstandingAlloc {
  uint64_t ptr = 0, size = 0;
  TraceRef ev;
  bool live = false;  // an in-use heap chunk of a usable size that fits starts at ptr in the core
};
struct AllocSite {
  std::string key, text;
  uint64_t count = 0, bytes = 0, live_count = 0, live_bytes = 0;
  // False when the site's blocks carry no addresses (bcc memleak's stack
  // summaries): how many are live in the core is not known.
  bool live_known = true;
};

struct HistoryEntry {
  TraceRef ev;
  uint32_t lifetime = 0;
  int64_t count_after = -1;  // running count after the event; -1 unknown
  bool nested = false;       // inner half of a probed wrapper (not counted)
  uint64_t ts = 0;           // when the count changed (a wrapper: its inner call's time)
};

struct CorrelateOptions {
  std::string kind = "any";  // restrict to core objects of this kind
  size_t top = 10;           // call sites kept
  uint64_t history_ptr = 0;  // fill CorrelateReport::history for this address
};

struct CorrelateReport {
  std::vector<ObjectResult> objects;     // flagged first, then by verdict and address
  std::vector<CallSite> sites;           // ranked by refs, at most options.top
  std::vector<OutstandingAlloc> allocs;  // allocation traces: blocks never freed
  std::vector<AllocSite> alloc_sites;    // ranked by live bytes, then bytes
  std::vector<HistoryEntry> history;     // options.history_ptr, chronological
  std::map<Verdict, uint64_t> counts;
  uint64_t events = 0, counted = 0, nested = 0, pointers = 0, pointers_in_core = 0, lost = 0;
  std::vector<std::string> warnings;
};

// Joins `traces` (ref/unref and allocation traces alike) with `objects`.
// `heap` (may be null) lets allocation records be checked against the
// core's in-use chunks. Bounded: linear in events plus objects.
CorrelateReport correlate(const std::vector<Trace>& traces, const std::vector<CoreObject>& objects,
                          const FrameResolver& fr, const CorrelateOptions& opts,
                          const HeapWalk* heap);

// For each target (address, size), the references `index` found to its
// first byte (low tag bits ignored) from outside [address, address + size)
// that can hold a reference: words in heap blocks, module data and other
// writable mappings. Stacks, TLS and registers are left out: a running
// frame's pointer is most often borrowed (the caller's reference), and
// counting it would hide the very leak a trace names. Conservative holders
// for a refcount: a stale pointer left in live memory over-counts, so a
// reference never found is strong evidence, a found one weak. -1 for a target in no in-use heap
// block (the index holds references to heap blocks only).
std::map<uint64_t, int64_t> count_references(
    const RefIndex& index, const std::vector<std::pair<uint64_t, uint64_t>>& targets);

}  // namespace lr
