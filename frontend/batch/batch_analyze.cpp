// One dump of an archive, analysed the way the single-dump commands do it:
// `leakref snapshot` (classes), `leakref gluster` (findings), `leakref
// kernel check` (violations) and `leakref profile --flagged` with every
// installed profile meant for the dump (or the ones asked for), and for a
// process core the nodes retaining most (`leakref retained`). The result is
// one leakref.batch-result/1 document.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "corelib/analyses/diff.hpp"
#include "corelib/answers/profile_match.hpp"
#include "corelib/answers/retained.hpp"
#include "corelib/base/decompress.hpp"
#include "corelib/base/fileio.hpp"
#include "corelib/dump/dump_kind.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/profiles/profile.hpp"
#include "corelib/registry/target.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/render.hpp"
#include "frontend/batch/batch.hpp"
#include "frontend/process/cmd_profile.hpp"
#include "frontend/series/snapshot_load.hpp"

namespace lrcli {

namespace {

using nlohmann::json;

constexpr size_t kMaxFlagged = 1000;  // objects kept per dump (all are counted)
constexpr size_t kMaxWarnings = 100;
constexpr size_t kMaxRetainers = 20;  // nodes kept per dump, largest retained first

// Collects a profile's sets as classes and its flagged objects as
// `leakref profile --json --flagged` lists them.
class FlagSink : public lr::ProfileSink {
 public:
  FlagSink(json& res, const std::string& profile) : res_(res), profile_(profile) {}
  void set_begin(const lr::ProfileSetSummary& s) override { holders_ = s.active_holders; }
  void object(const lr::ProfileObject& o) override {
    if (!profile_flagged(o)) return;
    res_["flagged_total"] = res_["flagged_total"].get<uint64_t>() + 1;
    if (res_["flagged"].size() >= kMaxFlagged) return;
    json j = profile_object_json(o, holders_);
    j["profile"] = profile_;
    j["set"] = o.set->name;
    res_["flagged"].push_back(std::move(j));
  }
  void set_end(const lr::ProfileSetSummary& s) override {
    res_["classes"].push_back(
        {{"kind", "profile"}, {"name", s.set->name}, {"count", s.objects}, {"bytes", nullptr}});
    for (const auto& w : s.warnings) warn(res_, profile_ + ": " + s.set->name + ": " + w);
  }
  static void warn(json& res, const std::string& w) {
    if (res["warnings"].size() < kMaxWarnings) res["warnings"].push_back(w);
  }

 private:
  json& res_;
  std::string profile_;
  std::vector<std::string> holders_;
};

// The installed profiles meant for this dump (its [match]), or the ones
// `o.profiles` names, run with their flagged objects kept.
void run_profiles(lr::Program& prog, bool kernel, const BatchOptions& o, json& res) {
  std::vector<std::string> why;
  auto profiles = lr::pick_profiles(prog, kernel, o.profiles, profile_dirs(), &why);
  for (const auto& w : why) FlagSink::warn(res, w);
  for (const auto& prof : profiles) {
    if (!kernel)
      if (auto t = lr::ensure_profile_types(prog, prof, nullptr); !t.ok()) {
        FlagSink::warn(res, prof.name + ": not run: " + t.error().message);
        continue;
      }
    res["profiles"].push_back(prof.name);
    FlagSink sink(res, prof.name);
    if (auto r = lr::run_profile(prog, prof, {}, sink); !r.ok())
      FlagSink::warn(res, prof.name + ": " + r.error().message);
  }
}

json finding_json(const lr::TargetFinding& f) {
  return {{"source", f.source},
          {"kind", f.kind},
          {"addr", f.addr ? json(hex(*f.addr)) : json(nullptr)},
          {"message", f.message}};
}

json class_json(const lr::SnapClass& c) {
  return {{"kind", c.kind},
          {"name", c.name},
          {"count", c.count},
          {"bytes", c.bytes < 0 ? json(nullptr) : json(c.bytes)}};
}

// The nodes retaining most of a process core's heap (retained.hpp), for
// SQL ("which dumps have an inode table retaining over 1 GB"): the largest
// of every node but the top, with its type and place. A core whose index
// cannot be built keeps none, with a warning.
void add_retainers(lr::Program& prog, json& res) {
  auto core = lr::index_program(prog, false);
  if (!core.ok()) {
    FlagSink::warn(res, "retainers: " + core.error().message);
    return;
  }
  lr::KnownObjects none;
  lr::RefNamer names(core.value(), none);
  auto t = lr::retained_tree(core.value(), names, false);
  if (!t.ok()) {
    FlagSink::warn(res, "retainers: " + t.error().message);
    return;
  }
  const lr::RetainedTree& tree = t.value();
  std::vector<uint32_t> nodes(tree.nodes() - 1);
  for (uint32_t v = 0; v < nodes.size(); ++v) nodes[v] = v;
  // Equal sizes: the outer node first (a holder before the one block it
  // holds), as `retained --tree top` lists them.
  std::vector<uint32_t> depth(tree.nodes(), 0);
  tree.top_down([&](uint32_t v) {
    if (v != tree.top()) depth[v] = depth[tree.idom(v)] + 1;
  });
  const size_t k = std::min(kMaxRetainers, nodes.size());
  std::partial_sort(nodes.begin(), nodes.begin() + k, nodes.end(), [&](uint32_t a, uint32_t b) {
    if (tree.retained(a) != tree.retained(b)) return tree.retained(a) > tree.retained(b);
    return depth[a] != depth[b] ? depth[a] < depth[b] : a < b;
  });
  for (size_t i = 0; i < k; ++i) {
    const uint32_t v = nodes[i];
    const char* kind = tree.is_block(v) ? "block" : v == tree.leaked() ? "leaked" : "holder";
    res["retainers"].push_back({{"node", lr::node_id(tree, v)},
                                {"kind", kind},
                                {"type", tree.is_block(v) ? json(tree.type(v)) : json(nullptr)},
                                {"place", lr::place_text(tree, v)},
                                {"retained", tree.retained(v)},
                                {"retained_blocks", tree.retained_blocks(v)}});
  }
  for (const auto& p : tree.partial) FlagSink::warn(res, "retainers: partial: " + p);
}

lr::Result<void> analyze_user(const std::string& file, const BatchOptions& o, json& res) {
  DumpOptions c;
  c.sysroot = o.sysroot;
  c.debug_dirs = o.debug_dirs;
  lr::SnapshotExtras x;
  LR_ASSIGN(lr::Snapshot s, load_snapshot(c, file, "", &x));
  res["kind"] = s.kind;
  if (x.prog) {
    if (auto* exe = x.prog->modules().exe()) res["program"] = exe->basename();
    res["build_id"] = s.build_id.empty() ? json(nullptr) : json(s.build_id);
  } else {
    res["program"] = "glusterfs";  // a statedump names no program; GlusterFS wrote it
  }
  res["objects"] = s.objects.size();
  for (const auto& cl : s.classes) res["classes"].push_back(class_json(cl));
  for (const auto& f : x.findings) res["findings"].push_back(finding_json(f));
  for (const auto& w : s.warnings) FlagSink::warn(res, w);
  if (x.prog) run_profiles(*x.prog, false, o, res);
  if (x.prog && x.prog->core()) add_retainers(*x.prog, res);
  // Classes counted in part are not an ok answer (a truncated core's heap).
  if (!s.unknown_kinds.empty()) {
    res["status"] = "partial";
    res["error"] =
        fmt::format("{} not counted whole (see warnings)", fmt::join(s.unknown_kinds, ", "));
    res["error_code"] = "partial";
  }
  return {};
}

lr::Result<void> analyze_kernel(const std::string& file, const BatchOptions& o, json& res) {
  lr::KernelDumps* kd = lr::kernel_dumps();
  if (!kd) return lr::make_error(lr::Errc::kUnsupported, file + ": no target reads kernel dumps");
  lr::DebugOptions dbg;
  dbg.sysroot = o.sysroot;
  dbg.debug_dirs = o.debug_dirs;
  LR_ASSIGN(auto k, kd->open(file, "", dbg));
  res["kind"] = "vmcore";
  res["program"] = k->program();
  std::string bid = k->build_id();
  res["build_id"] = bid.empty() ? json(nullptr) : json(bid);
  LR_ASSIGN(auto findings, k->findings());
  for (const auto& f : findings) res["findings"].push_back(finding_json(f));
  run_profiles(k->prog(), true, o, res);
  for (const auto& w : k->warnings()) FlagSink::warn(res, w);
  return {};
}

// systemd-coredump's name says when the process died:
// core.COMM.UID.BOOTID.PID.USEC[.zst] (the file's mtime is when it was copied).
double coredump_time(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  if (base.rfind("core.", 0) != 0) return 0;
  for (const char* ext : {".zst", ".xz", ".lz4", ".gz"})
    if (base.size() > std::strlen(ext) &&
        base.compare(base.size() - std::strlen(ext), std::string::npos, ext) == 0)
      base.resize(base.size() - std::strlen(ext));
  size_t dot = base.rfind('.');
  std::string usec = base.substr(dot + 1);
  if (usec.size() < 13 || usec.size() > 19 ||
      usec.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return std::stod(usec) / 1e6;
}

// A decompressed dump (gigabytes) is removed when the analysis is killed
// (SIGTERM from a timeout or Slurm, SIGINT, SIGHUP) as well as when it ends:
// the handler does only what is async-signal-safe, then dies of the signal.
char g_expanded[PATH_MAX], g_expanded_dir[PATH_MAX];

extern "C" void remove_expanded(int sig) {
  if (g_expanded[0]) ::unlink(g_expanded);
  if (g_expanded_dir[0]) ::rmdir(g_expanded_dir);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void guard_expanded(const std::string& file, const std::string& dir) {
  if (file.size() >= PATH_MAX || dir.size() >= PATH_MAX) return;
  std::memcpy(g_expanded, file.c_str(), file.size() + 1);
  std::memcpy(g_expanded_dir, dir.c_str(), dir.size() + 1);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, remove_expanded);
}

void unguard_expanded() {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, SIG_DFL);
  g_expanded[0] = g_expanded_dir[0] = 0;
}

lr::Result<void> analyze_file(const DumpFile& d, const BatchOptions& o, json& res,
                              std::string& expanded) {
  LR_ASSIGN(lr::DumpId id, lr::identify_dump(d.path));
  std::string kind = id.name();
  std::string file = d.path, tmpdir;
  res["compression"] = lr::compression_name(id.compression);
  if (id.compression != lr::Compression::kNone) {
    std::string base =
        o.work_dir.empty() ? (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") : o.work_dir;
    std::string tmpl = base + "/leakref-batch-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
      return lr::make_error(lr::Errc::kIo, fmt::format("{}: cannot make a directory: {}", base,
                                                       std::strerror(errno)));
    tmpdir = tmpl;
    file = tmpdir + "/dump";
    expanded = file;
    guard_expanded(file, tmpdir);
    auto n = lr::decompress_file(d.path, id.compression, file, o.max_core_mib << 20,
                                 [](std::string_view head) { return lr::dump_extent(head); });
    if (!n.ok()) {
      ::unlink(file.c_str());
      ::rmdir(tmpdir.c_str());
      unguard_expanded();
      return n.error();
    }
    auto inner = lr::identify_dump(file);
    if (inner.ok()) kind = inner->name();
  }
  struct Cleanup {
    std::string f, dir;
    ~Cleanup() {
      if (!dir.empty()) {
        ::unlink(f.c_str());
        ::rmdir(dir.c_str());
        unguard_expanded();
      }
    }
  } cleanup{file, tmpdir};
  if (kind.empty())
    return lr::make_error(lr::Errc::kBadFormat,
                          d.path +
                              ": not a dump leakref reads (neither an ELF core, a kdump "
                              "file, a GlusterFS statedump nor one of those compressed)");
  res["kind"] = kind;
  if (double t = coredump_time(d.path); t > 0) res["taken"] = t;
  if (kind == "vmcore") return analyze_kernel(file, o, res);
  return analyze_user(file, o, res);
}

// A dump's bucket: what program, which build, how it ended, what kinds of
// findings and which sets hold its flagged objects.
std::string signature_text(const json& r) {
  auto str = [&](const char* k, const char* none) {
    return r[k].is_string() ? r[k].get<std::string>() : std::string(none);
  };
  std::string s = fmt::format("{}|{}|{}|{}", str("kind", "?"), str("program", "?"),
                              str("build_id", "-"), str("status", "?"));
  if (r["status"] != "ok") return s + "|" + str("error_code", "");
  std::set<std::string> kinds;
  for (const auto& f : r["findings"])
    kinds.insert(f["source"].get<std::string>() + ":" + f["kind"].get<std::string>());
  std::map<std::string, size_t> sets;
  for (const auto& f : r["flagged"])
    sets[f["profile"].get<std::string>() + "/" + f["set"].get<std::string>()]++;
  std::vector<std::pair<size_t, std::string>> by;
  for (auto& [k, n] : sets) by.push_back({n, k});
  std::sort(by.begin(), by.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  s += "|findings:";
  for (const auto& k : kinds) s += k + ",";
  s += "|flagged:";
  for (size_t i = 0; i < by.size() && i < 3; ++i) s += by[i].second + ",";
  return s;
}

}  // namespace

std::string signature_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

nlohmann::json analyze_dump(const DumpFile& d, const BatchOptions& o) {
  json res{{"schema", "leakref.batch-result/1"},
           {"path", d.path},
           {"size", d.size},
           {"mtime_ns", d.mtime_ns},
           {"compression", "none"},
           {"kind", nullptr},
           {"status", "ok"},
           {"error", nullptr},
           {"error_code", nullptr},
           {"program", nullptr},
           {"build_id", nullptr},
           {"taken", static_cast<double>(d.mtime_ns) / 1e9},
           {"profiles", json::array()},
           {"objects", 0},
           {"classes", json::array()},
           {"findings", json::array()},
           {"flagged", json::array()},
           {"flagged_total", 0},
           {"retainers", json::array()},
           {"warnings", json::array()}};
  std::string expanded;  // a compressed dump's temporary file, named as the dump in messages
  if (auto r = analyze_file(d, o, res, expanded); !r.ok()) {
    res["status"] = "error";
    res["error"] = r.error().message;
    res["error_code"] = lr::errc_name(r.error().code);
  }
  if (!expanded.empty()) {
    auto rename = [&](json& v) {
      if (!v.is_string()) return;
      std::string t = v.get<std::string>();
      for (size_t at; (at = t.find(expanded)) != std::string::npos;)
        t.replace(at, expanded.size(), d.path + " (expanded)");
      v = t;
    };
    rename(res["error"]);
    for (auto& w : res["warnings"]) rename(w);
  }
  std::string sig = signature_text(res);
  res["signature_text"] = sig;
  res["signature"] = signature_hash(sig);
  return res;
}

}  // namespace lrcli
