// `leakref refs CORE ADDR...` (who points at these objects, and the chain of
// references from a root) and `leakref leaks CORE` (heap blocks nothing live
// reaches), both on one reference index of the core (refindex.hpp).
#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "cmd_gluster.hpp"
#include "cmd_heap.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "leakref/correlate.hpp"
#include "leakref/gluster.hpp"
#include "leakref/refindex.hpp"
#include "leakref/trace.hpp"
#include "leakref/unwind.hpp"
#include "progress.hpp"

namespace lrcli {

namespace {

struct RefsArgs {
  std::vector<std::string> addrs;
  size_t depth = 0;
};

struct LeaksArgs {
  bool list = false;
  std::vector<std::string> traces;
  size_t top = 20;
  std::vector<std::string> fail_on;
};

struct Opened {
  std::unique_ptr<lr::Program> prog;
  std::unique_ptr<lr::HeapWalk> heap;  // borrowed by the index: a stable address
  std::unique_ptr<lr::RefIndex> index;
};

// The core, its heap and the index (a progress line on a terminal).
// `before` (may be empty) runs on the opened program before the index is
// built: arguments that need the core fail fast.
lr::Result<Opened> open_indexed(const Common& c,
                                const std::function<lr::Result<void>(lr::Program&)>& before = {}) {
  Opened o;
  LR_ASSIGN(o.prog, open_program(c));
  if (!o.prog->core())
    return lr::make_error(lr::Errc::kUnsupported, "the reference index reads process cores");
  if (before) LR_TRY(before(*o.prog));
  LR_ASSIGN(lr::HeapWalk heap, read_heap(*o.prog));
  o.heap = std::make_unique<lr::HeapWalk>(std::move(heap));
  std::atomic<uint64_t> done{0};
  std::optional<Progress> progress;
  progress.emplace("indexing references", &done, false, "MiB", 1u << 20);
  lr::RefIndexOptions opts;
  opts.progress = &done;
  LR_ASSIGN(o.index, lr::RefIndex::build(*o.prog->core(), o.prog->modules(), *o.heap, opts));
  progress.reset();
  return o;
}

// A C++ object's class from its vtable pointer (the first word): "Widget".
std::string vtable_type(const lr::Program& prog, uint64_t chunk) {
  uint64_t vp = 0;
  if (!prog.mem().read(chunk, &vp, 8).ok() || !vp) return "";
  lr::SymbolHit h = prog.modules().symbolize(vp);
  if (!h.sym || h.sym->name.rfind("_ZTV", 0) != 0) return "";
  int st = 0;
  char* d = abi::__cxa_demangle(("_Z" + h.sym->name.substr(4)).c_str(), nullptr, nullptr, &st);
  std::string name = st == 0 && d ? d : h.sym->name.substr(4);
  std::free(d);
  return name;
}

// A C++ symbol as its source spells it ("holder_thread(void*)"); C names
// unchanged.
std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int st = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &st);
  std::string out = st == 0 && d ? d : name;
  std::free(d);
  return out;
}

// Each thread's call frames, unwound on first use.
class Frames {
 public:
  explicit Frames(const lr::Program& prog) : prog_(prog) {}
  // "frame #2 fn+0x1f [module]" for a stack word of thread `tid`; "" when
  // the unwind did not reach it.
  std::string frame_text(int tid, uint64_t addr) {
    auto it = frames_.find(tid);
    if (it == frames_.end()) {
      std::vector<lr::StackFrame> f;
      for (const auto& t : prog_.core()->threads())
        if (t.tid == tid) f = lr::unwind_thread(prog_.mem(), prog_.modules(), t);
      it = frames_.emplace(tid, std::move(f)).first;
    }
    const int i = lr::frame_of(it->second, addr);
    if (i < 0) return "";
    lr::SymbolHit h = prog_.modules().symbolize(it->second[i].pc);
    if (!h.sym) return fmt::format("frame #{} {}", i, h.format());
    return fmt::format("frame #{} {}+{:#x} [{}]", i, demangle(h.sym->name), h.offset,
                       h.module ? h.module->basename() : "?");
  }

 private:
  const lr::Program& prog_;
  std::map<int, std::vector<lr::StackFrame>> frames_;
};

// A global's name with the member the word is in, from the variable's
// DWARF type: "owner[30]", "g_cfg.list.next"; "" without a symbol.
std::string global_text(const lr::Program& prog, uint64_t addr) {
  lr::SymbolHit h = prog.modules().symbolize(addr);
  if (!h.sym || !h.module) return "";
  auto v = prog.resolve(h.sym->name + "@" + h.module->basename());
  std::string path = v.ok() && v.value().type && v.value().addr == h.sym->addr
                         ? lr::member_path_at(v.value().type, addr - h.sym->addr)
                         : "";
  if (path.empty())
    return h.offset
               ? fmt::format("{}+{:#x} [{}]", demangle(h.sym->name), h.offset, h.module->basename())
               : fmt::format("{} [{}]", demangle(h.sym->name), h.module->basename());
  return fmt::format("{}{} [{}]", demangle(h.sym->name), path, h.module->basename());
}

// Where a referring word is, for a person: a global and its member, a chunk
// and the offset in it (with the member of a C++ class), a thread's stack
// frame or register.
std::string describe(lr::Program& prog, const lr::RefIndex& ix, Frames& frames, const lr::Ref& r) {
  static const char* kRegs[27] = {"r15",     "r14",      "r13", "r12", "rbp",    "rbx", "r11",
                                  "r10",     "r9",       "r8",  "rax", "rcx",    "rdx", "rsi",
                                  "rdi",     "orig_rax", "rip", "cs",  "eflags", "rsp", "ss",
                                  "fs_base", "gs_base",  "ds",  "es",  "fs",     "gs"};
  switch (r.kind) {
    case lr::RefFrom::kRegister:
      return fmt::format("thread {} register {}", r.tid, r.from < 27 ? kRegs[r.from] : "?");
    case lr::RefFrom::kStack: {
      uint64_t sp = 0;
      for (const auto& t : prog.core()->threads())
        if (t.tid == r.tid) sp = t.sp();
      std::string f = frames.frame_text(r.tid, r.from);
      return fmt::format("thread {} stack at {:#x} (sp+{:#x}){}", r.tid, r.from, r.from - sp,
                         f.empty() ? "" : ", " + f);
    }
    case lr::RefFrom::kTls: {
      // x86_64: static TLS lies below the thread pointer, the thread's
      // control block at and above it.
      uint64_t tp = 0;
      for (const auto& t : prog.core()->threads())
        if (t.tid == r.tid) tp = t.fs_base();
      return r.from < tp
                 ? fmt::format("thread {} TLS at {:#x} (fs_base-{:#x})", r.tid, r.from, tp - r.from)
                 : fmt::format("thread {} control block at {:#x} (fs_base+{:#x})", r.tid, r.from,
                               r.from - tp);
    }
    case lr::RefFrom::kGlobal: {
      std::string g = global_text(prog, r.from);
      if (!g.empty()) return "global " + g;
      for (const auto& rr : ix.root_ranges())  // .bss past the last mapping: no symbol
        if (r.from >= rr.start && r.from < rr.end)
          return fmt::format("global {:#x} ({} data)", r.from, rr.what);
      return fmt::format("global {:#x}", r.from);
    }
    case lr::RefFrom::kMapping:
      return fmt::format("writable mapping at {:#x}", r.from);
    case lr::RefFrom::kChunk:
      break;
  }
  const size_t c = ix.chunk_at(r.from);
  if (c == SIZE_MAX) return fmt::format("{:#x}", r.from);
  const lr::HeapChunk& h = ix.heap().in_use[c];
  std::string type = vtable_type(prog, h.user), member;
  if (!type.empty())
    if (auto t = prog.types().find(type); t.ok())
      member = lr::member_path_at(t.value(), r.from - h.user);
  return fmt::format("chunk {:#x}+{:#x} ({} bytes{}{})", h.user, r.from - h.user, h.usable(),
                     type.empty() ? "" : ", " + type, member.empty() ? "" : " " + type + member);
}

uint64_t value_at(const lr::Program& prog, const lr::Ref& r) {
  if (r.kind == lr::RefFrom::kRegister) return r.value;
  uint64_t v = 0;
  return prog.mem().read(r.from, &v, 8).ok() ? v : r.value;
}

nlohmann::json ref_json(lr::Program& prog, const lr::RefIndex& ix, Frames& frames,
                        const lr::Ref& r) {
  nlohmann::json j{{"kind", lr::ref_from_name(r.kind)},
                   {"what", describe(prog, ix, frames, r)},
                   {"value", hex(value_at(prog, r))}};
  if (r.kind == lr::RefFrom::kRegister)
    j["register"] = r.from;
  else
    j["from"] = hex(r.from);
  if (r.tid) j["tid"] = r.tid;
  return j;
}

int cmd_refs(const Common& c, const RefsArgs& a) {
  // Addresses, or places as gdb writes them: "*g_list" (what g_list points
  // to), "owner[3]", "&g_obj".
  std::vector<uint64_t> want;
  auto o = open_indexed(c, [&](lr::Program& p) -> lr::Result<void> {
    for (const auto& s : a.addrs) {
      uint64_t v;
      if (lr::parse_u64(s, &v)) {
        want.push_back(v);
        continue;
      }
      auto r = p.resolve_address(s);
      if (!r.ok()) return lr::make_error(r.error().code, "refs: " + s + ": " + r.error().message);
      want.push_back(r.value());
    }
    return {};
  });
  if (!o.ok()) return fail(o.error());
  lr::Program& prog = *o.value().prog;
  const lr::RefIndex& ix = *o.value().index;
  Frames frames(prog);
  nlohmann::json out = nlohmann::json::array();
  int status = kOk;
  for (uint64_t addr : want) {
    const size_t ch = ix.chunk_at(addr);
    if (ch == SIZE_MAX) {
      std::string e = fmt::format(
          "{:#x} is not inside an in-use heap block (the index holds "
          "references to heap blocks)",
          addr);
      if (c.json)
        out.push_back({{"addr", hex(addr)}, {"error", e}});
      else
        out_stderr().print("leakref: error: {}\n", e);
      status = kLookup;
      continue;
    }
    const lr::HeapChunk& h = o.value().heap->in_use[ch];
    std::vector<lr::Ref> refs = ix.refs_to(ch);
    std::vector<lr::Ref> chain = a.depth ? ix.anchor_chain(ch, a.depth) : std::vector<lr::Ref>{};
    std::string type = vtable_type(prog, h.user);
    if (c.json) {
      nlohmann::json j{{"addr", hex(addr)},
                       {"chunk", hex(h.user)},
                       {"size", h.usable()},
                       {"type", type.empty() ? nlohmann::json(nullptr) : nlohmann::json(type)},
                       {"referrers", nlohmann::json::array()}};
      for (const auto& r : refs) j["referrers"].push_back(ref_json(prog, ix, frames, r));
      if (a.depth) {
        j["anchor_chain"] = nlohmann::json::array();
        for (const auto& r : chain) j["anchor_chain"].push_back(ref_json(prog, ix, frames, r));
      }
      out.push_back(std::move(j));
      continue;
    }
    out_stdout().print("{:#x}: in the {}-byte block at {:#x}{}; {} reference{}:\n", addr,
                       h.usable(), h.user, type.empty() ? "" : " (" + type + ")", refs.size(),
                       refs.size() == 1 ? "" : "s");
    for (const auto& r : refs)
      out_stdout().print("  {:<8} {}  -> {:#x}\n", lr::ref_from_name(r.kind),
                         describe(prog, ix, frames, r), value_at(prog, r));
    if (a.depth) {
      if (chain.empty())
        out_stdout().print("  no chain of references from a root within {} steps: leaked\n",
                           a.depth);
      else
        out_stdout().print("  anchored: {}\n", [&] {
          std::string s;
          for (const auto& r : chain)
            s += (s.empty() ? "" : " -> ") + describe(prog, ix, frames, r);
          return s + fmt::format(" -> {:#x}", h.user);
        }());
    }
  }
  if (c.json)
    emit_json({{"schema", "leakref.refs/1"},
               {"core", c.core},
               {"objects", out},
               {"index", {{"refs", ix.stats().refs}, {"roots", ix.stats().roots}}},
               {"warnings", ix.warnings()}});
  else
    print_warnings_text(ix.warnings());
  return status;
}

// Leaked blocks' allocation sites, from allocation traces: ptr -> site.
lr::Result<std::map<uint64_t, std::string>> sites_of(const lr::Program& prog,
                                                     const lr::HeapWalk& heap,
                                                     const std::vector<std::string>& paths) {
  std::map<uint64_t, std::string> out;
  if (paths.empty()) return out;
  std::vector<lr::Trace> traces;
  for (const auto& p : paths) {
    LR_ASSIGN(auto t, lr::load_trace(p));
    traces.push_back(std::move(t));
  }
  lr::FrameResolver fr(&prog.modules(), prog.core());
  lr::CorrelateOptions opts;
  opts.top = SIZE_MAX;
  lr::CorrelateReport rep = lr::correlate(traces, {}, fr, opts, &heap);
  for (const auto& al : rep.allocs) {
    if (!al.live) continue;
    const lr::Trace& t = traces[al.ev.trace];
    const auto& e = t.events[al.ev.event];
    std::string site = "(no caller)";
    if (e.stack && !t.stacks[e.stack].empty()) site = fr.resolve(t, t.stacks[e.stack][0]).text;
    out[al.ptr] = site;
  }
  return out;
}

// A GlusterFS process's blocks named by what made them (mem-pool objects,
// GF_MALLOC's accounted types); no namer for other programs, or when the
// GlusterFS types cannot be had (a warning says why).
struct GlusterNames {
  std::unique_ptr<lr::GlusterReport> report;  // the namer borrows it: a stable address
  std::unique_ptr<lr::GfBlockNamer> namer;
};
GlusterNames gluster_names(lr::Program& prog, std::vector<std::string>* warnings) {
  GlusterNames g;
  if (!prog.modules().by_name("libglusterfs.so.0")) return g;
  if (auto t = ensure_gluster_types(prog, ""); !t.ok()) {
    warnings->push_back("GlusterFS blocks are not named: " + t.error().message);
    return g;
  }
  lr::GlusterSections sec;
  sec.itable = sec.dicts = sec.clients = sec.fds = false;
  auto r = lr::analyze_gluster(prog, sec);
  if (!r.ok()) {
    warnings->push_back("GlusterFS blocks are not named: " + r.error().message);
    return g;
  }
  g.report = std::make_unique<lr::GlusterReport>(std::move(r).value());
  g.namer = std::make_unique<lr::GfBlockNamer>(*g.report, prog.mem());
  return g;
}

int cmd_leaks(const Common& c, const LeaksArgs& a) {
  for (const auto& f : a.fail_on)
    if (f != "leaked" && f != "any") return fail_usage("--fail-on: unknown finding '" + f + "'");
  auto o = open_indexed(c);
  if (!o.ok()) return fail(o.error());
  lr::Program& prog = *o.value().prog;
  const lr::RefIndex& ix = *o.value().index;
  const auto& chunks = o.value().heap->in_use;
  auto sites = sites_of(prog, *o.value().heap, a.traces);
  if (!sites.ok()) return fail(sites.error());
  std::vector<std::string> warnings = ix.warnings();
  GlusterNames gf = gluster_names(*o.value().prog, &warnings);
  std::vector<uint8_t> live = ix.reachable();
  struct Group {
    uint64_t count = 0, bytes = 0, unreferenced = 0;
  };
  std::map<std::pair<std::string, uint64_t>, Group> groups;  // (type, size)
  nlohmann::json blocks = nlohmann::json::array();
  uint64_t leaked = 0, leaked_bytes = 0, unref = 0, unref_bytes = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (live[i]) continue;
    const lr::HeapChunk& h = chunks[i];
    // Unreferenced (chap's word): no other block points at it at all.
    const bool unreferenced = ix.ref_count(i) == 0;
    std::string type = vtable_type(prog, h.user);
    if (type.empty() && gf.namer) type = gf.namer->name(h);
    ++leaked;
    leaked_bytes += h.usable();
    unref += unreferenced;
    unref_bytes += unreferenced ? h.usable() : 0;
    Group& g = groups[{type, h.usable()}];
    ++g.count;
    g.bytes += h.usable();
    g.unreferenced += unreferenced;
    if (!a.list && !c.json) continue;
    nlohmann::json b{{"ptr", hex(h.user)},
                     {"size", h.usable()},
                     {"type", type.empty() ? nlohmann::json(nullptr) : nlohmann::json(type)},
                     {"unreferenced", unreferenced}};
    nlohmann::json by = nlohmann::json::array();
    for (const auto& r : ix.refs_to(i)) {
      size_t from = ix.chunk_at(r.from);
      by.push_back(from == SIZE_MAX ? hex(r.from) : hex(chunks[from].user));
    }
    b["referenced_by"] = std::move(by);
    auto s = sites.value().find(h.user);
    b["site"] = s == sites.value().end() ? nlohmann::json(nullptr) : nlohmann::json(s->second);
    blocks.push_back(std::move(b));
  }
  std::vector<std::pair<std::pair<std::string, uint64_t>, Group>> rows(groups.begin(),
                                                                       groups.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& x, const auto& y) { return x.second.bytes > y.second.bytes; });
  const auto& st = ix.stats();
  // What was scanned as roots, and the references each kind holds.
  nlohmann::json roots = nlohmann::json::object();
  for (const auto& r : ix.root_ranges()) {
    auto& k = roots[lr::ref_from_name(r.kind)];
    if (k.is_null()) k = {{"bytes", 0}, {"ranges", 0}, {"refs", 0}};
    k["bytes"] = k["bytes"].get<uint64_t>() + (r.end - r.start);
    k["ranges"] = k["ranges"].get<uint64_t>() + 1;
  }
  for (int k = 1; k < 6; ++k)
    if (st.roots_by_kind[k]) {
      auto& j = roots[lr::ref_from_name(static_cast<lr::RefFrom>(k))];
      if (j.is_null()) j = {{"bytes", 0}, {"ranges", 0}};  // registers: no range
      j["refs"] = st.roots_by_kind[k];
    }
  if (c.json) {
    nlohmann::json gj = nlohmann::json::array();
    for (const auto& [k, g] : rows)
      gj.push_back({{"type", k.first.empty() ? nlohmann::json(nullptr) : nlohmann::json(k.first)},
                    {"size", k.second},
                    {"count", g.count},
                    {"bytes", g.bytes},
                    {"unreferenced", g.unreferenced}});
    emit_json({{"schema", "leakref.leaks/1"},
               {"core", c.core},
               {"summary",
                {{"blocks", chunks.size()},
                 {"leaked", leaked},
                 {"leaked_bytes", leaked_bytes},
                 {"unreferenced", unref},
                 {"unreferenced_bytes", unref_bytes}}},
               {"groups", gj},
               {"blocks", blocks},
               {"index",
                {{"bytes_scanned", st.bytes_scanned},
                 {"refs", st.refs},
                 {"roots", st.roots},
                 {"root_kinds", roots},
                 {"index_bytes", st.index_bytes},
                 {"table_bytes", st.table_bytes},
                 {"build_ns", st.build_ns}}},
               {"warnings", warnings}});
  } else {
    print_warnings_text(warnings);
    out_stdout().print(
        "{} of {} heap blocks leaked ({} bytes): nothing live reaches them (registers, stacks "
        "above the stack pointer, globals, TLS);\n{} of them unreferenced ({} bytes), the rest "
        "referenced only by leaked blocks\n",
        leaked, chunks.size(), leaked_bytes, unref, unref_bytes);
    if (!rows.empty())
      out_stdout().print("\n{:>8} {:>7} {:>10} {:>12}  {}\n", "SIZE", "COUNT", "BYTES",
                         "UNREFERENCED", "TYPE");
    for (size_t i = 0; i < rows.size() && i < a.top; ++i)
      out_stdout().print("{:>8} {:>7} {:>10} {:>12}  {}\n", rows[i].first.second,
                         rows[i].second.count, rows[i].second.bytes, rows[i].second.unreferenced,
                         rows[i].first.first.empty() ? "-" : rows[i].first.first);
    if (rows.size() > a.top)
      out_stdout().print("... {} more sizes (--top N, --json: all)\n", rows.size() - a.top);
    if (a.list) {
      out_stdout().print("\n{:<18} {:>8}  {:<12}  {}\n", "BLOCK", "SIZE", "", "SITE / TYPE");
      for (const auto& b : blocks)
        out_stdout().print("{:<18} {:>8}  {:<12}  {}{}\n", b["ptr"].get<std::string>(),
                           b["size"].get<uint64_t>(),
                           b["unreferenced"].get<bool>() ? "unreferenced" : "referenced",
                           b["site"].is_null() ? "" : b["site"].get<std::string>() + " ",
                           b["type"].is_null() ? "" : b["type"].get<std::string>());
    }
  }
  return fail_on_wants(a.fail_on, "leaked") && leaked ? kFindings : kOk;
}

}  // namespace

Command register_refs(CLI::App& app, Common& c) {
  auto a = std::make_shared<RefsArgs>();
  auto* sub = app.add_subcommand("refs", "who points at these heap objects (or into them)");
  add_common(sub, c);
  sub->add_option("addr", a->addrs, "addresses of objects (inside heap blocks)")->required();
  sub->add_option("--depth", a->depth, "a chain of references from a root, up to N steps");
  return {sub, [&c, a] { return cmd_refs(c, *a); }, [&c] { return c.json; }};
}

Command register_leaks(CLI::App& app, Common& c) {
  auto a = std::make_shared<LeaksArgs>();
  auto* sub = app.add_subcommand(
      "leaks", "heap blocks nothing live reaches (registers, stacks, globals, TLS)");
  add_common(sub, c);
  sub->add_flag("--list", a->list, "every leaked block, not only sizes");
  sub->add_option("--trace", a->traces,
                  "allocation trace (leakref-trace --malloc, mmleak, bcc): each block's site");
  sub->add_option("--top", a->top, "sizes listed in text (default 20)");
  sub->add_option("--fail-on", a->fail_on, "exit 1 if: leaked")->delimiter(',');
  return {sub, [&c, a] { return cmd_leaks(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
