// Buckets: dumps with one signature (program, build, how the analysis ended,
// the kinds of findings, the sets holding flagged objects) are one problem
// seen several times. Per bucket: how many, first and last seen, and which
// classes grow over its dumps in time order (the same least-squares slopes
// as `leakref trend`).
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "frontend/base/errors.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"
#include "frontend/batch/batch_db.hpp"
#include "frontend/batch/batch_report.hpp"
#include "frontend/series/cmd_trend.hpp"
#include "frontend/series/snapshot_load.hpp"

namespace lrcli {

namespace {

using nlohmann::json;

struct Bucket {
  std::string signature, text, example;
  int64_t dumps = 0;
  double first = 0, last = 0;
  Series series;                             // its dumps' classes, in time order
  std::vector<const lr::ClassSeries*> grow;  // classes that grew, steepest first
};

std::string col(const char* v) {
  return v ? v : "";
}

lr::Result<std::vector<Bucket>> load_buckets(BatchDb& db) {
  std::vector<Bucket> out;
  std::map<std::string, size_t> at;
  LR_TRY(
      db.query("SELECT signature, signature_text, count(*), min(taken), max(taken),"
               " max(path) FROM dumps GROUP BY signature ORDER BY count(*) DESC, signature_text",
               [&](auto&, auto& v) {
                 Bucket b;
                 b.signature = col(v[0]);
                 b.text = col(v[1]);
                 b.dumps = std::atoll(col(v[2]).c_str());
                 b.first = std::atof(col(v[3]).c_str());
                 b.last = std::atof(col(v[4]).c_str());
                 b.example = col(v[5]);
                 at[b.signature] = out.size();
                 out.push_back(std::move(b));
                 return true;
               }));
  // Each bucket's dumps as snapshots of classes, in time order.
  std::map<int64_t, std::pair<size_t, size_t>> dump_snap;  // dump id -> (bucket, snapshot)
  LR_TRY(
      db.query("SELECT id, signature, taken, path FROM dumps WHERE status = 'ok'"
               " ORDER BY taken, path",
               [&](auto&, auto& v) {
                 Bucket& b = out[at[col(v[1])]];
                 lr::Snapshot s;
                 s.time = std::atof(col(v[2]).c_str());
                 s.source = col(v[3]);
                 dump_snap[std::atoll(v[0])] = {at[col(v[1])], b.series.snaps.size()};
                 b.series.snaps.push_back(std::move(s));
                 return true;
               }));
  LR_TRY(db.query("SELECT dump_id, kind, name, count, bytes FROM classes", [&](auto&, auto& v) {
    auto it = dump_snap.find(std::atoll(v[0]));
    if (it == dump_snap.end()) return true;
    out[it->second.first].series.snaps[it->second.second].classes.push_back(
        {col(v[1]), col(v[2]), std::atoll(col(v[3]).c_str()),
         v[4] ? std::atoll(v[4]) : int64_t{-1}});
    return true;
  }));
  for (auto& b : out) {
    if (b.series.snaps.size() < 2) continue;
    b.series.trend = lr::trend_of(b.series.snaps);
    // The account's categories count blocks and mappings alike: the verdict
    // speaks for them.
    for (const auto& c : b.series.trend.classes)
      if (c.kind != "account" && c.slope > 0 && c.counts.back() > c.counts.front())
        b.grow.push_back(&c);
  }
  return out;
}

json report_json(const std::vector<Bucket>& bs, const json& totals) {
  json j{{"schema", "leakref.batch.report/1"}, {"totals", totals}, {"buckets", json::array()}};
  for (const auto& b : bs) {
    json g = json::array();
    for (const auto* c : b.grow)
      g.push_back({{"kind", c->kind},
                   {"name", c->name},
                   {"first", c->counts.front()},
                   {"last", c->counts.back()},
                   {"slope", c->slope},
                   {"per", b.series.trend.per_hour ? "hour" : "dump"},
                   {"only_grows", c->only_grows}});
    j["buckets"].push_back(
        {{"signature", b.signature},
         {"signature_text", b.text},
         {"dumps", b.dumps},
         {"first_seen", b.first},
         {"last_seen", b.last},
         {"example", b.example},
         {"growing", g},
         {"verdict", b.series.snaps.size() < 2
                         ? json(nullptr)
                         : verdict_json(b.series.snaps.front(), b.series.snaps.back())}});
  }
  return j;
}

void print_text(const std::vector<Bucket>& bs, const json& totals, size_t top) {
  out_stdout().print("{} dumps in {} buckets", totals["dumps"].get<int64_t>(), bs.size());
  std::string st;
  for (auto& [k, v] : totals["status"].items())
    st += fmt::format("{}{} {}", st.empty() ? "" : ", ", v.get<int64_t>(), k);
  out_stdout().print(" ({})\n", st);
  for (size_t i = 0; i < bs.size() && i < top; ++i) {
    const Bucket& b = bs[i];
    out_stdout().print("\nbucket {}  {} dumps, first {}, last {}\n  {}\n  e.g. {}\n", b.signature,
                       b.dumps, snapshot_time(b.first, "?"), snapshot_time(b.last, "?"), b.text,
                       b.example);
    if (b.series.snaps.size() >= 2)
      if (std::string v = verdict_line(b.series.snaps.front(), b.series.snaps.back()); !v.empty())
        out_stdout().print("  {}", v);
    for (size_t k = 0; k < b.grow.size() && k < 3; ++k)
      out_stdout().print("  grows: {} {}: {} -> {} ({:+.1f} per {}{})\n", b.grow[k]->kind,
                         b.grow[k]->name, b.grow[k]->counts.front(), b.grow[k]->counts.back(),
                         b.grow[k]->slope, b.series.trend.per_hour ? "hour" : "dump",
                         b.grow[k]->only_grows ? ", only grows" : "");
  }
  if (bs.size() > top) out_stdout().print("\n({} more buckets; --top N)\n", bs.size() - top);
}

std::string report_html(const std::vector<Bucket>& bs, const json& totals, size_t top) {
  fmt::memory_buffer b;
  auto out = std::back_inserter(b);
  fmt::format_to(out,
                 "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<title>leakref batch report</title><style>{}</style></head><body>\n"
                 "<h1>leakref batch: {} dumps in {} buckets</h1>\n<table><tr><th>bucket</th>"
                 "<th>dumps</th><th>first seen</th><th>last seen</th><th>signature</th></tr>\n",
                 kReportStyle, totals["dumps"].get<int64_t>(), bs.size());
  for (size_t i = 0; i < bs.size() && i < top; ++i)
    fmt::format_to(out,
                   "<tr><td><a href=\"#b{0}\">{0}</a></td><td class=\"n\">{1}</td><td>{2}</td>"
                   "<td>{3}</td><td>{4}</td></tr>\n",
                   bs[i].signature, bs[i].dumps, html_escape(snapshot_time(bs[i].first, "?")),
                   html_escape(snapshot_time(bs[i].last, "?")), html_escape(bs[i].text));
  fmt::format_to(out, "</table>\n");
  for (size_t i = 0; i < bs.size() && i < top; ++i) {
    if (bs[i].grow.empty()) continue;
    fmt::format_to(out, "<h2 id=\"b{}\">bucket {}: growing classes</h2><div class=\"plots\">\n",
                   bs[i].signature, bs[i].signature);
    for (size_t k = 0; k < bs[i].grow.size() && k < 4; ++k) {
      fmt::format_to(out, "<figure>");
      svg_line_plot(b, bs[i].series, *bs[i].grow[k]);
      fmt::format_to(out, "<figcaption>{} {}: {} to {}</figcaption></figure>\n",
                     html_escape(bs[i].grow[k]->kind), html_escape(bs[i].grow[k]->name),
                     bs[i].grow[k]->counts.front(), bs[i].grow[k]->counts.back());
    }
    fmt::format_to(out, "</div>\n");
  }
  fmt::format_to(out, "</body></html>\n");
  return fmt::to_string(b);
}

}  // namespace

int cmd_report(const ReportOptions& a) {
  auto db = BatchDb::open(a.db, false, true);
  if (!db.ok()) return fail(db.error());
  auto bs = load_buckets(*db.value());
  if (!bs.ok()) return fail(bs.error());
  json totals{{"dumps", 0}, {"status", json::object()}};
  auto r = db.value()->query("SELECT status, count(*) FROM dumps GROUP BY status ORDER BY status",
                             [&](auto&, auto& v) {
                               int64_t n = std::atoll(v[1]);
                               totals["status"][col(v[0])] = n;
                               totals["dumps"] = totals["dumps"].get<int64_t>() + n;
                               return true;
                             });
  if (!r.ok()) return fail(r.error());
  if (!a.html.empty())
    if (auto w = write_html_page(a.html, report_html(bs.value(), totals, a.top)); !w.ok())
      return fail(w.error());
  if (a.json)
    emit_json(report_json(bs.value(), totals));
  else
    print_text(bs.value(), totals, a.top);
  return kOk;
}

}  // namespace lrcli
