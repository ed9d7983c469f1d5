// `leakref kernel … leaks` and `… refs` (and `crash> leakref leaks|refs`):
// kernel objects nothing reachable points to, and who points at one, from
// one reference index of the image (targets/linux/kernel_refs.hpp), kept on
// the target so a crash session builds it once.
#include "frontend/kernel/cmd_kleaks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "frontend/base/errors.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"
#include "frontend/kernel/cmd_kslab.hpp"
#include "targets/linux/kernel_refs.hpp"
#include "targets/linux/kernel_retained.hpp"

namespace lrcli {

void add_kleaks_options(CLI::App* sub, KLeaksArgs& a) {
  sub->add_option("--cache", a.caches, "only objects of these caches (repeatable)");
  sub->add_option("--min-age", a.min_age,
                  "only objects allocated at least this many jiffies before the dump "
                  "(caches with slub_debug=U)");
  sub->add_option("--type", a.type,
                  "with one --cache: its objects' type, shown for each (default: the profile's "
                  "types, or struct CACHE when its size matches)");
  sub->add_option("--fail-on", a.fail_on,
                  "exit 1 if: leak, partial (a partial answer always fails under --fail-on)")
      ->delimiter(',');
  sub->add_flag("--json", a.json, "leakref.kernel.leaks/1 JSON");
}

void add_krefs_options(CLI::App* sub, KRefsArgs& a) {
  sub->add_option("place", a.place,
                  "an address inside an object, or a place: NAME, NAME@module, *NAME")
      ->required();
  sub->add_option("--depth", a.depth, "also a chain of references from a root, up to N steps");
  sub->add_flag("--json", a.json, "leakref.kernel.refs/1 JSON");
}

lr::Result<std::shared_ptr<lr::KRefIndex>> kernel_ref_index(lr::KernelTarget& k,
                                                            const lr::KernelLimits& lim) {
  if (!k.refs_slot()) {
    LR_ASSIGN(auto ix, lr::KRefIndex::build(k, lim));
    k.refs_slot() = std::move(ix);
  }
  return k.refs_slot();
}

namespace {

// `reused`: a crash session's earlier command built it.
nlohmann::json index_json(const lr::KRefIndex& ix, bool reused) {
  const auto& g = ix.graph().stats();
  const auto& s = ix.stats();
  return {{"objects", g.objects},
          {"slab_objects", s.slab_objects},
          {"vmalloc_areas", s.vmalloc_areas},
          {"module_areas", s.module_areas},
          {"stacks", s.stacks},
          {"kernel_pages", s.kernel_pages},
          {"rcu_pending", s.rcu_pending},
          {"untracked", s.untracked},
          {"kmemleak_not_leak", s.kmemleak_not_leak},
          {"kmemleak_no_scan", s.kmemleak_no_scan},
          {"cpu_registers", s.cpu_registers},
          {"references", g.refs},
          {"root_references", g.root_refs},
          {"bytes_scanned", g.bytes_scanned},
          {"unreadable_bytes", g.unreadable_bytes},
          {"memory_bytes", g.memory_bytes},
          {"build_ns", s.collect_ns + g.build_ns},
          {"reused", reused}};
}

struct LeakLine {
  size_t object;
  bool referenced;
};

// The jiffies of the dump (jiffies_64), 0 when unreadable.
uint64_t dump_jiffies(lr::KernelTarget& k) {
  auto v = k.prog().resolve("jiffies_64");
  uint64_t j = 0;
  if (v.ok() && k.mem().read(v.value().addr, &j, 8).ok()) return j;
  return 0;
}

nlohmann::json leak_json(lr::KernelTarget& k, const lr::KRefIndex& ix, lr::KRefNamer& names,
                         const LeakLine& l, const lr::StackDepot* depot, uint64_t now) {
  const lr::KObject& o = ix.objects()[l.object];
  nlohmann::json j{{"addr", hex(o.addr)}, {"size", o.size}, {"referenced", l.referenced}};
  if (o.track >= 0) {
    const lr::KSlabTrack& t = ix.tracks()[static_cast<size_t>(o.track)];
    nlohmann::json a = track_json(k, t);
    a["caller"] = names.symbol(t.addr);
    if (now >= t.when) a["age"] = now - t.when;
    auto& st = a["stack"] = nlohmann::json::array();
    if (auto s = lr::track_stack(t, depot); s.ok())
      for (uint64_t x : s.value()) st.push_back(names.symbol(x));
    j["alloc"] = std::move(a);
  }
  if (o.kind == lr::KObject::Kind::kVmalloc) j["caller"] = names.symbol(o.caller);
  if (const lr::Type* t =
          o.kind == lr::KObject::Kind::kSlab ? names.cache_type(o.cache) : nullptr) {
    std::vector<uint8_t> scratch;
    if (const uint8_t* b = lr::object_bytes(k.mem(), o.addr, o.size, scratch)) {
      lr::TreeLimits tl;
      tl.max_depth = 2;
      j["value"] = tree_json(lr::value_tree(b, o.size, t, tl));
    }
  }
  return j;
}

// Leaked objects grouped by cache ("vmalloc" for areas), caches by bytes.
std::vector<std::pair<std::string, std::vector<LeakLine>>> group_leaks(const lr::KRefIndex& ix,
                                                                       const KLeaksArgs& a,
                                                                       uint64_t now) {
  std::map<std::string, std::vector<LeakLine>> by;
  for (const lr::KLeak& l : lr::kernel_leaks(ix)) {
    const lr::KObject& o = ix.objects()[l.object];
    std::string name = o.kind == lr::KObject::Kind::kSlab ? ix.caches()[o.cache].name : "vmalloc";
    if (!a.caches.empty() && std::find(a.caches.begin(), a.caches.end(), name) == a.caches.end())
      continue;
    if (a.min_age) {
      if (o.track < 0) continue;  // its age is not known
      const uint64_t when = ix.tracks()[static_cast<size_t>(o.track)].when;
      if (now < when || now - when < a.min_age) continue;
    }
    by[name].push_back({l.object, l.referenced});
  }
  // In each cache, the objects nothing points to (where a leak starts)
  // before those only other leaked objects point to (cycles, chains).
  for (auto& [name, v] : by)
    std::stable_sort(v.begin(), v.end(), [](const LeakLine& x, const LeakLine& y) {
      return x.referenced < y.referenced;
    });
  std::vector<std::pair<std::string, std::vector<LeakLine>>> out(by.begin(), by.end());
  auto bytes = [&](const std::vector<LeakLine>& v) {
    uint64_t b = 0;
    for (const auto& l : v) b += ix.objects()[l.object].size;
    return b;
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const auto& x, const auto& y) { return bytes(x.second) > bytes(y.second); });
  return out;
}

// An object of a cache whose type is known, as `show` prints it (one level).
void print_typed(lr::KernelTarget& k, lr::KRefNamer& names, const lr::KObject& o, Out& out) {
  const lr::Type* t = o.kind == lr::KObject::Kind::kSlab ? names.cache_type(o.cache) : nullptr;
  if (!t) return;
  std::string text = lr::format_object(k.mem(), o.addr, t, &k.prog().modules(), 1);
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    out.print("      | {}\n", std::string_view(text).substr(at, nl - at));
    at = nl + 1;
  }
}

void print_leak(lr::KernelTarget& k, const lr::KRefIndex& ix, lr::KRefNamer& names,
                const LeakLine& l, const lr::StackDepot* depot, uint64_t now, Out& out) {
  const lr::KObject& o = ix.objects()[l.object];
  out.print("  {:#x}  {} bytes{}", o.addr, o.size, l.referenced ? "  (in a cycle or chain)" : "");
  if (o.kind == lr::KObject::Kind::kVmalloc) out.print("  from {}", names.symbol(o.caller));
  if (o.track < 0) {
    out.print("\n");
    print_typed(k, names, o, out);
    return;
  }
  const lr::KSlabTrack& t = ix.tracks()[static_cast<size_t>(o.track)];
  out.print("  allocated by pid {} on cpu {}", t.pid, t.cpu);
  if (now >= t.when) out.print(", {} jiffies before the dump", now - t.when);
  out.print("\n");
  bool stack = false;
  if (auto s = lr::track_stack(t, depot); s.ok()) {
    for (uint64_t x : s.value()) out.print("      {}\n", names.symbol(x));
    stack = true;
  }
  if (!stack) out.print("      {}\n", names.symbol(t.addr));
  print_typed(k, names, o, out);
}

}  // namespace

int run_kleaks(lr::KernelTarget& k, const KLeaksArgs& a, const std::string& source,
               const lr::KernelLimits& lim, Out& out, Out& err) {
  const bool reused = k.refs_slot() != nullptr;
  auto ixr = kernel_ref_index(k, lim);
  if (!ixr.ok()) return fail(ixr.error(), err);
  const lr::KRefIndex& ix = *ixr.value();
  lr::KRefNamer names(k, ix);
  if (!a.type.empty()) {
    if (a.caches.size() != 1)
      return fail(
          lr::make_error(lr::Errc::kInvalidArgument,
                         "--type needs exactly one --cache (whose objects are of that type)"),
          err);
    auto t = k.prog().types().find(a.type);
    if (!t.ok()) return fail(t.error(), err);
    if (auto r = names.set_cache_type(a.caches[0], t.value()); !r.ok()) return fail(r.error(), err);
  }
  const uint64_t now = dump_jiffies(k);
  auto depot = lr::StackDepot::open(k);
  const lr::StackDepot* dp = depot.ok() ? depot.value().get() : nullptr;
  const auto groups = group_leaks(ix, a, now);
  uint64_t n = 0, bytes = 0;
  for (const auto& [name, v] : groups)
    for (const auto& l : v) ++n, bytes += ix.objects()[l.object].size;
  if (a.json) {
    nlohmann::json j{{"schema", "leakref.kernel.leaks/1"}, {"dump", source}};
    auto& jc = j["caches"] = nlohmann::json::array();
    for (const auto& [name, v] : groups) {
      nlohmann::json c{{"name", name}, {"leaked", v.size()}};
      const lr::KObject& first = ix.objects()[v.front().object];
      if (first.kind == lr::KObject::Kind::kSlab)
        if (const lr::Type* t = names.cache_type(first.cache)) c["type"] = t->display();
      auto& objs = c["objects"] = nlohmann::json::array();
      uint64_t b = 0;
      for (const auto& l : v) {
        objs.push_back(leak_json(k, ix, names, l, dp, now));
        b += ix.objects()[l.object].size;
      }
      c["bytes"] = b;
      jc.push_back(std::move(c));
    }
    j["summary"] = {{"objects", n}, {"bytes", bytes}, {"caches", groups.size()}};
    j["partial"] = !ix.partial().empty();
    j["partial_reasons"] = ix.partial();
    j["index"] = index_json(ix, reused);
    j["warnings"] = ix.warnings();
    out.print("{}\n", json_text(j, 1));
  } else {
    // A partial answer says so before anything else.
    for (const auto& p : ix.partial()) out.print("partial: {}\n", p);
    for (const auto& [name, v] : groups) {
      uint64_t b = 0;
      for (const auto& l : v) b += ix.objects()[l.object].size;
      const lr::KObject& first = ix.objects()[v.front().object];
      const lr::Type* t =
          first.kind == lr::KObject::Kind::kSlab ? names.cache_type(first.cache) : nullptr;
      out.print("{}: {} unreferenced, {} bytes{}\n", name, v.size(), b,
                t ? fmt::format(" ({})", t->display()) : "");
      for (const auto& l : v) print_leak(k, ix, names, l, dp, now, out);
    }
    const auto& g = ix.graph().stats();
    out.print(
        "\n{}{} unreferenced object{}, {} bytes, in {} cache{} (of {} objects; {} references, "
        "{:.1f} MiB scanned)\n",
        ix.partial().empty() ? "" : "partial: ", n, n == 1 ? "" : "s", bytes, groups.size(),
        groups.size() == 1 ? "" : "s", g.objects, g.refs, g.bytes_scanned / 1048576.0);
    for (const auto& w : ix.warnings()) err.print("leakref: warning: {}\n", w);
  }
  for (const auto& f : a.fail_on)
    if ((f == "leak" || f == "any") && n) return kFindings;
  // A partial answer is not a clean one: under --fail-on it fails whatever
  // was asked for.
  return !a.fail_on.empty() && !ix.partial().empty() ? kFindings : kOk;
}

namespace {

// The address a PLACE names: a number, or a place as gdb writes it
// (NAME, NAME@module, *NAME: what the pointer NAME points to).
lr::Result<uint64_t> place_address(lr::KernelTarget& k, const std::string& p) {
  uint64_t v = 0;
  if (lr::parse_u64(p, &v)) return v;
  return k.prog().resolve_address(p);
}

// What the index makes of an object (refs' "state"), and in words: only
// "leaked" is one `leaks` lists. Objects whose contents are not scanned
// say so whether a root reaches them or not.
std::pair<const char*, std::string> object_state(const lr::KObject& o, bool reached) {
  const char* how = reached ? "reachable from a root" : "reached from no root";
  if (o.untracked)
    return {
        "untracked",
        fmt::format("kmemleak's own metadata (SLAB_NOLEAKTRACE: not scanned, no leak), {}", how)};
  if (o.rcu)
    return {"rcu_pending",
            fmt::format("waiting for an RCU grace period to be freed (no leak), {}", how)};
  if (o.kind == lr::KObject::Kind::kStack)
    return {"spare_stack", fmt::format("a spare kernel stack kept for reuse (no leak), {}", how)};
  if (o.unread)
    return {"not_in_dump",
            fmt::format("not wholly in the dump: whether it is allocated is not known, {}", how)};
  if (reached) return {"reachable", how};
  if (o.kmemleak & lr::KmemleakNote::kNotLeak)
    return {"not_leak", "reached from no root, but marked kmemleak_not_leak (no leak)"};
  return {"leaked", "reached from no root (leaked)"};
}

}  // namespace

int run_krefs(lr::KernelTarget& k, const KRefsArgs& a, const std::string& source,
              const lr::KernelLimits& lim, Out& out, Out& err) {
  const bool reused = k.refs_slot() != nullptr;
  auto ixr = kernel_ref_index(k, lim);
  if (!ixr.ok()) return fail(ixr.error(), err);
  const lr::KRefIndex& ix = *ixr.value();
  auto addr = place_address(k, a.place);
  if (!addr.ok()) return fail(addr.error(), err);
  const size_t i = ix.find(addr.value());
  if (i == SIZE_MAX)
    return fail(lr::make_error(lr::Errc::kNotFound,
                               fmt::format("{:#x} is inside no allocated slab object or vmalloc "
                                           "area (the index holds references to those)",
                                           addr.value())),
                err);
  lr::KRefNamer names(k, ix);
  const auto refs = ix.graph().referrers(i);
  const auto seen = ix.graph().reachable();
  const bool reached = seen[i] & lr::ObjectGraph::kReached;
  const auto chain = a.depth ? ix.graph().chain(i, a.depth) : std::vector<lr::GraphRef>{};
  const lr::KObject& o = ix.objects()[i];
  const auto [state, state_text] = object_state(o, reached);
  if (a.json) {
    nlohmann::json j{
        {"schema", "leakref.kernel.refs/1"},
        {"dump", source},
        {"object", {{"addr", hex(o.addr)}, {"size", o.size}, {"name", names.object(i)}}},
        {"reachable", reached},
        {"state", state}};
    auto& jr = j["referrers"] = nlohmann::json::array();
    for (const auto& r : refs)
      jr.push_back({{"from", hex(r.from)},
                    {"value", hex(r.value)},
                    {"root", r.object == lr::GraphRef::kNone},
                    {"name", names.referrer(r)}});
    j["partial"] = !ix.partial().empty();
    j["partial_reasons"] = ix.partial();
    j["index"] = index_json(ix, reused);
    if (a.depth) {
      auto& jc = j["chain"] = nlohmann::json::array();
      for (const auto& r : chain)
        jc.push_back({{"from", hex(r.from)},
                      {"name", names.referrer(r)},
                      {"to", hex(ix.objects()[r.target].addr)}});
    }
    out.print("{}\n", json_text(j, 1));
    return kOk;
  }
  for (const auto& p : ix.partial()) err.print("leakref: partial: {}\n", p);
  out.print("{}: {} bytes, {}\n", names.object(i), o.size, state_text);
  out.print("{} referring word{}:\n", refs.size(), refs.size() == 1 ? "" : "s");
  for (const auto& r : refs) {
    // A pointer to the start is to the object; inside it, to a member.
    const std::string m = r.value == o.addr ? "" : names.member(i, r.value - o.addr);
    out.print("  {:#x} -> +{:#x}{}  {}\n", r.from, r.value - o.addr,
              m.empty() ? "" : " (" + m + ")", names.referrer(r));
  }
  if (a.depth) {
    if (chain.empty())
      out.print("no chain from a root within {} steps\n", a.depth);
    else
      out.print("chain from a root:\n");
    for (const auto& r : chain)
      out.print("  {} -> {:#x}\n", names.referrer(r), ix.objects()[r.target].addr);
  }
  return kOk;
}

int run_kretained(lr::KernelTarget& k, const RetainedArgs& a, bool json, const std::string& source,
                  const lr::KernelLimits& lim, Out& out, Out& err) {
  auto ixr = kernel_ref_index(k, lim);
  if (!ixr.ok()) return fail(ixr.error(), err);
  const lr::KRefIndex& ix = *ixr.value();
  lr::KRefNamer names(k, ix);
  auto t = lr::kernel_retained(k, ix, names, a.all_roots);
  if (!t.ok()) return fail(t.error(), err);
  const lr::KernelRetained& kr = t.value();
  std::vector<std::string> warnings = k.warnings();
  warnings.insert(warnings.end(), ix.warnings().begin(), ix.warnings().end());
  RetainedView v{
      kr.tree,          *kr.namer,           out,
      source,           std::move(warnings), ix.stats().collect_ns + ix.graph().stats().build_ns,
      "kernel objects", "objects",           "vmcore"};
  return render_retained(v, a, json, err);
}

}  // namespace lrcli
