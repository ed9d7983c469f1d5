// The trace model, frame and module normalisation, and the parsers for
// leakref-trace v1 and bpftrace printf/ustack output.
#include <fmt/format.h>

#include <algorithm>

#include "corelib/analyses/trace.hpp"
#include "trace_text.hpp"

namespace lr {

using namespace tt;

const char* trace_op_name(TraceOp op) {
  switch (op) {
    case TraceOp::kRef:
      return "ref";
    case TraceOp::kUnref:
      return "unref";
    case TraceOp::kNew:
      return "new";
    case TraceOp::kFree:
      return "free";
    case TraceOp::kAlloc:
      return "alloc";
  }
  return "?";
}

bool trace_op_from_name(std::string_view s, TraceOp* op) {
  for (TraceOp o : {TraceOp::kRef, TraceOp::kUnref, TraceOp::kNew, TraceOp::kFree, TraceOp::kAlloc})
    if (s == trace_op_name(o)) {
      *op = o;
      return true;
    }
  return false;
}

const char* trace_format_name(TraceFormat f) {
  switch (f) {
    case TraceFormat::kAuto:
      return "auto";
    case TraceFormat::kLeakref:
      return "leakref";
    case TraceFormat::kBpftrace:
      return "bpftrace";
    case TraceFormat::kStap:
      return "stap";
    case TraceFormat::kMmleak:
      return "mmleak";
    case TraceFormat::kBccMemleak:
      return "bcc";
    case TraceFormat::kMtrace:
      return "mtrace";
    case TraceFormat::kMaps:
      return "maps";
  }
  return "?";
}

Result<TraceFormat> trace_format_from_name(const std::string& n) {
  if (n == "auto") return TraceFormat::kAuto;
  if (n == "leakref") return TraceFormat::kLeakref;
  if (n == "bpftrace") return TraceFormat::kBpftrace;
  if (n == "stap" || n == "systemtap") return TraceFormat::kStap;
  if (n == "mmleak") return TraceFormat::kMmleak;
  if (n == "bcc" || n == "memleak") return TraceFormat::kBccMemleak;
  if (n == "mtrace") return TraceFormat::kMtrace;
  if (n == "maps") return TraceFormat::kMaps;
  return make_error(Errc::kInvalidArgument,
                    fmt::format("unknown trace format '{}' (auto, leakref, bpftrace, stap, "
                                "mmleak, bcc, mtrace, maps)",
                                n));
}

uint64_t Trace::lost() const {
  uint64_t n = 0;
  for (const auto& l : losses) n += l.count;
  return n;
}

bool guess_function_role(const std::string& name, std::string* kind, TraceOp* op) {
  std::string_view n = name;
  while (!n.empty() && n.front() == '_') n.remove_prefix(1);
  size_t us = n.find('_');
  if (us == std::string_view::npos || us == 0) return false;
  std::string_view k = n.substr(0, us), rest = n.substr(us + 1);
  static const std::pair<const char*, TraceOp> kSuffix[] = {
      {"unref", TraceOp::kUnref},   {"put", TraceOp::kUnref},  {"decref", TraceOp::kUnref},
      {"release", TraceOp::kUnref}, {"ref", TraceOp::kRef},    {"get", TraceOp::kRef},
      {"incref", TraceOp::kRef},    {"hold", TraceOp::kRef},   {"grab", TraceOp::kRef},
      {"new", TraceOp::kNew},       {"create", TraceOp::kNew}, {"alloc", TraceOp::kNew},
      {"destroy", TraceOp::kFree},  {"free", TraceOp::kFree},
  };
  for (auto& [s, o] : kSuffix) {
    std::string_view sv = s;
    // "unref", "create_uint64", "new_from_..." : the role word starts `rest`.
    if (rest == sv ||
        (starts_with(rest, sv) && rest.size() > sv.size() && rest[sv.size()] == '_')) {
      *kind = std::string(k);
      *op = o;
      return true;
    }
  }
  return false;
}

uint32_t Trace::function(const std::string& name, const std::string& kind, TraceOp op,
                         bool explicit_role) {
  if (auto it = fn_index_.find(name); it != fn_index_.end()) {
    if (explicit_role) {
      functions[it->second].kind = kind;
      functions[it->second].op = op;
    }
    return it->second;
  }
  TraceFunction f{name, kind, op};
  if (!explicit_role) {
    std::string k;
    TraceOp o;
    if (guess_function_role(name, &k, &o)) {
      f.kind = k;
      f.op = o;
    } else {
      f.kind = kind.empty() ? "?" : kind;
    }
  }
  functions.push_back(std::move(f));
  fn_index_.emplace(name, static_cast<uint32_t>(functions.size() - 1));
  return static_cast<uint32_t>(functions.size() - 1);
}

uint32_t Trace::add_stack(std::vector<TraceFrame> frames) {
  if (frames.empty()) return 0;
  stacks.push_back(std::move(frames));
  return static_cast<uint32_t>(stacks.size() - 1);
}

std::string module_key(std::string_view m) {
  m = trim(m);
  constexpr std::string_view kDeleted = " (deleted)";
  if (m.size() > kDeleted.size() && m.substr(m.size() - kDeleted.size()) == kDeleted)
    m.remove_suffix(kDeleted.size());
  if (!m.empty() && m.front() == '(') m.remove_prefix(1);
  if (!m.empty() && m.back() == ')') m.remove_suffix(1);
  if (!m.empty() && m.front() == '[') m.remove_prefix(1);
  if (!m.empty() && m.back() == ']') m.remove_suffix(1);
  size_t slash = m.rfind('/');
  if (slash != std::string_view::npos) m.remove_prefix(slash + 1);
  std::string s(m);
  size_t so = s.find(".so");
  if (so != std::string::npos) s.resize(so + 3);  // libfoo.so.0.0.1 -> libfoo.so
  // libpthread-2.23.so / libc-2.21.so: drop "-<version>" before ".so".
  if (so != std::string::npos) {
    size_t dash = s.rfind('-', so);
    if (dash != std::string::npos && dash + 1 < so &&
        std::isdigit(static_cast<unsigned char>(s[dash + 1])))
      s.erase(dash, so - dash);
  }
  if (s == "libc.so" || s == "libpthread.so") return "libc";
  return s;
}

std::vector<TraceMapping> parse_proc_maps(std::string_view text) {
  std::vector<TraceMapping> out;
  Lines ls(text);
  std::string_view line;
  while (ls.next(&line)) {
    if (starts_with(line, "# maps: ")) line.remove_prefix(8);
    auto tok = split(line, 6);
    if (tok.size() < 6) continue;
    size_t dash = tok[0].find('-');
    TraceMapping m;
    if (dash == std::string_view::npos || !parse_hex(tok[0].substr(0, dash), &m.start) ||
        !parse_hex(tok[0].substr(dash + 1), &m.end) || m.end <= m.start || tok[1].size() != 4 ||
        !parse_hex(tok[2], &m.offset))
      continue;
    if (tok[1][2] != 'x' || tok[5].empty() || tok[5].front() != '/') continue;
    m.path = std::string(tok[5]);
    out.push_back(std::move(m));
  }
  return out;
}

// ---- frames ---------------------------------------------------------------

// "sym+0x1f" / "sym+107" (bpftrace: decimal) / "sym"
static bool parse_sym_off(std::string_view s, bool decimal, TraceFrame* f) {
  size_t plus = s.rfind('+');
  std::string_view name = plus == std::string_view::npos ? s : s.substr(0, plus);
  if (name.empty() || name.size() > 512) return false;
  uint64_t off = 0;
  if (plus != std::string_view::npos) {
    std::string_view o = s.substr(plus + 1);
    bool ok = decimal && !starts_with(o, "0x") ? parse_num(o, &off) : parse_hex(o, &off);
    if (!ok) return false;
  }
  f->sym = std::string(name);
  f->symoff = off;
  return true;
}

// leakref-trace frame token: 0xABS | module+0xOFF | sym+0xOFF@module | sym+0xOFF
static bool parse_frame_token(std::string_view tok, TraceFrame* f) {
  if (tok.empty()) return false;
  if (starts_with(tok, "0x")) return parse_hex(tok, &f->addr) && f->addr != 0;
  size_t at = tok.rfind('@');
  if (at != std::string_view::npos) {
    f->module = std::string(tok.substr(at + 1));
    return !f->module.empty() && parse_sym_off(tok.substr(0, at), false, f);
  }
  size_t plus = tok.rfind('+');
  if (plus == std::string_view::npos) return parse_sym_off(tok, false, f);
  std::string_view left = tok.substr(0, plus);
  if (left.find(".so") != std::string_view::npos || left.find('/') != std::string_view::npos) {
    f->module = std::string(left);
    f->has_modoff = true;
    return parse_hex(tok.substr(plus + 1), &f->modoff);
  }
  return parse_sym_off(tok, false, f);
}

static std::vector<TraceFrame> parse_frame_list(std::string_view s, bool* ok) {
  std::vector<TraceFrame> out;
  *ok = true;
  if (s == "-") return out;
  size_t i = 0;
  while (i <= s.size() && out.size() < 256) {
    size_t j = s.find(',', i);
    if (j == std::string_view::npos) j = s.size();
    TraceFrame f;
    if (!parse_frame_token(s.substr(i, j - i), &f)) {
      *ok = false;
      break;
    }
    out.push_back(std::move(f));
    i = j + 1;
  }
  return out;
}

static void add_loss(Trace& t, uint64_t count, uint64_t last_ts) {
  if (count) t.losses.push_back({t.events.size(), last_ts, count});
}

// bpftrace's own loss report, printed in the output stream: "Lost 123 events"
static bool bpftrace_lost_line(std::string_view line, Trace& t, uint64_t last_ts) {
  if (!starts_with(line, "Lost ")) return false;
  auto tok = split(line);
  uint64_t n = 0;
  if (tok.size() >= 3 && tok[2] == "events" && parse_num(tok[1], &n)) {
    add_loss(t, n, last_ts);
    return true;
  }
  return false;
}

static void set_kv(std::map<std::string, std::string>& m, std::string_view tok) {
  size_t eq = tok.find('=');
  if (eq == std::string_view::npos || eq == 0 || m.size() >= 256) return;
  m[std::string(tok.substr(0, eq))] = std::string(tok.substr(eq + 1));
}

namespace trace_detail {

void parse_leakref(std::string_view text, Trace& t) {
  Lines ls(text);
  std::string_view line;
  std::map<uint64_t, uint32_t> sid_to_stack;
  uint64_t last_ts = 0;
  while (ls.next(&line)) {
    if (line.empty() || line.front() == '#') continue;
    if (bpftrace_lost_line(line, t, last_ts)) continue;
    if (starts_with(line, "Attaching ")) continue;
    auto tok = split(line);
    if (tok.empty()) continue;  // blanks only
    std::string_view ty = tok[0];
    bool bad = false;
    if (ty == "E" && tok.size() >= 6) {
      TraceEvent e;
      uint64_t tid;
      if (!parse_num(tok[1], &e.ts) || !parse_num(tok[2], &tid) || tid > UINT32_MAX ||
          !parse_ptr(tok[4], &e.ptr)) {
        bad = true;
      } else {
        e.tid = static_cast<uint32_t>(tid);
        if (tok[5] != "-" && !parse_int(tok[5], &e.before)) e.before = -1;
        e.fn = t.function(std::string(tok[3]));
        for (size_t i = 7; i < tok.size(); ++i)
          if (starts_with(tok[i], "size=")) parse_num(tok[i].substr(5), &e.size);
        if (tok.size() >= 7) {
          if (starts_with(tok[6], "@")) {
            uint64_t sid;
            if (parse_num(tok[6].substr(1), &sid)) {
              auto it = sid_to_stack.find(sid);
              if (it != sid_to_stack.end()) e.stack = it->second;
            }
          } else {
            bool ok;
            auto frames = parse_frame_list(tok[6], &ok);
            if (!ok && ls.unterminated()) t.truncated = true;
            e.stack = t.add_stack(std::move(frames));
          }
        }
        if (ls.unterminated()) {
          t.truncated = true;  // a last record without newline may be cut
          continue;
        }
        last_ts = std::max(last_ts, e.ts);
        e.seq = t.events.size();
        if (e.ptr) t.events.push_back(e);
      }
    } else if (ty == "P" && tok.size() >= 4) {
      TraceOp op;
      if (trace_op_from_name(tok[3], &op))
        t.function(std::string(tok[1]), std::string(tok[2]), op, true);
      else
        bad = true;
    } else if (ty == "M" && tok.size() >= 6) {
      auto mt = split(line, 6);
      TraceMapping m;
      if (parse_hex(mt[1], &m.start) && parse_hex(mt[2], &m.end) && parse_hex(mt[3], &m.offset) &&
          m.end > m.start) {
        if (mt[4] != "-") m.build_id = std::string(mt[4]);
        m.path = std::string(mt[5]);
        if (t.mappings.size() < 65536) t.mappings.push_back(std::move(m));
      } else {
        bad = true;
      }
    } else if (ty == "S" && tok.size() >= 3) {
      uint64_t sid;
      bool ok;
      auto frames = parse_frame_list(tok[2], &ok);
      if (parse_num(tok[1], &sid) && ok && sid_to_stack.size() < (1u << 22))
        sid_to_stack[sid] = t.add_stack(std::move(frames));
      else
        bad = true;
    } else if (ty == "L" && tok.size() >= 4) {
      uint64_t ts = 0, n = 0;
      if (parse_num(tok[1], &ts) && parse_num(tok[3], &n))
        add_loss(t, n, ts);
      else
        bad = true;
    } else if (ty == "H") {
      for (size_t i = 1; i < tok.size(); ++i) set_kv(t.header, tok[i]);
    } else if (ty == "X") {
      t.has_trailer = true;
      std::map<std::string, std::string> kv;
      for (size_t i = 2; i < tok.size(); ++i) set_kv(kv, tok[i]);
      for (auto& [k, v] : kv) t.header["end." + k] = v;
    } else if (ty == "A" && tok.size() >= 5) {
      TraceAggregate a;
      uint64_t r;
      if (parse_num(tok[1], &r) && parse_ptr(tok[3], &a.ptr) && parse_int(tok[4], &a.value)) {
        a.round = static_cast<uint32_t>(std::min<uint64_t>(r, UINT32_MAX));
        t.aggregates.push_back(a);
      } else {
        bad = true;
      }
    } else if (ty == "K") {
      // kind declarations: informational (refcount offsets used at capture time)
    } else {
      bad = true;
    }
    if (bad) ++t.bad_lines;
  }
}

namespace {

// The state of one bpftrace text as it is read line by line.
struct BpftraceReader {
  BpftraceReader(Trace& trace, std::string_view text) : t(trace), ls(text) {}
  Trace& t;
  Lines ls;
  uint64_t last_ts = 0;
  std::vector<TraceFrame> pending;  // frames of the event being read
  bool have_event = false, in_map = false;
  uint64_t map_stacks = 0;
  TraceEvent cur;
  TraceFrame cur_ra;  // addr 0 when the record had no ra=
  bool blank_after_event = false;

  // The event read so far, with its stack: ustack frame 0 is the probed
  // function itself: dropped; the exact caller (ra) is kept first and a
  // ustack frame 1 that repeats it dropped.
  void flush() {
    if (!have_event) return;
    std::vector<TraceFrame> frames;
    if (cur_ra.addr) frames.push_back(cur_ra);
    for (size_t i = 1; i < pending.size() && frames.size() < 256; ++i) {
      if (i == 1 && cur_ra.addr && pending[i].addr == cur_ra.addr) continue;
      frames.push_back(std::move(pending[i]));
    }
    cur.stack = t.add_stack(std::move(frames));
    cur.seq = t.events.size();
    if (cur.ptr) t.events.push_back(cur);
    pending.clear();
    have_event = false;
  }

  // A ustack frame of the current event: perf mode ("\t7f.. sym+123
  // (/path)") or default mode ("        sym+123" / "        0x7f..").
  void frame(std::string_view line) {
    if (!have_event) {
      ++t.bad_lines;
      return;
    }
    auto tok = split(line);
    TraceFrame f;
    bool ok = false;
    if (line.front() == '\t' && tok.size() >= 2) {
      ok = parse_hex(tok[0], &f.addr);
      if (ok && !starts_with(tok[1], "0x")) ok = parse_sym_off(tok[1], true, &f);
      if (ok && tok.size() >= 3 && tok[2] != "([unknown])") f.module = std::string(tok[2]);
    } else if (tok.size() == 1) {
      ok = starts_with(tok[0], "0x") ? parse_hex(tok[0], &f.addr) : parse_sym_off(tok[0], true, &f);
    }
    if (ok && pending.size() < 256)
      pending.push_back(std::move(f));
    else if (!ok)
      ++t.bad_lines;
  }

  // "E <ts> <tid> [<comm>] <fn> 0x<ptr> <before> [ra=0x<ra>] [size=N]".
  void event(const std::vector<std::string_view>& tok) {
    flush();
    // With comm: E ts tid comm fn ptr before [ra=]; without: E ts tid fn ptr before
    size_t fi = (starts_with(tok[5], "0x") && !starts_with(tok[4], "0x")) ? 4 : 3;
    TraceEvent e;
    uint64_t tid;
    if (!parse_num(tok[1], &e.ts) || !parse_num(tok[2], &tid) || tid > UINT32_MAX ||
        fi + 1 >= tok.size() || !parse_ptr(tok[fi + 1], &e.ptr)) {
      if (ls.unterminated())
        t.truncated = true;
      else
        ++t.bad_lines;
      return;
    }
    e.tid = static_cast<uint32_t>(tid);
    if (fi + 2 < tok.size() && !parse_int(tok[fi + 2], &e.before)) e.before = -1;
    e.fn = t.function(std::string(tok[fi]));
    cur_ra = TraceFrame{};
    for (size_t i = fi + 3; i < tok.size(); ++i) {
      if (starts_with(tok[i], "ra=")) {
        if (!parse_hex(tok[i].substr(3), &cur_ra.addr)) cur_ra.addr = 0;
      } else if (starts_with(tok[i], "size="))
        parse_num(tok[i].substr(5), &e.size);
    }
    if (ls.unterminated()) {
      t.truncated = true;
      return;
    }
    last_ts = std::max(last_ts, e.ts);
    cur = e;
    have_event = true;
    blank_after_event = false;
  }

  // Lines that are not records: map output, blank lines, comments and
  // maps; true when `line` was one of them.
  bool aside(std::string_view line) {
    if (in_map) {  // "@[ ... ]: N" map of stacks: no pointers, counted only
      if (starts_with(line, "]")) {
        in_map = false;
        ++map_stacks;
      }
      return true;
    }
    if (line.empty()) {
      // print(ustack) starts the stack with a blank line; another one ends it.
      if (have_event && pending.empty() && !blank_after_event)
        blank_after_event = true;
      else
        flush();
      return true;
    }
    if (starts_with(line, "# maps: ")) {
      auto m = parse_proc_maps(line);
      t.mappings.insert(t.mappings.end(), m.begin(), m.end());
      return true;
    }
    if (line.front() == '#') {
      if (starts_with(line, "#leakref-bt"))
        for (auto tok : split(line)) set_kv(t.header, tok);
      return true;
    }
    return false;
  }

  void line(std::string_view line) {
    if (aside(line)) return;
    if (is_space(line.front())) return frame(line);
    if (starts_with(line, "@[")) {
      flush();
      in_map = line.find("]:") == std::string_view::npos;
      if (!in_map) ++map_stacks;
      return;
    }
    if (bpftrace_lost_line(line, t, last_ts) || starts_with(line, "Attaching ")) return;
    auto tok = split(line);
    if (tok[0] == "S" && tok.size() >= 4 && have_event) {  // stack-scan word
      TraceFrame f;
      if (parse_hex(tok[3], &f.addr) && f.addr && pending.size() < 256) {
        if (pending.empty()) pending.push_back(TraceFrame{});  // keep slot 0 = probed fn
        pending.push_back(std::move(f));
      }
      return;
    }
    if (tok[0] == "E" && tok.size() >= 6) return event(tok);
    ++t.bad_lines;
  }
};

}  // namespace

// bpftrace text: "E <ts> <tid> [<comm>] <fn> 0x<ptr> <before> ra=0x<ra>" records
// (the reference capture scripts), each optionally followed by a ustack()
// printed in default mode ("        sym+123" / "        0x7f..") or perf
// mode ("\t7f.. sym+123 (/path)"), and "S <ts> <tid> <word>" stack-scan lines.
void parse_bpftrace(std::string_view text, Trace& t) {
  BpftraceReader r(t, text);
  std::string_view line;
  while (r.ls.next(&line)) r.line(line);
  r.flush();
  if (r.map_stacks)
    t.warnings.push_back(
        fmt::format("{}: {} bpftrace map stack(s) carry no object pointer; "
                    "ignored",
                    t.source, r.map_stacks));
}

}  // namespace trace_detail
}  // namespace lr
