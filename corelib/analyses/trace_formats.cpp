// Parsers for other tools' outputs (SystemTap ref-leak rounds, mmleak, bcc
// memleak), format detection, and loading a trace file read-only.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "corelib/analyses/trace.hpp"
#include "corelib/base/fileio.hpp"
#include "corelib/base/saturate.hpp"
#include "trace_text.hpp"

namespace lr {

using namespace tt;

// SystemTap sprint_ubacktrace() frames (_STP_SYM_SIMPLE):
//   "sym+0xOFF [module]" | "0xADDR [module+0xOFF]" | "0xADDR"
static bool parse_stap_frame(std::string_view s, TraceFrame* f) {
  s = trim(s);
  if (s.empty() || s.front() == '<') return false;
  std::string_view head = s, mod;
  size_t lb = s.find(" [");
  if (lb != std::string_view::npos) {
    if (s.back() != ']') return false;
    head = s.substr(0, lb);
    mod = s.substr(lb + 2, s.size() - lb - 3);
  }
  if (starts_with(head, "0x")) {
    if (!parse_hex(head, &f->addr)) return false;
    if (!mod.empty()) {
      size_t plus = mod.rfind("+0x");
      if (plus == std::string_view::npos) return false;
      f->module = std::string(mod.substr(0, plus));
      f->has_modoff = parse_hex(mod.substr(plus + 1), &f->modoff);
      return f->has_modoff;
    }
    return true;
  }
  size_t plus = head.rfind("+0x");
  if (plus == std::string_view::npos || mod.empty()) return false;
  if (!parse_hex(head.substr(plus + 1), &f->symoff)) return false;
  f->sym = std::string(head.substr(0, plus));
  f->module = std::string(mod);
  return !f->sym.empty();
}

namespace trace_detail {

void parse_stap(std::string_view text, Trace& t) {
  enum State { kNone, kCounts, kRef, kUnref } st = kNone;
  Lines ls(text);
  std::string_view raw;
  uint32_t round = 0;
  bool in_block = false;
  uint64_t ptr = 0;
  std::vector<TraceFrame> frames;
  auto flush = [&]() {
    if (!in_block) return;
    in_block = false;
    if (!ptr) return;
    TraceOp section_op = st == kUnref ? TraceOp::kUnref : TraceOp::kRef;
    // Frame 0 is the probed function (dict_ref+0xc): it names the function;
    // the callers follow.
    std::string fn = !frames.empty() && !frames[0].sym.empty()
                         ? frames[0].sym
                         : std::string(section_op == TraceOp::kRef ? "ref" : "unref");
    std::string kind;
    TraceOp op;
    bool guessed = guess_function_role(fn, &kind, &op);
    TraceEvent e;
    e.fn =
        t.function(fn, guessed ? kind : std::string("?"), section_op, !guessed || op != section_op);
    e.ptr = ptr;
    e.round = round;
    e.seq = t.events.size();
    if (frames.size() > 1) e.stack = t.add_stack({frames.begin() + 1, frames.end()});
    t.events.push_back(e);
    frames.clear();
  };
  while (ls.next(&raw)) {
    std::string_view line = trim(raw);
    if (starts_with(line, "ROUND :")) {
      flush();
      uint64_t r = 0;
      parse_num(trim(line.substr(7)), &r);
      round = static_cast<uint32_t>(std::min<uint64_t>(r, UINT32_MAX));
      st = kCounts;
      continue;
    }
    if (starts_with(line, "Net ref counts")) {
      st = kCounts;
      continue;
    }
    if (starts_with(line, "Ref Traces") || starts_with(line, "Ref traces")) {
      flush();
      st = kRef;
      continue;
    }
    if (starts_with(line, "Unref Traces") || starts_with(line, "Unref traces")) {
      flush();
      st = kUnref;
      continue;
    }
    if (!line.empty() && line.find_first_not_of('-') == std::string_view::npos) {
      flush();
      if (line.size() > 6) st = kNone;  // "-----------" closes the round
      continue;
    }
    if (starts_with(line, "ptr :")) {
      flush();
      in_block = (st == kRef || st == kUnref) && parse_hex(trim(line.substr(5)), &ptr);
      if (!in_block) ++t.bad_lines;
      continue;
    }
    if (line.empty()) {
      // A blank line ends a backtrace block only once it has frames: the
      // block starts right after "ptr :".
      if (in_block && !frames.empty()) flush();
      continue;
    }
    if (st == kCounts) {
      auto tok = split(line);
      TraceAggregate a;
      if (tok.size() == 3 && tok[1] == ":" && parse_hex(tok[0], &a.ptr) &&
          parse_int(tok[2], &a.value)) {
        a.round = round;
        t.aggregates.push_back(a);
      } else if (line != "0" && !starts_with(line, "Therefore")) {
        ++t.bad_lines;
      }
      continue;
    }
    if (in_block) {
      TraceFrame f;
      if (parse_stap_frame(line, &f)) {
        if (frames.size() < 256) frames.push_back(std::move(f));
      } else if (starts_with(line, "<no user backtrace")) {
        // the event still counts; it has no stack
      } else if (ls.unterminated()) {
        t.truncated = true;  // MAXSTRINGLEN cut the last frame
      } else {
        ++t.bad_lines;
      }
      continue;
    }
    ++t.bad_lines;
  }
  if (ls.unterminated() && in_block) t.truncated = true;
  flush();
}

// mmleak: "0xPTR 0xCALLER SIZE" (alloc) / "0xPTR 0xCALLER" (free); %p prints
// NULL as "(nil)".
void parse_mmleak(std::string_view text, Trace& t) {
  Lines ls(text);
  std::string_view line;
  uint32_t fn_alloc = t.function("malloc", "alloc", TraceOp::kAlloc, true);
  uint32_t fn_free = t.function("free", "alloc", TraceOp::kFree, true);
  while (ls.next(&line)) {
    auto tok = split(line);
    if (tok.empty()) continue;
    TraceEvent e;
    TraceFrame caller;
    if ((tok.size() != 2 && tok.size() != 3) || !parse_ptr(tok[0], &e.ptr) ||
        !parse_ptr(tok[1], &caller.addr) || (tok.size() == 3 && !parse_num(tok[2], &e.size))) {
      if (ls.unterminated())
        t.truncated = true;
      else
        ++t.bad_lines;
      continue;
    }
    if (ls.unterminated() && tok.size() == 2) {
      t.truncated = true;  // "0x.. 0x.. 12" cut after the caller reads as a free
      continue;
    }
    if (!e.ptr) continue;
    e.fn = tok.size() == 3 ? fn_alloc : fn_free;
    if (caller.addr) e.stack = t.add_stack({caller});
    e.seq = t.events.size();
    t.events.push_back(e);
  }
}

// The C library's mtrace() log (MALLOC_TRACE; libc_malloc_debug.so from 2.34): one
// line per call, "@ WHERE OP PTR [SIZE]" with OP "+" (malloc, calloc,
// memalign), "-" (free), "<" and ">" (realloc's old and new block). WHERE is
// the caller, "FILE:(SYM+0xOFF)[0xADDR]", "FILE:[0xADDR]" or "[0xADDR]";
// "= Start" and "= End" bracket the log.
// With a FILE, the value is the caller's offset from the file's load base
// (release 2.36 prints that; older ones printed the address, which the
// core tells apart); without one it is an address.
static bool parse_mtrace_where(std::string_view w, TraceFrame* f) {
  const size_t lb = w.rfind('[');
  uint64_t v = 0;
  if (lb == w.npos || w.back() != ']' || !parse_ptr(w.substr(lb + 1, w.size() - lb - 2), &v))
    return false;
  w = w.substr(0, lb);
  if (w.empty()) {
    f->addr = v;
    return true;
  }
  f->modoff = v;
  f->has_modoff = true;
  if (w.back() == ')') {  // "(SYM+0xOFF)": an exported symbol dladdr found
    const size_t lp = w.rfind('(');
    if (lp == w.npos) return false;
    std::string_view so = w.substr(lp + 1, w.size() - lp - 2);
    const size_t plus = so.find_last_of("+-");
    uint64_t off = 0;
    if (plus != so.npos && parse_num(so.substr(plus + 1), &off) && so[plus] == '+') {
      f->sym = std::string(so.substr(0, plus));
      f->symoff = off;
    }
    w = w.substr(0, lp);
  }
  if (w.size() < 2 || w.back() != ':') return false;
  f->module = std::string(w.substr(0, w.size() - 1));
  return true;
}

void parse_mtrace(std::string_view text, Trace& t) {
  Lines ls(text);
  std::string_view line;
  const uint32_t fn_alloc = t.function("malloc", "alloc", TraceOp::kAlloc, true);
  const uint32_t fn_free = t.function("free", "alloc", TraceOp::kFree, true);
  while (ls.next(&line)) {
    if (line == "= End") t.has_trailer = true;     // muntrace() closed the log
    if (line.empty() || line[0] == '=') continue;  // "= Start", "= End"
    auto tok = split(line);
    TraceEvent e;
    TraceFrame caller;
    const bool alloc = tok.size() == 5 && (tok[2] == "+" || tok[2] == ">");
    const bool free = tok.size() == 4 && (tok[2] == "-" || tok[2] == "<");
    if (tok.size() < 4 || tok[0] != "@" || !(alloc || free) ||
        !parse_mtrace_where(tok[1], &caller) || !parse_ptr(tok[3], &e.ptr) ||
        (alloc && !parse_num(tok[4], &e.size))) {
      ++t.bad_lines;
      continue;
    }
    if (!e.ptr) continue;
    e.fn = alloc ? fn_alloc : fn_free;
    e.stack = t.add_stack({caller});
    e.seq = t.events.size();
    t.events.push_back(e);
  }
}

// bcc memleak (tools/memleak.py >= 0.25 and libbpf-tools). Every interval
// reprints everything outstanding, so only the last interval is kept.
void parse_bcc(std::string_view text, Trace& t) {
  struct Interval {
    std::vector<TraceAllocStack> stacks;
    std::vector<std::vector<TraceFrame>> frames;
    std::vector<std::pair<uint64_t, uint64_t>> addrs;  // (addr, size)
    std::vector<int64_t> addr_block;                   // block index or -1
  };
  Interval cur, prev;
  Lines ls(text);
  std::string_view raw;
  uint32_t fn_alloc = t.function("malloc", "alloc", TraceOp::kAlloc, true);
  while (ls.next(&raw)) {
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (line.front() == '[' && line.find("stacks with outstanding allocations") != line.npos) {
      if (!cur.stacks.empty() || !cur.addrs.empty()) prev = std::move(cur);
      cur = Interval{};
      continue;
    }
    if (starts_with(line, "Attaching") || starts_with(line, "Tracing")) continue;
    auto tok = split(line);
    if (tok.size() >= 6 && tok[1] == "bytes" && tok[2] == "in" && tok[4] == "allocations") {
      TraceAllocStack s;
      if (parse_num(tok[0], &s.bytes) && parse_num(tok[3], &s.count)) {
        cur.stacks.push_back(s);
        cur.frames.emplace_back();
      } else {
        ++t.bad_lines;
      }
      continue;
    }
    if (tok.size() >= 6 && tok[0] == "addr" && tok[1] == "=" && tok[3] == "size") {
      uint64_t a, sz;
      if (parse_hex(tok[2], &a) && parse_num(tok[5], &sz)) {
        cur.addrs.push_back({a, sz});
        cur.addr_block.push_back(cur.stacks.empty() ? -1 : int64_t(cur.stacks.size()) - 1);
      } else {
        ++t.bad_lines;
      }
      continue;
    }
    if (line == "stack information lost") continue;
    if (cur.frames.empty()) {
      ++t.bad_lines;
      continue;
    }
    // A frame: "0x<pc> sym+0xoff [mod]" (py), "<i> [<pc>] sym+0xoff [dso]"
    // (libbpf), "sym+0xoff [mod]" (--combined-only), "[unknown] [mod]".
    TraceFrame f;
    size_t i = 0;
    if (tok.size() >= 2 && std::all_of(tok[0].begin(), tok[0].end(), ::isdigit) &&
        starts_with(tok[1], "[")) {
      std::string_view pc = tok[1].substr(1);
      if (!pc.empty() && pc.back() == ']') pc.remove_suffix(1);
      if (!pc.empty() && pc.front() == '<') pc.remove_prefix(1);
      if (!pc.empty() && pc.back() == '>') pc.remove_suffix(1);
      parse_hex(pc, &f.addr);
      i = 2;
    } else if (starts_with(tok[0], "0x")) {
      parse_hex(tok[0], &f.addr);
      i = 1;
    }
    if (i < tok.size() && tok[i] != "[unknown]" && tok[i] != "<null") {
      size_t plus = tok[i].rfind("+0x");
      if (plus != std::string_view::npos && parse_hex(tok[i].substr(plus + 1), &f.symoff))
        f.sym = std::string(tok[i].substr(0, plus));
    }
    if (tok.size() > i + 1 && starts_with(tok.back(), "[") && tok.back().back() == ']')
      f.module = std::string(tok.back().substr(1, tok.back().size() - 2));
    if (f.module == "unknown") f.module.clear();
    if (!f.addr && f.sym.empty() && f.module.empty()) {
      if (!ls.unterminated()) ++t.bad_lines;
      continue;
    }
    if (cur.frames.back().size() < 256) cur.frames.back().push_back(std::move(f));
  }
  if (ls.unterminated()) t.truncated = true;
  Interval& use = (cur.stacks.empty() && cur.addrs.empty()) ? prev : cur;
  std::vector<uint32_t> sid(use.stacks.size());
  for (size_t i = 0; i < use.stacks.size(); ++i) {
    sid[i] = t.add_stack(std::move(use.frames[i]));
    use.stacks[i].stack = sid[i];
    t.alloc_stacks.push_back(use.stacks[i]);
  }
  for (size_t i = 0; i < use.addrs.size(); ++i) {
    TraceEvent e;
    e.ptr = use.addrs[i].first;
    e.size = use.addrs[i].second;
    e.fn = fn_alloc;
    if (use.addr_block[i] >= 0) e.stack = sid[use.addr_block[i]];
    e.seq = t.events.size();
    if (e.ptr) t.events.push_back(e);
  }
}

}  // namespace trace_detail

static bool looks_like_maps_line(std::string_view l) {
  return !parse_proc_maps(l).empty() || (l.find('-') < 17 && split(l).size() >= 5 &&
                                         split(l)[1].size() == 4 && split(l)[1][0] != '0');
}

TraceFormat detect_trace_format(std::string_view text) {
  std::string_view head = text.substr(0, std::min<size_t>(text.size(), 1 << 16));
  if (starts_with(head, "#leakref-trace")) return TraceFormat::kLeakref;
  if (starts_with(head, "= Start\n") || starts_with(head, "@ ")) return TraceFormat::kMtrace;
  if (starts_with(head, "ROUND :") || head.find("\nROUND :") != head.npos ||
      head.find("Net ref counts for each ptr") != head.npos)
    return TraceFormat::kStap;
  if (head.find("allocations from stack") != head.npos ||
      head.find("stacks with outstanding allocations") != head.npos)
    return TraceFormat::kBccMemleak;
  if (head.find("#leakref-bt") != head.npos || head.find("# maps: ") != head.npos ||
      starts_with(head, "Attaching "))
    return TraceFormat::kBpftrace;
  Lines ls(head);
  std::string_view line;
  int n = 0;
  while (ls.next(&line) && n < 8) {
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    ++n;
    auto tok = split(line);
    if (tok[0] == "E" && tok.size() >= 6)
      return line.find("ra=") != line.npos ? TraceFormat::kBpftrace : TraceFormat::kLeakref;
    if (looks_like_maps_line(line)) return TraceFormat::kMaps;
    uint64_t v;
    if ((tok.size() == 2 || tok.size() == 3) && parse_ptr(tok[0], &v) && parse_ptr(tok[1], &v) &&
        (starts_with(tok[0], "0x") || tok[0] == "(nil)"))
      return TraceFormat::kMmleak;
    return TraceFormat::kAuto;
  }
  return TraceFormat::kAuto;
}

namespace {

// A size past any address space is damage (a field that overflowed, a
// forged line): such a record's size is not counted, and the trace says so.
void drop_impossible_sizes(Trace& t) {
  uint64_t n = 0, first = 0;
  auto check = [&](uint64_t& size) {
    if (size <= kMaxAllocationSize) return;
    if (n++ == 0) first = size;
    size = 0;
  };
  for (auto& e : t.events) check(e.size);
  for (auto& a : t.alloc_stacks) check(a.bytes);
  if (n)
    t.warnings.push_back(fmt::format(
        "{}: {} record(s) give a size larger than any address space (the first: {} bytes); "
        "their sizes are not counted",
        t.source, n, first));
}

}  // namespace

Result<Trace> parse_trace(std::string_view text, TraceFormat fmt, const std::string& source) {
  Trace t;
  t.source = source;
  if (text.empty()) return make_error(Errc::kBadFormat, source + ": empty trace file");
  if (fmt == TraceFormat::kAuto) fmt = detect_trace_format(text);
  if (fmt == TraceFormat::kAuto)
    return make_error(Errc::kBadFormat,
                      source +
                          ": not a trace format leakref reads (leakref-trace, bpftrace, "
                          "SystemTap ref-leak, mmleak, bcc memleak, mtrace, /proc/PID/maps)");
  t.format = fmt;
  // Every tool ends its lines with '\n': a last line without one was cut
  // (a copy, a full disk, MAXSTRINGLEN) and is dropped, not parsed as a
  // shorter value ("ptr : 7fc7e00" was read as pointer 0x7fc7e00).
  if (text.back() != '\n') {
    size_t nl = text.rfind('\n');
    text = nl == std::string_view::npos ? std::string_view() : text.substr(0, nl + 1);
    t.truncated = true;
    if (text.empty())
      return make_error(Errc::kBadFormat, source + ": only a partial first line (cut off)");
  }
  switch (fmt) {
    case TraceFormat::kLeakref:
      trace_detail::parse_leakref(text, t);
      break;
    case TraceFormat::kBpftrace:
      trace_detail::parse_bpftrace(text, t);
      break;
    case TraceFormat::kStap:
      trace_detail::parse_stap(text, t);
      break;
    case TraceFormat::kMmleak:
      trace_detail::parse_mmleak(text, t);
      break;
    case TraceFormat::kBccMemleak:
      trace_detail::parse_bcc(text, t);
      break;
    case TraceFormat::kMtrace:
      trace_detail::parse_mtrace(text, t);
      break;
    case TraceFormat::kMaps:
      t.mappings = parse_proc_maps(text);
      break;
    case TraceFormat::kAuto:
      break;
  }
  if (t.events.empty() && t.aggregates.empty() && t.alloc_stacks.empty() && t.mappings.empty())
    return make_error(Errc::kBadFormat, fmt::format("{}: no {} records in it ({} line(s) not "
                                                    "understood)",
                                                    source, trace_format_name(fmt), t.bad_lines));
  drop_impossible_sizes(t);
  if (t.bad_lines)
    t.warnings.push_back(
        fmt::format("{}: {} line(s) not understood were skipped", source, t.bad_lines));
  if (t.truncated)
    t.warnings.push_back(source +
                         ": the input ends inside a record (truncated); the partial "
                         "record was dropped");
  if (t.lost())
    t.warnings.push_back(fmt::format("{}: the capture lost {} record(s)", source, t.lost()));
  return t;
}

namespace {
struct MappedFile {
  int fd = -1;
  void* p = nullptr;
  size_t n = 0;
  ~MappedFile() {
    if (p && p != MAP_FAILED) munmap(p, n);
    if (fd >= 0) close(fd);
  }
};

Result<std::string_view> map_file(const std::string& path, MappedFile& mf) {
  LR_ASSIGN(mf.fd, open_input(path, "trace"));  // never waits on a FIFO
  struct stat st;
  if (fstat(mf.fd, &st) != 0)
    return make_error(Errc::kIo, fmt::format("{}: {}", path, std::strerror(errno)));
  mf.n = static_cast<size_t>(st.st_size);
  if (mf.n == 0) return std::string_view();
  mf.p = mmap(nullptr, mf.n, PROT_READ, MAP_PRIVATE, mf.fd, 0);
  if (mf.p == MAP_FAILED)
    return make_error(Errc::kIo, fmt::format("{}: cannot map: {}", path, std::strerror(errno)));
  return std::string_view(static_cast<const char*>(mf.p), mf.n);
}

// mmleak-<host>.<pid>.<N>.out / mmleak-<host>.<pid>.pid -> mmleak-<host>.<pid>.maps
std::string mmleak_maps_path(const std::string& path) {
  std::string b = path;
  auto strip = [&](const char* suf) {
    size_t n = std::strlen(suf);
    if (b.size() > n && b.compare(b.size() - n, n, suf) == 0) {
      b.resize(b.size() - n);
      return true;
    }
    return false;
  };
  if (strip(".out")) {
    size_t dot = b.rfind('.');
    if (dot == std::string::npos || dot + 1 >= b.size() ||
        !std::all_of(b.begin() + dot + 1, b.end(), ::isdigit))
      return {};
    b.resize(dot);
  } else if (!strip(".pid")) {
    return {};
  }
  return b + ".maps";
}
}  // namespace

Result<Trace> load_trace(const std::string& path, TraceFormat fmt) {
  MappedFile mf;
  LR_ASSIGN(std::string_view text, map_file(path, mf));
  LR_ASSIGN(Trace t, parse_trace(text, fmt, path));
  if (t.format == TraceFormat::kMmleak && t.mappings.empty()) {
    std::string mp = mmleak_maps_path(path);
    MappedFile mm;
    auto maps = mp.empty() ? Result<std::string_view>(make_error(Errc::kIo, "")) : map_file(mp, mm);
    if (maps.ok())
      t.mappings = parse_proc_maps(*maps);
    else if (!mp.empty() && ::access(mp.c_str(), F_OK) == 0)  // there, but not usable
      t.warnings.push_back(maps.error().message +
                           "; callers are resolved against the core's mappings");
    else
      t.warnings.push_back(path +
                           ": no maps snapshot (mmleak-<host>.<pid>.maps) next to it; "
                           "callers are resolved against the core's mappings");
  }
  return t;
}

}  // namespace lr
