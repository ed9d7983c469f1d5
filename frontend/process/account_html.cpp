// `leakref account --html FILE`: the account as a treemap, one page with no
// scripts and nothing fetched (an attachment to a support case opens
// anywhere). Each category is a column as wide as its share of the total;
// its entries split the column by theirs; a rectangle's <title> gives its
// bytes. The table under it is the text's.
#include <fmt/format.h>

#include <iterator>

#include "frontend/base/render.hpp"
#include "frontend/process/account_html.hpp"

namespace lrcli {

namespace {

constexpr double kMapW = 1160, kMapH = 620;  // the map's box
// One colour per category, in account_categories() order.
constexpr const char* kColour[] = {"#4e79a7", "#e15759", "#59a14f", "#9c755f", "#bab0ac",
                                   "#f28e2b", "#edc948", "#76b7b2", "#b07aa1", "#ff9da7"};

std::string label(const lr::AccountNode& n, uint64_t total) {
  return fmt::format("{}: {} bytes, {} blocks ({:.1f}%)", n.name, n.bytes, n.blocks,
                     total ? 100.0 * static_cast<double>(n.bytes) / total : 0.0);
}

void rect(fmt::memory_buffer& b, double x, double y, double w, double h, const char* fill,
          double opacity, const std::string& title, const std::string& text) {
  auto out = std::back_inserter(b);
  fmt::format_to(out,
                 "<g><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                 "fill=\"{}\" fill-opacity=\"{:.2f}\" stroke=\"#fff\"><title>{}</title></rect>",
                 x, y, w, h, fill, opacity, html_escape(title));
  // A name only where it fits (about 7 pixels a character).
  if (w > 7.0 * static_cast<double>(text.size()) + 8 && h > 16)
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", x + 4, y + 14,
                   html_escape(text));
  fmt::format_to(out, "</g>\n");
}

// A category's column, split top to bottom by its entries.
void column(fmt::memory_buffer& b, const lr::AccountNode& c, const char* fill, double x, double w,
            uint64_t total) {
  rect(b, x, 0, w, kMapH, fill, 0.35, label(c, total), c.name);
  if (c.children.empty() || c.bytes == 0) return;
  double y = 24;  // the category's own name stays visible above its entries
  const double room = kMapH - y;
  for (const auto& k : c.children) {
    const double h = room * static_cast<double>(k.bytes) / static_cast<double>(c.bytes);
    if (h > 0) rect(b, x, y, w, h, fill, 0.8, label(k, total), k.name);
    y += h;
  }
}

void account_table(fmt::memory_buffer& b, const lr::Account& acc) {
  auto out = std::back_inserter(b);
  fmt::format_to(out, "<table><tr><th>category</th><th>bytes</th><th>blocks</th></tr>\n");
  for (const auto& c : acc.total.children) {
    fmt::format_to(out, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", html_escape(c.name),
                   c.bytes, c.blocks);
    for (const auto& k : c.children)
      fmt::format_to(out, "<tr><td class=\"k\">{}</td><td>{}</td><td>{}</td></tr>\n",
                     html_escape(k.name), k.bytes, k.blocks);
  }
  fmt::format_to(out, "<tr><th>total</th><th>{}</th><th></th></tr></table>\n", acc.total.bytes);
}

// The colour of each category, with its share: the narrow columns have no
// room for their names.
void legend(fmt::memory_buffer& b, const lr::Account& acc) {
  auto out = std::back_inserter(b);
  fmt::format_to(out, "<p>");
  const auto& cats = acc.total.children;
  for (size_t i = 0; i < cats.size(); ++i)
    if (cats[i].bytes)
      fmt::format_to(out,
                     "<span class=\"l\"><span class=\"sw\" style=\"background:{}\"></span>"
                     "{} {:.1f}%</span> ",
                     kColour[i % std::size(kColour)], html_escape(cats[i].name),
                     100.0 * static_cast<double>(cats[i].bytes) / acc.total.bytes);
  fmt::format_to(out, "</p>\n");
}

}  // namespace

std::string account_html(const lr::Account& acc, const std::string& core) {
  fmt::memory_buffer b;
  auto out = std::back_inserter(b);
  fmt::format_to(out,
                 "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>leakref account: "
                 "{0}</title>\n<style>body{{font:13px sans-serif;margin:16px}}"
                 "text{{font:12px sans-serif;fill:#111}}td,th{{padding:1px 10px;text-align:"
                 "right}}td:first-child,th:first-child{{text-align:left}}.k{{padding-left:28px}}"
                 ".l{{margin-right:14px}}.sw{{display:inline-block;width:11px;height:11px;"
                 "margin-right:4px}}</style></head><body>\n<h1>leakref account</h1>\n<p>{0}: "
                 "{1} bytes of writable memory, each in one category.</p>\n",
                 html_escape(core), acc.writable_bytes);
  legend(b, acc);
  fmt::format_to(out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                 "viewBox=\"0 0 {0} {1}\">\n",
                 kMapW, kMapH);
  const uint64_t total = acc.total.bytes;
  double x = 0;
  const auto& cats = acc.total.children;
  for (size_t i = 0; i < cats.size(); ++i) {
    if (!cats[i].bytes || !total) continue;
    const double w = kMapW * static_cast<double>(cats[i].bytes) / static_cast<double>(total);
    column(b, cats[i], kColour[i % std::size(kColour)], x, w, total);
    x += w;
  }
  fmt::format_to(out, "</svg>\n");
  account_table(b, acc);
  fmt::format_to(out, "</body></html>\n");
  return fmt::to_string(b);
}

}  // namespace lrcli
