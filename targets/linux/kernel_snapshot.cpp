// A kernel dump as a snapshot for diff and trend: what grows in a kernel
// that leaks. Classes: every slab cache (allocated objects, bytes), every
// super block's inodes, the files each command holds open. Objects, known by
// what identifies them between two dumps of one boot: dentries by path
// (d_lockref.count), struct files by address (f_count), modules by name
// (refcnt). A reference taken and never dropped shows as a climbed dentry or
// module, or a new file; a leak of objects as a grown slab cache.
#include <fmt/format.h>

#include <map>
#include <unordered_map>

#include "corelib/analyses/diff.hpp"
#include "kernel_internal.hpp"
#include "targets/linux/kernel_slab.hpp"

namespace lr {

namespace {

// "lrholder(147) fd 30" / "... exe" / "... map": who holds a file.
std::string holder_text(const KFileHolder& h) {
  std::string what = h.fd >= 0                   ? fmt::format("fd {}", h.fd)
                     : h.fd == KFileHolder::kExe ? std::string("exe")
                                                 : std::string("map");
  return fmt::format("{}({}) {}", h.comm, h.pid, what);
}

// A walk that failed, or met damage and counted a part, leaves its kinds
// unknown: a diff or trend then compares nothing of them rather than
// reading a dump it could not read as one whose objects are gone.
void unknown(Snapshot& s, std::initializer_list<const char*> kinds) {
  for (const char* k : kinds) s.unknown_kinds.push_back(k);
}

void add_slab_classes(KernelTarget& k, Snapshot& s, const KernelLimits& lim) {
  auto slab = kernel_slab(k, KSlabFilter{}, nullptr, lim);
  if (!slab.ok()) {
    s.warnings.push_back("no slab classes: " + slab.error().message);
    return unknown(s, {"slab"});
  }
  if (!slab.value().warnings.empty()) unknown(s, {"slab"});
  for (const auto& c : slab.value().caches)
    s.classes.push_back({"slab", c.name, static_cast<int64_t>(c.allocated),
                         static_cast<int64_t>(c.allocated * c.object_size)});
  for (const auto& w : slab.value().warnings) s.warnings.push_back(w);
}

// A super block as its mount point and type: its address is not a name a
// user knows, and an internal one is its type alone.
std::string sb_name(const KSuperBlock& sb) {
  std::string where = sb.mounts.empty() ? "(internal)" : sb.mounts[0];
  return fmt::format("{} {} {}", sb.fstype, sb.id, where);
}

void add_inode_report(KernelTarget& k, Snapshot& s, const KernelLimits& lim) {
  KInodeFilter f;  // every inode: a dentry's count may climb on one nobody held before
  auto r = kernel_inodes(k, f, lim);
  if (!r.ok()) {
    s.warnings.push_back("no inode classes: " + r.error().message);
    return unknown(s, {"inodes", "fds", "dentry", "file"});
  }
  const KInodeReport& rep = r.value();
  std::map<std::string, int64_t> per_sb;
  std::unordered_map<std::string, int> seen;  // a path two dentries share gets "#N"
  for (const auto& sb : rep.sbs) {
    per_sb[sb_name(sb)] += static_cast<int64_t>(sb.inode_count);
    for (const auto& i : sb.inodes)
      for (const auto& d : i.dentries) {
        SnapObject o;
        o.key = "dentry:" + d.path;
        if (int n = seen[o.key]++) o.key += fmt::format(" #{}", n + 1);
        o.cls = "dentries " + sb_name(sb);
        o.kind = "dentry";
        o.refcount = d.count;
        o.held = fmt::format("children {} + files {} + mounts {} + root/pwd {} + pin {}",
                             d.children, d.files, d.mount_refs, d.fs_refs, d.pinned);
        if (d.unexplained) o.held += fmt::format(" + {} unexplained", d.unexplained);
        s.objects.push_back(std::move(o));
      }
  }
  for (const auto& [name, n] : per_sb) s.classes.push_back({"inodes", name, n, -1});
  std::map<std::string, int64_t> per_comm;
  for (const auto& f : rep.files) {
    SnapObject o;
    o.key = fmt::format("file@{:#x}", f.addr);
    o.cls = "files";
    o.kind = "file";
    o.refcount = f.f_count;
    for (const auto& h : f.holders) {
      o.held += (o.held.empty() ? "" : ", ") + holder_text(h);
      if (h.fd >= 0) ++per_comm[h.comm];
    }
    if (f.unheld) o.held = "no task (in flight or leaked)";
    s.objects.push_back(std::move(o));
  }
  for (const auto& [comm, n] : per_comm) s.classes.push_back({"fds", comm, n, -1});
  for (const auto& w : rep.warnings) s.warnings.push_back(w);
  if (!rep.warnings.empty()) unknown(s, {"inodes", "fds", "dentry", "file"});
}

void add_modules(KernelTarget& k, Snapshot& s, const KernelLimits& lim) {
  auto r = kernel_modules(k, lim);
  if (!r.ok()) {
    s.warnings.push_back("no module objects: " + r.error().message);
    return unknown(s, {"module"});
  }
  for (const auto& m : r.value().modules)
    s.objects.push_back(
        {"module:" + m.name, "modules", m.refcnt,
         fmt::format("1 base + {} modules + {} super blocks + {} files{}", m.used_by.size(),
                     m.superblocks, m.open_files,
                     m.unexplained ? fmt::format(" + {} unexplained", m.unexplained) : ""),
         "module"});
  for (const auto& w : r.value().warnings) s.warnings.push_back(w);
  if (!r.value().warnings.empty()) unknown(s, {"module"});
}

}  // namespace

Result<Snapshot> kernel_snapshot(KernelTarget& k, const std::string& source,
                                 const KernelLimits& lim) {
  Snapshot s;
  s.source = source;
  s.kind = "vmcore";
  s.build_id = k.vmcoreinfo("BUILD-ID");
  s.warnings = k.warnings();
  add_slab_classes(k, s, lim);
  add_inode_report(k, s, lim);
  add_modules(k, s, lim);
  return s;
}

}  // namespace lr
