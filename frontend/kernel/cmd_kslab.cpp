// `leakref kernel slab`: the cache table, each chosen cache's allocated
// objects streamed as they are found (text rows, leakref.kernel.slab/1 JSON
// or JSON lines), allocation stacks from slub_debug=U tracks, and --type:
// the objects handed to the walk machinery.
#include "frontend/kernel/cmd_kslab.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"
#include "targets/linux/kernel_slab.hpp"

namespace lrcli {

void add_slab_options(CLI::App* sub, SlabArgs& s, WalkArgs& w) {
  sub->add_option("--cache", s.caches, "only this cache (repeatable): list its allocated objects");
  sub->add_flag("--objects", s.objects, "list the allocated objects of every cache (no --cache)");
  sub->add_flag("--scan-pages", s.scan_pages,
                "find slabs in the struct page array even when SLUB's lists hold them all");
  sub->add_flag("--stacks", s.stacks,
                "group allocated objects by allocation stack (caches with slub_debug=U)");
  sub->add_option("--top", s.top, "--stacks: the N most common stacks (default 20)");
  sub->add_option("--type", w.type,
                  "the objects' type: walk them (--where, --show, --refcount, --group-by)");
  sub->add_option("--refcount", w.refcount, "with --type: refcount field");
  sub->add_option("--show", w.show, "with --type: fields to print")->delimiter(',');
  sub->add_option("--where", w.where, "with --type: filter objects");
  add_walk_run_options(sub, w);
}

std::string ksym(lr::KernelTarget& k, uint64_t a) {
  lr::SymbolHit h = k.prog().modules().symbolize(a);
  if (!h.module || !h.sym) {
    // A loaded module's text, from its kallsyms.
    if (const lr::KModSymbol* s = k.module_symbol_at(a))
      return a > s->addr ? fmt::format("{}+{:#x} [{}]", s->name, a - s->addr, s->module)
                         : fmt::format("{} [{}]", s->name, s->module);
    return hex(a);
  }
  std::string mod = h.module->basename();
  std::string s = h.offset ? fmt::format("{}+{:#x}", h.sym->name, h.offset) : h.sym->name;
  return mod.rfind("vmlinux", 0) == 0 ? s : s + " [" + mod + "]";
}

nlohmann::json track_json(lr::KernelTarget& k, const lr::KSlabTrack& t) {
  return {{"caller", ksym(k, t.addr)}, {"caller_addr", hex(t.addr)}, {"pid", t.pid}, {"cpu", t.cpu},
          {"jiffies", t.when},         {"handle", t.handle}};
}

namespace {

struct StackGroup {
  uint64_t count = 0;
  uint64_t first = 0;  // an object allocated there
  uint64_t caller = 0;
};
// Objects are grouped by their allocation stack: a depot handle, or the
// frames a track keeps itself (before 5.17; handle 0 then).
using StackKey = std::pair<uint32_t, std::vector<uint64_t>>;

std::string sym(lr::KernelTarget& k, uint64_t a) {
  return ksym(k, a);
}

nlohmann::json object_json(lr::KernelTarget& k, const lr::KSlabObject& o) {
  nlohmann::json j{{"addr", hex(o.addr)},
                   {"cache", o.cache->name},
                   {"slab", hex(o.slab)},
                   {"where", lr::slab_where_name(o.where)}};
  if (o.cpu >= 0) j["cpu"] = o.cpu;
  if (o.has_tracks) {
    j["alloc"] = track_json(k, o.alloc);
    j["free"] = track_json(k, o.free);
  }
  return j;
}

nlohmann::json cache_json(const lr::KSlabCache& c) {
  nlohmann::json j{{"addr", hex(c.addr)},
                   {"name", c.name},
                   {"object_size", c.object_size},
                   {"size", c.size},
                   {"objects_per_slab", c.objects_per_slab},
                   {"free_pointer_offset", c.offset},
                   {"red_left_pad", c.red_left_pad},
                   {"order", c.order},
                   {"store_user", c.store_user},
                   {"hardened", c.hardened},
                   {"slabs", c.slabs},
                   {"objects", c.objects},
                   {"allocated", c.allocated},
                   {"free", c.free},
                   {"cpu_slabs", c.cpu_slabs},
                   {"cpu_partial_slabs", c.cpu_partial_slabs},
                   {"node_partial_slabs", c.node_partial_slabs},
                   {"full_slabs", c.full_slabs},
                   {"other_slabs", c.other_slabs},
                   {"sheaf_free", c.sheaf_free}};
  nlohmann::json& s = j["slub"];
  s = nlohmann::json::object();
  if (c.nr_slabs >= 0) {
    s["nr_slabs"] = c.nr_slabs;
    s["total_objects"] = c.total_objects;
    // What /proc/slabinfo's active_objs shows: SLUB counts a CPU slab's
    // free objects as active.
    s["slabinfo_active"] = c.total_objects - static_cast<int64_t>(c.node_partial_free);
  }
  if (c.nr_partial >= 0) s["nr_partial"] = c.nr_partial;
  return j;
}

void cache_table(const lr::KSlabReport& rep, Out& out) {
  out.print("{:<26} {:>7} {:>6} {:>6} {:>8} {:>9} {:>8} {:>4} {:>7} {:>7} {:>5} {:>6}\n", "CACHE",
            "OBJSIZE", "SIZE", "SLABS", "OBJS", "ALLOCATED", "FREE", "CPU", "CPUPART", "PARTIAL",
            "FULL", "OTHER");
  for (const auto& c : rep.caches)
    out.print("{:<26} {:>7} {:>6} {:>6} {:>8} {:>9} {:>8} {:>4} {:>7} {:>7} {:>5} {:>6}{}\n",
              c.name, c.object_size, c.size, c.slabs, c.objects, c.allocated, c.free, c.cpu_slabs,
              c.cpu_partial_slabs, c.node_partial_slabs, c.full_slabs, c.other_slabs,
              c.store_user ? "  [tracks]" : "");
}

// The N most common allocation stacks, each resolved once.
nlohmann::json stacks_out(lr::KernelTarget& k, const std::map<StackKey, StackGroup>& groups,
                          uint64_t top, bool json, Out& out, std::vector<std::string>* warnings) {
  std::vector<std::pair<StackKey, StackGroup>> v(groups.begin(), groups.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second.count > b.second.count; });
  if (v.size() > top) v.resize(top);
  bool by_handle = false;
  for (const auto& [key, g] : v) by_handle |= key.first != 0;
  auto depot = lr::StackDepot::open(k);
  if (!depot.ok() && by_handle) warnings->push_back(depot.error().message);
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [key, g] : v) {
    const uint32_t h = key.first;
    std::vector<std::string> frames;
    std::string err;
    lr::KSlabTrack t;
    t.handle = h;
    t.frames = key.second;
    if (h || !t.frames.empty()) {
      auto st = lr::track_stack(t, depot.ok() ? depot.value().get() : nullptr);
      if (st.ok())
        for (uint64_t a : st.value()) frames.push_back(sym(k, a));
      else if (depot.ok())
        err = st.error().message;
    } else {
      err = "no stack recorded (handle 0)";
    }
    if (json) {
      nlohmann::json j{{"handle", h},
                       {"objects", g.count},
                       {"example", hex(g.first)},
                       {"caller", sym(k, g.caller)},
                       {"frames", frames}};
      if (!err.empty()) j["error"] = err;
      arr.push_back(std::move(j));
      continue;
    }
    out.print("\n{} object{} allocated at {} (stack {:#x}; e.g. {}):\n", g.count,
              g.count == 1 ? "" : "s", sym(k, g.caller), h, hex(g.first));
    if (!err.empty()) out.print("    ({})\n", err);
    for (const auto& f : frames) out.print("    {}\n", f);
  }
  return arr;
}

// The objects as the walk machinery's: --type names their type.
int slab_walk(lr::KernelTarget& k, const lr::KSlabReport& rep, const std::vector<uint64_t>& objs,
              const WalkArgs& w, bool json, const std::string& source, Out& out, Out& err) {
  const lr::KSlabCache& c = rep.caches.at(0);
  auto t = k.prog().types().find(w.type);
  if (!t.ok()) return fail(t.error(), err);
  const lr::Type* ts = t.value()->strip();
  if (!ts || ts->size == 0 || ts->size > c.object_size) {
    err.print(
        "leakref: error: {} is {} bytes but the objects of cache {} are {} bytes: they are "
        "not of that type\n",
        t.value()->display(), ts ? ts->size : 0, c.name, c.object_size);
    return kUsage;
  }
  WalkArgs a = w;
  a.head = c.name;
  a.addresses = &objs;
  a.addresses_mode = "slab";
  a.addresses_at = c.addr;
  std::vector<std::string> pre = k.warnings();
  pre.insert(pre.end(), rep.warnings.begin(), rep.warnings.end());
  return run_and_render_walk(k.prog(), a, json, true, source, pre, out, err);
}

// `v` as fmt's "{:<#18x}  " writes it: 0x and its hex digits, no leading
// zeros, padded with spaces to 18 columns, then two spaces.
void hex_column(fmt::memory_buffer& b, uint64_t v) {
  char d[16];
  int n = 0;
  do {
    d[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  const size_t width = 2 + static_cast<size_t>(n);
  b.push_back('0');
  b.push_back('x');
  while (n) b.push_back(d[--n]);
  for (size_t w = width; w < 20; ++w) b.push_back(' ');
}

}  // namespace

namespace {

// The option combinations slab refuses; "" when they fit.
std::string slab_args_error(const SlabArgs& s, const WalkArgs& w) {
  const bool typed = !w.type.empty();
  if (!typed && (!w.where.empty() || !w.show.empty() || !w.refcount.empty() ||
                 !w.group_by.empty() || !w.sort.empty()))
    return "--where, --show, --refcount, --group-by and --sort need --type "
           "(the type of the cache's objects)";
  if (typed && s.caches.size() != 1)
    return "--type needs exactly one --cache (whose objects are of that type)";
  if (!w.profile.empty() || !w.profile_set.empty()) return "slab takes no --profile/--set";
  return "";
}

// What one slab pass lists: each object as a row (text, JSON or JSON
// lines), counted by the stack that allocated it, or kept for a typed walk.
struct SlabLister {
  SlabLister(lr::KernelTarget& k_, const SlabArgs& s_, const WalkArgs& w_, const std::string& src,
             Out& out_, bool json_, bool jsonl_, bool typed_, bool list_)
      : k(k_),
        s(s_),
        w(w_),
        source(src),
        out(out_),
        json(json_),
        jsonl(jsonl_),
        typed(typed_),
        list(list_) {}
  lr::KernelTarget& k;
  const SlabArgs& s;
  const WalkArgs& w;
  const std::string& source;
  Out& out;
  bool json, jsonl, typed, list;
  std::vector<uint64_t> objs;
  std::map<StackKey, StackGroup> groups;
  uint64_t listed = 0;
  bool head = false;
  fmt::memory_buffer rows;

  void flush_rows() {
    out.put(std::string_view(rows.data(), rows.size()));
    rows.clear();
  }
  void begin() {
    if (head) return;
    head = true;
    if (json && !jsonl)
      out.print("{{\"schema\":\"leakref.kernel.slab/1\",\"dump\":{},\"objects\":[",
                json_text(nlohmann::json(source)));
    else if (jsonl)
      out.print("{}\n",
                json_text(nlohmann::json{
                    {"record", "slab"}, {"schema", "leakref.kernel.slab/1"}, {"dump", source}}));
  }
  void on(const lr::KSlabObject& o) {
    if (typed) {
      objs.push_back(o.addr);
      return;
    }
    if (s.stacks && o.has_tracks) {
      StackGroup& g = groups[{o.alloc.handle, o.alloc.frames}];
      if (!g.count++) g.first = o.addr, g.caller = o.alloc.addr;
    }
    if (!list || out.failed() || (w.limit && listed >= w.limit)) return;
    begin();
    ++listed;
    if (json || jsonl) {
      nlohmann::json j = object_json(k, o);
      if (jsonl) j["record"] = "object";
      out.print("{}{}{}", !jsonl && listed > 1 ? "," : "", json_text(j), jsonl ? "\n" : "");
      return;
    }
    row(o);
  }
  // Rows are composed in one buffer and written a block at a time: a cache
  // can hold millions of objects. The fixed columns by hand: fmt's padded
  // hex is most of a row's cost (`{:<#18x}  {:<#18x}  {:<12}`).
  void row(const lr::KSlabObject& o) {
    hex_column(rows, o.addr);
    hex_column(rows, o.slab);
    const char* where = lr::slab_where_name(o.where);
    auto it = std::back_inserter(rows);
    if (o.cpu >= 0) {
      fmt::format_to(it, "{} {:<{}}", where, o.cpu, 11 - std::strlen(where));
    } else {
      const size_t n = std::strlen(where);
      rows.append(where, where + n);
      for (size_t i = n; i < 12; ++i) rows.push_back(' ');
    }
    if (o.has_tracks)
      fmt::format_to(it, "  pid {:<6} jiffies {:<11} {}", o.alloc.pid, o.alloc.when,
                     sym(k, o.alloc.addr));
    rows.push_back('\n');
    if (rows.size() > (64 << 10)) flush_rows();
  }
};

// After the objects: every cache's counts, the stacks, the summary and the
// warnings, as text, JSON or JSON lines.
void slab_summary(SlabLister& l, const lr::KSlabReport& rep, std::vector<std::string>& warnings,
                  Out& err) {
  Out& out = l.out;
  uint64_t allocated = 0, slabs = 0;
  for (const auto& c : rep.caches) allocated += c.allocated, slabs += c.slabs;
  nlohmann::json summary{{"caches", rep.caches.size()},
                         {"slabs", slabs},
                         {"allocated", allocated},
                         {"pages", rep.pages},
                         {"scanned", rep.scanned},
                         {"slab_pages", rep.slab_pages},
                         {"unreadable_pages", rep.unreadable_pages}};
  if (l.w.stats) summary["walk_ns"] = rep.walk_ns;
  if (l.json || l.jsonl) {
    l.begin();
    nlohmann::json caches = nlohmann::json::array();
    for (const auto& c : rep.caches) caches.push_back(cache_json(c));
    nlohmann::json stacks = l.s.stacks ? stacks_out(l.k, l.groups, l.s.top, true, out, &warnings)
                                       : nlohmann::json::array();
    if (l.jsonl) {
      for (auto& c : caches) {
        c["record"] = "cache";
        out.print("{}\n", json_text(c));
      }
      for (auto& st : stacks) {
        st["record"] = "stack";
        out.print("{}\n", json_text(st));
      }
      out.print("{}\n", json_text(nlohmann::json{
                            {"record", "summary"}, {"summary", summary}, {"warnings", warnings}}));
    } else {
      out.print("],\"caches\":{},\"stacks\":{},\"summary\":{},\"warnings\":{}}}\n",
                json_text(caches), json_text(stacks), json_text(summary),
                json_text(nlohmann::json(warnings)));
    }
    return;
  }
  print_warnings_text(warnings, err);
  if (l.listed) out.print("\n");
  cache_table(rep, out);
  if (l.s.stacks) stacks_out(l.k, l.groups, l.s.top, false, out, &warnings);
  out.print("\n{} caches, {} slabs, {} allocated objects ({})\n", rep.caches.size(), slabs,
            allocated,
            !rep.scanned ? std::string("slabs from SLUB's lists, which hold them all")
            : rep.unreadable_pages
                ? fmt::format("{} struct pages scanned, {} in holes or not in the dump", rep.pages,
                              rep.unreadable_pages)
                : fmt::format("{} struct pages scanned", rep.pages));
}

}  // namespace

int run_slab(lr::KernelTarget& k, const SlabArgs& s, const WalkArgs& w, bool json,
             const std::string& source, const lr::KernelLimits& lim, Out& out, Out& err) {
  if (std::string bad = slab_args_error(s, w); !bad.empty())
    return fail(lr::make_error(lr::Errc::kInvalidArgument, bad), err);
  const bool typed = !w.type.empty();
  lr::KSlabFilter f;
  f.caches = s.caches;
  const bool list = (!s.caches.empty() || s.objects) && !w.summary_only && !typed && !s.stacks;
  f.objects = list || s.stacks || typed;
  f.tracks = !typed;
  f.scan_pages = s.scan_pages;
  SlabLister l(k, s, w, source, out, json, w.jsonl && !typed, typed, list);
  if (list && !json && !l.jsonl)
    out.print("{:<18}  {:<18}  {:<12}{}\n", "OBJECT", "SLAB", "WHERE",
              "  ALLOCATED BY (slub_debug=U)");
  auto r = lr::kernel_slab(
      k, f, [&](const lr::KSlabObject& o) { l.on(o); }, lim);
  l.flush_rows();
  if (!r.ok()) {
    print_warnings_text(k.warnings(), err);
    return fail(r.error(), err);
  }
  const lr::KSlabReport& rep = r.value();
  if (typed) return slab_walk(k, rep, l.objs, w, json, source, out, err);
  std::vector<std::string> warnings = k.warnings();
  warnings.insert(warnings.end(), rep.warnings.begin(), rep.warnings.end());
  if (rep.warnings_dropped)
    warnings.push_back(fmt::format("{} more warnings not shown", rep.warnings_dropped));
  slab_summary(l, rep, warnings, err);
  return fail_on_wants(w.fail_on, "warning") && !warnings.empty() ? kFindings : kOk;
}

}  // namespace lrcli
