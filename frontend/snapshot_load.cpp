#include "snapshot_load.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <optional>
#include <set>
#include <unordered_map>

#include "alloc_sites.hpp"
#include "cmd_gluster.hpp"
#include "cmd_heap.hpp"
#include "cmd_profile.hpp"
#include "cmd_types.hpp"
#include "corelib/analyses/correlate.hpp"
#include "corelib/analyses/snapshot_io.hpp"
#include "corelib/base/fileio.hpp"
#include "corelib/dump/dump_kind.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/profiles/profile.hpp"
#include "indexed.hpp"
#include "targets/glusterfs/gluster.hpp"
#include "targets/glusterfs/statedump.hpp"
#include "targets/linux/kernel.hpp"

namespace lrcli {

namespace {

// When a core was written: gcore writes it at the moment it snapshots.
double file_time(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
}

// The GlusterFS classes and objects of a core: its statedump rendering,
// read back like GlusterFS's own, plus dicts and fds.
lr::Result<void> add_gluster(lr::Program& prog, const std::string& path, lr::Snapshot& s,
                             CoreExtras* x) {
  LR_TRY(ensure_gluster_types(prog, ""));
  lr::GlusterSections sec;
  LR_ASSIGN(lr::GlusterReport rep, lr::analyze_gluster(prog, sec));
  LR_ASSIGN(lr::Snapshot g, lr::snapshot_from_statedump(statedump_text(rep, sec, path), path));
  s.classes.insert(s.classes.end(), g.classes.begin(), g.classes.end());
  s.objects = std::move(g.objects);
  for (auto& w : g.warnings) s.warnings.push_back(std::move(w));
  lr::add_gluster_objects(s, rep);
  if (x) x->gluster_findings = rep.findings;
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
    x.kind = "profile";
    x.refcount = o.has_refcount ? o.refcount : 0;
    if (!o.verdict.empty())
      x.held = fmt::format("{} held by holders, verdict {}", o.held, o.verdict);
    s_.objects.push_back(std::move(x));
  }
  void set_end(const lr::ProfileSetSummary& sum) override {
    s_.classes.push_back({"profile", sum.set->name, static_cast<int64_t>(sum.objects), -1});
    for (const auto& w : sum.warnings) s_.warnings.push_back(sum.set->name + ": " + w);
    // A walk that stopped early listed a part of the set.
    if ((!sum.warnings.empty() || sum.warnings_dropped) && s_.knows("profile"))
      s_.unknown_kinds.push_back("profile");
  }

 private:
  lr::Snapshot& s_;
};

lr::Result<void> add_profile(lr::Program& prog, const std::string& what, lr::Snapshot& s,
                             bool kernel = false) {
  LR_ASSIGN(lr::Profile prof, lr::find_profile(what, profile_dirs()));
  if (std::string why = lr::profile_mismatch(prog, prof, kernel); !why.empty())
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

// Allocation sites from traces: one "site" class per site, counting its
// blocks still in use in the core.
lr::Result<void> add_sites(lr::Program& prog, const lr::HeapWalk& heap,
                           const std::vector<std::string>& paths, lr::Snapshot& s) {
  LR_ASSIGN(LiveSites ls, live_sites(prog, heap, paths));
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
  return {};
}

// The account's categories as classes (live, leaked, free...): what lets
// diff and trend tell a leak from memory the allocator keeps. Not whole when
// the heap walk met damage.
void add_account(lr::Program& prog, const lr::HeapWalk& heap, const std::string& path,
                 lr::Snapshot& s) {
  auto acc = plain_account(prog, heap);
  if (!acc.ok()) {
    s.warnings.push_back(path + ": no account classes: " + acc.error().message);
    s.unknown_kinds.push_back("account");
    return;
  }
  lr::add_account_classes(s, acc.value());
  for (const auto& w : acc->warnings) s.warnings.push_back(path + ": account: " + w);
  if (!heap.warnings.empty() || !acc->warnings.empty()) s.unknown_kinds.push_back("account");
}

lr::Result<lr::Snapshot> load_core(const Common& c, const std::string& path,
                                   const std::string& profile, CoreExtras* x,
                                   const std::vector<std::string>& traces) {
  Common cc = c;
  cc.core = path;
  LR_ASSIGN(auto prog, open_program(cc));
  lr::Snapshot s;
  s.source = path;
  s.kind = "core";
  s.time = file_time(path);
  s.time_from = "file mtime";
  s.warnings = prog->warnings();
  if (auto* exe = prog->modules().exe()) s.build_id = exe->build_id;
  auto heap = read_heap(*prog);
  if (heap.ok()) {
    lr::add_heap_classes(s, heap.value());
    for (const auto& w : heap->warnings) s.warnings.push_back(path + ": heap: " + w);
    // A walk that met damage counted a part: its classes are not the whole.
    if (!heap->warnings.empty()) s.unknown_kinds.push_back("heap");
    add_account(*prog, heap.value(), path, s);
  } else {
    s.warnings.push_back(path + ": no heap classes: " + heap.error().message);
    s.unknown_kinds.push_back("heap");
    s.unknown_kinds.push_back("account");
  }
  if (!traces.empty()) {
    if (!heap.ok())
      return lr::make_error(lr::Errc::kNotFound,
                            path + ": --trace needs the core's heap: " + heap.error().message);
    LR_TRY(add_sites(*prog, heap.value(), traces, s));
  }
  bool gluster = false;
  for (const auto& m : prog->modules().modules())
    gluster = gluster || m->basename().rfind("libglusterfs.so", 0) == 0;
  if (gluster) LR_TRY(add_gluster(*prog, path, s, x));
  if (!profile.empty()) LR_TRY(add_profile(*prog, profile, s));
  if (x) {
    x->gluster = gluster;
    x->prog = std::move(prog);
  }
  return s;
}

// A kernel dump: its slab caches, super blocks, fds per command, dentries,
// files and modules (kernel_snapshot), and a profile's sets on request.
lr::Result<lr::Snapshot> load_kernel(const Common& c, const std::string& path,
                                     const std::string& profile) {
  lr::DebugOptions dbg;
  dbg.sysroot = c.sysroot;
  dbg.debug_dirs = c.debug_dirs;
  LR_ASSIGN(auto k, lr::KernelTarget::open(path, c.vmlinux, dbg));
  LR_ASSIGN(lr::Snapshot s, lr::kernel_snapshot(*k, path));
  s.time = file_time(path);
  s.time_from = "file mtime";
  if (!profile.empty()) LR_TRY(add_profile(k->prog(), profile, s, true));
  return s;
}

}  // namespace

lr::Result<lr::Snapshot> load_snapshot(const Common& c, const std::string& path,
                                       const std::string& profile, CoreExtras* extras,
                                       const std::vector<std::string>& traces) {
  LR_ASSIGN(int fd, lr::open_input(path, "input"));
  char head[64] = {};
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  std::string_view h(head, n > 0 ? static_cast<size_t>(n) : 0);
  struct stat st {};
  ::fstat(fd, &st);
  const lr::DumpId id = lr::identify_dump_head(h, fd, static_cast<uint64_t>(st.st_size));
  ::close(fd);
  bool text = id.kind == lr::DumpKind::kText || lr::looks_like_saved_snapshot(h);
  if (text && (!profile.empty() || !traces.empty()))
    return lr::make_error(
        lr::Errc::kInvalidArgument,
        fmt::format("{} is a {}: --{} runs on cores", path,
                    id.kind == lr::DumpKind::kText ? id.text_kind : "saved snapshot",
                    profile.empty() ? "trace" : "profile"));
  if (text) return lr::read_text_snapshot(path);
  if (id.kind != lr::DumpKind::kKernelDump) return load_core(c, path, profile, extras, traces);
  if (!traces.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          path + " is a kernel dump: --trace (allocation traces) is for cores");
  return load_kernel(c, path, profile);
}

std::string snapshot_time(double t, const std::string& unknown) {
  if (t <= 0) return unknown;
  std::time_t s = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", tm);
}

nlohmann::json verdict_json(const lr::Snapshot& older, const lr::Snapshot& newer) {
  const lr::GrowthVerdict v = lr::growth_verdict(older, newer);
  if (v.kind.empty()) return nullptr;
  return {{"kind", v.kind}, {"text", v.text}};
}

std::string verdict_line(const lr::Snapshot& older, const lr::Snapshot& newer) {
  const lr::GrowthVerdict v = lr::growth_verdict(older, newer);
  return v.kind.empty() ? "" : fmt::format("verdict: {}: {}\n", v.kind, v.text);
}

}  // namespace lrcli
