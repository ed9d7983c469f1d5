#include "snapshot_load.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <unordered_map>

#include "cmd_gluster.hpp"
#include "cmd_heap.hpp"
#include "cmd_profile.hpp"
#include "cmd_types.hpp"
#include "corelib/analyses/correlate.hpp"
#include "corelib/base/fileio.hpp"
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

// Heap blocks by allocation site: the records of `paths` never freed in
// them whose block is live in this core. A maps file among them lends its
// mappings to traces that carry none (as for correlate).
lr::Result<void> add_sites(lr::Program& prog, const lr::HeapWalk& heap,
                           const std::vector<std::string>& paths, lr::Snapshot& s) {
  std::vector<lr::Trace> traces;
  std::vector<lr::TraceMapping> maps;
  for (const auto& p : paths) {
    LR_ASSIGN(auto t, lr::load_trace(p));
    if (t.format == lr::TraceFormat::kMaps)
      maps.insert(maps.end(), t.mappings.begin(), t.mappings.end());
    else
      traces.push_back(std::move(t));
  }
  for (auto& t : traces)
    if (t.mappings.empty()) t.mappings = maps;
  lr::FrameResolver fr(&prog.modules(), prog.core());
  lr::CorrelateOptions opts;
  opts.top = SIZE_MAX;
  lr::CorrelateReport rep = lr::correlate(traces, {}, fr, opts, &heap);
  if (rep.alloc_sites.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "--trace: no allocation records (leakref-trace --malloc, mmleak or bcc "
                          "memleak output) in " +
                              fmt::format("{}", fmt::join(paths, ", ")));
  for (const auto& site : rep.alloc_sites)
    s.classes.push_back({"site", site.text, static_cast<int64_t>(site.live_count),
                         static_cast<int64_t>(site.live_bytes)});
  for (const auto& w : rep.warnings) s.warnings.push_back(w);
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
  s.warnings = prog->warnings();
  if (auto* exe = prog->modules().exe()) s.build_id = exe->build_id;
  auto heap = read_heap(*prog);
  if (heap.ok())
    lr::add_heap_classes(s, heap.value());
  else
    s.warnings.push_back(path + ": no heap classes: " + heap.error().message);
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
  if (!profile.empty()) LR_TRY(add_profile(k->prog(), profile, s, true));
  return s;
}

}  // namespace

lr::Result<lr::Snapshot> load_snapshot(const Common& c, const std::string& path,
                                       const std::string& profile, CoreExtras* extras,
                                       const std::vector<std::string>& traces) {
  LR_ASSIGN(int fd, lr::open_input(path, "input"));
  char head[32] = {};
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  std::string_view h(head, n > 0 ? static_cast<size_t>(n) : 0);
  bool statedump = lr::looks_like_statedump(h);
  bool saved = !h.empty() && h.front() == '{';  // JSON: checked as leakref.snapshot/1
  struct stat st {};
  bool kernel = !statedump && !saved && ::fstat(fd, &st) == 0 &&
                lr::is_kernel_dump(fd, static_cast<uint64_t>(st.st_size));
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
  for (const auto& o : s.objects)
    objects.push_back(
        {{"key", o.key}, {"class", o.cls}, {"refcount", o.refcount}, {"held", o.held}});
  nlohmann::json j;
  j["schema"] = "leakref.snapshot/1";
  j["source"] = s.source;
  j["kind"] = s.kind;
  j["build_id"] = s.build_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.build_id);
  j["time"] = s.time > 0 ? nlohmann::json(s.time) : nlohmann::json(nullptr);
  j["classes"] = classes;
  j["objects"] = objects;
  j["warnings"] = s.warnings;
  return j;
}

lr::Result<lr::Snapshot> snapshot_from_json(const nlohmann::json& j, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return lr::make_error(lr::Errc::kBadFormat, path + ": not a leakref.snapshot/1: " + what);
  };
  try {
    if (!j.is_object() || j.value("schema", "") != "leakref.snapshot/1") return bad("schema");
    lr::Snapshot s;
    s.source = j.at("source").get<std::string>();
    s.kind = j.at("kind").get<std::string>();
    if (s.kind != "core" && s.kind != "statedump" && s.kind != "vmcore")
      return bad("kind '" + s.kind + "'");
    if (j.at("build_id").is_string()) s.build_id = j["build_id"].get<std::string>();
    if (j.at("time").is_number()) s.time = j["time"].get<double>();
    for (const auto& c : j.at("classes"))
      s.classes.push_back({c.at("kind").get<std::string>(), c.at("name").get<std::string>(),
                           c.at("count").get<int64_t>(),
                           c.at("bytes").is_null() ? -1 : c["bytes"].get<int64_t>()});
    for (const auto& o : j.at("objects"))
      s.objects.push_back({o.at("key").get<std::string>(), o.at("class").get<std::string>(),
                           o.at("refcount").get<int64_t>(), o.at("held").get<std::string>()});
    for (const auto& w : j.at("warnings")) s.warnings.push_back(w.get<std::string>());
    return s;
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
}

}  // namespace lrcli
