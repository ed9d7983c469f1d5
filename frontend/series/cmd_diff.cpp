// leakref diff OLD NEW: two cores of one program, or two GlusterFS
// statedumps, compared class by class and object by object (what grew).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>
#include <unordered_map>

#include "corelib/analyses/diff.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/series/snapshot_load.hpp"

namespace lrcli {

namespace {

struct DiffArgs {
  std::string older, newer;
  std::string profile;              // its object sets too, objects matched by the set's key
  std::vector<std::string> traces;  // allocation traces: heap blocks per site too
  bool by_type = false;             // blocks by type too
  size_t top = 10;
  std::vector<std::string> fail_on;
};

std::string ratio(const lr::ClassDelta& d) {
  if (!d.in_old || d.before == 0) return d.after ? "new" : "-";
  return fmt::format("{:.2f}x", static_cast<double>(d.after) / static_cast<double>(d.before));
}

nlohmann::json bytes_json(int64_t b) {
  return b < 0 ? nlohmann::json(nullptr) : nlohmann::json(b);
}

struct Counts {
  size_t grew = 0, shrank = 0, same = 0;
  size_t changes[4] = {};
};

Counts count(const lr::SnapDiff& d) {
  Counts n;
  for (const auto& c : d.classes) (c.delta() > 0 ? n.grew : c.delta() < 0 ? n.shrank : n.same)++;
  for (const auto& o : d.objects) n.changes[static_cast<int>(o.change)]++;
  return n;
}

// The kinds one side could not count whole: said, as no delta is made up.
std::vector<std::string> unknown_text(const lr::Snapshot& a, const lr::Snapshot& b) {
  std::vector<std::string> out;
  for (const lr::Snapshot* s : {&a, &b})
    for (const auto& k : s->unknown_kinds)
      out.push_back(
          fmt::format("{} is unknown in {} (not read whole there): "
                      "not compared",
                      k, s->source));
  // Types counted on one side only (a snapshot saved without --by-type).
  if (a.knows("type") != b.knows("type"))
    out.push_back(fmt::format("type: only {} counts blocks by type (--by-type): not compared",
                              (a.knows("type") ? a : b).source));
  return out;
}

nlohmann::json diff_json(const lr::Snapshot& a, const lr::Snapshot& b, const lr::SnapDiff& d) {
  nlohmann::json classes = nlohmann::json::array(), objects = nlohmann::json::array();
  for (const auto& c : d.classes)
    classes.push_back({{"kind", c.kind},
                       {"name", c.name},
                       {"before", c.before},
                       {"after", c.after},
                       {"delta", c.delta()},
                       {"ratio", c.in_old && c.before ? nlohmann::json(double(c.after) / c.before)
                                                      : nlohmann::json(nullptr)},
                       {"before_bytes", bytes_json(c.before_bytes)},
                       {"after_bytes", bytes_json(c.after_bytes)},
                       {"in_old", c.in_old},
                       {"in_new", c.in_new}});
  for (const auto& o : d.objects)
    objects.push_back({{"change", lr::change_name(o.change)},
                       {"key", o.key},
                       {"class", o.cls},
                       {"before", o.before},
                       {"after", o.after},
                       {"held", o.held}});
  nlohmann::json unknown = nlohmann::json::array();
  for (const auto& c : d.unknown)
    unknown.push_back(
        {{"kind", c.kind}, {"name", c.name}, {"in_old", c.in_old}, {"in_new", c.in_new}});
  Counts n = count(d);
  std::vector<std::string> warnings = a.warnings;
  warnings.insert(warnings.end(), b.warnings.begin(), b.warnings.end());
  for (const auto& w : unknown_text(a, b)) warnings.push_back(w);
  return {{"schema", "leakref.diff/1"},
          {"old", {{"source", a.source}, {"kind", a.kind}}},
          {"new", {{"source", b.source}, {"kind", b.kind}}},
          {"summary",
           {{"classes", d.classes.size()},
            {"grew", n.grew},
            {"shrank", n.shrank},
            {"unchanged", n.same},
            {"unknown", d.unknown.size()},
            {"new", n.changes[0]},
            {"gone", n.changes[1]},
            {"climbed", n.changes[2]},
            {"dropped", n.changes[3]},
            {"same", d.objects_same},
            {"objects_unknown", d.objects_unknown}}},
          {"classes", classes},
          {"verdict", verdict_json(a, b)},
          {"unknown", unknown},
          {"objects", objects},
          {"warnings", warnings}};
}

void print_objects(const lr::SnapDiff& d, lr::ObjectDelta::Change which, const char* title,
                   size_t top) {
  size_t total = 0, shown = 0;
  for (const auto& o : d.objects) total += o.change == which;
  if (!total) return;
  out_stdout().print("\n{} ({}{}):\n", title, total,
                     total > top ? fmt::format(", first {}", top) : "");
  for (const auto& o : d.objects) {
    if (o.change != which || shown++ >= top) continue;
    std::string refs =
        which == lr::ObjectDelta::Change::kNew ? fmt::format("ref {}", o.after)
        : which == lr::ObjectDelta::Change::kGone
            ? fmt::format("ref {}", o.before)
            : fmt::format("ref {} -> {} ({:+})", o.before, o.after, o.after - o.before);
    out_stdout().print("  {}  {}  {}{}\n", o.key, o.cls, refs,
                       o.held.empty() ? "" : "  held by " + o.held);
  }
}

void print_classes(const std::vector<const lr::ClassDelta*>& rows, size_t total, const char* title,
                   size_t top) {
  if (rows.empty()) return;
  size_t w = 5;
  for (const auto* c : rows) w = std::max(w, c->name.size());
  out_stdout().print(
      "\n{}{}:\n{:<9} {:<{}} {:>10} {:>10} {:>9} {:>7}\n", title,
      total > top ? fmt::format(" (first {} of {}; --top N, --json: all)", top, total) : "", "KIND",
      "CLASS", w, "BEFORE", "AFTER", "DELTA", "RATIO");
  for (const auto* c : rows)
    out_stdout().print("{:<9} {:<{}} {:>10} {:>10} {:>+9} {:>7}\n", c->kind, c->name, w, c->before,
                       c->after, c->delta(), ratio(*c));
}

// The account's categories by bytes (their counts are blocks, mappings and
// threads alike: not ranked with the classes of one kind of object).
void print_account(const lr::SnapDiff& d) {
  std::vector<const lr::ClassDelta*> rows;
  for (const auto& c : d.classes)
    if (c.kind == "account" && c.before_bytes >= 0 && c.after_bytes >= 0) rows.push_back(&c);
  if (rows.empty()) return;
  const auto& order = lr::account_categories();
  auto rank = [&](const lr::ClassDelta* c) {
    return std::find(order.begin(), order.end(), c->name) - order.begin();
  };
  std::sort(rows.begin(), rows.end(), [&](auto* x, auto* y) { return rank(x) < rank(y); });
  out_stdout().print("\naccount (bytes):\n{:<12} {:>14} {:>14} {:>14}\n", "CATEGORY", "BEFORE",
                     "AFTER", "DELTA");
  for (const auto* c : rows)
    out_stdout().print("{:<12} {:>14} {:>14} {:>+14}\n", c->name, c->before_bytes, c->after_bytes,
                       c->after_bytes - c->before_bytes);
}

void print_text(const lr::Snapshot& a, const lr::Snapshot& b, const lr::SnapDiff& d, size_t top) {
  Counts n = count(d);
  out_stdout().print("{} ({}) -> {} ({})\n", a.source, a.kind, b.source, b.kind);
  out_stdout().print("classes: {} ({} grew, {} shrank, {} unchanged{})", d.classes.size(), n.grew,
                     n.shrank, n.same,
                     d.unknown.empty() ? "" : fmt::format("; {} unknown", d.unknown.size()));
  if (!d.objects.empty() || d.objects_same)
    out_stdout().print("; objects: {} new, {} gone, {} refcount climbed, {} dropped, {} unchanged",
                       n.changes[0], n.changes[1], n.changes[2], n.changes[3], d.objects_same);
  if (d.objects_unknown)
    out_stdout().print("; {} objects of a kind one side could not list whole, not compared",
                       d.objects_unknown);
  out_stdout().print("\n");
  out_stdout().print("{}", verdict_line(a, b));
  // Grown classes are first in d.classes, shrunk ones last (most shrunk at the end).
  // The account's categories have a table of their own, by bytes.
  std::vector<const lr::ClassDelta*> grew, shrank;
  size_t grew_n = 0, shrank_n = 0;
  for (size_t i = 0; i < n.grew; ++i)
    if (d.classes[i].kind != "account" && grew_n++ < top) grew.push_back(&d.classes[i]);
  for (size_t i = 0; i < n.shrank; ++i)
    if (const auto& c = d.classes[d.classes.size() - 1 - i];
        c.kind != "account" && shrank_n++ < top)
      shrank.push_back(&c);
  print_classes(grew, grew_n, "grew most", top);
  print_classes(shrank, shrank_n, "shrank most", top);
  print_account(d);
  using C = lr::ObjectDelta::Change;
  print_objects(d, C::kClimbed, "refcount climbed", top);
  print_objects(d, C::kNew, "new", top);
  print_objects(d, C::kGone, "gone", top);
  print_objects(d, C::kDropped, "refcount dropped", top);
}

int cmd_diff(const DumpOptions& c, const DiffArgs& a) {
  static const std::set<std::string> kFail = {"grew", "climbed", "new", "any"};
  for (const auto& f : a.fail_on)
    if (!kFail.count(f)) return fail_usage("--fail-on: unknown finding '" + f + "'");
  auto older = load_snapshot(c, a.older, a.profile, nullptr, a.traces, a.by_type);
  if (!older.ok()) return fail(older.error());
  auto newer = load_snapshot(c, a.newer, a.profile, nullptr, a.traces, a.by_type);
  if (!newer.ok()) return fail(newer.error());
  lr::Snapshot &x = older.value(), &y = newer.value();
  if (x.kind != y.kind)
    return fail(lr::make_error(
        lr::Errc::kInvalidArgument,
        fmt::format("{} is a {} and {} a {}: diff compares two cores, two kernel dumps or two "
                    "statedumps",
                    a.older, x.kind, a.newer, y.kind)));
  // A dump that does not say its build (a truncated core) is compared, and said.
  for (auto [u, k] : {std::pair{&x, &y}, std::pair{&y, &x}})
    if (u->build_id.empty() && !k->build_id.empty())
      u->warnings.push_back(
          fmt::format("{} does not say its build-id (not in the dump): taken for "
                      "the build of {} ({})",
                      u->source, k->source, k->build_id));
  if (x.build_id != y.build_id && !x.build_id.empty() && !y.build_id.empty())
    return fail(lr::make_error(
        lr::Errc::kInvalidArgument,
        fmt::format("{} and {} are dumps of different builds ({} build-id {} and {}): diff "
                    "compares two moments of one program",
                    a.older, a.newer, x.kind == "vmcore" ? "kernel" : "executable",
                    x.build_id.empty() ? "none" : x.build_id,
                    y.build_id.empty() ? "none" : y.build_id)));
  lr::SnapDiff d = lr::diff_snapshots(x, y);
  if (c.json) {
    emit_json(diff_json(x, y, d));
  } else {
    print_text(x, y, d, a.top);
    print_warnings_text(x.warnings);
    print_warnings_text(y.warnings);
    print_warnings_text(unknown_text(x, y));
  }
  Counts n = count(d);
  bool findings = (fail_on_wants(a.fail_on, "grew") && n.grew) ||
                  (fail_on_wants(a.fail_on, "climbed") && n.changes[2]) ||
                  (fail_on_wants(a.fail_on, "new") && n.changes[0]);
  return findings ? kFindings : kOk;
}

}  // namespace

Command register_diff(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<DiffArgs>();
  auto* sub = app.add_subcommand(
      "diff", "two cores of one program, two kernel dumps, or two GlusterFS statedumps: what grew");
  sub->add_option("old", a->older, "the earlier core, kernel dump or statedump")->required();
  sub->add_option("new", a->newer, "the later core, kernel dump or statedump")->required();
  add_dump_options(sub, c, false);
  add_vmlinux_option(sub, c);
  sub->add_option("--profile", a->profile,
                  "also a profile's object sets (file or installed name), objects by its keys");
  sub->add_option(
      "--trace", a->traces,
      "allocation trace (leakref-trace --malloc, mmleak, bcc memleak, mtrace; repeatable): "
      "heap blocks per allocation site too");
  sub->add_flag("--by-type", a->by_type,
                "cores' blocks by type too, as account names them (C++ containers' blocks by "
                "what holds them)");
  sub->add_option("--top", a->top, "classes and objects listed per section in text (default 10)");
  sub->add_option("--fail-on", a->fail_on, "exit 1 if: grew, climbed, new, any")->delimiter(',');
  return {sub, [&c, a] { return cmd_diff(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
