// `leakref refs CORE PLACE...` (who points at these objects, and the chain
// of references from a root) and `leakref leaks CORE` (heap blocks nothing
// live reaches), both on one reference index of the core (refindex.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include "corelib/analyses/correlate.hpp"
#include "corelib/analyses/trace.hpp"
#include "corelib/answers/leak_report.hpp"
#include "corelib/answers/leak_states.hpp"
#include "corelib/answers/profile_match.hpp"
#include "corelib/blocks/refindex.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/render.hpp"
#include "frontend/process/cmd_profile.hpp"

namespace lrcli {

namespace {

struct RefsArgs {
  std::vector<std::string> addrs;
  size_t depth = 0;
  std::string profile;            // objects whose members name referrers
  std::vector<std::string> sets;  // only these of its sets
};

struct LeaksArgs {
  bool list = false;
  std::vector<std::string> traces;
  size_t top = 20;
  std::vector<std::string> fail_on;
};

// refs' arguments, once the core is open: each PLACE's address, and the
// profile's objects (its errors before the index is built).
lr::Result<void> resolve_refs_args(lr::Program& p, const RefsArgs& a, std::vector<uint64_t>* want,
                                   lr::KnownObjects* known) {
  for (const auto& s : a.addrs) {
    uint64_t v;
    if (lr::parse_u64(s, &v)) {
      want->push_back(v);
      continue;
    }
    auto r = p.resolve_address(s);
    if (!r.ok()) return lr::make_error(r.error().code, "refs: " + s + ": " + r.error().message);
    want->push_back(r.value());
  }
  return lr::load_known_objects(p, a.profile, a.sets, profile_dirs(), known, cli_display());
}

void print_refs_text(lr::RefNamer& names, const lr::HeapChunk& h, size_t ch, uint64_t addr,
                     const std::vector<lr::Ref>& refs, const std::vector<lr::Ref>* chain,
                     size_t depth, bool live, const lr::Program& prog) {
  std::string type = names.block_type(ch);
  out_stdout().print("{:#x}: in the {}-byte block at {:#x}{}; {} reference{}:\n", addr, h.usable(),
                     h.user, type.empty() ? "" : " (" + type + ")", refs.size(),
                     refs.size() == 1 ? "" : "s");
  for (const auto& r : refs)
    out_stdout().print("  {:<8} {}  -> {:#x}\n", lr::ref_from_name(r.kind), names.describe(r),
                       lr::ref_value(prog, r));
  if (!chain) return;
  if (!chain->empty()) {
    std::string s;
    for (const auto& r : *chain) s += (s.empty() ? "" : " -> ") + names.describe(r);
    out_stdout().print("  anchored: {} -> {:#x}\n", s, h.user);
  } else if (live) {
    out_stdout().print(
        "  reachable from a root, but by no chain within {} steps (a larger --depth finds it)\n",
        depth);
  } else {
    out_stdout().print("  no chain of references from any root: leaked\n");
  }
}

int cmd_refs(const DumpOptions& c, const RefsArgs& a) {
  // Addresses, or places as gdb writes them: "*g_list" (what g_list points
  // to), "owner[3]", "&g_obj".
  std::vector<uint64_t> want;
  lr::KnownObjects known;
  auto o =
      open_indexed_core(c, [&](lr::Program& p) { return resolve_refs_args(p, a, &want, &known); });
  if (!o.ok()) return fail(o.error());
  lr::Program& prog = *o.value().prog;
  const lr::RefIndex& ix = *o.value().ci.index;
  lr::RefNamer names(o.value(), known);
  names.type_containers();
  // As leaks decides: the words past a container's elements reach nothing
  // (they are listed as stale).
  auto extents = lr::live_extents(names.types());
  lr::add_tagger_spans(o.value(), extents);
  std::vector<uint8_t> live;
  if (a.depth) live = extents.empty() ? ix.reachable() : ix.reachable(extents);
  nlohmann::json out = nlohmann::json::array();
  int status = kOk;
  for (uint64_t addr : want) {
    const size_t ch = ix.chunk_at(addr);
    if (ch == SIZE_MAX) {
      std::string e = fmt::format(
          "{:#x} is not inside an in-use heap block (the index holds references to heap blocks)",
          addr);
      // A freed block: where it lies, and who still points at it.
      const lr::HeapPlace at = lr::locate_in_heap(prog, *o.value().ci.heap, addr);
      const std::vector<lr::Ref> dangling =
          at.start < at.end ? ix.words_into(at.start, at.end) : std::vector<lr::Ref>{};
      if (c.json) {
        nlohmann::json j{{"addr", hex(addr)}, {"error", e}};
        if (!at.what.empty()) {
          j["freed"] = at.what;
          j["dangling_referrers"] = nlohmann::json::array();
          for (const auto& r : dangling)
            j["dangling_referrers"].push_back(ref_json(names, prog, r));
        }
        out.push_back(std::move(j));
      } else {
        out_stderr().print("leakref: error: {}\n", e);
        if (!at.what.empty()) {
          out_stdout().print("{:#x}: {}; {} dangling pointer{} to it:\n", addr, at.what,
                             dangling.size(), dangling.size() == 1 ? "" : "s");
          for (const auto& r : dangling)
            out_stdout().print("  {:<8} {}  -> {:#x}\n", lr::ref_from_name(r.kind),
                               names.describe(r), lr::ref_value(prog, r));
        }
      }
      status = kLookup;
      continue;
    }
    const lr::HeapChunk h = o.value().ci.heap->in_use[ch];
    std::vector<lr::Ref> refs = ix.refs_to(ch);
    std::vector<lr::Ref> stale = ix.stale_refs_to(ch);
    lr::set_past_extents_aside(ix, extents, &refs, &stale);
    // A chain only to a reached block: one through a word past a
    // container's elements is no root's.
    std::vector<lr::Ref> chain =
        a.depth && (live[ch] & lr::RefIndex::kReached)
            ? ix.anchor_chain(ch, a.depth, [&](size_t b) { return names.container_of(b); })
            : std::vector<lr::Ref>{};
    if (!c.json) {
      print_refs_text(names, h, ch, addr, refs, a.depth ? &chain : nullptr, a.depth,
                      a.depth && (live[ch] & lr::RefIndex::kReached), prog);
      for (const auto& r : stale)
        out_stdout().print("  {:<8} {}  -> {:#x}\n", "stale", names.describe(r),
                           lr::ref_value(prog, r));
      continue;
    }
    std::string type = names.block_type(ch);
    nlohmann::json j{{"addr", hex(addr)},
                     {"chunk", hex(h.user)},
                     {"size", h.usable()},
                     {"type", type.empty() ? nlohmann::json(nullptr) : nlohmann::json(type)},
                     {"referrers", nlohmann::json::array()}};
    for (const auto& r : refs) j["referrers"].push_back(ref_json(names, prog, r));
    j["stale_referrers"] = nlohmann::json::array();
    for (const auto& r : stale) j["stale_referrers"].push_back(ref_json(names, prog, r));
    if (a.depth) {
      j["reachable"] = (live[ch] & lr::RefIndex::kReached) != 0;
      j["anchor_chain"] = nlohmann::json::array();
      for (const auto& r : chain) j["anchor_chain"].push_back(ref_json(names, prog, r));
    }
    out.push_back(std::move(j));
  }
  if (c.json)
    emit_json({{"schema", "leakref.refs/1"},
               {"core", c.core},
               {"objects", out},
               {"known_objects", known.size()},
               {"index", {{"refs", ix.stats().refs}, {"roots", ix.stats().roots}}},
               {"partial", !ix.partial().empty()},
               {"partial_reasons", ix.partial()},
               {"warnings", o.value().warnings}});
  else
    print_warnings_text(o.value().warnings);
  if (!c.json)
    for (const auto& p : ix.partial()) out_stderr().print("leakref: partial: {}\n", p);
  return status;
}

// What was scanned as roots, and the references each kind holds.
nlohmann::json root_kinds(const lr::RefIndex& ix) {
  const auto& st = ix.stats();
  nlohmann::json roots = nlohmann::json::object();
  for (const auto& r : ix.root_ranges()) {
    auto& k = roots[lr::ref_from_name(r.kind)];
    if (k.is_null()) k = {{"bytes", 0}, {"ranges", 0}, {"refs", 0}};
    k["bytes"] = k["bytes"].get<uint64_t>() + (r.end - r.start);
    k["ranges"] = k["ranges"].get<uint64_t>() + 1;
  }
  for (size_t k = 1; k < lr::kRefFromKinds; ++k)
    if (st.roots_by_kind[k]) {
      auto& j = roots[lr::ref_from_name(static_cast<lr::RefFrom>(k))];
      if (j.is_null()) j = {{"bytes", 0}, {"ranges", 0}};  // registers: no range
      j["refs"] = st.roots_by_kind[k];
    }
  return roots;
}

// Each group of leaked blocks that hold one another, as one cycle word by
// word: what keeps its refcounts above zero.
void print_leak_cycles(const LeaksArgs& a, const lr::LeakCycles& c) {
  if (!c.groups) return;
  out_stdout().print(
      "\n{} group{} of leaked blocks that hold one another (one cycle of each: a block, its "
      "word that points on):\n",
      c.groups, c.groups == 1 ? "" : "s");
  for (size_t i = 0; i < c.shown.size() && i < a.top; ++i) {
    const lr::LeakCycle& y = c.shown[i];
    out_stdout().print(
        "  cycle of {} block{}{}:\n", y.blocks.size(), y.blocks.size() == 1 ? "" : "s",
        y.group_blocks > y.blocks.size() ? fmt::format(" (in a group of {})", y.group_blocks) : "");
    for (size_t k = 0; k < y.blocks.size(); ++k)
      out_stdout().print("    {:#x}  {}  -> {:#x}\n", y.blocks[k], y.links[k],
                         y.blocks[(k + 1) % y.blocks.size()]);
  }
  if (c.groups > std::min<uint64_t>(c.shown.size(), a.top))
    out_stdout().print("  ... {} more (--top N, --json: the first {})\n",
                       c.groups - std::min<uint64_t>(c.shown.size(), a.top), c.shown.size());
}

void print_leaks_text(const LeaksArgs& a, const lr::LeakReport& r) {
  std::vector<std::pair<std::pair<std::string, uint64_t>, lr::LeakGroup>> rows(r.groups.begin(),
                                                                               r.groups.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& x, const auto& y) { return x.second.bytes > y.second.bytes; });
  out_stdout().print(
      "{}{} of {} heap blocks leaked ({} bytes): nothing live reaches them (registers, stacks "
      "above the stack pointer, globals, TLS, other mappings);\n{} of them unreferenced ({} "
      "bytes), the rest referenced only by leaked blocks\n",
      r.partial.empty() ? "" : "partial: ", r.leaked, r.heap_blocks, r.leaked_bytes, r.unreferenced,
      r.unreferenced_bytes);
  for (const auto& p : r.partial) out_stdout().print("partial: {}\n", p);
  if (r.pool_free)
    out_stdout().print("{} more blocks are objects free in {} (not counted)\n", r.pool_free,
                       r.pools);
  if (!rows.empty())
    out_stdout().print("\n{:>8} {:>7} {:>10} {:>12}  {}\n", "SIZE", "COUNT", "BYTES",
                       "UNREFERENCED", "TYPE");
  for (size_t i = 0; i < rows.size() && i < a.top; ++i)
    out_stdout().print("{:>8} {:>7} {:>10} {:>12}  {}\n", rows[i].first.second,
                       rows[i].second.count, rows[i].second.bytes, rows[i].second.unreferenced,
                       rows[i].first.first.empty() ? "-" : rows[i].first.first);
  if (rows.size() > a.top)
    out_stdout().print("... {} more sizes (--top N, --json: all)\n", rows.size() - a.top);
  print_leak_cycles(a, r.cycles);
}

// --list: one row per leaked block.
void print_leaked_blocks(const lr::LeakReport& r) {
  out_stdout().print("{:<18} {:>8}  {:<12}  {}\n", "BLOCK", "SIZE", "", "SITE / TYPE");
  for (const auto& b : r.blocks) {
    std::string t = b.type;
    if (b.through_pointer) t += " (from " + b.type_from + ")";
    out_stdout().print("{:<18} {:>8}  {:<12}  {}{}\n", hex(b.ptr), b.size,
                       b.unreferenced ? "unreferenced" : "referenced",
                       b.site.empty() ? "" : b.site + " ", t);
  }
}

nlohmann::json null_or(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

// leakref.leaks/1: the blocks one a line as they come, then the totals.
void print_leaks_json(const DumpOptions& c, const lr::LeakReport& r, const lr::RefIndex& ix,
                      const std::vector<std::string>& warnings) {
  out_stdout().print("{{\"schema\":\"leakref.leaks/1\",\"core\":{},\"blocks\":[",
                     json_text(nlohmann::json(c.core)));
  bool first = true;
  for (const auto& b : r.blocks) {
    nlohmann::json by = nlohmann::json::array();
    for (uint64_t from : b.referenced_by) by.push_back(hex(from));
    nlohmann::json j{{"ptr", hex(b.ptr)},
                     {"size", b.size},
                     {"type", null_or(b.type)},
                     {"type_from", null_or(b.type_from)},
                     {"unreferenced", b.unreferenced},
                     {"referenced_by", std::move(by)},
                     {"site", null_or(b.site)}};
    out_stdout().print("{}{}", first ? "\n" : ",\n", json_text(j));
    first = false;
  }
  nlohmann::json gj = nlohmann::json::array();
  for (const auto& [k, g] : r.groups)
    gj.push_back({{"type", null_or(k.first)},
                  {"size", k.second},
                  {"count", g.count},
                  {"bytes", g.bytes},
                  {"unreferenced", g.unreferenced}});
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& y : r.cycles.shown) {
    nlohmann::json blocks = nlohmann::json::array();
    for (uint64_t b : y.blocks) blocks.push_back(hex(b));
    cj.push_back(
        {{"blocks", std::move(blocks)}, {"links", y.links}, {"group_blocks", y.group_blocks}});
  }
  const auto& st = ix.stats();
  nlohmann::json rest{{"partial", !r.partial.empty()},
                      {"cycle_groups", r.cycles.groups},
                      {"cycles", std::move(cj)},
                      {"partial_reasons", r.partial},
                      {"summary",
                       {{"blocks", r.heap_blocks},
                        {"leaked", r.leaked},
                        {"leaked_bytes", r.leaked_bytes},
                        {"unreferenced", r.unreferenced},
                        {"unreferenced_bytes", r.unreferenced_bytes},
                        {"pool_free", r.pool_free}}},
                      {"groups", gj},
                      {"index",
                       {{"bytes_scanned", st.bytes_scanned},
                        {"refs", st.refs},
                        {"roots", st.roots},
                        {"root_kinds", root_kinds(ix)},
                        {"index_bytes", st.index_bytes},
                        {"table_bytes", st.table_bytes},
                        {"build_ns", st.build_ns}}},
                      {"warnings", warnings}};
  std::string t = json_text(rest);
  out_stdout().print("\n],{}\n", t.substr(1));  // `rest` continues the open object
}

int cmd_leaks(const DumpOptions& c, const LeaksArgs& a) {
  for (const auto& f : a.fail_on)
    if (f != "leaked" && f != "partial" && f != "any")
      return fail_usage("--fail-on: unknown finding '" + f + "'");
  auto o = open_indexed_core(c);
  if (!o.ok()) return fail(o.error());
  lr::LiveSites sites;
  if (!a.traces.empty()) {
    auto r = sites_from_traces(*o.value().prog, *o.value().ci.heap, a.traces);
    if (!r.ok()) return fail(r.error());
    sites = std::move(r).value();
  }
  lr::KnownObjects none;
  lr::RefNamer names(o.value(), none);
  const lr::LeakStates ls = lr::find_leaks(o.value(), names);
  const lr::LeakReport r =
      lr::leak_report(o.value(), names, ls, a.traces.empty() ? nullptr : &sites,
                      /*with_referrers=*/c.json);
  std::vector<std::string> warnings = o.value().warnings;
  warnings.insert(warnings.end(), sites.warnings.begin(), sites.warnings.end());
  if (c.json) {
    print_leaks_json(c, r, *o.value().ci.index, warnings);
  } else {
    if (a.list) print_leaked_blocks(r);
    print_warnings_text(warnings);
    if (a.list) out_stdout().put("\n");
    print_leaks_text(a, r);
  }
  // A partial answer is not a clean one: under --fail-on it fails whatever
  // was asked.
  if (!a.fail_on.empty() && !r.partial.empty()) return kFindings;
  return fail_on_wants(a.fail_on, "leaked") && r.leaked ? kFindings : kOk;
}

}  // namespace

Command register_refs(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<RefsArgs>();
  auto* sub = app.add_subcommand("refs", "who points at these heap objects (or into them)");
  add_dump_options(sub, c);
  sub->add_option("PLACE", a->addrs, "objects: addresses, symbols, *SYMBOL (inside heap blocks)")
      ->required();
  sub->add_option("--depth", a->depth, "a chain of references from a root, up to N steps");
  sub->add_option("-p,--profile", a->profile,
                  "profile file (or NAME): a referring word in one of its objects is named by "
                  "the set and member");
  sub->add_option("--set", a->sets, "only these sets of the profile")->delimiter(',');
  return {sub, [&c, a] { return cmd_refs(c, *a); }, [&c] { return c.json; }};
}

Command register_leaks(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<LeaksArgs>();
  auto* sub = app.add_subcommand(
      "leaks", "heap blocks nothing live reaches (registers, stacks, globals, TLS)");
  add_dump_options(sub, c);
  sub->add_flag("--list", a->list, "every leaked block, not only sizes");
  sub->add_option(
      "--trace", a->traces,
      "allocation trace (leakref-trace --malloc, mmleak, bcc, mtrace): each block's site");
  sub->add_option("--top", a->top, "sizes listed in text (default 20)");
  sub->add_option("--fail-on", a->fail_on,
                  "exit 1 if: leaked, partial (a partial answer always fails under --fail-on)")
      ->delimiter(',');
  return {sub, [&c, a] { return cmd_leaks(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
