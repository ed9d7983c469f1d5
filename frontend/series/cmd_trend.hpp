// `leakref trend`: what its HTML report (trend_html.cpp) renders.
#pragma once

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "corelib/analyses/diff.hpp"

namespace lrcli {

struct Series {
  std::vector<lr::Snapshot> snaps;             // in time order; classes only (objects dropped)
  std::map<int64_t, uint64_t> last_refcounts;  // refcount -> objects, in the last snapshot
  lr::TrendReport trend;
  std::vector<std::string> warnings;
};

// One self-contained HTML page: the classes that only grow, the `top`
// steepest as SVG line plots of count over time, and the last snapshot's
// refcount histogram.
std::string trend_html(const Series& s, size_t top);
// Pieces the batch report's HTML shares: one class's counts over `s` as an
// SVG line plot, the page style (html_escape is in frontend/base/render.hpp).
void svg_line_plot(fmt::memory_buffer& b, const Series& s, const lr::ClassSeries& c);
extern const char* const kReportStyle;

}  // namespace lrcli
