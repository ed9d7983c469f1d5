// GlusterFS as a program target (gluster_target.hpp).
#include "targets/glusterfs/gluster_target.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "corelib/debuginfo/open_core.hpp"
#include "targets/glusterfs/gluster.hpp"
#include "targets/glusterfs/gluster_types.hpp"
#include "targets/glusterfs/statedump.hpp"

namespace lr {

namespace {

// The library that makes a process GlusterFS: every GlusterFS program (the
// FUSE client, a brick, glusterd, a gfapi program) maps it.
bool is_libglusterfs(std::string_view basename) {
  return basename.rfind("libglusterfs.so", 0) == 0;
}

// A report's blocks as the engine asks for them.
class GlusterTagger final : public BlockTagger {
 public:
  GlusterTagger(GlusterReport r, const Memory& mem) : r_(std::move(r)), namer_(r_, mem) {}
  const HeapWalk* heap() const override { return &r_.heap_walk; }
  std::vector<uint64_t> pooled_free() const override { return r_.dead_pooled; }
  std::string name(const HeapChunk& c) const override { return namer_.name(c); }
  std::string owner(const HeapChunk& c) const override { return namer_.parts(c).xlator; }
  std::vector<AccountRange> account_ranges(std::vector<std::string>* warnings) const override {
    for (const auto& ar : r_.iobuf_arenas)
      if (!ar.why.empty())
        warnings->push_back(fmt::format(
            "GlusterFS iobuf arena {:#x}: {}; {}", ar.addr, ar.why,
            ar.region ? "its bytes are unknown" : "its bytes are counted by their mapping"));
    return gluster_iobuf_ranges(r_);
  }
  KeptObjects kept() const override {
    GfLruHeld h = gluster_lru_held(r_);
    return {std::move(h.keys), std::move(h.objects)};
  }

 private:
  GlusterReport r_;  // the namer borrows it: the tagger is never moved
  GfBlockNamer namer_;
};

std::vector<TargetFinding> findings_of(const GlusterReport& r) {
  std::vector<TargetFinding> out;
  for (const auto& f : r.findings) out.push_back({"gluster", f.kind, f.addr, f.message});  // key()
  return out;
}

class Glusterfs final : public ProcessTarget {
 public:
  std::string name() const override { return "GlusterFS"; }
  std::string key() const override { return "gluster"; }
  bool owns_module(std::string_view basename) const override { return is_libglusterfs(basename); }
  std::string module_hint() const override { return "libglusterfs"; }
  std::string pools() const override { return "GlusterFS mem-pools"; }
  Result<TypesSource> ensure_types(Program& prog, const std::string& types_file) override {
    return ensure_gluster_types(prog, types_file);
  }
  std::string_view builtin_profile() const override { return glusterfs_profile_text(); }
  std::string builtin_profile_source() const override { return "glusterfs (built in)"; }
  Result<std::unique_ptr<BlockTagger>> tagger(Program& prog, bool caches) override {
    GlusterSections sec;
    sec.dicts = sec.clients = sec.fds = false;
    sec.itable = caches;
    LR_ASSIGN(GlusterReport r, analyze_gluster(prog, sec));
    return std::unique_ptr<BlockTagger>(std::make_unique<GlusterTagger>(std::move(r), prog.mem()));
  }
  std::vector<std::string> object_kinds() const override { return {"dict", "inode", "fd"}; }
  // Every inode of every table, explained as libglusterfs takes its refs;
  // dicts and fds explained by the pointers to them in live memory.
  Result<ProgramObjects> objects(Program& prog, const std::string&) override {
    GlusterSections sec;
    auto rep = std::make_shared<GlusterReport>();
    LR_ASSIGN(*rep, analyze_gluster(prog, sec));
    GlusterCorrelateObjects g = gluster_correlate_objects(*rep);
    ProgramObjects po;
    po.objects = std::move(g.objects);
    po.scan = std::move(g.scan);
    po.heap = &rep->heap_walk;
    po.pooled_free = rep->dead_pooled;
    po.warnings = rep->warnings;
    po.keep = rep;
    return po;
  }
  // The statedump rendering of the core, read back like GlusterFS's own,
  // plus dicts and fds.
  Result<ProgramSnapshot> snapshot(Program& prog, const std::string& source, Snapshot& s) override {
    GlusterSections sec;
    LR_ASSIGN(GlusterReport rep, analyze_gluster(prog, sec));
    LR_ASSIGN(Snapshot g,
              snapshot_from_statedump(gluster_statedump_text(rep, sec, source), source));
    s.classes.insert(s.classes.end(), g.classes.begin(), g.classes.end());
    s.objects = std::move(g.objects);
    for (auto& w : g.warnings) s.warnings.push_back(std::move(w));
    add_gluster_objects(s, rep);
    return ProgramSnapshot{findings_of(rep)};
  }
};

}  // namespace

Module* libglusterfs_module(const ModuleSet& mods) {
  for (const auto& m : mods.modules())
    if (is_libglusterfs(m->basename())) return m.get();
  return nullptr;
}

// Real debuginfo first; else the given file; else the cache, built on first use.
Result<TypesSource> ensure_gluster_types(Program& prog, const std::string& types_file) {
  const std::string& opt = types_origin().prefix;
  if (!types_file.empty()) {
    struct stat st;
    if (::stat(types_file.c_str(), &st) != 0)
      return make_error(Errc::kIo, fmt::format("{}{}: {}", opt, types_file, std::strerror(errno)));
    prog.modules().add_types(types_file);
    return TypesSource{types_file, ""};
  }
  Module* lib = libglusterfs_module(prog.modules());
  if (!lib)
    return make_error(Errc::kNotFound, "libglusterfs.so.0 is not mapped: not a GlusterFS process");
  if (lib->has_dwarf() && prog.types().find("glusterfs_ctx_t").ok())
    return TypesSource{"debuginfo " + lib->debug_path, ""};
  for (const auto& m : prog.modules().modules())  // a types file
    if (m->types_only && prog.types().find("glusterfs_ctx_t").ok())
      return TypesSource{m->debug_path, ""};
  std::string path = gluster_types_cache_path(lib->build_id);
  if (path.empty())
    return make_error(Errc::kNotFound, "no cache directory (HOME unset): pass " + opt + "FILE");
  TypesSource out{path, ""};
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    std::string cmd;
    auto b = build_gluster_types(path, {}, &cmd);
    if (!b.ok())
      return make_error(b.error().code, "no GlusterFS debuginfo, and synthesizing types failed: " +
                                            b.error().message);
    out.note =
        "leakref: no GlusterFS debuginfo; synthesized types from the installed headers: " + path;
  }
  // As a types file: its declarations give libglusterfs's globals their
  // types (the profile's sets start from global_ctx).
  LR_TRY(add_types_file(prog, path, types_origin()));
  return out;
}

TargetSpec glusterfs_target() {
  TargetSpec t;
  t.name = "glusterfs";
  t.text_dumps.push_back({"statedump", &looks_like_statedump, &snapshot_from_statedump});
  t.process = std::make_shared<Glusterfs>();
  return t;
}

}  // namespace lr
