// The views of a retained-size tree (retained_render.hpp), and the
// arguments of `retained` (cmd_retained.hpp).
#include "frontend/process/retained_render.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "frontend/base/errors.hpp"
#include "frontend/base/render.hpp"

namespace lrcli {

using nlohmann::ordered_json;

lr::Result<std::vector<uint8_t>> retained_group(const RetainedView& o, const RetainedArgs& a) {
  const auto& t = o.tree;
  std::vector<uint8_t> in(t.blocks(), 0);
  for (const std::string& g : a.group) {
    size_t n = 0;
    for (uint32_t b = 0; b < t.blocks(); ++b)
      if (t.type(b) == g) in[b] = 1, ++n;
    if (n) continue;
    auto v = lr::find_node(t, o.namer, g);
    if (!v.ok())
      return lr::make_error(lr::Errc::kNotFound,
                            "--group " + g + ": no block of that type, and " + v.error().message);
    if (!t.is_block(v.value()))
      return lr::make_error(lr::Errc::kInvalidArgument,
                            "--group " + g + ": not a block (a holder's blocks are --tree's)");
    in[v.value()] = 1;
  }
  return in;
}

lr::Result<uint32_t> retained_place(const RetainedView& o, const RetainedArgs& a) {
  const std::string& p = !a.tree.empty() ? a.tree : a.path;
  if (p.empty()) return o.tree.top();
  return lr::find_node(o.tree, o.namer, p);
}

namespace {

// `path` is the dump itself (or what a link to it names).
bool is_input(const RetainedView& o, const std::string& path) {
  struct stat a {
  }, b{};
  return stat(path.c_str(), &a) == 0 && stat(o.source.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

lr::Result<void> write_html(const RetainedView& o, const std::string& path, size_t top) {
  if (is_input(o, path))
    return lr::make_error(lr::Errc::kInvalidArgument,
                          path + ": is the " + o.input + "; not overwritten");
  std::ofstream f(path, std::ios::trunc);
  f << retained_html(o, top);
  f.close();
  if (!f) return lr::make_error(lr::Errc::kIo, path + ": cannot write the page");
  return {};
}

}  // namespace

int render_retained(const RetainedView& o, const RetainedArgs& a, bool json, Out& err) {
  auto place = retained_place(o, a);
  if (!place.ok()) return fail(place.error(), err);
  std::optional<lr::GroupRetained> group;
  if (!a.group.empty()) {
    auto in = retained_group(o, a);
    if (!in.ok()) return fail(in.error(), err);
    group = lr::group_retained(o.tree, in.value());
  }
  const lr::GroupRetained* g = group ? &*group : nullptr;
  if (!a.export_file.empty())
    if (auto r = export_graph(o, a.export_file); !r.ok()) return fail(r.error(), err);
  if (!a.html.empty())
    if (auto r = write_html(o, a.html, a.top); !r.ok()) return fail(r.error(), err);
  if (json) {
    retained_json(o, a, place.value(), g);
  } else {
    print_warnings_text(o.warnings, err);
    retained_text(o, a, place.value(), g);
  }
  return !a.fail_on.empty() && !o.tree.partial.empty() ? kFindings : kOk;
}

std::string pct(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / whole) : "-";
}

// One line: "global g [fx] > 0x... struct t (64 bytes) .next > ...".
std::string path_line(const RetainedView& o, const std::vector<uint32_t>& p) {
  std::string s;
  for (size_t i = 1; i < p.size(); ++i) {
    if (i > 1) {
      const std::string e = o.namer.edge(o.tree, p[i - 1], p[i]);
      s += e.empty() ? " > " : " " + e + " > ";
    }
    s += lr::node_text(o.tree, p[i]);
  }
  return s;
}

ordered_json path_json(const RetainedView& o, const std::vector<uint32_t>& p) {
  ordered_json a = ordered_json::array();
  for (size_t i = 1; i < p.size(); ++i) {
    const std::string e = i > 1 ? o.namer.edge(o.tree, p[i - 1], p[i]) : "";
    a.push_back({{"node", lr::node_id(o.tree, p[i])},
                 {"text", lr::node_text(o.tree, p[i])},
                 {"via", e.empty() ? ordered_json(nullptr) : ordered_json(e)}});
  }
  return a;
}

ordered_json node_json(const RetainedView& o, uint32_t v) {
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
void top_text(const RetainedView& o, size_t n) {
  const auto& t = o.tree;
  const auto holders = t.children(t.top(), n);
  o.out.print("\n{:>14} {:>7} {:>9}  {}\n", "RETAINED", "%", "BLOCKS", "DIRECTLY BELOW THE ROOTS");
  for (size_t i = 0; i < holders.size() && i < n; ++i)
    o.out.print("{:>14} {:>7} {:>9}  {}\n", t.retained(holders[i]),
                pct(t.retained(holders[i]), t.heap_bytes()), t.retained_blocks(holders[i]),
                lr::node_text(t, holders[i]));
  if (holders.size() > n) o.out.print("... {} more (--top N)\n", holders.size() - n);
}

void biggest_text(const RetainedView& o, size_t n) {
  const auto& t = o.tree;
  o.out.print("\n{:>14} {:>7} {:>9} {:>10}  {}\n", "RETAINED", "%", "BLOCKS", "SHALLOW",
              "BLOCK, AND ITS SHORTEST PATH FROM A ROOT");
  for (uint32_t v : lr::biggest_blocks(t, n)) {
    o.out.print("{:>14} {:>7} {:>9} {:>10}  {}\n", t.retained(v),
                pct(t.retained(v), t.heap_bytes()), t.retained_blocks(v), t.shallow(v),
                lr::node_text(t, v));
    o.out.print("{:>44}{}\n", "", path_line(o, t.shortest_path(v)));
  }
}

void by_type_text(const RetainedView& o, size_t n) {
  const auto rows = lr::retained_by_type(o.tree);
  o.out.print("\n{:>14} {:>7} {:>9} {:>12}  {}\n", "RETAINED", "%", "COUNT", "SHALLOW", "TYPE");
  for (size_t i = 0; i < rows.size() && i < n; ++i)
    o.out.print("{:>14} {:>7} {:>9} {:>12}  {}\n", rows[i].retained,
                pct(rows[i].retained, o.tree.heap_bytes()), rows[i].count, rows[i].shallow,
                rows[i].type);
  if (rows.size() > n) o.out.print("... {} more types (--top N)\n", rows.size() - n);
}

// An indented tree, `depth` levels below `v`, at most `n` children a node:
// `kids(u)` gives a node's children in the order shown, `line(u, d)` its
// line.
template <class Kids, class Line>
void indented(Out& out, uint32_t v, size_t depth, size_t n, const Kids& kids, const Line& line) {
  struct Item {
    uint32_t node;
    size_t depth, more;  // more: a "... N more" line instead of a node
  };
  std::vector<Item> stack = {{v, 0, 0}};
  while (!stack.empty() && !out.failed()) {
    const Item it = stack.back();
    stack.pop_back();
    const std::string pad(2 * it.depth, ' ');
    if (it.more) {
      out.print("{}... {} more (--top N)\n", pad, it.more);
      continue;
    }
    out.print("{}{}\n", pad, line(it.node));
    if (it.depth == depth) continue;
    const auto k = kids(it.node);
    if (k.size() > n) stack.push_back({0, it.depth + 1, k.size() - n});
    for (size_t i = std::min(n, k.size()); i-- > 0;) stack.push_back({k[i], it.depth + 1, 0});
  }
}

void tree_text(const RetainedView& o, uint32_t v, size_t depth, size_t n) {
  const auto& t = o.tree;
  indented(
      o.out, v, depth, n, [&](uint32_t u) { return t.children(u, n); },
      [&](uint32_t u) {
        return fmt::format("{} retains {} bytes in {} blocks ({})", lr::node_text(t, u),
                           t.retained(u), t.retained_blocks(u), pct(t.retained(u), t.heap_bytes()));
      });
}

ordered_json tree_json(const RetainedView& o, uint32_t v, size_t depth, size_t n) {
  ordered_json rows = ordered_json::array();
  std::vector<std::pair<uint32_t, size_t>> stack = {{v, 0}};
  while (!stack.empty()) {
    auto [u, d] = stack.back();
    stack.pop_back();
    ordered_json j = node_json(o, u);
    j["depth"] = d;
    j["children"] = o.tree.children_unsorted(u).size();
    rows.push_back(std::move(j));
    if (d == depth) continue;
    const auto k = o.tree.children(u, n);
    for (size_t i = std::min(n, k.size()); i-- > 0;) stack.emplace_back(k[i], d + 1);
  }
  return rows;
}

void path_text(const RetainedView& o, uint32_t v) {
  const auto& t = o.tree;
  const auto p = t.shortest_path(v);
  o.out.print("{}\nshortest path from a root ({} steps):\n", lr::node_text(t, v),
              p.size() > 2 ? p.size() - 2 : 0);
  for (size_t i = 1; i < p.size(); ++i) {
    const std::string e = i > 1 ? o.namer.edge(t, p[i - 1], p[i]) : "";
    o.out.print("  {}{}{}\n", i > 1 ? "-> " : "", lr::node_text(t, p[i]),
                e.empty() ? "" : "  via " + e);
  }
  const auto d = t.dominators(v);
  o.out.print("dominators (freeing any of them frees it):\n");
  for (size_t i = 1; i < d.size(); ++i)
    o.out.print("  {} retains {} bytes\n", lr::node_text(t, d[i]), t.retained(d[i]));
}

void group_text(const RetainedView& o, const lr::GroupRetained& g, size_t n) {
  o.out.print(
      "{} blocks of {} bytes retain {} bytes in {} blocks together ({}): what freeing them all "
      "would free\n",
      g.blocks, g.shallow, g.retained, g.retained_blocks, pct(g.retained, o.tree.heap_bytes()));
  o.out.print("\n{:>14} {:>9}  TYPE (of the retained set)\n", "BYTES", "BLOCKS");
  for (size_t i = 0; i < g.by_type.size() && i < n && !o.out.failed(); ++i)
    o.out.print("{:>14} {:>9}  {}\n", g.by_type[i].shallow, g.by_type[i].count, g.by_type[i].type);
  if (g.by_type.size() > n) o.out.print("... {} more types (--top N)\n", g.by_type.size() - n);
  if (g.shared.empty()) return;
  o.out.print("\npointed at by the set but held around the group too (so not in it):\n");
  for (size_t i = 0; i < g.shared.size() && i < n && !o.out.failed(); ++i) {
    const auto& s = g.shared[i];
    o.out.print("{:>14} {:>9}  {}\n{:>26}e.g. {}\n", s.bytes, s.count, s.type, "",
                path_line(o, s.path));
  }
  if (g.shared.size() > n) o.out.print("... {} more types (--top N)\n", g.shared.size() - n);
}

ordered_json group_json(const RetainedView& o, const lr::GroupRetained& g,
                        const std::vector<std::string>& names) {
  ordered_json rows = ordered_json::array(), shared = ordered_json::array();
  for (const auto& r : g.by_type)
    rows.push_back({{"type", r.type}, {"count", r.count}, {"bytes", r.shallow}});
  for (const auto& s : g.shared)
    shared.push_back({{"type", s.type},
                      {"count", s.count},
                      {"bytes", s.bytes},
                      {"example", node_json(o, s.example)},
                      {"path", path_json(o, s.path)}});
  return {{"of", names},
          {"blocks", g.blocks},
          {"shallow", g.shallow},
          {"retained", g.retained},
          {"retained_blocks", g.retained_blocks},
          {"by_type", std::move(rows)},
          {"shared", std::move(shared)}};
}

void paths_of_text(const RetainedView& o, const lr::MergedPaths& m, const std::string& type,
                   size_t depth, size_t n) {
  const auto& t = o.tree;
  o.out.print("{} blocks of type {}: their shortest paths from the roots, merged\n", m.blocks,
              type);
  if (!m.blocks) return;
  indented(
      o.out, t.top(), depth, n,
      [&](uint32_t u) {
        auto it = m.next.find(u);
        return it == m.next.end() ? std::vector<uint32_t>() : it->second;
      },
      [&](uint32_t u) {
        const std::string e = u == t.top() ? "" : o.namer.edge(t, t.path_parent(u), u);
        return fmt::format("{}: {}{}", m.count.at(u), lr::node_text(t, u),
                           e.empty() ? "" : "  via " + e);
      });
}

ordered_json paths_of_json(const RetainedView& o, const lr::MergedPaths& m, size_t depth,
                           size_t n) {
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
lr::Result<void> export_graph(const RetainedView& o, const std::string& path) {
  // Never over an input: the dump (or what a link to it names).
  if (is_input(o, path))
    return lr::make_error(lr::Errc::kInvalidArgument,
                          path + ": is the " + o.input + "; not overwritten");
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

ordered_json heap_json(const RetainedView& o) {
  const auto& t = o.tree;
  return {{"blocks", t.blocks()},
          {"bytes", t.heap_bytes()},
          {"holders", t.stats.holders},
          {"register_refs_set_aside", t.stats.weak_set_aside},
          {"leaked_bytes", t.retained(t.leaked())},
          {"leaked_blocks", t.retained_blocks(t.leaked())}};
}

ordered_json stats_json(const RetainedView& o) {
  const auto& s = o.tree.stats;
  return {{"index_ns", o.index_ns},           {"graph_ns", s.graph_ns},
          {"dominators_ns", s.dominators_ns}, {"sizes_ns", s.sizes_ns},
          {"types_ns", s.types_ns},           {"paths_ns", o.tree.paths_ns()},
          {"leak_entries", s.leak_entries}};
}

void headline(const RetainedView& o) {
  const auto& t = o.tree;
  o.out.print(
      "{}{} {}, {} bytes, held through {} holders of root references; {} bytes in {} "
      "{} no root reaches (leaked)\n",
      t.partial.empty() ? "" : "partial: ", t.blocks(), o.noun, t.heap_bytes(), t.stats.holders,
      t.retained(t.leaked()), t.retained_blocks(t.leaked()), o.short_noun);
  for (const auto& p : t.partial) o.out.print("partial: {}\n", p);
  if (t.stats.weak_set_aside)
    o.out.print(
        "registers hold only what nothing else reaches: {} of their references set aside "
        "(--all-roots counts them)\n",
        t.stats.weak_set_aside);
}

int retained_text(const RetainedView& o, const RetainedArgs& a, uint32_t place,
                  const lr::GroupRetained* group) {
  headline(o);
  if (group) {
    o.out.put("\n");
    group_text(o, *group, a.top);
  } else if (!a.tree.empty()) {
    o.out.put("\n");
    tree_text(o, place, a.depth ? a.depth : 2, a.top);
  } else if (!a.path.empty()) {
    o.out.put("\n");
    path_text(o, place);
  } else if (!a.paths_of.empty()) {
    o.out.put("\n");
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

void retained_json(const RetainedView& o, const RetainedArgs& a, uint32_t place,
                   const lr::GroupRetained* group) {
  const auto& t = o.tree;
  ordered_json j{{"schema", "leakref.retained/1"},
                 {"core", o.source},
                 {"partial", !t.partial.empty()},
                 {"partial_reasons", t.partial},
                 {"heap", heap_json(o)}};
  if (group) {
    j["group"] = group_json(o, *group, a.group);
  } else if (!a.tree.empty()) {
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
    const auto top = t.children(t.top(), a.top);
    for (size_t i = 0; i < top.size() && i < a.top; ++i) h.push_back(node_json(o, top[i]));
    for (uint32_t v : lr::biggest_blocks(t, a.top)) {
      ordered_json n = node_json(o, v);
      n["path"] = path_json(o, t.shortest_path(v));
      b.push_back(std::move(n));
    }
    j["holders"] = std::move(h);
    j["biggest"] = std::move(b);
  }
  j["stats"] = stats_json(o);
  j["warnings"] = o.warnings;
  o.out.print("{}\n", json_text(j, 1));
}

// One sentence and its path.
std::string suspect_text(const RetainedView& o, const lr::Suspect& s) {
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

ordered_json suspect_json(const RetainedView& o, const lr::Suspect& s) {
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

}  // namespace lrcli
