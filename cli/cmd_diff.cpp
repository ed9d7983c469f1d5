// leakref diff OLD NEW: two cores of one program, or two GlusterFS
// statedumps, compared class by class and object by object (what grew).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>
#include <unordered_map>

#include "cmd_gluster.hpp"
#include "cmd_heap.hpp"
#include "cmd_profile.hpp"
#include "cmd_types.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "leakref/diff.hpp"
#include "leakref/fileio.hpp"
#include "leakref/gluster.hpp"
#include "leakref/profile.hpp"

namespace lrcli {

namespace {

struct DiffArgs {
  std::string older, newer;
  std::string profile;  // its object sets too, objects matched by the set's key
  size_t top = 10;
  std::vector<std::string> fail_on;
};

struct Side {
  lr::Snapshot snap;
  std::string build_id;  // the executable's, for cores
};

// A statedump is text; 1 GiB is far beyond any (a FUSE client with 200,000
// inodes writes ~60 MB).
constexpr size_t kMaxStatedump = 1ull << 30;

lr::Result<std::string> read_text(const std::string& path, int fd) {
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return lr::make_error(lr::Errc::kIo, path + ": read failed");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxStatedump)
      return lr::make_error(lr::Errc::kBadFormat, path + ": over 1 GiB: not a statedump");
  }
  return text;
}

// The GlusterFS classes and objects of a core: its statedump rendering,
// read back like GlusterFS's own, plus dicts and fds.
lr::Result<void> add_gluster(lr::Program& prog, const std::string& path, lr::Snapshot& s) {
  LR_TRY(ensure_gluster_types(prog, ""));
  lr::GlusterSections sec;
  LR_ASSIGN(lr::GlusterReport rep, lr::analyze_gluster(prog, sec));
  LR_ASSIGN(lr::Snapshot g, lr::snapshot_from_statedump(statedump_text(rep, sec, path), path));
  s.classes.insert(s.classes.end(), g.classes.begin(), g.classes.end());
  s.objects = std::move(g.objects);
  for (auto& w : g.warnings) s.warnings.push_back(std::move(w));
  lr::add_gluster_objects(s, rep);
  return {};
}

// A profile's sets as classes ("profile SET": objects found) and its objects,
// known by the set's key when it declares one (a client id, a resource
// name), else by address.
class SnapshotSink : public lr::ProfileSink {
 public:
  explicit SnapshotSink(lr::Snapshot& s) : s_(s) {}
  void object(const lr::ProfileObject& o) override {
    const std::string& set = o.set->name;
    lr::SnapObject x;
    x.key = set + (o.set->key.empty() ? fmt::format("@{:#x}", o.addr) : ":" + o.key.to_string());
    x.cls = "profile " + set;
    x.refcount = o.has_refcount ? o.refcount : 0;
    if (!o.verdict.empty())
      x.held = fmt::format("{} held by holders, verdict {}", o.held, o.verdict);
    s_.objects.push_back(std::move(x));
  }
  void set_end(const lr::ProfileSetSummary& sum) override {
    s_.classes.push_back({"profile", sum.set->name, static_cast<int64_t>(sum.objects), -1});
    for (const auto& w : sum.warnings) s_.warnings.push_back(sum.set->name + ": " + w);
  }

 private:
  lr::Snapshot& s_;
};

lr::Result<void> add_profile(lr::Program& prog, const std::string& what, lr::Snapshot& s) {
  LR_ASSIGN(lr::Profile prof, lr::find_profile(what, profile_dirs()));
  if (std::string why = lr::profile_mismatch(prog, prof, false); !why.empty())
    return lr::make_error(lr::Errc::kUnsupported, s.source + ": " + why);
  LR_TRY(ensure_profile_types(prog, prof, out_stderr()));
  SnapshotSink sink(s);
  size_t first = s.objects.size();
  LR_TRY(lr::run_profile(prog, prof, {}, sink));
  // Keys are unique: two objects of one key (a key that is not one) are told
  // apart by address, in both snapshots alike.
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = first; i < s.objects.size(); ++i)
    if (seen[s.objects[i].key]++) s.objects[i].key += " #" + std::to_string(seen[s.objects[i].key]);
  return {};
}

lr::Result<Side> load_core(const Common& c, const DiffArgs& a, const std::string& path) {
  Common cc = c;
  cc.core = path;
  LR_ASSIGN(auto prog, open_program(cc));
  Side side;
  side.snap.source = path;
  side.snap.kind = "core";
  side.snap.warnings = prog->warnings();
  if (auto* exe = prog->modules().exe()) side.build_id = exe->build_id;
  auto heap = read_heap(*prog);
  if (heap.ok())
    lr::add_heap_classes(side.snap, heap.value());
  else
    side.snap.warnings.push_back(path + ": no heap classes: " + heap.error().message);
  bool gluster = false;
  for (const auto& m : prog->modules().modules())
    gluster = gluster || m->basename().rfind("libglusterfs.so", 0) == 0;
  if (gluster) LR_TRY(add_gluster(*prog, path, side.snap));
  if (!a.profile.empty()) LR_TRY(add_profile(*prog, a.profile, side.snap));
  return side;
}

lr::Result<Side> load(const Common& c, const DiffArgs& a, const std::string& path) {
  LR_ASSIGN(int fd, lr::open_input(path, "input"));
  char head[32] = {};
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  if (n > 0 && lr::looks_like_statedump(std::string_view(head, static_cast<size_t>(n)))) {
    auto text = read_text(path, fd);
    ::close(fd);
    if (!text.ok()) return text.error();
    if (!a.profile.empty())
      return lr::make_error(lr::Errc::kInvalidArgument,
                            path + " is a statedump: --profile runs on cores");
    LR_ASSIGN(lr::Snapshot s, lr::snapshot_from_statedump(text.value(), path));
    return Side{std::move(s), ""};
  }
  ::close(fd);
  return load_core(c, a, path);
}

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

nlohmann::json diff_json(const Side& a, const Side& b, const lr::SnapDiff& d) {
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
  Counts n = count(d);
  std::vector<std::string> warnings = a.snap.warnings;
  warnings.insert(warnings.end(), b.snap.warnings.begin(), b.snap.warnings.end());
  return {{"schema", "leakref.diff/1"},
          {"old", {{"source", a.snap.source}, {"kind", a.snap.kind}}},
          {"new", {{"source", b.snap.source}, {"kind", b.snap.kind}}},
          {"summary",
           {{"classes", d.classes.size()},
            {"grew", n.grew},
            {"shrank", n.shrank},
            {"unchanged", n.same},
            {"new", n.changes[0]},
            {"gone", n.changes[1]},
            {"climbed", n.changes[2]},
            {"dropped", n.changes[3]},
            {"same", d.objects_same}}},
          {"classes", classes},
          {"objects", objects},
          {"warnings", warnings}};
}

void print_objects(const lr::SnapDiff& d, lr::ObjectDelta::Change which, const char* title,
                   size_t top) {
  size_t total = 0, shown = 0;
  for (const auto& o : d.objects) total += o.change == which;
  if (!total) return;
  fmt::print("\n{} ({}{}):\n", title, total, total > top ? fmt::format(", first {}", top) : "");
  for (const auto& o : d.objects) {
    if (o.change != which || shown++ >= top) continue;
    std::string refs =
        which == lr::ObjectDelta::Change::kNew ? fmt::format("ref {}", o.after)
        : which == lr::ObjectDelta::Change::kGone
            ? fmt::format("ref {}", o.before)
            : fmt::format("ref {} -> {} ({:+})", o.before, o.after, o.after - o.before);
    fmt::print("  {}  {}  {}{}\n", o.key, o.cls, refs, o.held.empty() ? "" : "  held by " + o.held);
  }
}

void print_classes(const std::vector<const lr::ClassDelta*>& rows, size_t total, const char* title,
                   size_t top) {
  if (rows.empty()) return;
  size_t w = 5;
  for (const auto* c : rows) w = std::max(w, c->name.size());
  fmt::print("\n{}{}:\n{:<9} {:<{}} {:>10} {:>10} {:>9} {:>7}\n", title,
             total > top ? fmt::format(" (first {} of {}; --top N, --json: all)", top, total) : "",
             "KIND", "CLASS", w, "BEFORE", "AFTER", "DELTA", "RATIO");
  for (const auto* c : rows)
    fmt::print("{:<9} {:<{}} {:>10} {:>10} {:>+9} {:>7}\n", c->kind, c->name, w, c->before,
               c->after, c->delta(), ratio(*c));
}

void print_text(const Side& a, const Side& b, const lr::SnapDiff& d, size_t top) {
  Counts n = count(d);
  fmt::print("{} ({}) -> {} ({})\n", a.snap.source, a.snap.kind, b.snap.source, b.snap.kind);
  fmt::print("classes: {} ({} grew, {} shrank, {} unchanged)", d.classes.size(), n.grew, n.shrank,
             n.same);
  if (!d.objects.empty() || d.objects_same)
    fmt::print("; objects: {} new, {} gone, {} refcount climbed, {} dropped, {} unchanged",
               n.changes[0], n.changes[1], n.changes[2], n.changes[3], d.objects_same);
  fmt::print("\n");
  // Grown classes are first in d.classes, shrunk ones last (most shrunk at the end).
  std::vector<const lr::ClassDelta*> grew, shrank;
  for (size_t i = 0; i < std::min(top, n.grew); ++i) grew.push_back(&d.classes[i]);
  for (size_t i = 0; i < std::min(top, n.shrank); ++i)
    shrank.push_back(&d.classes[d.classes.size() - 1 - i]);
  print_classes(grew, n.grew, "grew most", top);
  print_classes(shrank, n.shrank, "shrank most", top);
  using C = lr::ObjectDelta::Change;
  print_objects(d, C::kClimbed, "refcount climbed", top);
  print_objects(d, C::kNew, "new", top);
  print_objects(d, C::kGone, "gone", top);
  print_objects(d, C::kDropped, "refcount dropped", top);
}

int cmd_diff(const Common& c, const DiffArgs& a) {
  static const std::set<std::string> kFail = {"grew", "climbed", "new", "any"};
  for (const auto& f : a.fail_on)
    if (!kFail.count(f)) return fail_usage("--fail-on: unknown finding '" + f + "'");
  auto older = load(c, a, a.older);
  if (!older.ok()) return fail(older.error());
  auto newer = load(c, a, a.newer);
  if (!newer.ok()) return fail(newer.error());
  const Side &x = older.value(), &y = newer.value();
  if (x.snap.kind != y.snap.kind)
    return fail(lr::make_error(
        lr::Errc::kInvalidArgument,
        fmt::format("{} is a {} and {} a {}: diff compares two cores or two statedumps", a.older,
                    x.snap.kind, a.newer, y.snap.kind)));
  if (x.build_id != y.build_id)
    return fail(lr::make_error(
        lr::Errc::kInvalidArgument,
        fmt::format("{} and {} are cores of different builds (executable build-id {} and {}): "
                    "diff compares two moments of one program",
                    a.older, a.newer, x.build_id.empty() ? "none" : x.build_id,
                    y.build_id.empty() ? "none" : y.build_id)));
  lr::SnapDiff d = lr::diff_snapshots(x.snap, y.snap);
  if (c.json) {
    emit_json(diff_json(x, y, d));
  } else {
    print_text(x, y, d, a.top);
    print_warnings_text(x.snap.warnings);
    print_warnings_text(y.snap.warnings);
  }
  Counts n = count(d);
  bool findings = (fail_on_wants(a.fail_on, "grew") && n.grew) ||
                  (fail_on_wants(a.fail_on, "climbed") && n.changes[2]) ||
                  (fail_on_wants(a.fail_on, "new") && n.changes[0]);
  return findings ? kFindings : kOk;
}

}  // namespace

Command register_diff(CLI::App& app, Common& c) {
  auto a = std::make_shared<DiffArgs>();
  auto* sub = app.add_subcommand(
      "diff", "two cores of one program, or two GlusterFS statedumps: what grew, class by class");
  sub->add_option("old", a->older, "the earlier core or statedump")->required();
  sub->add_option("new", a->newer, "the later core or statedump")->required();
  add_common(sub, c, false);
  sub->add_option("--profile", a->profile,
                  "also a profile's object sets (file or installed name), objects by its keys");
  sub->add_option("--top", a->top, "classes and objects listed per section in text (default 10)");
  sub->add_option("--fail-on", a->fail_on, "exit 1 if: grew, climbed, new, any")->delimiter(',');
  return {sub, [&c, a] { return cmd_diff(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
