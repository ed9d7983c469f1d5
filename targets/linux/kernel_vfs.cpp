// Kernel walks: tasks -> fd tables -> files; mounts; super blocks -> inodes
// -> dentries; modules. Members are named as linux-kernel.toml declares them
// (alternatives there span kernel versions), offsets come from vmlinux DWARF
// once per call; each object is read whole (one span or copy), never a read
// per field.
#include "targets/linux/kernel.hpp"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "corelib/objects/objects.hpp"
#include "corelib/objects/walkers.hpp"
#include "kernel_internal.hpp"
#include "targets/linux/kernel_slab.hpp"

namespace lr {

bool KInode::flagged() const {
  if (unexplained > 0) return true;
  for (const auto& d : dentries)
    if (d.unexplained > 0) return true;
  return false;
}

std::string inode_state_names(uint64_t state,
                              const std::vector<std::pair<uint64_t, std::string>>& bits) {
  std::string out;
  uint64_t rest = state;
  for (const auto& [bit, name] : bits) {
    if (!(state & bit)) continue;
    if (!out.empty()) out += '|';
    out += name;
    rest &= ~bit;
  }
  if (rest) out += fmt::format("{}{:#x}", out.empty() ? "" : "|", rest);
  return out.empty() ? "0" : out;
}

namespace kint {

uint64_t ptr_at(const uint8_t* obj, uint64_t off) {
  return load_uint(obj + off, 8);
}

std::string cstr_at(const uint8_t* obj, uint64_t off, size_t max) {
  const char* p = reinterpret_cast<const char*>(obj + off);
  size_t n = strnlen(p, max);
  return std::string(p, n);
}

// A dentry's d_name.name ("" when unreadable).
std::string dentry_name(const Memory& mem, uint64_t p) {
  if (!p) return "";
  auto n = mem.read_cstring(p, 256);
  return n.ok() ? n.value() : "";
}

bool interrupted(const KernelLimits& lim) {
  return lim.interrupted && lim.interrupted->load(std::memory_order_relaxed);
}

uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Walks a list_head ring and returns the containers, adding a warning when
// the walk did not end cleanly.
std::vector<uint64_t> list_objects(const Memory& mem, uint64_t head, uint64_t member_off,
                                   const KernelLimits& lim, const std::string& what,
                                   std::vector<std::string>* warnings, WalkResult* out) {
  WalkLimits wl;
  wl.max_nodes = lim.max_objects;
  wl.interrupted = lim.interrupted;
  WalkResult r = walk_list(mem, head, member_off, wl);
  if (!r.ok() && warnings)
    warnings->push_back(fmt::format("{}: walk stopped ({}) at {:#x}{}{}", what,
                                    walk_stop_name(r.stop), r.stop_addr,
                                    r.stop_detail.empty() ? "" : ": ", r.stop_detail));
  std::vector<uint64_t> objs = std::move(r.objects);
  if (out) {
    r.objects.clear();
    *out = std::move(r);
  }
  return objs;
}

Result<std::vector<uint64_t>> root_objects(const Memory& mem, uint64_t head, uint64_t member_off,
                                           const KernelLimits& lim, const std::string& what,
                                           std::vector<std::string>* warnings, WalkResult* out) {
  uint64_t first = 0;
  if (auto r = mem.read(head, &first, 8); !r.ok())
    return make_error(Errc::kNotFound,
                      fmt::format("the walk cannot start: {} at {:#x} is not readable: {}", what,
                                  head, mem.why_unreadable(head)));
  return list_objects(mem, head, member_off, lim, what, warnings, out);
}

void hold_file(const Memory& mem, Scan& s, uint64_t f, const KFileHolder& h) {
  auto [it, fresh] = s.file_index.emplace(f, s.files.size());
  if (fresh) {
    KFile kf;
    kf.addr = f;
    if (const uint8_t* ob = object_bytes(mem, f, s.fl.size, s.scratch)) {
      kf.f_count = s.fl.f_count.load(ob);
      kf.inode = ptr_at(ob, s.fl.inode);
      kf.dentry = ptr_at(ob, s.fl.dentry);
      kf.mnt = ptr_at(ob, s.fl.mnt);
      kf.f_op = ptr_at(ob, s.fl.op);
    } else {
      s.warnings.push_back(fmt::format("pid {}: file {:#x} not readable", h.pid, f));
    }
    if (kf.dentry) s.files_by_dentry[kf.dentry].push_back(it->second);
    if (kf.inode) s.files_by_inode[kf.inode].push_back(it->second);
    s.files.push_back(std::move(kf));
  }
  s.files[it->second].holders.push_back(h);
}

// Every task: its root and pwd, its executable, and its open files.
Result<void> scan_tasks(KernelTarget& k, const KernelLimits& lim, Scan& s) {
  const Memory& mem = k.mem();
  std::vector<uint8_t> scratch, fdbuf;
  LR_ASSIGN(Layout task, Layout::of(k, "task"));
  LR_ASSIGN(uint64_t t_tasks, task.off("tasks"));
  LR_ASSIGN(uint64_t t_files, task.off("files"));
  LR_ASSIGN(uint64_t t_fs, task.off("fs"));
  LR_ASSIGN(auto t_comm, task.bytes("comm"));
  LR_ASSIGN(uint64_t t_mm, task.off("mm"));
  LR_ASSIGN(Layout mm, Layout::of(k, "mm"));
  LR_ASSIGN(uint64_t mm_exe, mm.off("exe_file"));
  LR_ASSIGN(IntField t_pid, task.field("pid"));
  LR_ASSIGN(Layout files, Layout::of(k, "files"));
  LR_ASSIGN(uint64_t fs_fdt, files.off("fdt"));
  LR_ASSIGN(Layout fdt, Layout::of(k, "fdtable"));
  LR_ASSIGN(IntField fdt_max, fdt.field("max_fds"));
  LR_ASSIGN(uint64_t fdt_fd, fdt.off("fd"));
  LR_ASSIGN(Layout file, Layout::of(k, "file"));
  LR_ASSIGN(IntField f_count, file.field("count", true));
  LR_ASSIGN(uint64_t f_inode, file.off("f_inode"));
  LR_ASSIGN(uint64_t f_dentry, file.off("f_path.dentry"));
  LR_ASSIGN(uint64_t f_mnt, file.off("f_path.mnt"));
  LR_ASSIGN(uint64_t f_op, file.off("f_op"));
  LR_ASSIGN(Layout fss, Layout::of(k, "fs_struct"));
  LR_ASSIGN(uint64_t fs_root, fss.off("root.dentry"));
  LR_ASSIGN(uint64_t fs_pwd, fss.off("pwd.dentry"));
  LR_ASSIGN(uint64_t init_task, ksymbol(k, "init_task"));

  std::vector<uint64_t> tasks = {init_task};
  LR_ASSIGN(std::vector<uint64_t> listed,
            root_objects(mem, init_task + t_tasks, t_tasks, lim, "init_task.tasks", &s.warnings,
                         &s.tasks_walk));
  for (uint64_t t : listed)
    if (t != init_task) tasks.push_back(t);
  std::unordered_set<uint64_t> seen_files_structs, seen_fs, seen_mm;
  s.fl = {f_count, f_inode, f_dentry, f_mnt, f_op, file.size};
  for (uint64_t t : tasks) {
    if (interrupted(lim)) return make_error(Errc::kInterrupted, "interrupted");
    const uint8_t* tb = object_bytes(mem, t, task.size, scratch);
    if (!tb) {
      s.warnings.push_back(fmt::format("task {:#x}: not readable", t));
      continue;
    }
    ++s.tasks;
    int pid = static_cast<int>(t_pid.load(tb));
    std::string comm = cstr_at(tb, t_comm.first, t_comm.second);
    uint64_t fsp = ptr_at(tb, t_fs), fp = ptr_at(tb, t_files);
    if (fsp && seen_fs.insert(fsp).second) {
      uint64_t rd[2] = {};
      if (mem.read(fsp + fs_root, &rd[0], 8).ok() && mem.read(fsp + fs_pwd, &rd[1], 8).ok()) {
        for (uint64_t d : rd)
          if (d) ++s.fs_refs[d];
      }
    }
    // The executable's struct file (mm->exe_file; its VMAs share it): a
    // forked child shares the parent's until it execs.
    if (uint64_t mmp = ptr_at(tb, t_mm); mmp && seen_mm.insert(mmp).second) {
      s.mm_owner.emplace(mmp, std::make_pair(pid, comm));
      uint64_t ef = 0;
      if (mem.read(mmp + mm_exe, &ef, 8).ok() && ef)
        hold_file(mem, s, ef, {pid, comm, KFileHolder::kExe});
    }
    if (!fp || !seen_files_structs.insert(fp).second) continue;  // threads share one table
    uint64_t fdtp = 0, fdarr = 0;
    uint32_t maxfds = 0;
    if (!mem.read(fp + fs_fdt, &fdtp, 8).ok() || !fdtp) continue;
    const uint8_t* fb = object_bytes(mem, fdtp, fdt.size, scratch);
    if (!fb) {
      s.warnings.push_back(fmt::format("pid {}: fdtable {:#x} not readable", pid, fdtp));
      continue;
    }
    maxfds = static_cast<uint32_t>(fdt_max.load(fb));
    fdarr = ptr_at(fb, fdt_fd);
    if (maxfds > lim.max_fds) {
      s.warnings.push_back(
          fmt::format("pid {}: max_fds {} capped at {}", pid, maxfds, lim.max_fds));
      maxfds = static_cast<uint32_t>(lim.max_fds);
    }
    fdbuf.resize(size_t{maxfds} * 8);
    if (maxfds && !mem.read(fdarr, fdbuf.data(), fdbuf.size()).ok()) {
      s.warnings.push_back(fmt::format("pid {}: fd array {:#x} not readable", pid, fdarr));
      continue;
    }
    for (uint32_t fd = 0; fd < maxfds; ++fd) {
      uint64_t f = load_uint(fdbuf.data() + size_t{fd} * 8, 8);
      if (f) hold_file(mem, s, f, {pid, comm, static_cast<int>(fd)});
    }
  }
  return {};
}

// Super blocks, and through each one's s_mounts every mount (internal
// kern_mounts included), for the dentry references mounts hold.
Result<void> scan_mounts(KernelTarget& k, const KernelLimits& lim, bool want_mounts, Scan& s) {
  const Memory& mem = k.mem();
  std::vector<uint8_t> scratch;
  LR_ASSIGN(Layout sb, Layout::of(k, "super_block"));
  LR_ASSIGN(uint64_t sb_list, sb.off("s_list"));
  LR_ASSIGN(uint64_t super_blocks, ksymbol(k, "super_blocks"));
  LR_ASSIGN(s.super_blocks,
            root_objects(mem, super_blocks, sb_list, lim, "super_blocks", &s.warnings, &s.sb_walk));
  if (want_mounts) {
    LR_ASSIGN(uint64_t sb_mounts, sb.off("s_mounts"));
    LR_ASSIGN(Layout mnt, Layout::of(k, "mount"));
    // A super block's mounts: a list_head of mnt_instance links until 6.x,
    // a NULL-ended chain of mnt_next_for_sb pointers from s_mounts since.
    const bool chain = mnt.bound->missing.count("mnt_instance") != 0;
    if (chain && mnt.bound->missing.count("mnt_next_for_sb"))
      return make_error(Errc::kNotFound,
                        "struct mount has neither mnt_instance nor mnt_next_for_sb: this "
                        "kernel links a super block's mounts in a way linux-kernel.toml does "
                        "not describe");
    LR_ASSIGN(uint64_t m_inst, mnt.off(chain ? "mnt_next_for_sb" : "mnt_instance"));
    LR_ASSIGN(uint64_t m_root, mnt.off("mnt.mnt_root"));
    LR_ASSIGN(uint64_t m_mp, mnt.off("mnt_mp"));
    LR_ASSIGN(Layout mp, Layout::of(k, "mountpoint"));
    LR_ASSIGN(uint64_t mp_dentry, mp.off("m_dentry"));
    LR_ASSIGN(uint64_t m_mountpoint, mnt.off("mnt_mountpoint"));
    LR_ASSIGN(uint64_t m_parent, mnt.off("mnt_parent"));
    LR_ASSIGN(uint64_t m_ns, mnt.off("mnt_ns"));
    LR_ASSIGN(Layout den, Layout::of(k, "dentry"));
    LR_ASSIGN(uint64_t d_name, den.off("d_name.name"));
    LR_ASSIGN(uint64_t d_parent, den.off("d_parent"));
    auto rd = [&](uint64_t a) -> uint64_t {
      uint64_t v = 0;
      return mem.read(a, &v, 8).ok() ? v : 0;
    };
    // Where a mount is attached, as a path from its namespace's root
    // (mountpoint dentries up to each parent mount's root), bounded.
    auto mount_path = [&](uint64_t m) -> std::string {
      std::vector<std::string> parts;
      uint64_t cur = m;
      for (int hops = 0; hops < 64; ++hops) {
        uint64_t parent = rd(cur + m_parent);
        if (!parent || parent == cur) break;
        uint64_t d = rd(cur + m_mountpoint), root = rd(parent + m_root);
        for (int up = 0; d && d != root && up < 256; ++up) {
          std::string n = dentry_name(mem, rd(d + d_name));
          parts.push_back(n.empty() ? "?" : n);
          uint64_t pd = rd(d + d_parent);
          if (pd == d) break;
          d = pd;
        }
        cur = parent;
      }
      std::string path;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) path += "/" + *it;
      return path.empty() ? "/" : path;
    };
    std::unordered_set<uint64_t> mps;
    auto mounts_of = [&](uint64_t b) {
      std::string what = fmt::format("super_block {:#x} s_mounts", b);
      if (!chain) return list_objects(mem, b + sb_mounts, m_inst, lim, what, &s.warnings, nullptr);
      WalkLimits wl;
      wl.max_nodes = lim.max_objects;
      wl.interrupted = lim.interrupted;
      WalkResult r = walk_chain(mem, rd(b + sb_mounts), m_inst, wl);
      if (!r.ok())
        s.warnings.push_back(fmt::format("{}: walk stopped ({}) at {:#x}", what,
                                         walk_stop_name(r.stop), r.stop_addr));
      return std::move(r.objects);
    };
    for (uint64_t b : s.super_blocks) {
      for (uint64_t m : mounts_of(b)) {
        const uint8_t* mb = object_bytes(mem, m, mnt.size, scratch);
        if (!mb) continue;
        ++s.mounts;
        if (uint64_t r = ptr_at(mb, m_root)) ++s.mount_refs[r];
        uint64_t p = ptr_at(mb, m_mp), ns = ptr_at(mb, m_ns);
        // Internal (kern_mount) mounts have no namespace, or MNT_NS_INTERNAL.
        bool visible = ns && ns < ~uint64_t{4095};
        if (visible && (p || ptr_at(mb, m_parent) == m) && s.sb_mounts[b].size() < 8)
          s.sb_mounts[b].push_back(mount_path(m));
        if (p && mps.insert(p).second) {
          uint64_t d = 0;
          if (mem.read(p + mp_dentry, &d, 8).ok() && d) ++s.mount_refs[d];
        }
      }
    }
  }
  return {};
}

Result<Scan> scan(KernelTarget& k, const KernelLimits& lim, bool want_mounts) {
  Scan s;
  LR_TRY(scan_tasks(k, lim, s));
  LR_TRY(scan_mounts(k, lim, want_mounts, s));
  return s;
}

}  // namespace kint

using namespace kint;

namespace {

// References a filesystem itself keeps on its dentries (Linux 6.1), so they
// are not reported as unexplained:
//  - tmpfs/ramfs `dget` each node in mknod ("pin the dentry in core"); the
//    simple_fill_super / debugfs family keep the creation reference;
//    apparmorfs keeps the creation reference and takes another (aafs_create)
//    up to 6.12 (Debian 12's 6.1 and 6.12), only the creation one in 7.x
//    (sid's 7.2; where between them it changed is not known here: a kernel
//    in between that differs shows its apparmorfs dentries flagged, count
//    below held, never a reference hidden);
//  - procfs keeps /proc/self and /proc/thread-self in its fs_info;
//  - apparmorfs's root is pinned once more by its simple_pin_fs mount user;
//  - before 6.1 securityfs_create_dentry took a second reference (dget)
//    for its caller, kept with the dentry it returns (seen on Debian 11's
//    5.10; 6.1's and 6.12's take none): on the files, directories and
//    symlinks it makes, not on a device node a module adds itself
//    (apparmor's .null).
// Looked up once per super block; `dentry_pin` applies it per dentry.
struct FsPin {
  uint64_t child = 0;  // on every positive non-root dentry
  uint64_t root = 0;   // on the root dentry (besides the super block's own)
  uint64_t made = 0;   // more on a non-root file, directory or symlink
  bool proc = false;   // procfs: self and thread-self under the root
};

FsPin fs_pin(const std::string& fstype, uint64_t release) {
  static const std::map<std::string, uint64_t> kPin = {
      {"tmpfs", 1},       {"ramfs", 1},     {"devtmpfs", 1},   {"rootfs", 1},
      {"debugfs", 1},     {"tracefs", 1},   {"securityfs", 1}, {"configfs", 1},
      {"binfmt_misc", 1}, {"hugetlbfs", 1}, {"mqueue", 1},     {"devpts", 1},
      {"bpf", 1},         {"pstore", 1},    {"efivarfs", 1},   {"apparmorfs", 2}};
  FsPin p;
  if (auto it = kPin.find(fstype); it != kPin.end()) p.child = it->second;
  if (fstype == "securityfs" && release && release < 6001) p.made = 1;
  if (fstype == "apparmorfs" && release >= 7000) p.child = 1;
  p.root = fstype == "apparmorfs" ? 1 : 0;
  p.proc = fstype == "proc";
  return p;
}

}  // namespace

// A flagged dentry's references that no task holds may be struct files in
// the file cache that no fd, exe or mapping holds (an SCM_RIGHTS message in
// flight, or a leaked file): found there and attached to the dentry with
// who allocated them (slub_debug=U), so the finding names its origin.
// Anything that fails here is a warning: the report stands without it.
static void attach_unheld_files(KernelTarget& k, Scan& s, KInodeReport& rep,
                                const KernelLimits& lim) {
  std::unordered_map<uint64_t, KDentry*> flagged;
  for (auto& sb : rep.sbs)
    for (auto& i : sb.inodes)
      for (auto& d : i.dentries)
        if (d.unexplained > 0) flagged.emplace(d.addr, &d);
  if (flagged.empty()) return;
  auto file = Layout::of(k, "file");
  const std::string& alloc =
      file.ok() && file.value().bound->decl ? file.value().bound->decl->allocation : std::string();
  if (alloc.rfind("slab:", 0) != 0) return;  // the profile names no cache for files
  KSlabFilter f;
  f.caches = {alloc.substr(5)};
  f.objects = f.tracks = true;
  const Memory& mem = k.mem();
  std::vector<uint8_t> scratch;
  auto scan = kernel_slab(
      k, f,
      [&](const KSlabObject& o) {
        if (s.file_index.count(o.addr)) return;  // a task holds it
        const uint8_t* ob = object_bytes(mem, o.addr, s.fl.size, scratch);
        if (!ob) return;
        auto d = flagged.find(ptr_at(ob, s.fl.dentry));
        if (d == flagged.end()) return;
        KFile kf;
        kf.addr = o.addr;
        kf.f_count = s.fl.f_count.load(ob);
        kf.inode = ptr_at(ob, s.fl.inode);
        kf.dentry = d->first;
        kf.mnt = ptr_at(ob, s.fl.mnt);
        kf.f_op = ptr_at(ob, s.fl.op);
        kf.unheld = true;
        kf.has_alloc = o.has_tracks;
        kf.alloc = o.alloc;
        d->second->unheld_files.push_back(s.files.size());
        s.file_index.emplace(o.addr, s.files.size());
        s.files.push_back(std::move(kf));
      },
      lim);
  if (!scan.ok()) {
    rep.warnings.push_back(fmt::format("files no task holds were not looked for in cache {}: {}",
                                       f.caches[0], scan.error().message));
    return;
  }
  for (const auto& w : scan.value().warnings) rep.warnings.push_back(w);
  std::unique_ptr<StackDepot> depot;
  for (KFile& kf : s.files) {
    if (!kf.unheld || !kf.has_alloc) continue;
    if (!kf.alloc.frames.empty()) {  // kept in the track itself (before 5.17)
      kf.alloc_stack = kf.alloc.frames;
      continue;
    }
    if (!kf.alloc.handle) continue;
    if (!depot) {
      auto d = StackDepot::open(k);
      if (!d.ok()) {
        kf.alloc_stack_error = d.error().message;
        continue;
      }
      depot = std::move(d).value();
    }
    auto st = depot->stack(kf.alloc.handle);
    if (st.ok())
      kf.alloc_stack = std::move(st).value();
    else
      kf.alloc_stack_error = st.error().message;
  }
}

Result<KInodeReport> kernel_inodes(KernelTarget& k, const KInodeFilter& flt,
                                   const KernelLimits& lim) {
  uint64_t t0 = now_ns();
  LR_ASSIGN(Scan s, scan(k, lim, true));
  LR_ASSIGN(KInodeReport rep, inodes_from(k, s, flt, lim));
  rep.walk_ns = now_ns() - t0;
  return rep;
}

Result<KModuleReport> kernel_modules(KernelTarget& k, const KernelLimits& lim) {
  uint64_t t0 = now_ns();
  LR_ASSIGN(Scan s, scan(k, lim, false));
  LR_ASSIGN(KModuleReport rep, modules_from(k, s, lim));
  rep.walk_ns = now_ns() - t0;
  return rep;
}

namespace kint {

namespace {

// What the inode report reads of the kernel's types, resolved once.
struct InodeLayout {
  Layout sb, fst, ino, den, vma, rbn;
  uint64_t sb_type = 0, sb_root = 0, sb_inodes = 0, fst_name = 0;
  std::pair<uint64_t, uint64_t> sb_id;
  uint64_t i_sb_list = 0, i_dentry = 0, i_mmap = 0;
  IntField i_ino, i_count, i_nlink, i_state, i_mode, d_count;
  uint64_t d_alias = 0, d_name = 0, d_children = 0, d_sibling = 0, d_parent = 0;
  bool children_hlist = false;  // children: a list_head of d_child, or (6.8+) an hlist of d_sib
  uint64_t vma_rb = 0, vma_file = 0, vma_mm = 0, rb_left = 0, rb_right = 0;

  static Result<InodeLayout> of(KernelTarget& k) {
    InodeLayout l;
    LR_ASSIGN(l.sb, Layout::of(k, "super_block"));
    LR_ASSIGN(l.sb_type, l.sb.off("s_type"));
    LR_ASSIGN(l.sb_id, l.sb.bytes("s_id"));
    LR_ASSIGN(l.sb_root, l.sb.off("s_root"));
    LR_ASSIGN(l.sb_inodes, l.sb.off("s_inodes"));
    LR_ASSIGN(l.fst, Layout::of(k, "file_system_type"));
    LR_ASSIGN(l.fst_name, l.fst.off("name"));
    LR_ASSIGN(l.ino, Layout::of(k, "inode"));
    LR_ASSIGN(l.i_sb_list, l.ino.off("i_sb_list"));
    LR_ASSIGN(l.i_ino, l.ino.field("i_ino"));
    LR_ASSIGN(l.i_count, l.ino.field("i_count", true));
    LR_ASSIGN(l.i_nlink, l.ino.field("i_nlink"));
    LR_ASSIGN(l.i_state, l.ino.field("i_state"));
    LR_ASSIGN(l.i_mode, l.ino.field("i_mode"));
    LR_ASSIGN(l.i_dentry, l.ino.off("i_dentry"));
    LR_ASSIGN(l.den, Layout::of(k, "dentry"));
    const bool d_u = !l.den.bound->missing.count("d_u");
    if (!d_u && l.den.bound->missing.count("d_alias"))
      return make_error(Errc::kNotFound,
                        "struct dentry has neither d_u.d_alias nor d_alias: this kernel links an "
                        "inode's dentries in a way linux-kernel.toml does not describe");
    LR_ASSIGN(l.d_alias, l.den.off(d_u ? "d_u.d_alias" : "d_alias"));
    LR_ASSIGN(l.d_count, l.den.field("d_lockref", true));
    LR_ASSIGN(l.d_name, l.den.off("d_name.name"));
    LR_ASSIGN(l.d_children, l.den.off("children"));
    LR_ASSIGN(l.d_sibling, l.den.off("sibling"));
    LR_ASSIGN(l.children_hlist, l.den.hlist("children"));
    LR_ASSIGN(l.d_parent, l.den.off("d_parent"));
    // Mappings: vm_area_structs in each inode's i_mmap tree.
    LR_ASSIGN(l.i_mmap, l.ino.off("i_data.i_mmap.rb_root.rb_node"));
    LR_ASSIGN(l.vma, Layout::of(k, "vma"));
    LR_ASSIGN(l.vma_rb, l.vma.off("shared.rb"));
    LR_ASSIGN(l.vma_file, l.vma.off("vm_file"));
    LR_ASSIGN(l.vma_mm, l.vma.off("vm_mm"));
    LR_ASSIGN(l.rbn, Layout::of(k, "rb_node"));
    LR_ASSIGN(l.rb_left, l.rbn.off("rb_left"));
    LR_ASSIGN(l.rb_right, l.rbn.off("rb_right"));
    return l;
  }
};

// The inode report over one scan: super blocks, their inodes, each inode's
// dentries and mappings.
class InodeReporter {
 public:
  InodeReporter(const Memory& mem, const InodeLayout& l, Scan& s, const KernelLimits& lim,
                KInodeReport& rep, uint64_t release)
      : mem_(mem), l_(l), s_(s), lim_(lim), rep_(rep), release_(release) {}

  // One super block's inodes, filtered; false when `flt` leaves it out.
  Result<bool> super_block(uint64_t b, const KInodeFilter& flt, KSuperBlock& ks) {
    const uint8_t* sbb = object_bytes(mem_, b, l_.sb.size, scratch_);
    if (!sbb) {
      rep_.warnings.push_back(fmt::format("super_block {:#x}: not readable", b));
      return false;
    }
    ks.addr = b;
    ks.id = cstr_at(sbb, l_.sb_id.first, l_.sb_id.second);
    ks.root = ptr_at(sbb, l_.sb_root);
    ks.s_inodes = b + l_.sb_inodes;
    if (auto it = s_.sb_mounts.find(b); it != s_.sb_mounts.end()) ks.mounts = it->second;
    uint64_t typep = ptr_at(sbb, l_.sb_type), namep = 0;
    if (typep && mem_.read(typep + l_.fst_name, &namep, 8).ok() && namep) {
      auto n = mem_.read_cstring(namep, 64);
      if (n.ok()) ks.fstype = n.value();
    }
    if (!flt.fstype.empty() && flt.fstype != ks.fstype) return false;
    std::vector<uint64_t> inodes =
        list_objects(mem_, b + l_.sb_inodes, l_.i_sb_list, lim_,
                     fmt::format("super_block {:#x} ({}) s_inodes", b, ks.fstype), &rep_.warnings,
                     &ks.inode_walk);
    const FsPin pin = fs_pin(ks.fstype, release_);
    for (uint64_t ia : inodes) {
      if (interrupted(lim_)) return make_error(Errc::kInterrupted, "interrupted");
      inode(ia, ks, pin, flt);
    }
    return true;
  }

 private:
  void inode(uint64_t ia, KSuperBlock& ks, const FsPin& pin, const KInodeFilter& flt) {
    const uint8_t* ib = object_bytes(mem_, ia, l_.ino.size, scratch_);
    if (!ib) {
      rep_.warnings.push_back(fmt::format("inode {:#x}: not readable", ia));
      return;
    }
    KInode ki;
    ki.addr = ia;
    ki.ino = static_cast<uint64_t>(l_.i_ino.load(ib));
    ki.i_count = l_.i_count.load(ib);
    ki.i_nlink = static_cast<uint64_t>(l_.i_nlink.load(ib));
    ki.i_state = static_cast<uint64_t>(l_.i_state.load(ib));
    ki.i_mode = static_cast<uint64_t>(l_.i_mode.load(ib));
    if (uint64_t root = ptr_at(ib, l_.i_mmap)) add_mappings(ia, root);
    // i_dentry aliases: an hlist through dentry.d_u.d_alias.
    WalkLimits al;
    al.max_nodes = 4096;
    WalkResult aliases = walk_hlist(mem_, ia + l_.i_dentry, l_.d_alias, al);
    if (!aliases.ok())
      rep_.warnings.push_back(fmt::format("inode {:#x}: i_dentry walk stopped ({}): {}", ia,
                                          walk_stop_name(aliases.stop), aliases.stop_detail));
    std::vector<uint64_t> name_ptrs;  // names are read only for inodes reported
    for (uint64_t d : aliases.objects) {
      const uint8_t* db = object_bytes(mem_, d, l_.den.size, dscratch_);
      if (!db) {
        rep_.warnings.push_back(fmt::format("inode {:#x}: dentry {:#x} not readable", ia, d));
        break;
      }
      name_ptrs.push_back(ptr_at(db, l_.d_name));
      ki.dentries.push_back(dentry(d, db, ks, pin, name_ptrs.back(), ki.i_mode));
      ++rep_.dentries;
    }
    if (auto it = s_.files_by_inode.find(ia); it != s_.files_by_inode.end())
      for (size_t fi : it->second) ki.files.push_back(fi);
    ki.unexplained = ki.i_count - static_cast<int64_t>(ki.dentries.size());
    ++rep_.inodes;
    ++ks.inode_count;
    bool flagged = ki.flagged();
    if (flagged) ++rep_.flagged, ++ks.flagged;
    if (flt.held_only && !flagged && ki.files.empty()) return;
    for (size_t i = 0; i < ki.dentries.size(); ++i) {
      if (ki.dentries[i].name.empty()) ki.dentries[i].name = dentry_name(mem_, name_ptrs[i]);
      ki.dentries[i].path = dentry_path(ki.dentries[i].addr, ks);
    }
    ks.inodes.push_back(std::move(ki));
  }

  // A dentry's count against what holds it: children, open files, mounts,
  // tasks' root and pwd, and the file system's own pin.
  KDentry dentry(uint64_t d, const uint8_t* db, const KSuperBlock& ks, const FsPin& pin,
                 uint64_t name_ptr, uint64_t i_mode) {
    KDentry kd;
    kd.addr = d;
    kd.count = l_.d_count.load(db);
    const uint64_t first = ptr_at(db, l_.d_children);
    if (l_.children_hlist ? first != 0 : first != d + l_.d_children) {
      WalkLimits wl;
      wl.max_nodes = lim_.max_objects;
      wl.interrupted = lim_.interrupted;
      kd.children = (l_.children_hlist ? walk_hlist(mem_, d + l_.d_children, l_.d_sibling, wl)
                                       : walk_list(mem_, d + l_.d_children, l_.d_sibling, wl))
                        .objects.size();
    }
    if (auto it = s_.files_by_dentry.find(d); it != s_.files_by_dentry.end())
      kd.files = it->second.size();
    if (auto it = s_.mount_refs.find(d); it != s_.mount_refs.end()) kd.mount_refs = it->second;
    if (auto it = s_.fs_refs.find(d); it != s_.fs_refs.end()) kd.fs_refs = it->second;
    if (d == ks.root) {
      kd.pinned = pin.root;
    } else if (pin.proc) {
      kd.name = dentry_name(mem_, name_ptr);
      kd.pinned =
          ptr_at(db, l_.d_parent) == ks.root && (kd.name == "self" || kd.name == "thread-self");
    } else {
      const uint64_t fmt = i_mode & 0170000;  // S_IFMT: S_IFREG, S_IFDIR, S_IFLNK
      kd.pinned = pin.child + (fmt == 0100000 || fmt == 0040000 || fmt == 0120000 ? pin.made : 0);
    }
    int64_t held = static_cast<int64_t>(kd.children + kd.files + kd.mount_refs + kd.fs_refs +
                                        kd.pinned + (d == ks.root ? 1 : 0));
    kd.unexplained = kd.count - held;
    return kd;
  }

  // The names from `d` up to its file system's root (bounded; a loop ends
  // it), under the super block's first mount point.
  std::string dentry_path(uint64_t d, const KSuperBlock& sbk) const {
    std::vector<std::string> parts;
    for (int up = 0; d && up < 256; ++up) {
      uint64_t parent = 0, name = 0;
      if (!mem_.read(d + l_.d_parent, &parent, 8).ok() || parent == d) break;
      if (!mem_.read(d + l_.d_name, &name, 8).ok()) break;
      std::string n = dentry_name(mem_, name);
      parts.push_back(n.empty() ? "?" : n);
      d = parent;
    }
    std::string base = sbk.mounts.empty() ? sbk.fstype + ":" : sbk.mounts[0];
    if (base.size() > 1 && base.back() == '/') base.pop_back();
    if (base == "/") base.clear();
    std::string p;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) p += "/" + *it;
    return base + (p.empty() ? "/" : p);
  }

  // vm_area_structs in the inode's i_mmap tree hold their vm_file (files
  // with no fd left, and the executables of every process).
  void add_mappings(uint64_t inode, uint64_t root) {
    std::vector<uint64_t> stack = {root};
    std::unordered_set<uint64_t> seen;
    while (!stack.empty() && seen.size() < lim_.max_objects) {
      uint64_t n = stack.back();
      stack.pop_back();
      if (!n || !seen.insert(n).second) continue;  // a loop in a corrupt tree ends here
      uint64_t kids[2] = {}, fm[2] = {};
      if (!mem_.read(n + l_.rb_left, &kids[0], 8).ok() ||
          !mem_.read(n + l_.rb_right, &kids[1], 8).ok()) {
        rep_.warnings.push_back(
            fmt::format("inode {:#x}: i_mmap node {:#x} not readable", inode, n));
        continue;
      }
      stack.push_back(kids[0]);
      stack.push_back(kids[1]);
      uint64_t v = n - l_.vma_rb;
      if (!mem_.read(v + l_.vma_file, &fm[0], 8).ok() ||
          !mem_.read(v + l_.vma_mm, &fm[1], 8).ok() || !fm[0])
        continue;
      auto own = s_.mm_owner.find(fm[1]);
      KFileHolder h{0, "?", KFileHolder::kMmap};
      if (own != s_.mm_owner.end()) h = {own->second.first, own->second.second, KFileHolder::kMmap};
      hold_file(mem_, s_, fm[0], h);
    }
  }

  const Memory& mem_;
  const InodeLayout& l_;
  Scan& s_;
  const KernelLimits& lim_;
  KInodeReport& rep_;
  uint64_t release_ = 0;  // release_number(): what fs_pin depends on
  std::vector<uint8_t> scratch_, dscratch_;
};

}  // namespace

Result<KInodeReport> inodes_from(KernelTarget& k, Scan& s, const KInodeFilter& flt,
                                 const KernelLimits& lim) {
  KInodeReport rep;
  rep.warnings = s.warnings;
  rep.tasks = s.tasks;
  LR_ASSIGN(const InodeLayout l, InodeLayout::of(k));
  LR_ASSIGN(rep.state_bits, l.ino.constants(k, "I_"));
  for (const auto& [bit, name] : rep.state_bits)
    if (bit == 0 || (bit & (bit - 1)) != 0)
      return make_error(Errc::kBadFormat,
                        fmt::format("linux-kernel.toml: types.inode.exprs.{} is {:#x}, not one "
                                    "bit of i_state",
                                    name, bit));
  InodeReporter r(k.mem(), l, s, lim, rep, release_number(k));
  for (uint64_t b : s.super_blocks) {
    if (interrupted(lim)) return make_error(Errc::kInterrupted, "interrupted");
    if (flt.sb && flt.sb != b) continue;
    KSuperBlock ks;
    LR_ASSIGN(bool kept, r.super_block(b, flt, ks));
    if (kept) rep.sbs.push_back(std::move(ks));
  }
  if (rep.flagged) attach_unheld_files(k, s, rep, lim);
  // Files are reported once, in scan order; inodes refer to them by index.
  rep.files = std::move(s.files);
  return rep;
}

Result<KModuleReport> modules_from(KernelTarget& k, const Scan& s, const KernelLimits& lim,
                                   WalkResult* walk) {
  const Memory& mem = k.mem();
  KModuleReport rep;
  rep.warnings = s.warnings;
  std::vector<uint8_t> scratch;
  LR_ASSIGN(Layout mod, Layout::of(k, "module"));
  LR_ASSIGN(uint64_t m_list, mod.off("list"));
  LR_ASSIGN(auto m_name, mod.bytes("name"));
  LR_ASSIGN(FieldLoc m_state, resolve_path(mod.type, "state"));
  LR_ASSIGN(IntField m_refcnt, mod.field("refcnt", true));
  LR_ASSIGN(uint64_t m_src, mod.off("source_list"));
  LR_ASSIGN(uint64_t m_tgt, mod.off("target_list"));
  LR_ASSIGN(Layout use, Layout::of(k, "module_use"));
  LR_ASSIGN(uint64_t u_src_list, use.off("source_list"));
  LR_ASSIGN(uint64_t u_tgt_list, use.off("target_list"));
  LR_ASSIGN(uint64_t u_source, use.off("source"));
  LR_ASSIGN(uint64_t u_target, use.off("target"));
  LR_ASSIGN(Layout sb, Layout::of(k, "super_block"));
  LR_ASSIGN(uint64_t sb_type, sb.off("s_type"));
  LR_ASSIGN(Layout fst, Layout::of(k, "file_system_type"));
  LR_ASSIGN(uint64_t fst_owner, fst.off("owner"));
  LR_ASSIGN(Layout fops, Layout::of(k, "file_operations"));
  LR_ASSIGN(uint64_t fo_owner, fops.off("owner"));
  LR_ASSIGN(uint64_t modules, ksymbol(k, "modules"));

  std::unordered_map<uint64_t, uint64_t> sbs_by_owner, files_by_owner;
  for (uint64_t b : s.super_blocks) {
    uint64_t t = 0, owner = 0;
    if (mem.read(b + sb_type, &t, 8).ok() && t && mem.read(t + fst_owner, &owner, 8).ok() && owner)
      ++sbs_by_owner[owner];
  }
  std::unordered_map<uint64_t, uint64_t> fop_owner;
  for (const KFile& f : s.files) {
    if (!f.f_op) continue;
    auto it = fop_owner.find(f.f_op);
    if (it == fop_owner.end()) {
      uint64_t owner = 0;
      if (!mem.read(f.f_op + fo_owner, &owner, 8).ok()) owner = 0;
      it = fop_owner.emplace(f.f_op, owner).first;
    }
    if (it->second) ++files_by_owner[it->second];
  }
  auto mod_name = [&](uint64_t m) -> std::string {
    auto n = mem.read_cstring(m + m_name.first, m_name.second);
    return n.ok() ? n.value() : fmt::format("{:#x}", m);
  };
  auto uses_of = [&](uint64_t head, uint64_t link_off, uint64_t who_off) {
    std::vector<std::string> out;
    for (uint64_t u :
         list_objects(mem, head, link_off, lim, "module_use list", &rep.warnings, nullptr)) {
      uint64_t who = 0;
      if (mem.read(u + who_off, &who, 8).ok() && who) out.push_back(mod_name(who));
    }
    return out;
  };
  LR_ASSIGN(std::vector<uint64_t> mods,
            root_objects(mem, modules, m_list, lim, "modules", &rep.warnings, walk));
  for (uint64_t m : mods) {
    if (interrupted(lim)) return make_error(Errc::kInterrupted, "interrupted");
    const uint8_t* mb = object_bytes(mem, m, mod.size, scratch);
    if (!mb) {
      rep.warnings.push_back(fmt::format("module {:#x}: not readable", m));
      continue;
    }
    KModule km;
    km.addr = m;
    km.name = cstr_at(mb, m_name.first, m_name.second);
    // MODULE_STATE_LIVE -> "live"; a value outside the enum prints as a number.
    FieldValue st = format_scalar(mb, m_state);
    km.state = st.kind == FieldValue::Kind::kEnum && !st.text.empty() ? st.text : st.to_string();
    if (km.state.rfind("MODULE_STATE_", 0) == 0) km.state.erase(0, 13);
    for (auto& c : km.state) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    km.refcnt = m_refcnt.load(mb);
    km.used_by = uses_of(m + m_src, u_src_list, u_source);
    km.uses = uses_of(m + m_tgt, u_tgt_list, u_target);
    if (auto it = sbs_by_owner.find(m); it != sbs_by_owner.end()) km.superblocks = it->second;
    if (auto it = files_by_owner.find(m); it != files_by_owner.end()) km.open_files = it->second;
    km.unexplained =
        km.refcnt - 1 - static_cast<int64_t>(km.used_by.size() + km.superblocks + km.open_files);
    rep.modules.push_back(std::move(km));
  }
  return rep;
}

}  // namespace kint
}  // namespace lr
