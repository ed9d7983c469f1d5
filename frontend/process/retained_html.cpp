// `retained --html FILE` (a process core's and a vmcore's): the tree as an
// icicle chart, one page with no scripts and nothing fetched. Row d holds
// the nodes d levels below the top, each as wide as its retained size, under
// its dominator; nodes too narrow to see are left to their parent's
// rectangle. Each rectangle's <title> gives its retained bytes and blocks.
// Below it: the leak suspects with their paths, and the largest retainers.
#include <fmt/format.h>

#include <iterator>

#include "corelib/answers/retained.hpp"
#include "frontend/base/render.hpp"
#include "frontend/process/retained_render.hpp"

namespace lrcli {

namespace {

constexpr double kChartW = 1160, kChartRowH = 30;
// Children at least a pixel wide are at most the chart's width in pixels:
// the largest that many and one more, in order, say where they end.
constexpr size_t kChartMost = static_cast<size_t>(kChartW) + 1;
constexpr size_t kChartRows = 6;
constexpr const char* kChartColour[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                        "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

// The chart: the top's children in row 0, theirs in row 1, ...; a node's
// children laid out left to right inside its span.
void icicle(fmt::memory_buffer& b, const RetainedView& o) {
  const auto& t = o.tree;
  auto out = std::back_inserter(b);
  fmt::format_to(out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                 "viewBox=\"0 0 {0} {1}\">\n",
                 kChartW, kChartRowH * kChartRows);
  const double total = static_cast<double>(t.heap_bytes());
  struct Item {
    uint32_t node;
    double x, w;
    size_t row, colour;
  };
  std::vector<Item> todo;
  double x = 0;
  size_t c = 0;
  for (uint32_t v : t.children(t.top(), kChartMost)) {
    const double w = total ? kChartW * static_cast<double>(t.retained(v)) / total : 0;
    if (w < 1) break;  // children by size: the rest are narrower
    todo.push_back({v, x, w, 0, c++ % std::size(kChartColour)});
    x += w;
  }
  while (!todo.empty()) {
    const Item it = todo.back();
    todo.pop_back();
    const std::string title = fmt::format(
        "{}: retains {} bytes in {} blocks ({})", lr::node_text(t, it.node), t.retained(it.node),
        t.retained_blocks(it.node), pct(t.retained(it.node), t.heap_bytes()));
    fmt::format_to(out,
                   "<g><rect data-row=\"{}\" data-node=\"{}\" x=\"{:.2f}\" y=\"{:.0f}\" "
                   "width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\" fill-opacity=\"{:.2f}\" "
                   "stroke=\"#fff\"><title>{}</title></rect>",
                   it.row, html_escape(lr::node_id(t, it.node)), it.x, kChartRowH * it.row, it.w,
                   kChartRowH, kChartColour[it.colour], 0.9 - 0.12 * static_cast<double>(it.row),
                   html_escape(title));
    const std::string name = lr::node_text(t, it.node);
    if (it.w > 7.0 * static_cast<double>(name.size()) + 8)
      fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.0f}\">{}</text>", it.x + 4,
                     kChartRowH * it.row + 19, html_escape(name));
    fmt::format_to(out, "</g>\n");
    if (it.row + 1 == kChartRows) continue;
    double cx = it.x;
    for (uint32_t k : t.children(it.node, kChartMost)) {
      const double w = total ? kChartW * static_cast<double>(t.retained(k)) / total : 0;
      if (w < 1) break;
      todo.push_back({k, cx, w, it.row + 1, it.colour});
      cx += w;
    }
  }
  fmt::format_to(out, "</svg>\n");
}

void suspects(fmt::memory_buffer& b, const RetainedView& o) {
  auto out = std::back_inserter(b);
  const auto s = lr::leak_suspects(o.tree, 0.10);
  fmt::format_to(out, "<h2>Leak suspects (each retains at least 10%)</h2>\n<ol>\n");
  for (const auto& x : s)
    fmt::format_to(out, "<li>{}<br><small>path: {}</small></li>\n", html_escape(suspect_text(o, x)),
                   html_escape(path_line(o, o.tree.shortest_path(x.accumulation))));
  fmt::format_to(out, "</ol>\n");
  if (s.empty()) fmt::format_to(out, "<p>(none)</p>\n");
}

void holders(fmt::memory_buffer& b, const RetainedView& o, size_t n) {
  const auto& t = o.tree;
  auto out = std::back_inserter(b);
  fmt::format_to(out,
                 "<h2>Directly below the roots</h2>\n<table><tr><th>retained</th><th>%</th>"
                 "<th>blocks</th><th>node</th></tr>\n");
  const auto kids = t.children(t.top(), n);
  for (size_t i = 0; i < kids.size() && i < n; ++i)
    fmt::format_to(out, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                   t.retained(kids[i]), pct(t.retained(kids[i]), t.heap_bytes()),
                   t.retained_blocks(kids[i]), html_escape(lr::node_text(t, kids[i])));
  fmt::format_to(out, "</table>\n");
}

}  // namespace

std::string retained_html(const RetainedView& o, size_t top) {
  const auto& t = o.tree;
  fmt::memory_buffer b;
  auto out = std::back_inserter(b);
  fmt::format_to(out,
                 "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>leakref retained: "
                 "{0}</title>\n<style>body{{font:13px sans-serif;margin:16px}}"
                 "text{{font:12px sans-serif;fill:#111}}td,th{{padding:1px 10px;text-align:"
                 "right}}td:last-child,th:last-child{{text-align:left}}</style></head><body>\n"
                 "<h1>leakref retained</h1>\n<p>{0}: {1}{2} {3}, {4} bytes, held through {5} "
                 "holders of root references; {6} bytes in {7} {8} no root reaches (leaked). "
                 "Each row of the chart holds the nodes one level further below the roots, each "
                 "as wide as what it retains.</p>\n",
                 html_escape(o.source), t.partial.empty() ? "" : "partial: ", t.blocks(), o.noun,
                 t.heap_bytes(), t.stats.holders, t.retained(t.leaked()),
                 t.retained_blocks(t.leaked()), o.short_noun);
  for (const auto& p : t.partial) fmt::format_to(out, "<p>partial: {}</p>\n", html_escape(p));
  icicle(b, o);
  suspects(b, o);
  holders(b, o, top);
  fmt::format_to(out, "</body></html>\n");
  return fmt::to_string(b);
}

}  // namespace lrcli
