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

namespace lrcli {

namespace {

using nlohmann::ordered_json;

struct RetainedArgs {
  size_t top = 20;
  bool by_type = false;
  std::string tree, path, paths_of, export_file;
  size_t depth = 2;
  std::vector<std::string> fail_on;
};

// A core and its tree, built once.
struct Opened {
  lr::IndexedCore core;
  std::unique_ptr<lr::KnownObjects> none = std::make_unique<lr::KnownObjects>();
  std::unique_ptr<lr::RefNamer> names;
  lr::RetainedTree tree;
};

lr::Result<std::unique_ptr<Opened>> open_tree(const DumpOptions& c, const std::string& core) {
  DumpOptions d = c;
  d.core = core;
  auto o = open_indexed_core(d);
  if (!o.ok()) return o.error();
  auto out = std::make_unique<Opened>();
  out->core = std::move(o).value();
  out->names = std::make_unique<lr::RefNamer>(out->core, *out->none);
  auto t = lr::retained_tree(out->core, *out->names);
  if (!t.ok()) return t.error();
  out->tree = std::move(t).value();
  return out;
}

std::string pct(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / whole) : "-";
}

// One line: "global g [fx] > 0x... struct t (64 bytes) .next > ...".
std::string path_line(const Opened& o, const std::vector<uint32_t>& p) {
  std::string s;
  for (size_t i = 1; i < p.size(); ++i) {
    if (i > 1) {
      const std::string e = lr::edge_text(o.tree, *o.names, p[i - 1], p[i]);
      s += e.empty() ? " > " : " " + e + " > ";
    }
    s += lr::node_text(o.tree, p[i]);
  }
  return s;
}

ordered_json path_json(const Opened& o, const std::vector<uint32_t>& p) {
  ordered_json a = ordered_json::array();
  for (size_t i = 1; i < p.size(); ++i) {
    const std::string e = i > 1 ? lr::edge_text(o.tree, *o.names, p[i - 1], p[i]) : "";
    a.push_back({{"node", lr::node_id(o.tree, p[i])},
                 {"text", lr::node_text(o.tree, p[i])},
                 {"via", e.empty() ? ordered_json(nullptr) : ordered_json(e)}});
  }
  return a;
}

ordered_json node_json(const Opened& o, uint32_t v) {
  const auto& t = o.tree;
  const char* kind = t.is_block(v)     ? "block"
                     : v == t.top()    ? "top"
                     : v == t.leaked() ? "leaked"
                                       : "holder";
  ordered_json j{{"node", lr::node_id(t, v)}, {"kind", kind}};
  if (t.is_block(v)) j["type"] = t.type(v), j["size"] = t.shallow(v);
  if (kind == std::string("holder")) j["holder_kind"] = lr::ref_from_name(t.holder(v).kind);
  j["retained"] = t.retained(v);
  j["retained_blocks"] = t.retained_blocks(v);
  j["idom"] = lr::node_id(t, t.idom(v));
  return j;
}

// The holders and the blocks retaining most, each block with its path.
void top_text(const Opened& o, size_t n) {
  const auto& t = o.tree;
  std::vector<uint32_t> holders(t.children(t.top()).begin(), t.children(t.top()).end());
  out_stdout().print("\n{:>14} {:>7} {:>9}  {}\n", "RETAINED", "%", "BLOCKS",
                     "DIRECTLY BELOW THE ROOTS");
  for (size_t i = 0; i < holders.size() && i < n; ++i)
    out_stdout().print("{:>14} {:>7} {:>9}  {}\n", t.retained(holders[i]),
                       pct(t.retained(holders[i]), t.heap_bytes()), t.retained_blocks(holders[i]),
                       lr::node_text(t, holders[i]));
  if (holders.size() > n) out_stdout().print("... {} more (--top N)\n", holders.size() - n);
}

std::vector<uint32_t> biggest_blocks(const lr::RetainedTree& t, size_t n) {
  std::vector<uint32_t> b(t.blocks());
  for (uint32_t i = 0; i < b.size(); ++i) b[i] = i;
  const size_t k = std::min(n, b.size());
  std::partial_sort(b.begin(), b.begin() + k, b.end(), [&](uint32_t x, uint32_t y) {
    return t.retained(x) != t.retained(y) ? t.retained(x) > t.retained(y) : x < y;
  });
  b.resize(k);
  return b;
}

void biggest_text(const Opened& o, size_t n) {
  const auto& t = o.tree;
  out_stdout().print("\n{:>14} {:>7} {:>9} {:>10}  {}\n", "RETAINED", "%", "BLOCKS", "SHALLOW",
                     "BLOCK, AND ITS SHORTEST PATH FROM A ROOT");
  for (uint32_t v : biggest_blocks(t, n)) {
    out_stdout().print("{:>14} {:>7} {:>9} {:>10}  {}\n", t.retained(v),
                       pct(t.retained(v), t.heap_bytes()), t.retained_blocks(v), t.shallow(v),
                       lr::node_text(t, v));
    out_stdout().print("{:>44}{}\n", "", path_line(o, t.shortest_path(v)));
  }
}

void by_type_text(const Opened& o, size_t n) {
  const auto rows = lr::retained_by_type(o.tree);
  out_stdout().print("\n{:>14} {:>7} {:>9} {:>12}  {}\n", "RETAINED", "%", "COUNT", "SHALLOW",
                     "TYPE");
  for (size_t i = 0; i < rows.size() && i < n; ++i)
    out_stdout().print("{:>14} {:>7} {:>9} {:>12}  {}\n", rows[i].retained,
                       pct(rows[i].retained, o.tree.heap_bytes()), rows[i].count, rows[i].shallow,
                       rows[i].type);
  if (rows.size() > n) out_stdout().print("... {} more types (--top N)\n", rows.size() - n);
}

// An indented tree, `depth` levels below `v`, at most `n` children a node:
// `kids(u)` gives a node's children in the order shown, `line(u, d)` its
// line.
template <class Kids, class Line>
void indented(uint32_t v, size_t depth, size_t n, const Kids& kids, const Line& line) {
  struct Item {
    uint32_t node;
    size_t depth, more;  // more: a "... N more" line instead of a node
  };
  std::vector<Item> stack = {{v, 0, 0}};
  while (!stack.empty() && !out_stdout().failed()) {
    const Item it = stack.back();
    stack.pop_back();
    const std::string pad(2 * it.depth, ' ');
    if (it.more) {
      out_stdout().print("{}... {} more (--top N)\n", pad, it.more);
      continue;
    }
    out_stdout().print("{}{}\n", pad, line(it.node));
    if (it.depth == depth) continue;
    const std::vector<uint32_t> k = kids(it.node);
    if (k.size() > n) stack.push_back({0, it.depth + 1, k.size() - n});
    for (size_t i = std::min(n, k.size()); i-- > 0;) stack.push_back({k[i], it.depth + 1, 0});
  }
}

void tree_text(const Opened& o, uint32_t v, size_t depth, size_t n) {
  const auto& t = o.tree;
  indented(
      v, depth, n,
      [&](uint32_t u) { return std::vector<uint32_t>(t.children(u).begin(), t.children(u).end()); },
      [&](uint32_t u) {
        return fmt::format("{} retains {} bytes in {} blocks ({})", lr::node_text(t, u),
                           t.retained(u), t.retained_blocks(u), pct(t.retained(u), t.heap_bytes()));
      });
}

ordered_json tree_json(const Opened& o, uint32_t v, size_t depth, size_t n) {
  ordered_json rows = ordered_json::array();
  std::vector<std::pair<uint32_t, size_t>> stack = {{v, 0}};
  while (!stack.empty()) {
    auto [u, d] = stack.back();
    stack.pop_back();
    ordered_json j = node_json(o, u);
    j["depth"] = d;
    j["children"] = o.tree.children(u).size();
    rows.push_back(std::move(j));
    if (d == depth) continue;
    const auto k = o.tree.children(u);
    for (size_t i = std::min(n, k.size()); i-- > 0;) stack.emplace_back(k[i], d + 1);
  }
  return rows;
}

void path_text(const Opened& o, uint32_t v) {
  const auto& t = o.tree;
  const auto p = t.shortest_path(v);
  out_stdout().print("{}\nshortest path from a root ({} steps):\n", lr::node_text(t, v),
                     p.size() > 2 ? p.size() - 2 : 0);
  for (size_t i = 1; i < p.size(); ++i) {
    const std::string e = i > 1 ? lr::edge_text(t, *o.names, p[i - 1], p[i]) : "";
    out_stdout().print("  {}{}{}\n", i > 1 ? "-> " : "", lr::node_text(t, p[i]),
                       e.empty() ? "" : "  via " + e);
  }
  const auto d = t.dominators(v);
  out_stdout().print("dominators (freeing any of them frees it):\n");
  for (size_t i = 1; i < d.size(); ++i)
    out_stdout().print("  {} retains {} bytes\n", lr::node_text(t, d[i]), t.retained(d[i]));
}

void paths_of_text(const Opened& o, const lr::MergedPaths& m, const std::string& type, size_t depth,
                   size_t n) {
  const auto& t = o.tree;
  out_stdout().print("{} blocks of type {}: their shortest paths from the roots, merged\n",
                     m.blocks, type);
  if (!m.blocks) return;
  indented(
      t.top(), depth, n,
      [&](uint32_t u) {
        auto it = m.next.find(u);
        return it == m.next.end() ? std::vector<uint32_t>() : it->second;
      },
      [&](uint32_t u) {
        const std::string e = u == t.top() ? "" : lr::edge_text(t, *o.names, t.path_parent(u), u);
        return fmt::format("{}: {}{}", m.count.at(u), lr::node_text(t, u),
                           e.empty() ? "" : "  via " + e);
      });
}

ordered_json paths_of_json(const Opened& o, const lr::MergedPaths& m, size_t depth, size_t n) {
  ordered_json rows = ordered_json::array();
  if (!m.blocks) return rows;
  std::vector<std::pair<uint32_t, size_t>> stack = {{o.tree.top(), 0}};
  while (!stack.empty()) {
    auto [u, d] = stack.back();
    stack.pop_back();
    rows.push_back({{"node", lr::node_id(o.tree, u)},
                    {"text", lr::node_text(o.tree, u)},
                    {"depth", d},
                    {"blocks", m.count.at(u)}});
    auto it = m.next.find(u);
    if (d == depth || it == m.next.end()) continue;
    for (size_t i = std::min(n, it->second.size()); i-- > 0;)
      stack.emplace_back(it->second[i], d + 1);
  }
  return rows;
}

// The whole graph for a check outside (networkx): each node with its idom
// and sizes, each edge that counts once.
lr::Result<void> export_graph(const Opened& o, const std::string& path, const std::string& core) {
  // Never over an input: the core (or what a link to it names).
  struct stat a {
  }, b{};
  if (stat(path.c_str(), &a) == 0 && stat(core.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return lr::make_error(lr::Errc::kInvalidArgument, path + ": is the core; not overwritten");
  std::ofstream f(path, std::ios::trunc);
  if (!f) return lr::make_error(lr::Errc::kIo, path + ": cannot write the graph");
  const auto& t = o.tree;
  f << "{\"schema\":\"leakref.retained-graph/1\",\"nodes\":[";
  for (uint32_t v = 0; v < t.nodes(); ++v) f << (v ? ",\n" : "\n") << json_text(node_json(o, v));
  f << "\n],\"edges\":[";
  bool first = true;
  for (uint32_t v = 0; v < t.nodes(); ++v) {
    std::vector<uint32_t> s(t.successors(v).begin(), t.successors(v).end());
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    const std::string from = json_text(nlohmann::json(lr::node_id(t, v)));
    for (uint32_t w : s) {
      if (!t.is_edge(v, w)) continue;
      f << (first ? "\n[" : ",\n[") << from << "," << json_text(nlohmann::json(lr::node_id(t, w)))
        << "]";
      first = false;
    }
  }
  f << "\n]}\n";
  f.close();
  if (!f) return lr::make_error(lr::Errc::kIo, path + ": cannot write the graph");
  return {};
}

ordered_json heap_json(const Opened& o) {
  const auto& t = o.tree;
  return {{"blocks", t.blocks()},
          {"bytes", t.heap_bytes()},
          {"holders", t.stats.holders},
          {"leaked_bytes", t.retained(t.leaked())},
          {"leaked_blocks", t.retained_blocks(t.leaked())}};
}

ordered_json stats_json(const Opened& o) {
  const auto& s = o.tree.stats;
  const auto& ix = o.core.ci.index->stats();
  return {{"index_ns", ix.build_ns},          {"graph_ns", s.graph_ns},
          {"dominators_ns", s.dominators_ns}, {"sizes_ns", s.sizes_ns},
          {"types_ns", s.types_ns},           {"paths_ns", o.tree.paths_ns()},
          {"leak_entries", s.leak_entries}};
}

void headline(const Opened& o) {
  const auto& t = o.tree;
  out_stdout().print(
      "{}{} heap blocks, {} bytes, held through {} holders of root references; {} bytes in {} "
      "blocks no root reaches (leaked)\n",
      t.partial.empty() ? "" : "partial: ", t.blocks(), t.heap_bytes(), t.stats.holders,
      t.retained(t.leaked()), t.retained_blocks(t.leaked()));
  for (const auto& p : t.partial) out_stdout().print("partial: {}\n", p);
}

int retained_text(const Opened& o, const RetainedArgs& a, uint32_t place) {
  headline(o);
  if (!a.tree.empty()) {
    out_stdout().put("\n");
    tree_text(o, place, a.depth ? a.depth : 2, a.top);
  } else if (!a.path.empty()) {
    out_stdout().put("\n");
    path_text(o, place);
  } else if (!a.paths_of.empty()) {
    out_stdout().put("\n");
    paths_of_text(o, lr::merged_paths(o.tree, a.paths_of), a.paths_of, a.depth ? a.depth : 12,
                  a.top);
  } else if (a.by_type) {
    by_type_text(o, a.top);
  } else {
    top_text(o, a.top);
    biggest_text(o, a.top);
  }
  return kOk;
}

void retained_json(const DumpOptions& c, const Opened& o, const RetainedArgs& a, uint32_t place) {
  const auto& t = o.tree;
  ordered_json j{{"schema", "leakref.retained/1"},
                 {"core", c.core},
                 {"partial", !t.partial.empty()},
                 {"partial_reasons", t.partial},
                 {"heap", heap_json(o)}};
  if (!a.tree.empty()) {
    j["tree"] = tree_json(o, place, a.depth ? a.depth : 2, a.top);
  } else if (!a.path.empty()) {
    j["path"] = {{"node", node_json(o, place)},
                 {"shortest", path_json(o, t.shortest_path(place))},
                 {"dominators", path_json(o, t.dominators(place))}};
  } else if (!a.paths_of.empty()) {
    const auto m = lr::merged_paths(t, a.paths_of);
    j["paths_of"] = {{"type", a.paths_of},
                     {"blocks", m.blocks},
                     {"paths", paths_of_json(o, m, a.depth ? a.depth : 12, a.top)}};
  } else if (a.by_type) {
    ordered_json rows = ordered_json::array();
    for (const auto& r : lr::retained_by_type(t))
      rows.push_back(
          {{"type", r.type}, {"count", r.count}, {"shallow", r.shallow}, {"retained", r.retained}});
    j["by_type"] = std::move(rows);
  } else {
    ordered_json h = ordered_json::array(), b = ordered_json::array();
    const auto top = t.children(t.top());
    for (size_t i = 0; i < top.size() && i < a.top; ++i) h.push_back(node_json(o, top[i]));
    for (uint32_t v : biggest_blocks(t, a.top)) {
      ordered_json n = node_json(o, v);
      n["path"] = path_json(o, t.shortest_path(v));
      b.push_back(std::move(n));
    }
    j["holders"] = std::move(h);
    j["biggest"] = std::move(b);
  }
  j["stats"] = stats_json(o);
  j["warnings"] = o.core.warnings;
  out_stdout().print("{}\n", json_text(j, 1));
}

int cmd_retained(const DumpOptions& c, const RetainedArgs& a) {
  for (const auto& f : a.fail_on)
    if (f != "partial" && f != "any") return fail_usage("--fail-on: unknown finding '" + f + "'");
  const int views = !a.tree.empty() + !a.path.empty() + !a.paths_of.empty() + a.by_type;
  if (views > 1) return fail_usage("retained: one of --tree, --path, --paths-of, --by-type");
  auto o = open_tree(c, c.core);
  if (!o.ok()) return fail(o.error());
  const Opened& op = *o.value();
  uint32_t place = op.tree.top();
  if (const std::string& p = !a.tree.empty() ? a.tree : a.path; !p.empty()) {
    auto n = lr::find_node(op.tree, *op.core.prog, p);
    if (!n.ok()) return fail(n.error());
    place = n.value();
  }
  if (!a.export_file.empty())
    if (auto r = export_graph(op, a.export_file, c.core); !r.ok()) return fail(r.error());
  if (c.json) {
    retained_json(c, op, a, place);
  } else {
    print_warnings_text(op.core.warnings);
    retained_text(op, a, place);
  }
  return !a.fail_on.empty() && !op.tree.partial.empty() ? kFindings : kOk;
}

struct SuspectsArgs {
  double threshold = 10;
  std::string baseline;
  double min_growth = 1;
  size_t top = 20;
  std::vector<std::string> fail_on;
};

// One sentence and its path.
std::string suspect_text(const Opened& o, const lr::Suspect& s) {
  const auto& t = o.tree;
  std::string line = fmt::format(
      "{} retains {} bytes ({} of the heap) in {} blocks.", lr::node_text(t, s.node),
      t.retained(s.node), pct(t.retained(s.node), t.heap_bytes()), t.retained_blocks(s.node));
  if (s.accumulation != s.node)
    line += fmt::format(" They accumulate in {}, which retains {} bytes.",
                        lr::node_text(t, s.accumulation), t.retained(s.accumulation));
  if (s.chain)
    line += fmt::format(" It heads a chain of {} more {}.", s.chain, t.type(s.accumulation));
  else if (!s.held.empty())
    line +=
        fmt::format(" Directly below it: {} {}, retaining {} bytes{}.", s.held[0].count,
                    s.held[0].type, s.held[0].retained,
                    s.held.size() > 1 ? fmt::format(" and {} other types", s.held.size() - 1) : "");
  return line;
}

ordered_json suspect_json(const Opened& o, const lr::Suspect& s) {
  ordered_json held = ordered_json::array();
  for (const auto& h : s.held)
    held.push_back({{"type", h.type}, {"count", h.count}, {"retained", h.retained}});
  return {{"node", node_json(o, s.node)},
          {"accumulation", node_json(o, s.accumulation)},
          {"held", std::move(held)},
          {"chain", s.chain},
          {"path", path_json(o, o.tree.shortest_path(s.accumulation))},
          {"text", suspect_text(o, s)}};
}

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
  for (uint32_t v : now.tree.order())
    if (v != now.tree.top()) depth[v] = depth[now.tree.idom(v)] + 1;
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
    for (const auto& x : suspects) s.push_back(suspect_json(op, x));
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
    j["heap"] = heap_json(op);
    j["suspects"] = std::move(s);
    if (base) j["growth"] = std::move(g);
    j["warnings"] = op.core.warnings;
    out_stdout().print("{}\n", json_text(j, 1));
  } else {
    print_warnings_text(op.core.warnings);
    headline(op);
    for (const auto& p : partial)
      if (p.rfind("baseline: ", 0) == 0) out_stdout().print("partial: {}\n", p);
    out_stdout().print("\n{} suspects (each retains at least {}% of the heap):\n", suspects.size(),
                       a.threshold);
    for (size_t i = 0; i < suspects.size(); ++i) {
      out_stdout().print("{}. {}\n", i + 1, suspect_text(op, suspects[i]));
      out_stdout().print("   path: {}\n",
                         path_line(op, op.tree.shortest_path(suspects[i].accumulation)));
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
  sub->add_option("--top", a->top, "rows listed, children shown per node (default 20)");
  sub->add_flag("--by-type", a->by_type, "retained size by type (blocks of a type counted once)");
  sub->add_option("--tree", a->tree,
                  "the dominator tree below PLACE (an address, a global, a holder, leaked, top)");
  sub->add_option("--depth", a->depth, "levels shown (default 2 for --tree, 12 for --paths-of)");
  sub->add_option("--path", a->path, "the shortest path from a root to PLACE, and its dominators");
  sub->add_option("--paths-of", a->paths_of, "the shortest paths to every block of TYPE, merged");
  sub->add_option("--export", a->export_file,
                  "write the whole graph (nodes with their dominators, edges) as JSON to FILE");
  sub->add_option("--fail-on", a->fail_on, "exit 1 if: partial")->delimiter(',');
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
