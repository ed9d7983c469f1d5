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
#include "corelib/base/fileio.hpp"
#include "corelib/dump/dump_kind.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/profiles/profile.hpp"
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

// A statedump or a saved snapshot is text; 1 GiB is far beyond either.
constexpr size_t kMaxText = 1ull << 30;

lr::Result<std::string> read_text(const std::string& path, int fd) {
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return lr::make_error(lr::Errc::kIo, path + ": read failed");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxText)
      return lr::make_error(lr::Errc::kBadFormat, path + ": over 1 GiB of text");
  }
  return text;
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
  } else {
    s.warnings.push_back(path + ": no heap classes: " + heap.error().message);
    s.unknown_kinds.push_back("heap");
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
  bool statedump = id.kind == lr::DumpKind::kText && id.text_kind == "statedump";
  // JSON (an object, or anything else a JSON file holds): checked as
  // leakref.snapshot/1, not taken for a core.
  size_t first = h.find_first_not_of(" \t\r\n");
  bool saved =
      !statedump && first != std::string_view::npos && (h[first] == '{' || h[first] == '[');
  bool kernel = id.kind == lr::DumpKind::kKernelDump;
  if (!statedump && !saved) {
    ::close(fd);
    if (kernel && !traces.empty())
      return lr::make_error(lr::Errc::kInvalidArgument,
                            path + " is a kernel dump: --trace (allocation traces) is for cores");
    if (kernel) return load_kernel(c, path, profile);
    return load_core(c, path, profile, extras, traces);
  }
  auto text = read_text(path, fd);
  ::close(fd);
  if (!text.ok()) return text.error();
  if (!profile.empty() || !traces.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          fmt::format("{} is a {}: --{} runs on cores", path,
                                      statedump ? "statedump" : "saved snapshot",
                                      profile.empty() ? "trace" : "profile"));
  if (statedump) return lr::snapshot_from_statedump(text.value(), path);
  nlohmann::json j = nlohmann::json::parse(text.value(), nullptr, false);
  if (j.is_discarded())
    return lr::make_error(lr::Errc::kBadFormat, path + ": a leakref.snapshot/1 that is not JSON");
  return snapshot_from_json(j, path);
}

std::string snapshot_time(double t, const std::string& unknown) {
  if (t <= 0) return unknown;
  std::time_t s = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", tm);
}

nlohmann::json snapshot_json(const lr::Snapshot& s) {
  nlohmann::json classes = nlohmann::json::array(), objects = nlohmann::json::array();
  for (const auto& c : s.classes)
    classes.push_back({{"kind", c.kind},
                       {"name", c.name},
                       {"count", c.count},
                       {"bytes", c.bytes < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.bytes)}});
  for (const auto& o : s.objects) {
    objects.push_back(
        {{"key", o.key}, {"class", o.cls}, {"refcount", o.refcount}, {"held", o.held}});
    if (!o.kind.empty()) objects.back()["kind"] = o.kind;
  }
  nlohmann::json j;
  j["schema"] = "leakref.snapshot/1";
  j["source"] = s.source;
  j["kind"] = s.kind;
  j["build_id"] = s.build_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.build_id);
  j["time"] = s.time > 0 ? nlohmann::json(s.time) : nlohmann::json(nullptr);
  j["time_from"] = s.time > 0 ? nlohmann::json(s.time_from) : nlohmann::json(nullptr);
  j["classes"] = classes;
  j["unknown_kinds"] = s.unknown_kinds;
  j["objects"] = objects;
  j["warnings"] = s.warnings;
  return j;
}

namespace {

// A saved snapshot is input like any other: every member is checked for
// its type and range, so a hostile number never becomes a count (2^64-1
// read as -1, INT64_MIN growing by 2^63) and a bad time is refused, not
// quietly unknown. Messages name the member, not the JSON library.
struct SnapReader {
  const std::string& path;
  lr::Error bad(const std::string& what) const {
    return lr::make_error(lr::Errc::kBadFormat, path + ": not a leakref.snapshot/1: " + what);
  }
  lr::Result<std::string> str(const nlohmann::json& o, const char* k, bool null_ok = false) const {
    if (!o.is_object() || !o.contains(k)) return bad(fmt::format("'{}' is missing", k));
    if (null_ok && o[k].is_null()) return std::string();
    if (!o[k].is_string()) return bad(fmt::format("'{}' is not a string", k));
    return o[k].get<std::string>();
  }
  // An integer in [lo, hi]; `null_as` when null is allowed (else refused).
  lr::Result<int64_t> num(const nlohmann::json& o, const char* k, int64_t lo, int64_t hi,
                          std::optional<int64_t> null_as = std::nullopt) const {
    if (!o.is_object() || !o.contains(k)) return bad(fmt::format("'{}' is missing", k));
    const auto& v = o[k];
    if (v.is_null() && null_as) return *null_as;
    bool fits = v.is_number_integer() &&
                (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                        : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi);
    if (!fits)
      return bad(fmt::format("'{}' is {}, not an integer from {} to {}", k, v.dump(), lo, hi));
    return v.get<int64_t>();
  }
  lr::Result<double> time(const nlohmann::json& j) const {
    if (!j.contains("time") || j["time"].is_null()) return 0.0;
    const auto& t = j["time"];
    // 1970 to 2500: a snapshot's time in seconds; anything else is damage.
    if (!t.is_number() || !(t.get<double>() > 0 && t.get<double>() < 16725225600.0))
      return bad(fmt::format("'time' is {}, not seconds since 1970", t.dump()));
    return t.get<double>();
  }
};

constexpr int64_t kMaxSnapCount = int64_t{1} << 48;

lr::Result<void> read_classes(const SnapReader& r, const nlohmann::json& j, lr::Snapshot& s) {
  if (!j.contains("classes") || !j["classes"].is_array()) return r.bad("'classes' is not a list");
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& c : j["classes"]) {
    LR_ASSIGN(std::string kind, r.str(c, "kind"));
    LR_ASSIGN(std::string name, r.str(c, "name"));
    if (!seen.insert({kind, name}).second)
      return r.bad(fmt::format("class {} '{}' is listed twice", kind, name));
    LR_ASSIGN(int64_t count, r.num(c, "count", 0, kMaxSnapCount));
    LR_ASSIGN(int64_t bytes, r.num(c, "bytes", 0, kMaxSnapCount, -1));
    s.classes.push_back({kind, name, count, bytes});
  }
  return {};
}

lr::Result<void> read_objects(const SnapReader& r, const nlohmann::json& j, lr::Snapshot& s) {
  if (!j.contains("objects") || !j["objects"].is_array()) return r.bad("'objects' is not a list");
  for (const auto& o : j["objects"]) {
    LR_ASSIGN(std::string key, r.str(o, "key"));
    LR_ASSIGN(std::string cls, r.str(o, "class"));
    LR_ASSIGN(int64_t rc, r.num(o, "refcount", INT32_MIN, INT32_MAX));
    LR_ASSIGN(std::string held, r.str(o, "held"));
    std::string kind;
    if (o.contains("kind")) {
      LR_ASSIGN(kind, r.str(o, "kind"));
    }
    s.objects.push_back({key, cls, rc, held, kind});
  }
  return {};
}

}  // namespace

lr::Result<lr::Snapshot> snapshot_from_json(const nlohmann::json& j, const std::string& path) {
  SnapReader r{path};
  if (!j.is_object()) return r.bad("the document is not a JSON object");
  if (j.value("schema", "") != "leakref.snapshot/1")
    return r.bad("its schema is not leakref.snapshot/1");
  lr::Snapshot s;
  LR_ASSIGN(s.source, r.str(j, "source"));
  LR_ASSIGN(s.kind, r.str(j, "kind"));
  if (s.kind != "core" && s.kind != "statedump" && s.kind != "vmcore")
    return r.bad("kind '" + s.kind + "'");
  LR_ASSIGN(s.build_id, r.str(j, "build_id", true));
  LR_ASSIGN(s.time, r.time(j));
  if (s.time > 0)
    s.time_from = j.contains("time_from") && j["time_from"].is_string()
                      ? "saved snapshot (" + j["time_from"].get<std::string>() + ")"
                      : "saved snapshot";
  LR_TRY(read_classes(r, j, s));
  if (j.contains("unknown_kinds")) {
    if (!j["unknown_kinds"].is_array()) return r.bad("'unknown_kinds' is not a list");
    for (const auto& k : j["unknown_kinds"]) {
      if (!k.is_string()) return r.bad("an unknown kind is not a string");
      s.unknown_kinds.push_back(k.get<std::string>());
    }
  }
  LR_TRY(read_objects(r, j, s));
  if (!j.contains("warnings") || !j["warnings"].is_array())
    return r.bad("'warnings' is not a list");
  for (const auto& w : j["warnings"]) {
    if (!w.is_string()) return r.bad("a warning is not a string");
    s.warnings.push_back(w.get<std::string>());
  }
  return s;
}

}  // namespace lrcli
