// correlate: a core's live objects joined with ref/unref (and malloc) traces.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <set>

#include "corelib/analyses/correlate.hpp"
#include "corelib/analyses/trace.hpp"
#include "corelib/answers/trace_objects.hpp"
#include "corelib/base/saturate.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/blocks/refindex.hpp"
#include "corelib/profiles/profile.hpp"
#include "corelib/registry/target.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/progress.hpp"
#include "frontend/base/render.hpp"
#include "frontend/process/cmd_profile.hpp"
#include "frontend/process/cmd_walk.hpp"

namespace lrcli {

struct CorrelateArgs {
  std::vector<std::string> traces;
  std::string format = "auto";
  std::string kind = "any";
  std::string types;
  std::string ptr;
  size_t top = 10;
  std::vector<std::string> fail_on;
  WalkArgs walk;
  std::string profile, profile_set;  // objects from a profile's set instead of a walk
};

namespace {

std::string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

nlohmann::json event_json(const std::vector<lr::Trace>& traces, const lr::FrameResolver& fr,
                          const lr::TraceRef& r) {
  const lr::Trace& t = traces[r.trace];
  const lr::TraceEvent& e = t.events[r.event];
  nlohmann::json j{{"ts", e.ts},
                   {"tid", e.tid},
                   {"fn", t.functions[e.fn].name},
                   {"op", lr::trace_op_name(t.functions[e.fn].op)},
                   {"before", e.before >= 0 ? nlohmann::json(e.before) : nlohmann::json(nullptr)}};
  auto& st = j["stack"] = nlohmann::json::array();
  if (e.stack)
    for (const auto& f : t.stacks[e.stack]) st.push_back(fr.resolve(t, f).text);
  if (t.format == lr::TraceFormat::kStap) j["round"] = e.round;
  return j;
}

std::string caller_text(const std::vector<lr::Trace>& traces, const lr::FrameResolver& fr,
                        const lr::TraceRef& r) {
  const lr::Trace& t = traces[r.trace];
  const lr::TraceEvent& e = t.events[r.event];
  if (!e.stack || t.stacks[e.stack].empty()) return "(no caller recorded)";
  return fr.resolve(t, t.stacks[e.stack][0]).text;
}

void print_object(const lr::ObjectResult& o, const std::vector<lr::Trace>& traces,
                  const lr::FrameResolver& fr) {
  out_stdout().print("  {:<5} {:#x}  refcount {}", o.obj.kind, o.obj.addr, o.obj.refcount);
  if (o.obj.explained >= 0)
    out_stdout().print(", {} account for {}", o.obj.explained_by, o.obj.explained);
  if (o.excess) out_stdout().print("  EXCESS {}", o.excess);
  out_stdout().print("\n        {}\n", o.obj.label);
  if (!o.obj.holders.empty()) out_stdout().print("        held by xlators: {}\n", o.obj.holders);
  if (o.verdict != lr::Verdict::kNotInTrace)
    out_stdout().print("        trace: {}, last one {} +{} -{}{}; {}\n",
                       plural(o.lifetimes, "lifetime", "lifetimes"),
                       o.start_count >= 0 ? fmt::format("started at {},", o.start_count)
                                          : std::string("started before the trace,"),
                       o.refs, o.unrefs,
                       o.predicted >= 0 ? fmt::format(" -> {}", o.predicted) : std::string(),
                       o.reason);
  if (!o.alloc_site.empty()) out_stdout().print("        allocated by {}\n", o.alloc_site);
  std::map<std::string, int> by_site;
  std::vector<std::string> order;
  for (const auto& b : o.blamed) {
    std::string s = caller_text(traces, fr, b);
    if (!by_site.count(s)) order.push_back(s);
    ++by_site[s];
  }
  for (const auto& s : order) out_stdout().print("        {} x {}\n", by_site[s], s);
}

void print_history(const lr::CorrelateReport& rep, const std::vector<lr::Trace>& traces,
                   const lr::FrameResolver& fr, uint64_t ptr) {
  out_stdout().print("\nHISTORY of {:#x}: {} event(s)\n", ptr, rep.history.size());
  const lr::ObjectResult* obj = nullptr;
  for (const auto& o : rep.objects)
    if (o.obj.addr == ptr) obj = &o;
  std::set<std::pair<uint32_t, uint32_t>> unmatched;
  if (obj)
    for (const auto& u : obj->unmatched) unmatched.insert({u.trace, u.event});
  for (const auto& h : rep.history) {
    const lr::Trace& t = traces[h.ev.trace];
    const lr::TraceEvent& e = t.events[h.ev.event];
    out_stdout().print(
        "  {}{:>16} tid {:<6} {:<18} {:<5} {:>4} -> {:<4} {}{}\n",
        unmatched.count({h.ev.trace, h.ev.event}) ? "*" : " ", e.ts, e.tid, t.functions[e.fn].name,
        lr::trace_op_name(t.functions[e.fn].op), e.before >= 0 ? std::to_string(e.before) : "?",
        h.count_after >= 0 ? std::to_string(h.count_after) : "?", caller_text(traces, fr, h.ev),
        h.nested ? "  (inside the probed wrapper)" : "");
  }
  if (!obj || obj->unmatched.empty()) return;
  // The SystemTap ref-leak script's view: the references never dropped.
  out_stdout().print("\nRef Traces : (never dropped, * above)\n");
  for (const auto& u : obj->unmatched) {
    const lr::Trace& t = traces[u.trace];
    const lr::TraceEvent& e = t.events[u.event];
    out_stdout().print("\nptr : {:x}\n{}\n", ptr, t.functions[e.fn].name);
    if (e.stack)
      for (const auto& f : t.stacks[e.stack]) out_stdout().print("{}\n", fr.resolve(t, f).text);
  }
}

bool has_alloc_records(const std::vector<lr::Trace>& traces) {
  for (const auto& t : traces) {
    if (!t.alloc_stacks.empty()) return true;
    for (const auto& e : t.events)
      if (t.functions[e.fn].kind == "alloc") return true;
  }
  return false;
}

// Blocks allocated in the trace and never freed there, by call site. The
// sites add up to the total; a site's live count is shown only where its
// blocks have addresses and the core's heap was read.
void print_alloc_sites(const lr::CorrelateReport& rep, const lr::HeapWalk* heap, size_t top) {
  uint64_t count = 0, bytes = 0, live = 0;
  for (const auto& s : rep.alloc_sites)
    count = lr::sat_add(count, s.count), bytes = lr::sat_add(bytes, s.bytes);
  for (const auto& al : rep.allocs) live += al.live;
  out_stdout().print("\nALLOCATIONS never freed in the trace: {} ({} B){}\n", count, bytes,
                     heap ? fmt::format(", {} still in use in the core's heap", live) : "");
  for (size_t i = 0; i < rep.alloc_sites.size() && i < top; ++i) {
    const auto& s = rep.alloc_sites[i];
    std::string lv = heap && s.live_known
                         ? fmt::format("{:>5} live ({} B)", s.live_count, s.live_bytes)
                         : fmt::format("{:>5} live", "?");
    out_stdout().print("  {:>8} B in {:>5} block(s), {}  {}\n", s.bytes, s.count, lv, s.text);
  }
  if (rep.alloc_sites.size() > top)
    out_stdout().print("  ... {} more site(s) (--top, --json lists every block)\n",
                       rep.alloc_sites.size() - top);
}

// Any program, allocation records only: blocks never freed, by call site.
void print_heap_mode(const lr::CorrelateReport& rep, const lr::HeapWalk* heap, size_t top) {
  if (heap)
    out_stdout().print("heap: {} chunks in use in the core\n", heap->in_use.size());
  else
    out_stdout().print("heap: not readable in the core; blocks are not checked against it\n");
  print_alloc_sites(rep, heap, top);
}

// The flags' combination; "" when they fit, else the usage error. `*ptr`:
// --ptr's address (0 without it).
std::string correlate_usage(const CorrelateArgs& a, uint64_t* ptr) {
  static const std::set<std::string> kFail = {"flagged", "disagree", "unreliable", "leaked", "any"};
  for (const auto& f : a.fail_on)
    if (!kFail.count(f)) return "--fail-on: unknown verdict '" + f + "'";
  const bool by_profile = !a.profile.empty();
  if (by_profile != !a.profile_set.empty())
    return "--profile and --set go together (the set whose objects to join)";
  if (by_profile && (!a.walk.type.empty() || !a.walk.head.empty()))
    return "give a walk (--type/--head) or a profile set (--profile/--set), not both";
  bool walk_mode = by_profile || !a.walk.type.empty() || !a.walk.head.empty();
  if (walk_mode && !by_profile && (a.walk.type.empty() || a.walk.head.empty()))
    return "a walk needs both --type and --head";
  // The kinds of the programs' own objects (GlusterFS's dict, inode, fd).
  const std::vector<std::string> kinds = lr::program_object_kinds();
  if (!walk_mode && a.kind != "any" && std::find(kinds.begin(), kinds.end(), a.kind) == kinds.end())
    return fmt::format("--kind: {} or any (other kinds need a walk: --type/--head)",
                       fmt::join(kinds, ", "));
  *ptr = 0;
  if (!a.ptr.empty() && !lr::parse_u64(a.ptr, ptr)) return "--ptr: not an address: " + a.ptr;
  return "";
}

// The traces of the arguments, in the format --format names.
lr::Result<std::vector<lr::Trace>> load_traces(const CorrelateArgs& a) {
  LR_ASSIGN(auto format, lr::trace_format_from_name(a.format));
  return lr::load_traces(a.traces, format);
}

// What the traces are joined against (the engine's trace_object_source): a
// walk's or profile set's objects, a program target's own objects, or (any
// other program) only the heap.
struct CoreSide {
  lr::TraceObjectSource source;
  std::vector<lr::CoreObject> objects;
  lr::ProgramObjects program;  // kProgram: its objects' reading, kept alive
  lr::HeapWalk heap_walk;
  bool have_heap = false;
  std::vector<std::string> warnings;
  bool walk_mode() const { return source.kind == lr::TraceObjectSource::kWalk; }
  bool heap_mode() const { return source.kind == lr::TraceObjectSource::kHeap; }
  // The heap the allocations are checked against; nullptr when unread.
  const lr::HeapWalk* heap() const {
    if (source.kind == lr::TraceObjectSource::kProgram) return program.heap;
    return have_heap ? &heap_walk : nullptr;
  }
};

// The objects of a profile set, or of the walk --type/--head give; the
// kind the probes use becomes the set's name. A set whose profile declares
// its holders is explained by them; any other walk by the pointers to each
// object's start found in live memory.
lr::Result<std::vector<lr::CoreObject>> correlate_objects(lr::Program& p, const CorrelateArgs& a,
                                                          CoreSide& cs) {
  std::string kind = a.kind;
  lr::WalkSpec spec;
  if (a.profile.empty()) {
    spec = walk_spec_from(a.walk);
  } else {
    LR_ASSIGN(auto prof, lr::find_profile(a.profile, profile_dirs()));
    if (std::string why = lr::profile_mismatch(p, prof, false); !why.empty())
      return lr::make_error(lr::Errc::kUnsupported, why);
    if (kind == "any") kind = a.profile_set;
    const lr::ProfileSet* set = nullptr;
    for (const auto& s : prof.sets)
      if (s.name == a.profile_set) set = &s;
    if (set && !set->holders.empty()) {
      cs.have_heap = lr::core_heap(p, &cs.heap_walk, &cs.warnings, cli_display());
      return lr::held_objects(p, prof, a.profile_set, kind, &cs.warnings);
    }
    LR_ASSIGN(spec, lr::profile_set_walk(p, prof, a.profile_set));
  }
  if (spec.refcount.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "correlate with a walk needs a refcount (--refcount FIELD, or the "
                          "profile set's refcount)");
  return lr::walk_objects(p, spec, kind, &cs.heap_walk, &cs.have_heap, &cs.warnings, cli_display());
}

// The programs whose own objects a ref/unref trace can be joined against
// ("GlusterFS"), for the message that no walk was given.
std::string programs_with_objects() {
  std::string names;
  for (lr::ProcessTarget* t : lr::process_targets())
    if (!t->object_kinds().empty()) names += (names.empty() ? "" : " or ") + t->name();
  return names;
}

lr::Result<void> gather_core_side(const DumpOptions& c, const CorrelateArgs& a, lr::Program& p,
                                  const std::vector<lr::Trace>& traces, CoreSide& cs) {
  cs.warnings = p.warnings();
  cs.source = lr::trace_object_source(
      p, !a.profile.empty() || !a.walk.type.empty() || !a.walk.head.empty());
  if (cs.heap_mode() && !has_alloc_records(traces))
    return lr::make_error(
        lr::Errc::kUnsupported,
        fmt::format(
            "{}: not a {} process, and no walk or profile set names the objects "
            "this ref/unref trace counts: give --type/--head or --profile/--set (an "
            "allocation trace from mmleak, bcc memleak, mtrace or leakref-trace --malloc needs "
            "neither)",
            c.core, programs_with_objects()));
  if (cs.walk_mode()) {
    LR_ASSIGN(cs.objects, correlate_objects(p, a, cs));
  } else if (cs.heap_mode()) {
    cs.have_heap = lr::core_heap(p, &cs.heap_walk, &cs.warnings, cli_display());
  } else {
    LR_ASSIGN(cs.program, lr::program_objects(p, *cs.source.target, a.types, cli_display()));
    cs.objects = std::move(cs.program.objects);
    cs.warnings.insert(cs.warnings.end(), cs.program.warnings.begin(), cs.program.warnings.end());
  }
  return {};
}

size_t verdict_count(const lr::CorrelateReport& rep, lr::Verdict v) {
  auto it = rep.counts.find(v);
  return it == rep.counts.end() ? 0 : it->second;
}

nlohmann::json trace_json(const lr::Trace& t) {
  nlohmann::json x{{"file", t.source},
                   {"format", lr::trace_format_name(t.format)},
                   {"events", t.events.size()},
                   {"lost", t.lost()},
                   {"truncated", t.truncated},
                   {"bad_lines", t.bad_lines},
                   {"mappings", t.mappings.size()},
                   {"complete", t.has_trailer}};
  auto& fns = x["functions"] = nlohmann::json::array();
  for (const auto& f : t.functions)
    fns.push_back({{"name", f.name}, {"kind", f.kind}, {"op", lr::trace_op_name(f.op)}});
  return x;
}

nlohmann::json object_verdict_json(const lr::ObjectResult& r, const std::vector<lr::Trace>& traces,
                                   const lr::FrameResolver& fr) {
  auto opt = [](int64_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json x{{"addr", hex(r.obj.addr)},
                   {"kind", r.obj.kind},
                   {"label", r.obj.label},
                   {"refcount", r.obj.refcount},
                   {"explained", opt(r.obj.explained)},
                   {"explained_by", r.obj.explained_by},
                   {"holders", r.obj.holders},
                   {"verdict", lr::verdict_name(r.verdict)},
                   {"reason", r.reason},
                   {"lifetimes", r.lifetimes},
                   {"events", r.events},
                   {"start_count", opt(r.start_count)},
                   {"refs", r.refs},
                   {"unrefs", r.unrefs},
                   {"predicted", opt(r.predicted)},
                   {"excess", r.excess},
                   {"alloc_site", r.alloc_site}};
  auto& um = x["unmatched"] = nlohmann::json::array();
  for (const auto& u : r.unmatched) um.push_back(event_json(traces, fr, u));
  auto& bl = x["blamed"] = nlohmann::json::array();
  for (const auto& b : r.blamed) bl.push_back(caller_text(traces, fr, b));
  return x;
}

// Every block allocated in the trace and never freed there, and the sites.
nlohmann::json allocations_json(const lr::CorrelateReport& rep,
                                const std::vector<lr::Trace>& traces, const lr::FrameResolver& fr,
                                const lr::HeapWalk* heap) {
  nlohmann::json ja;
  uint64_t live = 0, count = 0, bytes = 0;
  for (const auto& al : rep.allocs) live += al.live;
  for (const auto& s : rep.alloc_sites)
    count = lr::sat_add(count, s.count), bytes = lr::sat_add(bytes, s.bytes);
  ja["outstanding"] = count;
  ja["outstanding_bytes"] = bytes;
  ja["live_in_core"] = live;
  ja["heap_checked"] = heap != nullptr;
  auto& jb = ja["blocks"] = nlohmann::json::array();
  for (const auto& al : rep.allocs)
    jb.push_back({{"ptr", hex(al.ptr)},
                  {"size", al.size},
                  {"live", heap ? nlohmann::json(al.live) : nlohmann::json(nullptr)},
                  {"site", caller_text(traces, fr, al.ev)}});
  auto& jas = ja["sites"] = nlohmann::json::array();
  for (const auto& s : rep.alloc_sites) {
    jas.push_back({{"site", s.text},
                   {"count", s.count},
                   {"bytes", s.bytes},
                   {"live_count",
                    heap && s.live_known ? nlohmann::json(s.live_count) : nlohmann::json(nullptr)},
                   {"live_bytes", heap && s.live_known ? nlohmann::json(s.live_bytes)
                                                       : nlohmann::json(nullptr)}});
  }
  return ja;
}

nlohmann::json correlate_json(const DumpOptions& c, const CoreSide& cs,
                              const std::vector<lr::Trace>& traces, const lr::FrameResolver& fr,
                              const lr::CorrelateReport& rep, uint64_t ptr) {
  nlohmann::json j;
  j["schema"] = "leakref.correlate/1";
  j["core"] = c.core;
  j["source"] = cs.walk_mode()                                      ? "walk"
                : cs.source.kind == lr::TraceObjectSource::kProgram ? cs.source.target->key()
                                                                    : "heap";
  auto& jt = j["traces"] = nlohmann::json::array();
  for (const auto& t : traces) jt.push_back(trace_json(t));
  j["events"] = rep.events;
  j["events_counted"] = rep.counted;
  j["events_nested"] = rep.nested;
  j["pointers"] = rep.pointers;
  j["objects_total"] = rep.objects.size();
  auto& jc = j["counts"] = nlohmann::json::object();
  for (auto v : {lr::Verdict::kFlagged, lr::Verdict::kExplained, lr::Verdict::kBalanced,
                 lr::Verdict::kBeforeWindow, lr::Verdict::kUnreliable, lr::Verdict::kDisagree,
                 lr::Verdict::kNotInTrace})
    jc[lr::verdict_name(v)] = verdict_count(rep, v);
  auto& jo = j["objects"] = nlohmann::json::array();
  for (const auto& r : rep.objects)
    if (r.verdict != lr::Verdict::kNotInTrace) jo.push_back(object_verdict_json(r, traces, fr));
  auto& js = j["sites"] = nlohmann::json::array();
  for (const auto& s : rep.sites)
    js.push_back({{"site", s.text},
                  {"key", s.key},
                  {"refs", s.refs},
                  {"objects", s.objects},
                  {"by_kind", s.by_kind},
                  {"example_stack", s.example}});
  j["allocations"] = allocations_json(rep, traces, fr, cs.heap());
  if (ptr) {
    auto& jh = j["history"] = nlohmann::json::array();
    for (const auto& h : rep.history) {
      auto x = event_json(traces, fr, h.ev);
      x["lifetime"] = h.lifetime;
      x["count_after"] = h.count_after >= 0 ? nlohmann::json(h.count_after) : nullptr;
      x["nested"] = h.nested;
      jh.push_back(std::move(x));
    }
  }
  j["warnings"] = cs.warnings;
  return j;
}

// Whether any --fail-on verdict holds. leaked: blocks the trace never saw
// freed that are still in use in the core (every never-freed block when
// the heap could not be read).
bool has_findings(const CorrelateArgs& a, const lr::CorrelateReport& rep,
                  const lr::HeapWalk* heap) {
  uint64_t leaked = 0;
  for (const auto& al : rep.allocs) leaked += heap ? al.live : 1;
  auto n = [&](lr::Verdict v) { return verdict_count(rep, v) != 0; };
  for (const auto& f : a.fail_on) {
    bool any = f == "any";
    if ((any || f == "flagged") && n(lr::Verdict::kFlagged)) return true;
    if ((any || f == "disagree") && n(lr::Verdict::kDisagree)) return true;
    if ((any || f == "unreliable") && n(lr::Verdict::kUnreliable)) return true;
    if ((any || f == "leaked") && leaked) return true;
  }
  return false;
}

}  // namespace

static void print_objects_text(const lr::CorrelateReport& rep, const std::vector<lr::Trace>& traces,
                               const lr::FrameResolver& fr, const lr::HeapWalk* heap, size_t top,
                               uint64_t ptr);

static void print_correlate_text(const DumpOptions& c, const CoreSide& cs,
                                 const std::vector<lr::Trace>& traces, const lr::FrameResolver& fr,
                                 const lr::CorrelateReport& rep, size_t top, uint64_t ptr) {
  print_warnings_text(cs.warnings);
  out_stdout().print("leakref correlate: {}\n", c.core);
  for (const auto& t : traces)
    out_stdout().print(
        "trace: {} ({}, {} events, {} function(s), {} lost{}{})\n", t.source,
        lr::trace_format_name(t.format), t.events.size(), t.functions.size(), t.lost(),
        t.truncated ? ", truncated" : "",
        t.has_trailer || t.format != lr::TraceFormat::kLeakref ? "" : ", no trailer");
  if (cs.heap_mode()) {
    print_heap_mode(rep, cs.heap(), top);
    if (ptr) print_history(rep, traces, fr, ptr);
  } else {
    print_objects_text(rep, traces, fr, cs.heap(), top, ptr);
  }
}

static int cmd_correlate(const DumpOptions& c, const CorrelateArgs& a) {
  uint64_t ptr = 0;
  if (std::string why = correlate_usage(a, &ptr); !why.empty()) return fail_usage(why);
  auto traces = load_traces(a);
  if (!traces.ok()) return fail(traces.error());
  if (traces->empty()) return fail_usage("no trace among the inputs (only maps files)");
  auto prog = open_program(c);
  if (!prog.ok()) return fail(prog.error());
  lr::Program& p = *prog.value();
  CoreSide cs;
  if (auto r = gather_core_side(c, a, p, *traces, cs); !r.ok()) {
    print_warnings_text(cs.warnings);
    return fail(r.error());
  }
  lr::FrameResolver fr(&p.modules(), p.core());
  lr::CorrelateOptions o;
  o.kind = cs.walk_mode() ? "any" : a.kind;
  // --top trims the text; JSON holds every site.
  o.top = c.json ? SIZE_MAX : a.top;
  o.history_ptr = ptr;
  lr::CorrelateReport rep = lr::correlate(*traces, cs.objects, fr, o, cs.heap());
  cs.warnings.insert(cs.warnings.end(), rep.warnings.begin(), rep.warnings.end());
  if (c.json)
    emit_json(correlate_json(c, cs, *traces, fr, rep, ptr));
  else
    print_correlate_text(c, cs, *traces, fr, rep, a.top, ptr);
  return has_findings(a, rep, cs.heap()) ? kFindings : kOk;
}

// The object verdicts (GlusterFS, a walk or a profile set), after the header.
static void print_objects_text(const lr::CorrelateReport& rep, const std::vector<lr::Trace>& traces,
                               const lr::FrameResolver& fr, const lr::HeapWalk* heap, size_t top,
                               uint64_t ptr) {
  auto n = [&](lr::Verdict v) { return rep.counts.count(v) ? rep.counts.at(v) : 0; };
  {
    std::map<std::string, uint64_t> kinds;
    for (const auto& r : rep.objects) ++kinds[r.obj.kind];
    std::string ks;
    for (auto& [k, v] : kinds) ks += fmt::format("{}{} {}", ks.empty() ? "" : ", ", k, v);
    out_stdout().print("objects: {} live in the core ({}); {} with trace events\n",
                       rep.objects.size(), ks, rep.pointers_in_core);
    out_stdout().print(
        "verdicts: flagged {}, explained {}, balanced {}, before-window {}, unreliable {}, "
        "disagree {}, not-in-trace {}\n",
        n(lr::Verdict::kFlagged), n(lr::Verdict::kExplained), n(lr::Verdict::kBalanced),
        n(lr::Verdict::kBeforeWindow), n(lr::Verdict::kUnreliable), n(lr::Verdict::kDisagree),
        n(lr::Verdict::kNotInTrace));
    if (rep.nested)
      out_stdout().print(
          "({} inner calls of probed wrappers counted once, e.g. inode_ref -> __inode_ref)\n",
          rep.nested);
    out_stdout().print(
        "\nFLAGGED: {} (refs the core cannot account for, taken in the trace, never dropped)\n",
        n(lr::Verdict::kFlagged));
    for (const auto& r : rep.objects)
      if (r.verdict == lr::Verdict::kFlagged) print_object(r, traces, fr);
    if (!rep.sites.empty()) {
      out_stdout().print(
          "\nTOP LEAKING CALL SITES (unmatched references across flagged objects)\n");
      int rank = 0;
      for (const auto& s : rep.sites) {
        std::string kinds_s;
        for (auto& [k, v] : s.by_kind)
          kinds_s += fmt::format("{}{} {}", kinds_s.empty() ? "" : ", ", k, v);
        out_stdout().print("  {:>2}. {:>5} ref(s)  {:>4} object(s) ({})  {}\n", ++rank, s.refs,
                           s.objects, kinds_s, s.text);
        for (const auto& e : s.example) out_stdout().print("             <- {}\n", e);
      }
    }
    size_t shown = 0;
    for (auto v : {lr::Verdict::kDisagree, lr::Verdict::kUnreliable, lr::Verdict::kBeforeWindow}) {
      if (!n(v)) continue;
      out_stdout().print("\n{}: {}\n", lr::verdict_name(v), n(v));
      shown = 0;
      for (const auto& r : rep.objects)
        if (r.verdict == v && shown++ < 10) print_object(r, traces, fr);
      if (n(v) > 10) out_stdout().print("  ... {} more (--json lists all)\n", n(v) - 10);
    }
    if (!rep.allocs.empty() || !rep.alloc_sites.empty()) print_alloc_sites(rep, heap, top);
    if (ptr) print_history(rep, traces, fr, ptr);
  }
}

Command register_correlate(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<CorrelateArgs>();
  auto* sub = app.add_subcommand("correlate",
                                 "join ref/unref or malloc traces with the objects live in a core");
  add_dump_options(sub, c);
  sub->add_option("trace", a->traces,
                  "trace files: leakref-trace, bpftrace, SystemTap ref-leak, mmleak (+ .maps), "
                  "bcc memleak, /proc/PID/maps")
      ->required();
  sub->add_option("--format", a->format, "trace format (default: detected per file)");
  sub->add_option("--kind", a->kind,
                  "GlusterFS objects: dict, inode, fd or any; with a walk: "
                  "the trace kind its objects are (default any)");
  sub->add_option("--ptr", a->ptr, "print the full ref/unref history of this object");
  sub->add_option("--top", a->top, "call sites to list (default 10)");
  sub->add_option("--fail-on", a->fail_on,
                  "exit 1 if: flagged, disagree, unreliable, leaked (allocation traces), any")
      ->delimiter(',');
  add_walk_options(sub, a->walk, false);
  sub->add_option("--profile", a->profile, "profile file (or NAME) whose --set gives the objects");
  sub->add_option("--set", a->profile_set, "the profile set to join (walked from a symbol)");
  return {sub, [&c, a] { return cmd_correlate(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
