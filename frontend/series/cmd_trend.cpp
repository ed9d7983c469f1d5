// leakref trend INPUT...: a series of snapshots of one program (cores,
// statedumps or saved snapshots), per-class growth slopes, the classes that
// only grow, and an HTML report with plots (trend_html.cpp).
#include "frontend/series/cmd_trend.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <set>

#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"
#include "frontend/series/snapshot_load.hpp"

namespace lrcli {

namespace {

struct TrendArgs {
  std::vector<std::string> inputs;
  std::string profile, html;
  size_t top = 10;
  std::vector<std::string> fail_on;
  std::string order = "time";  // "time" (when each was taken) or "args" (as given)
  bool by_type = false;        // blocks by type too
};

// The same dump given twice (or a copy of it) makes a flat step that reads
// as "stopped growing": every class with the same count in both.
void warn_twice(Series& s) {
  for (size_t i = 0; i < s.snaps.size(); ++i)
    for (size_t k = i + 1; k < s.snaps.size(); ++k) {
      const lr::Snapshot &x = s.snaps[i], &y = s.snaps[k];
      bool same =
          x.kind == y.kind && x.build_id == y.build_id && x.classes.size() == y.classes.size();
      for (size_t c = 0; same && c < x.classes.size(); ++c)
        same = x.classes[c].kind == y.classes[c].kind && x.classes[c].name == y.classes[c].name &&
               x.classes[c].count == y.classes[c].count && x.classes[c].bytes == y.classes[c].bytes;
      if (same && !x.classes.empty())
        s.warnings.push_back(
            fmt::format("{} and {} have the same count in every class: the same "
                        "dump given twice?",
                        x.source, y.source));
    }
}

// Orders the series by when each input was taken (`order` "time", when every
// one says) or as given ("args"); says which, where the times came from, and
// when the two orders disagree. True when ordered by time.
bool order_series(Series& s, const std::string& order) {
  bool timed = std::all_of(s.snaps.begin(), s.snaps.end(), [](auto& x) { return x.time > 0; });
  bool mtimes = std::any_of(s.snaps.begin(), s.snaps.end(),
                            [](auto& x) { return x.time_from == "file mtime"; });
  std::vector<size_t> by_time(s.snaps.size());
  for (size_t i = 0; i < by_time.size(); ++i) by_time[i] = i;
  std::stable_sort(by_time.begin(), by_time.end(),
                   [&](size_t x, size_t y) { return s.snaps[x].time < s.snaps[y].time; });
  size_t moved = 0;
  for (size_t i = 0; i < by_time.size(); ++i) moved += by_time[i] != i;
  const char* why = mtimes ? " (file modification times: copying a dump changes them)" : "";
  if (order == "args" || !timed) {
    if (order != "args")
      s.warnings.push_back(
          "not every input says when it was taken: the series keeps the order "
          "given");
    else if (timed && moved)
      s.warnings.push_back(
          fmt::format("the inputs' times{} would order {} of them differently; "
                      "kept in the order given (--order args)",
                      why, moved));
    return false;
  }
  if (moved)
    s.warnings.push_back(
        fmt::format("ordered by when each was taken{}: {} of {} inputs moved from "
                    "the order given; --order args keeps that order",
                    why, moved, s.snaps.size()));
  std::vector<lr::Snapshot> sorted;
  for (size_t i : by_time) sorted.push_back(std::move(s.snaps[i]));
  s.snaps = std::move(sorted);
  return true;
}

// Loads every input, keeping its classes and, of the last, the refcount
// histogram only: a long series of large cores must not hold every object.
lr::Result<Series> load_series(const DumpOptions& c, const TrendArgs& a) {
  Series s;
  double newest_time = 0;
  std::map<int64_t, uint64_t> newest_hist, last_given_hist;
  for (const auto& in : a.inputs) {
    LR_ASSIGN(lr::Snapshot snap, load_snapshot(c, in, a.profile, nullptr, {}, a.by_type));
    if (!s.snaps.empty()) {
      const lr::Snapshot& first = s.snaps.front();
      // A dump that does not say its build (a truncated core) joins, said.
      if (snap.build_id.empty() != first.build_id.empty())
        s.warnings.push_back(fmt::format("{} does not say its build-id: taken for the build of {}",
                                         snap.build_id.empty() ? snap.source : first.source,
                                         snap.build_id.empty() ? first.source : snap.source));
      bool other =
          !snap.build_id.empty() && !first.build_id.empty() && snap.build_id != first.build_id;
      if (snap.kind != first.kind || other)
        return lr::make_error(
            lr::Errc::kInvalidArgument,
            fmt::format("{} ({}{}) and {} ({}{}) are not snapshots of one program", first.source,
                        first.kind, first.build_id.empty() ? "" : ", build-id " + first.build_id,
                        in, snap.kind, snap.build_id.empty() ? "" : ", build-id " + snap.build_id));
    }
    for (auto& w : snap.warnings) s.warnings.push_back(std::move(w));
    snap.warnings.clear();
    // The objects go at once; the refcounts are kept of the newest one taken
    // and of the last one given (which of them is last is known at the end).
    std::map<int64_t, uint64_t> hist;
    for (const auto& o : snap.objects) hist[o.refcount]++;
    snap.objects = {};
    if (snap.time > newest_time) newest_time = snap.time, newest_hist = hist;
    last_given_hist = std::move(hist);
    s.snaps.push_back(std::move(snap));
  }
  warn_twice(s);
  bool by_time = order_series(s, a.order);
  s.last_refcounts = by_time ? std::move(newest_hist) : std::move(last_given_hist);
  s.trend = lr::trend_of(s.snaps);
  for (const auto& [kind, n] : s.trend.unknown_kinds)
    s.warnings.push_back(
        fmt::format("{} classes are not counted whole in {} of {} inputs: left "
                    "out of the trend (no slope or verdict from a part)",
                    kind, n, s.snaps.size()));
  return s;
}

nlohmann::json trend_json(const Series& s) {
  nlohmann::json snaps = nlohmann::json::array(), classes = nlohmann::json::array();
  for (const auto& x : s.snaps)
    snaps.push_back(
        {{"source", x.source},
         {"kind", x.kind},
         {"time", x.time > 0 ? nlohmann::json(x.time) : nlohmann::json(nullptr)},
         {"time_from", x.time > 0 ? nlohmann::json(x.time_from) : nlohmann::json(nullptr)}});
  size_t only = 0;
  for (const auto& c : s.trend.classes) {
    only += c.only_grows;
    classes.push_back({{"kind", c.kind},
                       {"name", c.name},
                       {"counts", c.counts},
                       {"slope", c.slope},
                       {"only_grows", c.only_grows}});
  }
  return {{"schema", "leakref.trend/1"},
          {"snapshots", snaps},
          {"slope_unit", s.trend.per_hour ? "per hour" : "per snapshot"},
          {"classes", classes},
          {"verdict", verdict_json(s.snaps.front(), s.snaps.back())},
          {"summary",
           {{"snapshots", s.snaps.size()}, {"classes", classes.size()}, {"only_grow", only}}},
          {"warnings", s.warnings}};
}

void print_rows(const std::vector<const lr::ClassSeries*>& rows, const char* unit) {
  size_t w = 5;
  for (const auto* c : rows) w = std::max(w, c->name.size());
  out_stdout().print("{:<9} {:<{}} {:>10} {:>10} {:>14}\n", "KIND", "CLASS", w, "FIRST", "LAST",
                     fmt::format("SLOPE/{}", unit));
  for (const auto* c : rows)
    out_stdout().print("{:<9} {:<{}} {:>10} {:>10} {:>+14.1f}\n", c->kind, c->name, w,
                       c->counts.front(), c->counts.back(), c->slope);
}

void print_trend(const Series& s, size_t top) {
  const auto& f = s.snaps.front();
  const auto& l = s.snaps.back();
  const char* unit = s.trend.per_hour ? "h" : "snap";
  auto when = [](const lr::Snapshot& x) {
    std::string t = snapshot_time(x.time, "time unknown");
    return x.time > 0 && !x.time_from.empty() ? t + ", " + x.time_from : t;
  };
  out_stdout().print("{} snapshots, {} ({}) to {} ({}); slopes per {}\n", s.snaps.size(), f.source,
                     when(f), l.source, when(l), s.trend.per_hour ? "hour" : "snapshot");
  out_stdout().print("{}", verdict_line(f, l));  // first to last
  std::vector<const lr::ClassSeries*> only, steep;
  for (const auto& c : s.trend.classes) {
    if (c.kind == "account") continue;  // blocks and mappings alike: the verdict speaks for them
    if (c.only_grows) only.push_back(&c);
    if (c.slope > 0 && steep.size() < top) steep.push_back(&c);
  }
  size_t only_total = only.size();
  if (only.size() > top) only.resize(top);
  if (!only.empty()) {
    out_stdout().print("\nonly grow ({}{}):\n", only_total,
                       only_total > top ? fmt::format(", first {}", top) : "");
    print_rows(only, unit);
  } else {
    out_stdout().print("\nno class only grows\n");
  }
  if (!steep.empty()) {
    out_stdout().print("\nsteepest growth:\n");
    print_rows(steep, unit);
  }
}

int cmd_trend(const DumpOptions& c, const TrendArgs& a) {
  static const std::set<std::string> kFail = {"grows", "any"};
  for (const auto& f : a.fail_on)
    if (!kFail.count(f)) return fail_usage("--fail-on: unknown finding '" + f + "'");
  if (a.inputs.size() < 2) return fail_usage("trend needs at least two snapshots");
  auto s = load_series(c, a);
  if (!s.ok()) return fail(s.error());
  if (!a.html.empty())
    if (auto w = write_html_page(a.html, trend_html(s.value(), a.top)); !w.ok())
      return fail(w.error());
  if (c.json) {
    emit_json(trend_json(s.value()));
  } else {
    print_trend(s.value(), a.top);
    print_warnings_text(s.value().warnings);
  }
  bool grows = std::any_of(s.value().trend.classes.begin(), s.value().trend.classes.end(),
                           [](const auto& x) { return x.only_grows; });
  return fail_on_wants(a.fail_on, "grows") && grows ? kFindings : kOk;
}

}  // namespace

Command register_trend(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<TrendArgs>();
  auto* sub = app.add_subcommand(
      "trend", "a series of snapshots of one program: growth per class, classes that only grow");
  sub->add_option("inputs", a->inputs, "cores, statedumps or saved snapshots (leakref snapshot)")
      ->required();
  add_dump_options(sub, c, false);
  add_vmlinux_option(sub, c);
  sub->add_option("--profile", a->profile, "also a profile's object sets, on cores");
  sub->add_flag("--by-type", a->by_type,
                "cores' blocks by type too, as account names them (C++ containers' blocks by "
                "what holds them)");
  sub->add_option("--top", a->top, "classes listed and plotted (default 10)");
  sub->add_option("--order", a->order,
                  "time: by when each was taken (default; a core's file mtime, a statedump's "
                  "DUMP-START-TIME); args: as given")
      ->check(CLI::IsMember({"time", "args"}));
  sub->add_option("--html", a->html, "also write a self-contained HTML report with SVG plots");
  sub->add_option("--fail-on", a->fail_on, "exit 1 if: grows (a class only grows), any")
      ->delimiter(',');
  return {sub, [&c, a] { return cmd_trend(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
