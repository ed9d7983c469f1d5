// `leakref shared CORE`: every shared_ptr control block of a C++ process
// (libstdc++'s and libc++'s), its use and weak counts against the owners found in memory:
// leaked owners, more owners than counted, blocks no root reaches (a cycle
// of shared_ptrs or a lost last owner), with each owner named.
#include <fmt/format.h>

#include <map>
#include <memory>

#include "corelib/answers/shared_census.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/render.hpp"

namespace lrcli {

namespace {

using nlohmann::ordered_json;

struct SharedArgs {
  bool all = false;
  std::vector<std::string> fail_on;
};

const char* why(lr::SharedVerdict v) {
  switch (v) {
    case lr::SharedVerdict::kLeakedOwner:
      return "counted references no live shared_ptr or weak_ptr holds: an owner inside a "
             "leaked block, or one new'd and never deleted";
    case lr::SharedVerdict::kExtraOwner:
      return "more owners than counted: one of them will outlive the object";
    case lr::SharedVerdict::kLeaked:
      return "no root reaches it: kept alive by a cycle of shared_ptrs, or its last owner "
             "leaked";
    case lr::SharedVerdict::kCorrupt:
      return "counts no program reaches: not a live control block";
    case lr::SharedVerdict::kOk:
      break;
  }
  return "";
}

// What names an owner (shared_owner_name), for the blocks shown.
struct Naming {
  const lr::IndexedCore& core;
  lr::RefNamer& names;
  const lr::SharedCensus& census;
  std::string operator()(const lr::ControlBlock& b, const lr::SharedOwner& o) const {
    return lr::shared_owner_name(core, names, census, b, o);
  }
};

ordered_json block_json(const lr::ControlBlock& b, const Naming& name) {
  const lr::SharedCensus& s = name.census;
  ordered_json owners = ordered_json::array();
  for (const auto& o : s.owners_of(b))
    owners.push_back({{"at", fmt::format("{:#x}", o.from)},
                      {"name", name(b, o)},
                      {"live", o.live},
                      {"stale", o.stale},
                      {"unsure", o.unsure}});
  return {{"addr", fmt::format("{:#x}", b.addr)},
          {"type", s.type(b)},
          {"size", b.size},
          {"object", b.object ? ordered_json(fmt::format("{:#x}", b.object)) : ordered_json()},
          {"use_count", b.use},
          {"weak_count", b.weak},
          {"expected_owners", b.expected()},
          {"live_owners", b.live},
          {"unsure_owners", b.unsure},
          {"reached", b.reached},
          {"verdict", lr::shared_verdict_name(b.verdict)},
          {"owners", std::move(owners)}};
}

void block_text(Out& out, const lr::ControlBlock& b, const Naming& name) {
  const lr::SharedCensus& s = name.census;
  out.print("{:#x} {} ({} bytes): use_count {}, weak_count {}; {} owners expected, {} live{}\n",
            b.addr, s.type(b), b.size, b.use, b.weak, b.expected(), b.live,
            b.object ? fmt::format("; object {:#x}", b.object) : "");
  if (b.verdict != lr::SharedVerdict::kOk)
    out.print("  {}: {}\n", lr::shared_verdict_name(b.verdict), why(b.verdict));
  for (const auto& o : s.owners_of(b))
    out.print("  {} {}\n",
              o.stale    ? "stale "
              : o.unsure ? "unsure"
              : o.live   ? "owner "
                         : "leaked",
              name(b, o));
}

// The document streamed: its head's members, then each block as it is
// named (with --all a core's millions of blocks are never held as JSON
// at once), then the warnings.
void stream_json(const ordered_json& head, const lr::SharedCensus& s, bool all, const Naming& name,
                 const std::vector<std::string>& warnings) {
  Out& out = out_stdout();
  out.put("{\n");
  for (const auto& [k, v] : head.items())
    out.print(" {}: {},\n", json_text(ordered_json(k)), json_text(v));
  out.put(" \"blocks\": [");
  bool first = true;
  for (const auto& b : s.blocks) {
    if (!all && b.verdict == lr::SharedVerdict::kOk) continue;
    out.print("{}\n  {}", first ? "" : ",", json_text(block_json(b, name)));
    first = false;
  }
  out.print("{}],\n \"warnings\": {}\n}}\n", first ? "" : "\n ", json_text(ordered_json(warnings)));
}

int cmd_shared(const DumpOptions& c, const SharedArgs& a) {
  for (const auto& f : a.fail_on)
    if (f != "leaked-owner" && f != "extra-owner" && f != "leaked" && f != "corrupt" &&
        f != "partial" && f != "any")
      return fail_usage("--fail-on: unknown finding '" + f + "'");
  auto core = open_indexed_core(c);
  if (!core.ok()) return fail(core.error());
  lr::KnownObjects none;
  lr::RefNamer names(core.value(), none);
  auto census = lr::shared_census(core.value(), names, a.all);
  if (!census.ok()) return fail(census.error());
  const auto& s = census.value();
  const Naming name{core.value(), names, s};
  std::map<std::string, uint64_t> by;  // verdict -> blocks
  for (auto v :
       {lr::SharedVerdict::kOk, lr::SharedVerdict::kLeakedOwner, lr::SharedVerdict::kExtraOwner,
        lr::SharedVerdict::kLeaked, lr::SharedVerdict::kCorrupt})
    by[lr::shared_verdict_name(v)] = s.count(v);
  const bool partial = !s.partial.empty();
  if (c.json) {
    ordered_json counts = ordered_json::object();
    for (const char* v : {"ok", "leaked-owner", "extra-owner", "leaked", "corrupt"})
      counts[v] = by[v];
    ordered_json head{{"schema", "leakref.shared/1"},
                      {"core", c.core},
                      {"partial", partial},
                      {"partial_reasons", s.partial},
                      {"control_blocks", s.found.size()},
                      {"stale_words", s.stale_words},
                      {"unsure_blocks", s.unsure_blocks},
                      {"verdicts", counts}};
    stream_json(head, s, a.all, name, core.value().warnings);
  } else {
    print_warnings_text(core.value().warnings, out_stderr());
    out_stdout().print(
        "{}{} shared_ptr control blocks: {} ok, {} with leaked owners, {} with more owners than "
        "counted, {} leaked, {} corrupt\n",
        partial ? "partial: " : "", s.found.size(), by["ok"], by["leaked-owner"], by["extra-owner"],
        by["leaked"], by["corrupt"]);
    if (s.stale_words)
      out_stdout().print(
          "{} words past containers' elements (an erased shared_ptr's, in a vector's spare "
          "capacity) were set aside: not counted as owners\n",
          s.stale_words);
    if (s.unsure_blocks)
      out_stdout().print(
          "{} ok blocks have more owners than counted only through words no type says are a "
          "shared_ptr's (stack slots, blocks of unknown type: stale copies, most likely); not "
          "findings (--all lists them)\n",
          s.unsure_blocks);
    for (const auto& p : s.partial) out_stdout().print("partial: {}\n", p);
    for (const auto& b : s.blocks)
      if (a.all || b.verdict != lr::SharedVerdict::kOk) {
        out_stdout().put("\n");
        block_text(out_stdout(), b, name);
      }
  }
  if (!a.fail_on.empty() && partial) return kFindings;
  for (const auto& [v, n] : by)
    if (v != "ok" && n && fail_on_wants(a.fail_on, v.c_str())) return kFindings;
  return kOk;
}

}  // namespace

Command register_shared(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<SharedArgs>();
  auto* sub = app.add_subcommand(
      "shared", "C++ shared_ptr control blocks: counts against the owners found, cycles");
  add_dump_options(sub, c);
  sub->add_flag("--all", a->all, "list every control block (by default those not ok)");
  sub->add_option("--fail-on", a->fail_on,
                  "exit 1 if: leaked-owner, extra-owner, leaked, corrupt, partial, any")
      ->delimiter(',');
  return {sub, [&c, a] { return cmd_shared(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
