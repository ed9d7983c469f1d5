// `leakref retained CORE` (what holds the memory: the largest retainers with
// their paths from the roots, by type, the dominator tree below a place,
// the paths to a place or to every block of a type) and `leakref suspects
// CORE` (the nodes retaining a large part of the heap, alone or against a
// baseline dump), both on one retained-size tree (retained.hpp).
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>

#include "corelib/answers/retained.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/render.hpp"
#include "frontend/process/cmd_retained.hpp"
#include "frontend/process/retained_render.hpp"

namespace lrcli {

void add_retained_options(CLI::App* sub, RetainedArgs& a) {
  sub->add_option("--top", a.top, "rows listed, children shown per node (default 20)");
  sub->add_flag("--by-type", a.by_type, "retained size by type (blocks of a type counted once)");
  sub->add_option("--tree", a.tree,
                  "the dominator tree below PLACE (an address, a global, a holder, leaked, top)");
  sub->add_option("--depth", a.depth, "levels shown (default 2 for --tree, 12 for --paths-of)");
  sub->add_option("--path", a.path, "the shortest path from a root to PLACE, and its dominators");
  sub->add_option("--paths-of", a.paths_of, "the shortest paths to every block of TYPE, merged");
  sub->add_option("--group", a.group,
                  "what every block of TYPE (or at PLACE) retains together: repeat it for "
                  "several")
      ->delimiter('\0');
  sub->add_option("--export", a.export_file,
                  "write the whole graph (nodes with their dominators, edges) as JSON to FILE");
  sub->add_option("--html", a.html,
                  "also write the tree as a page to FILE: a chart of retained sizes, the "
                  "suspects, the holders");
  sub->add_flag("--all-roots", a.all_roots,
                "count every register's references (by default a register holds only blocks "
                "nothing else reaches)");
  sub->add_option("--fail-on", a.fail_on, "exit 1 if: partial")->delimiter(',');
}

std::string retained_args_error(const RetainedArgs& a) {
  for (const auto& f : a.fail_on)
    if (f != "partial" && f != "any") return "--fail-on: unknown finding '" + f + "'";
  const int views =
      !a.tree.empty() + !a.path.empty() + !a.paths_of.empty() + a.by_type + !a.group.empty();
  if (views > 1) return "retained: one of --tree, --path, --paths-of, --by-type, --group";
  return "";
}

namespace {

using nlohmann::ordered_json;

// A core and its tree, built once, and the view rendering them.
struct Opened {
  lr::IndexedCore core;
  std::unique_ptr<lr::KnownObjects> none = std::make_unique<lr::KnownObjects>();
  std::unique_ptr<lr::RefNamer> names;
  std::unique_ptr<lr::RetainedNamer> namer;
  lr::RetainedTree tree;
  std::unique_ptr<RetainedView> view;
};

lr::Result<std::unique_ptr<Opened>> open_tree(const DumpOptions& c, const std::string& core,
                                              bool all_roots = false) {
  DumpOptions d = c;
  d.core = core;
  auto o = open_indexed_core(d);
  if (!o.ok()) return o.error();
  auto out = std::make_unique<Opened>();
  out->core = std::move(o).value();
  out->names = std::make_unique<lr::RefNamer>(out->core, *out->none);
  auto t = lr::retained_tree(out->core, *out->names, all_roots);
  if (!t.ok()) return t.error();
  out->tree = std::move(t).value();
  auto& w = out->core.warnings;
  w.insert(w.end(), out->tree.warnings.begin(), out->tree.warnings.end());
  out->namer = lr::retained_namer(out->core, *out->names);
  out->view.reset(new RetainedView{out->tree, *out->namer, out_stdout(), core, out->core.warnings,
                                   out->core.ci.index->stats().build_ns});
  return out;
}

int cmd_retained(const DumpOptions& c, const RetainedArgs& a) {
  if (std::string bad = retained_args_error(a); !bad.empty()) return fail_usage(bad);
  auto o = open_tree(c, c.core, a.all_roots);
  if (!o.ok()) return fail(o.error());
  return render_retained(*o.value()->view, a, c.json, out_stderr());
}

struct SuspectsArgs {
  double threshold = 10;
  std::string baseline;
  double min_growth = 1;
  size_t top = 20;
  std::vector<std::string> fail_on;
};

struct Growth {
  uint64_t key = 0;
  uint32_t example = 0;  // a node of the place, in the newer tree
  uint64_t before = 0, after = 0, count_before = 0, count_after = 0;
  int64_t delta() const { return static_cast<int64_t>(after) - static_cast<int64_t>(before); }
};

// The places whose retained size grew since `base`, by at least `min` bytes,
// most first.
std::vector<Growth> growth(const Opened& base, const Opened& now, uint64_t min) {
  const auto b = lr::retained_by_place(base.tree, 0);
  const auto a = lr::retained_by_place(now.tree, min);
  std::vector<Growth> out;
  for (const auto& [k, p] : a) {
    Growth g{k, p.example, 0, p.retained, 0, p.count};
    if (auto it = b.find(k); it != b.end())
      g.before = it->second.retained, g.count_before = it->second.count;
    if (g.delta() >= static_cast<int64_t>(min)) out.push_back(g);
  }
  // Equal growth: the outer place first (it retains the inner), then by key.
  std::vector<uint32_t> depth(now.tree.nodes(), 0);
  now.tree.top_down([&](uint32_t v) {
    if (v != now.tree.top()) depth[v] = depth[now.tree.idom(v)] + 1;
  });
  std::sort(out.begin(), out.end(), [&](const Growth& x, const Growth& y) {
    if (x.delta() != y.delta()) return x.delta() > y.delta();
    const uint32_t dx = depth[x.example], dy = depth[y.example];
    return dx != dy ? dx < dy : x.key < y.key;
  });
  return out;
}

int cmd_suspects(const DumpOptions& c, const SuspectsArgs& a) {
  for (const auto& f : a.fail_on)
    if (f != "suspects" && f != "growth" && f != "partial" && f != "any")
      return fail_usage("--fail-on: unknown finding '" + f + "'");
  if (!(a.threshold > 0 && a.threshold <= 100))
    return fail_usage("--threshold: a percentage in (0, 100]");
  auto o = open_tree(c, c.core);
  if (!o.ok()) return fail(o.error());
  const Opened& op = *o.value();
  const auto suspects = lr::leak_suspects(op.tree, a.threshold / 100);
  std::unique_ptr<Opened> base;
  std::vector<Growth> grown;
  std::vector<std::string> partial = op.tree.partial;
  if (!a.baseline.empty()) {
    auto b = open_tree(c, a.baseline);
    if (!b.ok()) return fail(b.error());
    base = std::move(b).value();
    // Places match only within one program: another build's types and
    // globals would read as growth.
    const lr::Module* be = base->core.prog->modules().exe();
    const lr::Module* ne = op.core.prog->modules().exe();
    if (!be || !ne || be->build_id.empty() || be->build_id != ne->build_id)
      return fail(lr::make_error(
          lr::Errc::kInvalidArgument,
          "--baseline " + a.baseline + ": not a core of the same executable (build-ids " +
              (be ? be->build_id : "?") + " and " + (ne ? ne->build_id : "?") + ")"));
    for (const auto& p : base->tree.partial) partial.push_back("baseline: " + p);
    const uint64_t min = static_cast<uint64_t>(a.min_growth / 100 * op.tree.heap_bytes());
    grown = growth(*base, op, std::max<uint64_t>(min, 1));
  }
  if (c.json) {
    ordered_json s = ordered_json::array(), g = ordered_json::array();
    for (const auto& x : suspects) s.push_back(suspect_json(*op.view, x));
    for (size_t i = 0; i < grown.size() && i < a.top; ++i)
      g.push_back({{"place", lr::place_text(op.tree, grown[i].example)},
                   {"retained_before", grown[i].before},
                   {"retained_after", grown[i].after},
                   {"growth", grown[i].delta()},
                   {"count_before", grown[i].count_before},
                   {"count_after", grown[i].count_after}});
    ordered_json j{{"schema", "leakref.suspects/1"}, {"core", c.core}};
    j["baseline"] = a.baseline.empty() ? ordered_json(nullptr) : ordered_json(a.baseline);
    j["threshold"] = a.threshold;
    j["partial"] = !partial.empty();
    j["partial_reasons"] = partial;
    j["heap"] = heap_json(*op.view);
    j["suspects"] = std::move(s);
    if (base) j["growth"] = std::move(g);
    j["warnings"] = op.core.warnings;
    out_stdout().print("{}\n", json_text(j, 1));
  } else {
    print_warnings_text(op.core.warnings);
    headline(*op.view);
    for (const auto& p : partial)
      if (p.rfind("baseline: ", 0) == 0) out_stdout().print("partial: {}\n", p);
    out_stdout().print("\n{} suspects (each retains at least {}% of the heap):\n", suspects.size(),
                       a.threshold);
    for (size_t i = 0; i < suspects.size(); ++i) {
      out_stdout().print("{}. {}\n", i + 1, suspect_text(*op.view, suspects[i]));
      out_stdout().print("   path: {}\n",
                         path_line(*op.view, op.tree.shortest_path(suspects[i].accumulation)));
    }
    if (base) {
      out_stdout().print(
          "\nsince {} ({} -> {} heap bytes), these places grew by at least {}% of the heap "
          "(matched by holder and the types of their dominators):\n",
          a.baseline, base->tree.heap_bytes(), op.tree.heap_bytes(), a.min_growth);
      out_stdout().print("{:>14} {:>14} {:>14} {:>9}  {}\n", "GROWTH", "BEFORE", "AFTER", "NODES",
                         "PLACE");
      for (size_t i = 0; i < grown.size() && i < a.top; ++i)
        out_stdout().print("{:>+14} {:>14} {:>14} {:>9}  {}\n", grown[i].delta(), grown[i].before,
                           grown[i].after,
                           fmt::format("{}->{}", grown[i].count_before, grown[i].count_after),
                           lr::place_text(op.tree, grown[i].example));
      if (grown.empty()) out_stdout().print("(none)\n");
    }
  }
  if (!a.fail_on.empty() && !partial.empty()) return kFindings;
  if (fail_on_wants(a.fail_on, "suspects") && !suspects.empty()) return kFindings;
  return fail_on_wants(a.fail_on, "growth") && !grown.empty() ? kFindings : kOk;
}

}  // namespace

Command register_retained(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<RetainedArgs>();
  auto* sub = app.add_subcommand(
      "retained", "what holds the heap: dominator tree, retained sizes, paths from the roots");
  add_dump_options(sub, c);
  add_retained_options(sub, *a);
  return {sub, [&c, a] { return cmd_retained(c, *a); }, [&c] { return c.json; }};
}

Command register_suspects(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<SuspectsArgs>();
  auto* sub = app.add_subcommand(
      "suspects", "leak suspects: what retains a large part of the heap, or grew since a baseline");
  add_dump_options(sub, c);
  sub->add_option("--threshold", a->threshold,
                  "a suspect retains at least this % of the heap (default 10)");
  sub->add_option("--baseline", a->baseline,
                  "an earlier core of the same program: the places whose retained size grew");
  sub->add_option("--min-growth", a->min_growth,
                  "with --baseline: growth listed from this % of the heap (default 1)");
  sub->add_option("--top", a->top, "growth rows listed (default 20)");
  sub->add_option("--fail-on", a->fail_on, "exit 1 if: suspects, growth, partial")->delimiter(',');
  return {sub, [&c, a] { return cmd_suspects(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
