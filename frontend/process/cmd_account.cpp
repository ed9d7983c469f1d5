// `leakref account CORE`: every byte of the core's writable memory in one
// category (corelib/analyses/account.hpp), the heap's in-use blocks as
// live or leaked by the same reachability as `leaks`, broken down by type
// or by allocation site.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "corelib/analyses/account.hpp"
#include "corelib/answers/block_keys.hpp"
#include "corelib/answers/container_blocks.hpp"
#include "corelib/answers/leak_states.hpp"
#include "corelib/answers/profile_match.hpp"
#include "corelib/base/fileio.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/render.hpp"
#include "frontend/process/account_html.hpp"
#include "frontend/process/cmd_profile.hpp"

namespace lrcli {

namespace {

struct AccountArgs {
  std::string by = "type";
  std::string profile;
  std::vector<std::string> sets;
  std::vector<std::string> traces;
  size_t top = 10;
  size_t depth = 3;
  std::string html;
  std::string smaps, pagemap;  // default: CORE.smaps and CORE.pagemap, when both exist
};

nlohmann::json node_json(const lr::AccountNode& n, bool resident) {
  nlohmann::json j{{"name", n.name}, {"bytes", n.bytes}, {"blocks", n.blocks}};
  if (resident) j["resident_bytes"] = n.resident;
  nlohmann::json kids = nlohmann::json::array();
  for (const auto& c : n.children) kids.push_back(node_json(c, resident));
  j["children"] = std::move(kids);
  return j;
}

std::string share(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / whole) : "-";
}

// The rows' layout: the name column as wide as the widest name shown (at
// least 44, at most 120 characters: past that a name runs over).
struct Columns {
  size_t name = 44;
  const lr::Residency* res = nullptr;
};

size_t widest(const lr::AccountNode& n, size_t level, size_t depth) {
  size_t w = 2 * level + n.name.size();
  if (level + 1 < depth)
    for (const auto& c : n.children) w = std::max(w, widest(c, level + 1, depth));
  return w;
}

// One row; the RESIDENT column only when the capture said which pages were.
// The total row has no blocks or share: it ends after its bytes then.
void print_row(const Columns& col, const std::string& name, uint64_t bytes, std::string_view blocks,
               std::string_view pct, uint64_t resident) {
  if (blocks.empty() && !col.res)
    return out_stdout().print("{:<{}} {:>14}\n", name, col.name, bytes);
  out_stdout().print("{:<{}} {:>14} {:>10} {:>7}", name, col.name, bytes, blocks, pct);
  if (col.res) out_stdout().print(" {:>14}", resident);
  out_stdout().print("\n");
}

void print_node(const Columns& col, const lr::AccountNode& n, uint64_t whole, size_t level,
                size_t depth) {
  print_row(col, std::string(2 * level, ' ') + n.name, n.bytes, fmt::to_string(n.blocks),
            share(n.bytes, whole), n.resident);
  if (level + 1 < depth)
    for (const auto& c : n.children) print_node(col, c, whole, level + 1, depth);
}

void print_account_text(const lr::Account& acc, const AccountArgs& a, const std::string& core,
                        const lr::Residency* res) {
  const uint64_t whole = acc.total.bytes;
  Columns col{44, res};
  for (const auto& c : acc.total.children)
    col.name = std::max(col.name, std::min<size_t>(120, widest(c, 0, a.depth)));
  out_stdout().print("{}: {} bytes of writable memory, each in one category (blocks: by {})\n\n",
                     core, acc.writable_bytes, a.by);
  out_stdout().print("{:<{}} {:>14} {:>10} {:>7}{}\n", "CATEGORY", col.name, "BYTES", "BLOCKS",
                     "SHARE", res ? fmt::format(" {:>14}", "RESIDENT") : "");
  for (const auto& c : acc.total.children) print_node(col, c, whole, 0, a.depth);
  print_row(col, "total", whole, "", "", acc.total.resident);
  if (res)
    out_stdout().print(
        "\nsmaps at capture: {} bytes resident in writable mappings, {} in all ({} read-only)\n",
        res->smaps_writable_rss(), res->smaps_rss(), res->smaps_rss() - res->smaps_writable_rss());
}

// The capture's smaps and pagemap: the ones named, else CORE.smaps and
// CORE.pagemap when both are there. Named files that do not fit are an
// error; found ones a warning (the account is given without residency).
lr::Result<void> load_residency(lr::Program& prog, const DumpOptions& c, const AccountArgs& a,
                                std::vector<std::string>* warnings) {
  const bool named = !a.smaps.empty() || !a.pagemap.empty();
  if (named && (a.smaps.empty() || a.pagemap.empty()))
    return lr::make_error(lr::Errc::kInvalidArgument, "--smaps and --pagemap go together");
  const std::string sm = named ? a.smaps : c.core + ".smaps";
  const std::string pm = named ? a.pagemap : c.core + ".pagemap";
  if (!named && !(lr::is_regular_file(sm) && lr::is_regular_file(pm))) return {};
  auto r = lr::Residency::load(sm, pm);
  if (r.ok()) {
    uint64_t outside = 0;
    for (const auto& s : prog.core()->segments())
      if (s.writable) outside += (s.end - s.start) - r->mapped(s.start, s.end);
    if (outside == 0) {
      prog.set_residency(std::make_unique<lr::Residency>(std::move(r.value())));
      return {};
    }
    r = lr::make_error(lr::Errc::kBadFormat,
                       fmt::format("{}: {} writable bytes of the core are in no mapping it "
                                   "lists; not this core's process",
                                   sm, outside));
  }
  if (named) return r.error();
  warnings->push_back(r.error().message + "; no resident figures");
  return {};
}

// Each in-use chunk's key for the breakdown; site and module with a trace:
// the allocating frame and its module.
lr::Result<std::function<std::string_view(size_t)>> breakdown(const AccountArgs& a,
                                                              lr::IndexedCore& o,
                                                              lr::RefNamer& names,
                                                              const lr::KnownObjects& known,
                                                              lr::LiveSites& sites) {
  const auto& chunks = o.ci.heap->in_use;
  if (a.traces.empty()) {
    const lr::BlockKeyBy by = a.by == "set"      ? lr::BlockKeyBy::kSet
                              : a.by == "module" ? lr::BlockKeyBy::kModule
                                                 : lr::BlockKeyBy::kType;
    return std::function<std::string_view(size_t)>(lr::BlockKeys(o, names, known, by));
  }
  LR_ASSIGN(sites, sites_from_traces(*o.prog, *o.ci.heap, a.traces));
  const bool module = a.by == "module";
  return std::function<std::string_view(size_t)>([&chunks, &sites, module](size_t i) {
    auto s = sites.by_ptr.find(chunks[i].user);
    if (s == sites.by_ptr.end()) return std::string_view("(not in the trace)");
    return std::string_view(module ? sites.module_of.at(s->second) : s->second);
  });
}

// The combinations that cannot be answered, said before the core is read.
std::string usage_error(const AccountArgs& a) {
  if (a.by != "type" && a.by != "site" && a.by != "set" && a.by != "module")
    return "--by: '" + a.by + "' is not one of type, set, site, module";
  if (a.by == "site" && a.traces.empty())
    return "--by site needs the allocations' trace (--trace FILE)";
  if (a.by == "set" && a.profile.empty())
    return "--by set needs a profile (--profile FILE or NAME) whose sets the blocks are in";
  if (!a.traces.empty() && a.by != "site" && a.by != "module")
    return "--trace is for --by site or module (the blocks' allocation sites)";
  if (!a.sets.empty() && a.profile.empty())
    return "--set chooses among a profile's sets (--profile)";
  return "";
}

int cmd_account(const DumpOptions& c, const AccountArgs& a) {
  if (std::string why = usage_error(a); !why.empty()) return fail_usage(why);
  std::vector<std::string> res_warnings;
  lr::KnownObjects known;
  auto o = open_indexed_core(
      c,
      [&](lr::Program& p) -> lr::Result<void> {
        LR_TRY(load_residency(p, c, a, &res_warnings));
        return lr::load_known_objects(p, a.profile, a.sets, profile_dirs(), &known, cli_display());
      },
      /*caches=*/a.by == "type");
  if (!o.ok()) return fail(o.error());
  lr::IndexedCore& op = o.value();
  lr::RefNamer names(op, known);
  const lr::LeakStates ls = lr::find_leaks(op, names);
  if (a.by == "type") {
    // Live blocks by what holds them: containers' nodes, typed pointers.
    lr::ContainerTyping ct = ls.typed ? ls.typing : lr::type_heap_blocks(op, names.types());
    res_warnings.insert(res_warnings.end(), ct.warnings.begin(), ct.warnings.end());
  }
  lr::AccountInput in = lr::account_input(op, ls, &res_warnings);
  lr::LiveSites sites;
  auto key = breakdown(a, op, names, known, sites);
  if (!key.ok()) return fail(key.error());
  in.key_of = key.value();
  in.max_children = c.json ? 1000 : a.top;
  auto acc = lr::build_account(in);
  if (!acc.ok()) return fail(acc.error());
  std::vector<std::string> warnings = res_warnings;
  warnings.insert(warnings.end(), op.warnings.begin(), op.warnings.end());
  warnings.insert(warnings.end(), sites.warnings.begin(), sites.warnings.end());
  warnings.insert(warnings.end(), acc->warnings.begin(), acc->warnings.end());
  if (!a.html.empty())
    if (auto w = write_html_page(a.html, account_html(acc.value(), c.core)); !w.ok())
      return fail(w.error());
  if (c.json) {
    nlohmann::json cats = nlohmann::json::array();
    const lr::Residency* res = in.residency;
    for (const auto& n : acc->total.children) cats.push_back(node_json(n, res));
    nlohmann::json j{{"schema", "leakref.account/1"},      {"core", c.core},
                     {"allocator", op.ci.heap->allocator}, {"by", a.by},
                     {"total_bytes", acc->total.bytes},    {"writable_bytes", acc->writable_bytes},
                     {"categories", std::move(cats)},      {"warnings", warnings}};
    if (res)
      j["resident"] = {{"total_bytes", acc->total.resident},
                       {"smaps_rss_bytes", res->smaps_rss()},
                       {"smaps_writable_rss_bytes", res->smaps_writable_rss()}};
    emit_json(j);
    return kOk;
  }
  print_warnings_text(warnings);
  print_account_text(acc.value(), a, c.core, in.residency);
  return kOk;
}

}  // namespace

Command register_account(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<AccountArgs>();
  auto* sub = app.add_subcommand(
      "account",
      "every byte of the core's writable memory in one category (live, leaked, free...)");
  add_dump_options(sub, c);
  sub->add_option("--by", a->by,
                  "break the heap's blocks down by: type (default), set (a profile's), site (with "
                  "--trace), module");
  sub->add_option("-p,--profile", a->profile,
                  "profile file (or NAME): blocks holding its objects take their type and set");
  sub->add_option("--set", a->sets, "only these sets of the profile")->delimiter(',');
  sub->add_option(
      "--trace", a->traces,
      "allocation trace (leakref-trace --malloc, mmleak, bcc, mtrace), for --by site or "
      "module (the allocating frame's)");
  sub->add_option("--top", a->top, "largest entries listed under each category (default 10)");
  sub->add_option("--depth", a->depth, "levels of the table shown (default 3)");
  sub->add_option("--html", a->html, "also write the account as a treemap: one page, no scripts");
  sub->add_option("--smaps", a->smaps,
                  "the process's /proc/PID/smaps at capture (default: CORE.smaps), with --pagemap");
  sub->add_option("--pagemap", a->pagemap,
                  "its mappings' pagemap entries as leakref-snap saves them (default: "
                  "CORE.pagemap): a RESIDENT column");
  return {sub, [&c, a] { return cmd_account(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
