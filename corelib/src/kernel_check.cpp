// `leakref check` on a kernel: invariants the kernel relies on, each checked
// over the whole image with the first violations named.
#include <fmt/format.h>

#include "kernel_internal.hpp"
#include "leakref/kernel.hpp"

namespace lr {

using namespace kint;

namespace {

void add_example(KCheckResult& c, std::string what) {
  ++c.violations;
  if (c.examples.size() < 10) c.examples.push_back(std::move(what));
}

KCheckResult list_check(const Memory& mem, const std::string& name, const std::string& what,
                        uint64_t head, uint64_t off, const KernelLimits& lim) {
  KCheckResult c;
  c.name = name;
  c.description = what +
                  " is a well-formed ring: every next's prev points back, no loop "
                  "that misses the head, no unreadable link";
  WalkLimits wl;
  wl.max_nodes = lim.max_objects;
  wl.interrupted = lim.interrupted;
  WalkResult r = walk_list(mem, head, off, wl);
  c.checked = r.objects.size();
  if (!r.ok())
    add_example(c, fmt::format("walk stopped ({}) at {:#x}: {}", walk_stop_name(r.stop),
                               r.stop_addr, r.stop_detail));
  for (const auto& is : r.issues) add_example(c, fmt::format("{:#x}: {}", is.addr, is.what));
  c.violations += r.issue_count - r.issues.size();
  return c;
}

}  // namespace

Result<std::vector<KCheckResult>> kernel_check(KernelTarget& k, const KernelLimits& lim) {
  std::vector<KCheckResult> out;
  const Memory& mem = k.mem();
  LR_ASSIGN(Layout task, Layout::of(k, "struct task_struct"));
  LR_ASSIGN(uint64_t t_tasks, task.off("tasks"));
  LR_ASSIGN(uint64_t init_task, k.symbol("init_task"));
  out.push_back(list_check(mem, "list.tasks", "init_task.tasks (every process)",
                           init_task + t_tasks, t_tasks, lim));
  LR_ASSIGN(Layout mod, Layout::of(k, "struct module"));
  LR_ASSIGN(uint64_t m_list, mod.off("list"));
  LR_ASSIGN(uint64_t modules, k.symbol("modules"));
  out.push_back(list_check(mem, "list.modules", "modules", modules, m_list, lim));
  LR_ASSIGN(Layout sb, Layout::of(k, "struct super_block"));
  LR_ASSIGN(uint64_t sb_list, sb.off("s_list"));
  LR_ASSIGN(uint64_t super_blocks, k.symbol("super_blocks"));
  out.push_back(list_check(mem, "list.super_blocks", "super_blocks", super_blocks, sb_list, lim));

  // s_inodes of every super block, as one check.
  LR_ASSIGN(uint64_t sb_inodes, sb.off("s_inodes"));
  LR_ASSIGN(Layout ino, Layout::of(k, "struct inode"));
  LR_ASSIGN(uint64_t i_sb_list, ino.off("i_sb_list"));
  KCheckResult si;
  si.name = "list.s_inodes";
  si.description = "every super_block's s_inodes is a well-formed ring";
  for (uint64_t b :
       list_objects(mem, super_blocks, sb_list, lim, "super_blocks", nullptr, nullptr)) {
    if (interrupted(lim)) return make_error(Errc::kInterrupted, "interrupted");
    KCheckResult one = list_check(mem, "", "", b + sb_inodes, i_sb_list, lim);
    si.checked += one.checked;
    for (auto& e : one.examples) add_example(si, fmt::format("super_block {:#x}: {}", b, e));
    si.violations += one.violations - one.examples.size();
  }
  out.push_back(std::move(si));

  // Counts against the holders found in memory: a count below them means a
  // reference someone holds is not counted (the next put frees a live object).
  LR_ASSIGN(KInodeReport ir, kernel_inodes(k, KInodeFilter{}, lim));
  KCheckResult fc;
  fc.name = "file.f_count";
  fc.description =
      "a file's f_count >= its holders found in memory (fd slots, mm->exe_file, "
      "mappings)";
  for (const KFile& f : ir.files) {
    ++fc.checked;
    if (f.f_count < static_cast<int64_t>(f.holders.size()))
      add_example(fc, fmt::format("file {:#x}: f_count {} < {} holders (first: pid {})", f.addr,
                                  f.f_count, f.holders.size(), f.holders[0].pid));
  }
  out.push_back(std::move(fc));
  KCheckResult ic, dc;
  ic.name = "inode.i_count";
  ic.description = "an inode's i_count >= its dentry aliases (each positive dentry holds one)";
  dc.name = "dentry.d_lockref";
  dc.description = "a dentry's count >= children + open files + mounts + task root/pwd + pin";
  for (const auto& s : ir.sbs) {
    for (const auto& i : s.inodes) {
      ++ic.checked;
      if (i.unexplained < 0)
        add_example(ic, fmt::format("inode {:#x} ({} ino {}): i_count {} < {} aliases", i.addr,
                                    s.fstype, i.ino, i.i_count, i.dentries.size()));
      for (const auto& d : i.dentries) {
        ++dc.checked;
        if (d.unexplained < 0)
          add_example(dc, fmt::format("dentry {:#x} '{}' ({}): count {} < {} held", d.addr, d.name,
                                      s.fstype, d.count, d.count - d.unexplained));
      }
    }
  }
  out.push_back(std::move(ic));
  out.push_back(std::move(dc));

  LR_ASSIGN(KModuleReport mr, kernel_modules(k, lim));
  KCheckResult mc;
  mc.name = "module.refcnt";
  mc.description =
      "a live module's refcnt >= 1 + dependent modules + its mounted super blocks "
      "+ open files it owns";
  for (const auto& m : mr.modules) {
    ++mc.checked;
    if (m.state == "live" && m.unexplained < 0)
      add_example(mc, fmt::format("module {} ({:#x}): refcnt {} < {} held", m.name, m.addr,
                                  m.refcnt, m.refcnt - m.unexplained));
  }
  out.push_back(std::move(mc));
  return out;
}

}  // namespace lr
