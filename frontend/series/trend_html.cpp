// The HTML report of `leakref trend --html`: one file, no scripts and nothing
// fetched, so it opens anywhere (an attachment to a support case).
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <iterator>

#include "frontend/base/render.hpp"
#include "frontend/series/cmd_trend.hpp"
#include "frontend/series/snapshot_load.hpp"

namespace lrcli {

namespace {
constexpr int kW = 360, kH = 180, kL = 56, kR = 12, kT = 12, kB = 28;  // plot box and margins
const auto& esc = html_escape;
}  // namespace

// Count over time (or snapshot index) as a line with its points.
void svg_line_plot(fmt::memory_buffer& b, const Series& s, const lr::ClassSeries& c) {
  auto out = std::back_inserter(b);
  const size_t n = c.counts.size();
  double x0 = s.trend.per_hour ? s.snaps.front().time : 0;
  double x1 = s.trend.per_hour ? s.snaps.back().time : static_cast<double>(n - 1);
  auto [lo, hi] = std::minmax_element(c.counts.begin(), c.counts.end());
  double y0 = static_cast<double>(std::min<int64_t>(*lo, 0)), y1 = static_cast<double>(*hi);
  if (y1 <= y0) y1 = y0 + 1;
  if (x1 <= x0) x1 = x0 + 1;
  auto px = [&](size_t i) {
    double x = s.trend.per_hour ? s.snaps[i].time : static_cast<double>(i);
    return kL + (x - x0) / (x1 - x0) * (kW - kL - kR);
  };
  auto py = [&](int64_t v) { return kT + (y1 - v) / (y1 - y0) * (kH - kT - kB); };
  fmt::format_to(out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                 "viewBox=\"0 0 {0} {1}\" role=\"img\"><title>{2} {3}</title>"
                 "<rect x=\"{4}\" y=\"{5}\" width=\"{6}\" height=\"{7}\" class=\"box\"/>",
                 kW, kH, esc(c.kind), esc(c.name), kL, kT, kW - kL - kR, kH - kT - kB);
  fmt::format_to(out,
                 "<text x=\"{0}\" y=\"{1}\" class=\"ax\" text-anchor=\"end\">{2}</text>"
                 "<text x=\"{0}\" y=\"{3}\" class=\"ax\" text-anchor=\"end\">{4}</text>",
                 kL - 4, kT + 10, static_cast<int64_t>(y1), kH - kB, static_cast<int64_t>(y0));
  fmt::format_to(out, "<text x=\"{}\" y=\"{}\" class=\"ax\">{}</text>", kL, kH - 8,
                 s.trend.per_hour ? esc(snapshot_time(s.snaps.front().time, "?")) : "snapshot 1");
  fmt::format_to(
      out, "<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"end\">{}</text>", kW - kR, kH - 8,
      s.trend.per_hour ? esc(snapshot_time(s.snaps.back().time, "?")) : fmt::format("{}", n));
  fmt::format_to(out, "<polyline class=\"{}\" points=\"", c.only_grows ? "line grows" : "line");
  for (size_t i = 0; i < n; ++i)
    fmt::format_to(out, "{}{:.1f},{:.1f}", i ? " " : "", px(i), py(c.counts[i]));
  fmt::format_to(out, "\"/>");
  for (size_t i = 0; i < n; ++i)
    fmt::format_to(out, "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\"><title>{}</title></circle>",
                   px(i), py(c.counts[i]), c.counts[i]);
  fmt::format_to(out, "</svg>");
}

namespace {

// Objects per refcount value in the last snapshot, as bars.
void histogram(fmt::memory_buffer& b, const std::map<int64_t, uint64_t>& h) {
  auto out = std::back_inserter(b);
  const size_t n = std::min<size_t>(h.size(), 40);  // the 40 smallest refcounts
  uint64_t top = 1;
  size_t i = 0;
  for (auto it = h.begin(); i < n; ++it, ++i) top = std::max(top, it->second);
  const int w = std::max<int>(kW, static_cast<int>(n) * 24 + kL + kR);
  const double bw = static_cast<double>(w - kL - kR) / std::max<size_t>(n, 1);
  fmt::format_to(out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                 "viewBox=\"0 0 {0} {1}\" role=\"img\"><title>refcount histogram</title>"
                 "<text x=\"{2}\" y=\"{3}\" class=\"ax\" text-anchor=\"end\">{4}</text>",
                 w, kH, kL - 4, kT + 10, top);
  i = 0;
  for (auto it = h.begin(); i < n; ++it, ++i) {
    double bh = static_cast<double>(it->second) / top * (kH - kT - kB);
    double x = kL + i * bw;
    fmt::format_to(out,
                   "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                   "height=\"{:.1f}\"><title>refcount {}: {} objects</title></rect>"
                   "<text x=\"{:.1f}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">{}</text>",
                   x + 2, kH - kB - bh, std::max(bw - 4, 1.0), bh, it->first, it->second,
                   x + bw / 2, kH - 10, it->first);
  }
  fmt::format_to(out, "</svg>");
}

void table(fmt::memory_buffer& b, const std::vector<const lr::ClassSeries*>& rows,
           const char* unit) {
  auto out = std::back_inserter(b);
  fmt::format_to(out,
                 "<table><tr><th>kind</th><th>class</th><th>first</th><th>last</th>"
                 "<th>slope / {}</th></tr>",
                 unit);
  for (const auto* c : rows)
    fmt::format_to(out,
                   "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                   "<td class=\"n\">{:+.1f}</td></tr>",
                   esc(c->kind), esc(c->name), c->counts.front(), c->counts.back(), c->slope);
  fmt::format_to(out, "</table>");
}

}  // namespace

const char* const kReportStyle =
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:2px 8px}"
    "td.n{text-align:right;font-family:monospace}"
    ".plots{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0}"
    "figcaption{font-size:13px;max-width:360px;overflow-wrap:anywhere}"
    ".box{fill:#fafafa;stroke:#999}.ax{font-size:11px;fill:#444}"
    ".line{fill:none;stroke:#2a6fb0;stroke-width:2}.grows{stroke:#c0392b}"
    "circle{fill:#222}.bar{fill:#2a6fb0}";

std::string trend_html(const Series& s, size_t top) {
  fmt::memory_buffer b;
  auto out = std::back_inserter(b);
  const char* unit = s.trend.per_hour ? "hour" : "snapshot";
  fmt::format_to(out,
                 "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<title>leakref trend</title><style>{}</style></head><body>\n"
                 "<h1>leakref trend: {} snapshots</h1><p>{} ({}) to {} ({})</p>\n",
                 kReportStyle, s.snaps.size(), esc(s.snaps.front().source),
                 esc(snapshot_time(s.snaps.front().time, "?")), esc(s.snaps.back().source),
                 esc(snapshot_time(s.snaps.back().time, "?")));
  std::vector<const lr::ClassSeries*> only, steep;
  for (const auto& c : s.trend.classes) {
    if (c.only_grows) only.push_back(&c);
    if (c.slope > 0 && steep.size() < top) steep.push_back(&c);
  }
  fmt::format_to(out, "<h2>Classes that only grow ({})</h2>\n", only.size());
  if (only.size() > top) only.resize(top);
  if (only.empty())
    fmt::format_to(out, "<p>none</p>\n");
  else
    table(b, only, unit);
  fmt::format_to(out, "<h2>Steepest growth</h2>\n<div class=\"plots\">\n");
  for (const auto* c : steep) {
    fmt::format_to(out, "<figure>");
    svg_line_plot(b, s, *c);
    fmt::format_to(out, "<figcaption>{} {}: {} to {} ({:+.1f} per {}){}</figcaption></figure>\n",
                   esc(c->kind), esc(c->name), c->counts.front(), c->counts.back(), c->slope, unit,
                   c->only_grows ? ", only grows" : "");
  }
  if (steep.empty()) fmt::format_to(out, "<p>no class grew</p>");
  fmt::format_to(out, "</div>\n");
  if (!s.last_refcounts.empty()) {
    fmt::format_to(out, "<h2>Refcounts in the last snapshot</h2>\n");
    histogram(b, s.last_refcounts);
  }
  fmt::format_to(out, "\n</body></html>\n");
  return fmt::to_string(b);
}

}  // namespace lrcli
