// leakref snapshot INPUT: the classes and objects `diff` and `trend` compare,
// from one core or statedump; with --json a leakref.snapshot/1 that they read
// back in place of the core (leakref-snap keeps these and removes the cores).
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <memory>

#include "corelib/analyses/snapshot_io.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/series/snapshot_load.hpp"

namespace lrcli {

namespace {

struct SnapshotArgs {
  std::string input, profile;
  bool by_type = false;  // blocks by type too
  size_t top = 20;
};

void print_snapshot(const lr::Snapshot& s, size_t top) {
  std::string when = s.time > 0 ? "taken " + snapshot_time(s.time, "") : "time unknown";
  out_stdout().print("{} ({}, {}): {} classes, {} objects\n", s.source, s.kind, when,
                     s.classes.size(), s.objects.size());
  std::vector<const lr::SnapClass*> by(s.classes.size());
  for (size_t i = 0; i < by.size(); ++i) by[i] = &s.classes[i];
  std::stable_sort(by.begin(), by.end(), [](auto* a, auto* b) { return a->count > b->count; });
  if (by.size() > top) by.resize(top);
  if (by.empty()) return;
  size_t w = 5;
  for (const auto* c : by) w = std::max(w, c->name.size());
  out_stdout().print(
      "\nlargest{}:\n{:<9} {:<{}} {:>10} {:>12}\n",
      s.classes.size() > top ? fmt::format(" (first {} of {})", top, s.classes.size()) : "", "KIND",
      "CLASS", w, "COUNT", "BYTES");
  for (const auto* c : by)
    out_stdout().print("{:<9} {:<{}} {:>10} {:>12}\n", c->kind, c->name, w, c->count,
                       c->bytes < 0 ? "?" : std::to_string(c->bytes));
}

int cmd_snapshot(const DumpOptions& c, const SnapshotArgs& a) {
  auto s = load_snapshot(c, a.input, a.profile, nullptr, {}, a.by_type);
  if (!s.ok()) return fail(s.error());
  if (c.json) {
    emit_json(lr::snapshot_json(s.value()));
  } else {
    print_snapshot(s.value(), a.top);
    print_warnings_text(s.value().warnings);
  }
  return kOk;
}

}  // namespace

Command register_snapshot(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<SnapshotArgs>();
  auto* sub = app.add_subcommand(
      "snapshot", "the classes and objects diff and trend compare, from one core or statedump");
  sub->add_option("input", a->input, "a core, a GlusterFS statedump or a saved snapshot")
      ->required();
  add_dump_options(sub, c, false);
  add_vmlinux_option(sub, c);
  sub->add_option("--profile", a->profile, "also a profile's object sets (file or installed name)");
  sub->add_flag("--by-type", a->by_type,
                "cores' blocks by type too, as account names them (C++ containers' blocks by "
                "what holds them)");
  sub->add_option("--top", a->top, "classes listed in text (default 20)");
  return {sub, [&c, a] { return cmd_snapshot(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
