// Snapshots by input kind (snapshots.hpp).
#include "corelib/answers/snapshots.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <unordered_map>

#include "corelib/analyses/snapshot_io.hpp"
#include "corelib/answers/core_index.hpp"
#include "corelib/answers/leak_states.hpp"
#include "corelib/answers/profile_match.hpp"
#include "corelib/base/fileio.hpp"
#include "corelib/dump/dump_kind.hpp"
#include "corelib/registry/target.hpp"

namespace lr {

namespace {

// When a core was written: gcore writes it at the moment it snapshots.
double file_time(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
}

// A profile's sets as classes ("profile SET": objects found) and its objects,
// known by the set's key when it declares one (a client id, a resource
// name), else by address.
class SnapshotSink : public ProfileSink {
 public:
  explicit SnapshotSink(Snapshot& s) : s_(s) {}
  void object(const ProfileObject& o) override {
    const std::string& set = o.set->name;
    SnapObject x;
    x.key = set + (o.set->key.empty() ? fmt::format("@{:#x}", o.addr) : ":" + o.key.to_string());
    x.cls = "profile " + set;
    x.kind = "profile";
    x.refcount = o.has_refcount ? o.refcount : 0;
    if (!o.verdict.empty())
      x.held = fmt::format("{} held by holders, verdict {}", o.held, o.verdict);
    s_.objects.push_back(std::move(x));
  }
  void set_end(const ProfileSetSummary& sum) override {
    s_.classes.push_back({"profile", sum.set->name, static_cast<int64_t>(sum.objects), -1});
    for (const auto& w : sum.warnings) s_.warnings.push_back(sum.set->name + ": " + w);
    // A walk that stopped early listed a part of the set.
    if ((!sum.warnings.empty() || sum.warnings_dropped) && s_.knows("profile"))
      s_.unknown_kinds.push_back("profile");
  }

 private:
  Snapshot& s_;
};

Result<void> add_profile(Program& prog, const SnapshotRequest& r, Snapshot& s, bool kernel) {
  LR_ASSIGN(Profile prof, find_profile(r.profile, r.profile_dirs));
  if (std::string why = profile_mismatch(prog, prof, kernel); !why.empty())
    return make_error(Errc::kUnsupported, s.source + ": " + why);
  LR_TRY(ensure_profile_types(prog, prof, r.show));
  SnapshotSink sink(s);
  size_t first = s.objects.size();
  LR_TRY(run_profile(prog, prof, {}, sink));
  // Keys are unique: two objects of one key (a key that is not one) are told
  // apart by address, in both snapshots alike.
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = first; i < s.objects.size(); ++i)
    if (seen[s.objects[i].key]++) s.objects[i].key += " #" + std::to_string(seen[s.objects[i].key]);
  return {};
}

// Allocation sites: one "site" class per site, counting its blocks still in
// use in the core.
void add_sites(const LiveSites& ls, Snapshot& s) {
  for (const auto& site : ls.sites) {
    // A site known by totals alone (bcc's stack summaries) has no live count.
    if (!site.live_known) {
      if (s.knows("site")) s.unknown_kinds.push_back("site");
      continue;
    }
    s.classes.push_back({"site", site.text, static_cast<int64_t>(site.live_count),
                         static_cast<int64_t>(site.live_bytes)});
  }
  for (const auto& w : ls.warnings) s.warnings.push_back(w);
}

// The account's categories as classes (live, leaked, free...): what lets
// diff and trend tell a leak from memory the allocator keeps. Not whole when
// the heap walk met damage.
// With `by_type`, the typed blocks as "type" classes from the same index.
void add_account(Program& prog, const HeapWalk& heap, const std::string& path, bool by_type,
                 Snapshot& s) {
  TypeTallies types;
  auto acc = plain_account(prog, heap, by_type ? &types : nullptr);
  if (!acc.ok()) {
    s.warnings.push_back(path + ": no account classes: " + acc.error().message);
    s.unknown_kinds.push_back("account");
    if (by_type) s.unknown_kinds.push_back("type");
    return;
  }
  add_account_classes(s, acc.value());
  for (const auto& t : types.rows)
    s.classes.push_back(
        {"type", t.type, static_cast<int64_t>(t.blocks), static_cast<int64_t>(t.bytes)});
  for (const auto& w : types.warnings) s.warnings.push_back(path + ": types: " + w);
  for (const auto& w : acc->warnings) s.warnings.push_back(path + ": account: " + w);
  if (!heap.warnings.empty() || !acc->warnings.empty()) s.unknown_kinds.push_back("account");
}

// The heap's classes and account; the sites when asked (they need the heap).
Result<void> add_heap(Program& prog, const SnapshotRequest& r, Snapshot& s) {
  const std::string& path = r.path;
  auto heap = read_heap(prog, r.show);
  if (heap.ok()) {
    add_heap_classes(s, heap.value());
    for (const auto& w : heap->warnings) s.warnings.push_back(path + ": heap: " + w);
    // A walk that met damage counted a part: its classes are not the whole.
    if (!heap->warnings.empty()) s.unknown_kinds.push_back("heap");
    add_account(prog, heap.value(), path, r.by_type, s);
    if (r.by_type && !heap->warnings.empty()) s.unknown_kinds.push_back("type");
  } else {
    s.warnings.push_back(path + ": no heap classes: " + heap.error().message);
    s.unknown_kinds.push_back("heap");
    s.unknown_kinds.push_back("account");
    if (r.by_type) s.unknown_kinds.push_back("type");
  }
  if (!r.sites) return {};
  LR_ASSIGN(LiveSites ls, r.sites(prog, heap));
  add_sites(ls, s);
  return {};
}

Result<Snapshot> load_core(const SnapshotRequest& r, SnapshotExtras* x) {
  LR_ASSIGN(auto prog, r.open_core(r.path));
  Snapshot s;
  s.source = r.path;
  s.kind = "core";
  s.time = file_time(r.path);
  s.time_from = "file mtime";
  s.warnings = prog->warnings();
  if (auto* exe = prog->modules().exe()) s.build_id = exe->build_id;
  LR_TRY(add_heap(*prog, r, s));
  std::vector<std::string> programs;
  for (ProcessTarget* t : process_targets_of(prog->modules())) {
    LR_ASSIGN(TypesSource ts, t->ensure_types(*prog, ""));
    if (!ts.note.empty() && r.show) r.show->note(ts.note);
    LR_ASSIGN(ProgramSnapshot ps, t->snapshot(*prog, r.path, s));
    programs.push_back(t->name());
    if (x) x->findings.insert(x->findings.end(), ps.findings.begin(), ps.findings.end());
  }
  if (!r.profile.empty()) LR_TRY(add_profile(*prog, r, s, false));
  if (x) {
    x->programs = std::move(programs);
    x->prog = std::move(prog);
  }
  return s;
}

// A kernel dump: what its target reads, and a profile's sets on request.
Result<Snapshot> load_kernel(const SnapshotRequest& r) {
  KernelDumps* kd = kernel_dumps();
  if (!kd) return make_error(Errc::kUnsupported, r.path + ": no target reads kernel dumps");
  LR_ASSIGN(auto k, kd->open(r.path, r.vmlinux, r.dbg));
  LR_ASSIGN(Snapshot s, k->snapshot(r.path));
  s.time = file_time(r.path);
  s.time_from = "file mtime";
  if (!r.profile.empty()) LR_TRY(add_profile(k->prog(), r, s, true));
  return s;
}

}  // namespace

Result<SnapshotInput> snapshot_input(const std::string& path) {
  LR_ASSIGN(int fd, open_input(path, "input"));
  char head[64] = {};
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  std::string_view h(head, n > 0 ? static_cast<size_t>(n) : 0);
  struct stat st {};
  ::fstat(fd, &st);
  const DumpId id = identify_dump_head(h, fd, static_cast<uint64_t>(st.st_size));
  ::close(fd);
  SnapshotInput in;
  if (id.kind == DumpKind::kText) {
    in.kind = SnapshotInput::kText;
    in.text_kind = id.text_kind;
  } else if (looks_like_saved_snapshot(h)) {
    in.kind = SnapshotInput::kSaved;
  } else if (id.kind == DumpKind::kKernelDump) {
    in.kind = SnapshotInput::kKernelDump;
  }
  return in;
}

Result<Snapshot> load_snapshot(const SnapshotRequest& r, SnapshotExtras* extras) {
  LR_ASSIGN(SnapshotInput in, snapshot_input(r.path));
  switch (in.kind) {
    case SnapshotInput::kText:
    case SnapshotInput::kSaved:
      return read_text_snapshot(r.path);
    case SnapshotInput::kKernelDump:
      return load_kernel(r);
    case SnapshotInput::kCore:
      break;
  }
  return load_core(r, extras);
}

}  // namespace lr
