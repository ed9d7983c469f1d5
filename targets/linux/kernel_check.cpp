// `leakref check` on a kernel: invariants the kernel relies on, each checked
// over the whole image with the first violations named.
#include <fmt/format.h>

#include "kernel_internal.hpp"
#include "targets/linux/kernel.hpp"

namespace lr {

using namespace kint;

namespace {

void add_example(KCheckResult& c, std::string what) {
  ++c.violations;
  if (c.examples.size() < 10) c.examples.push_back(std::move(what));
}

// A list's integrity from the walk that already went over it; `prefix`
// names the list in each example when several lists share one check.
KCheckResult list_check(const std::string& name, const std::string& what, const WalkResult& r,
                        uint64_t visited, const std::string& prefix = "") {
  KCheckResult c;
  c.name = name;
  c.description = what +
                  " is a well-formed ring: every next's prev points back, no loop "
                  "that misses the head, no unreadable link";
  c.checked = visited;
  if (r.stop != WalkStop::kEnd)
    add_example(c, fmt::format("{}walk stopped ({}) at {:#x}: {}", prefix, walk_stop_name(r.stop),
                               r.stop_addr, r.stop_detail));
  for (const auto& is : r.issues)
    add_example(c, fmt::format("{}{:#x}: {}", prefix, is.addr, is.what));
  c.violations += r.issue_count - r.issues.size();
  return c;
}

}  // namespace

Result<std::vector<KCheckResult>> kernel_check(KernelTarget& k, const KernelLimits& lim) {
  std::vector<KCheckResult> out;
  // One scan serves every check: the lists' integrity comes from the walks
  // the reports make anyway.
  LR_ASSIGN(Scan s, scan(k, lim, true));
  WalkResult mw;
  LR_ASSIGN(KModuleReport mr, modules_from(k, s, lim, &mw));
  LR_ASSIGN(KInodeReport ir, inodes_from(k, s, KInodeFilter{}, lim));
  out.push_back(list_check("list.tasks", "init_task.tasks (every process)", s.tasks_walk, s.tasks));
  out.push_back(list_check("list.modules", "modules", mw, mr.modules.size()));
  out.push_back(list_check("list.super_blocks", "super_blocks", s.sb_walk, s.super_blocks.size()));
  KCheckResult si;
  si.name = "list.s_inodes";
  si.description = "every super_block's s_inodes is a well-formed ring";
  for (const auto& sb : ir.sbs) {
    KCheckResult one = list_check("", "", sb.inode_walk, sb.inode_count,
                                  fmt::format("super_block {:#x}: ", sb.addr));
    si.checked += one.checked;
    si.violations += one.violations;
    for (auto& e : one.examples)
      if (si.examples.size() < 10) si.examples.push_back(std::move(e));
  }
  out.push_back(std::move(si));

  // Counts against the holders found in memory: a count below them means a
  // reference someone holds is not counted (the next put frees a live object).
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
