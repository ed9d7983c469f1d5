// The kernel subcommands (walk, inodes, modules, check): argument parsing and
// rendering shared by `leakref kernel` and the crash extension, which differ
// only in where memory comes from and where text goes.
#include "frontend/kernel/cmd_kernel.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/kernel/cmd_kleaks.hpp"
#include "frontend/kernel/cmd_kslab.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include "corelib/profiles/profile.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"
#include "frontend/process/cmd_profile.hpp"
#include "frontend/process/cmd_walk.hpp"
#include "targets/linux/kernel_refs.hpp"

namespace lrcli {

namespace {

struct KArgs {
  bool json = false;
  bool stats = false;  // timing in JSON
  std::vector<std::string> fail_on;
  // inodes
  std::string sb, fstype;
  bool all = false, flagged_only = false;
  // modules
  std::vector<std::string> names;
  // walk, profile: loaded modules' .ko files (their types)
  std::vector<std::string> kos;
};

std::string mode_string(uint64_t mode) {
  const char* kind = "?";
  switch (mode & 0170000) {
    case 0100000:
      kind = "reg";
      break;
    case 0040000:
      kind = "dir";
      break;
    case 0120000:
      kind = "lnk";
      break;
    case 0020000:
      kind = "chr";
      break;
    case 0060000:
      kind = "blk";
      break;
    case 0010000:
      kind = "fifo";
      break;
    case 0140000:
      kind = "sock";
      break;
    default:
      break;
  }
  return fmt::format("{} {:04o}", kind, mode & 07777);
}

std::string holders_text(const lr::KFile& f) {
  // "lrholder(93) fd 8,9,10; lrchild(100) exe, 4 maps", processes in order
  // of first appearance.
  std::vector<int> order;
  std::map<int, std::vector<const lr::KFileHolder*>> by_pid;
  for (const auto& h : f.holders) {
    auto& v = by_pid[h.pid];
    if (v.empty()) order.push_back(h.pid);
    v.push_back(&h);
  }
  std::string out;
  for (int pid : order) {
    const auto& hs = by_pid[pid];
    std::string fds;
    uint64_t maps = 0;
    bool exe = false;
    for (const auto* h : hs) {
      if (h->fd == lr::KFileHolder::kExe)
        exe = true;
      else if (h->fd == lr::KFileHolder::kMmap)
        ++maps;
      else
        fds += (fds.empty() ? "fd " : ",") + std::to_string(h->fd);
    }
    std::vector<std::string> parts;
    if (!fds.empty()) parts.push_back(fds);
    if (exe) parts.push_back("exe");
    if (maps) parts.push_back(fmt::format("{} map{}", maps, maps == 1 ? "" : "s"));
    if (!out.empty()) out += "; ";
    out += fmt::format("{}({}) ", hs[0]->comm, pid);
    for (size_t p = 0; p < parts.size(); ++p) out += (p ? ", " : "") + parts[p];
  }
  return out;
}

nlohmann::json file_json(lr::KernelTarget& k, const lr::KFile& f) {
  nlohmann::json j{{"addr", hex(f.addr)},     {"f_count", f.f_count}, {"inode", hex(f.inode)},
                   {"dentry", hex(f.dentry)}, {"mnt", hex(f.mnt)},    {"f_op", hex(f.f_op)}};
  auto& h = j["holders"] = nlohmann::json::array();
  for (const auto& x : f.holders) {
    nlohmann::json jh{{"pid", x.pid}, {"comm", x.comm}};
    if (x.fd >= 0) jh["fd"] = x.fd;
    jh["kind"] = x.fd >= 0 ? "fd" : x.fd == lr::KFileHolder::kExe ? "exe" : "mmap";
    h.push_back(std::move(jh));
  }
  if (f.unheld) j["unheld"] = true;
  if (f.has_alloc) {
    nlohmann::json a = track_json(k, f.alloc);
    auto& st = a["stack"] = nlohmann::json::array();
    for (uint64_t x : f.alloc_stack) st.push_back(ksym(k, x));
    if (!f.alloc_stack_error.empty()) a["stack_error"] = f.alloc_stack_error;
    j["alloc"] = std::move(a);
  }
  return j;
}

// A file no task holds: what it is, and who allocated it when known.
void print_unheld(lr::KernelTarget& k, const lr::KFile& f, Out& out) {
  out.print(
      "    file   {} f_count {}  held by no task, mapping or exe (an SCM_RIGHTS message in "
      "flight, or leaked)\n",
      hex(f.addr), f.f_count);
  if (!f.has_alloc) {
    out.print("           (who allocated it is known only with slub_debug=U for its cache)\n");
    return;
  }
  out.print("           allocated by pid {} on cpu {} at jiffies {}:\n", f.alloc.pid, f.alloc.cpu,
            f.alloc.when);
  for (uint64_t a : f.alloc_stack) out.print("             {}\n", ksym(k, a));
  if (f.alloc_stack.empty())
    out.print("             {} ({})\n", ksym(k, f.alloc.addr),
              f.alloc_stack_error.empty() ? "no stack recorded" : f.alloc_stack_error);
}

// The dump's own warnings (a cut-off file, missing debuginfo) before a report's.
std::vector<std::string> with_target_warnings(const lr::KernelTarget& k,
                                              const std::vector<std::string>& report) {
  std::vector<std::string> w = k.warnings();
  w.insert(w.end(), report.begin(), report.end());
  return w;
}

int run_inodes(lr::KernelTarget& k, const KArgs& a, const std::string& source,
               const lr::KernelLimits& lim, Out& out, Out& err) {
  lr::KInodeFilter f;
  if (!a.sb.empty()) {
    auto addr = k.prog().resolve_address(a.sb);
    if (!addr.ok()) return fail(addr.error(), err);
    f.sb = addr.value();
  }
  f.fstype = a.fstype;
  f.held_only = !a.all;
  auto r = lr::kernel_inodes(k, f, lim);
  if (!r.ok()) {
    print_warnings_text(k.warnings(), err);  // why it failed: a cut-off dump, ...
    return fail(r.error(), err);
  }
  const lr::KInodeReport& rep = r.value();
  if ((f.sb || !f.fstype.empty()) && rep.sbs.empty()) {
    err.print("leakref: error: no super_block matches {}\n",
              f.sb ? hex(f.sb) : "fstype '" + f.fstype + "'");
    return kLookup;
  }
  auto show = [&](const lr::KInode& i) { return !a.flagged_only || i.flagged(); };
  size_t unheld = 0;  // files found only in the file cache, on flagged dentries
  for (const auto& f : rep.files) unheld += f.unheld;
  if (a.json) {
    nlohmann::json j;
    j["schema"] = "leakref.kernel.inodes/1";
    j["dump"] = source;
    j["all"] = a.all;
    auto& sbs = j["super_blocks"] = nlohmann::json::array();
    for (const auto& s : rep.sbs) {
      nlohmann::json js{
          {"addr", hex(s.addr)},          {"fstype", s.fstype},          {"id", s.id},
          {"root", hex(s.root)},          {"s_inodes", hex(s.s_inodes)}, {"mounts", s.mounts},
          {"inode_count", s.inode_count}, {"flagged", s.flagged}};
      js["inodes_walk_stop"] = lr::walk_stop_name(s.inode_walk.stop);
      auto& ji = js["inodes"] = nlohmann::json::array();
      for (const auto& i : s.inodes) {
        if (!show(i)) continue;
        nlohmann::json x{{"addr", hex(i.addr)},
                         {"ino", i.ino},
                         {"i_count", i.i_count},
                         {"i_nlink", i.i_nlink},
                         {"i_state", i.i_state},
                         {"i_state_names", lr::inode_state_names(i.i_state, rep.state_bits)},
                         {"i_mode", i.i_mode},
                         {"unexplained", i.unexplained},
                         {"flagged", i.flagged()}};
        auto& jd = x["dentries"] = nlohmann::json::array();
        for (const auto& d : i.dentries) {
          nlohmann::json uf = nlohmann::json::array();
          for (size_t fi : d.unheld_files) uf.push_back(file_json(k, rep.files[fi]));
          jd.push_back({{"addr", hex(d.addr)},
                        {"name", d.name},
                        {"path", d.path},
                        {"count", d.count},
                        {"children", d.children},
                        {"files", d.files},
                        {"mount_refs", d.mount_refs},
                        {"fs_refs", d.fs_refs},
                        {"pinned", d.pinned},
                        {"unexplained", d.unexplained},
                        {"unheld_files", std::move(uf)}});
        }
        auto& jf = x["files"] = nlohmann::json::array();
        for (size_t fi : i.files) jf.push_back(file_json(k, rep.files[fi]));
        ji.push_back(std::move(x));
      }
      sbs.push_back(std::move(js));
    }
    j["summary"] = {{"tasks", rep.tasks},       {"open_files", rep.files.size() - unheld},
                    {"unheld_files", unheld},   {"inodes", rep.inodes},
                    {"dentries", rep.dentries}, {"flagged", rep.flagged}};
    if (a.stats) j["summary"]["walk_ns"] = rep.walk_ns;
    j["warnings"] = with_target_warnings(k, rep.warnings);
    emit_json(j, out);
  } else {
    print_warnings_text(with_target_warnings(k, rep.warnings), err);
    out.print("{:<18}  {:<12}  {:<12}  {:>8}  {:>7}  {}\n", "SUPER_BLOCK", "TYPE", "ID", "INODES",
              "FLAGGED", "MOUNTED ON");
    for (const auto& s : rep.sbs) {
      std::string where = s.mounts.empty() ? "-" : s.mounts[0];
      if (s.mounts.size() > 1) where += fmt::format(" (+{})", s.mounts.size() - 1);
      out.print("{:<18}  {:<12}  {:<12}  {:>8}  {:>7}  {}\n", hex(s.addr), s.fstype, s.id,
                s.inode_count, s.flagged, where);
    }
    for (const auto& s : rep.sbs) {
      bool header = false;
      for (const auto& i : s.inodes) {
        if (!show(i) || out.failed()) continue;
        if (!header) {
          out.print("\nsuper_block {} {} \"{}\"{}:\n", hex(s.addr), s.fstype, s.id,
                    s.mounts.empty() ? "" : " on " + s.mounts[0]);
          header = true;
        }
        out.print("  inode {} ino {} {} i_count {} nlink {} state {}{}\n", hex(i.addr), i.ino,
                  mode_string(i.i_mode), i.i_count, i.i_nlink,
                  lr::inode_state_names(i.i_state, rep.state_bits),
                  i.unexplained > 0
                      ? fmt::format("  !! {} i_count not held by dentries", i.unexplained)
                      : "");
        for (const auto& d : i.dentries) {
          std::string why = fmt::format("children {} + files {} + mounts {} + root/pwd {} + pin {}",
                                        d.children, d.files, d.mount_refs, d.fs_refs, d.pinned);
          out.print("    dentry {} {} d_count {} = {}{}\n", hex(d.addr), d.path, d.count, why,
                    d.unexplained ? fmt::format("  !! {:+} unexplained", d.unexplained) : "");
          for (size_t fi : d.unheld_files) print_unheld(k, rep.files[fi], out);
        }
        for (size_t fi : i.files) {
          const lr::KFile& f = rep.files[fi];
          out.print("    file   {} f_count {}  {}\n", hex(f.addr), f.f_count, holders_text(f));
        }
      }
    }
    out.print("\n{} tasks, {} open files, {} inodes, {} dentries; {} flagged{}\n", rep.tasks,
              rep.files.size() - unheld, rep.inodes, rep.dentries, rep.flagged,
              a.all ? "" : " (inodes without open files or findings not listed; --all lists them)");
  }
  return fail_on_wants(a.fail_on, "flagged") && rep.flagged ? kFindings : kOk;
}

int run_modules(lr::KernelTarget& k, const KArgs& a, const std::string& source,
                const lr::KernelLimits& lim, Out& out, Out& err) {
  auto r = lr::kernel_modules(k, lim);
  if (!r.ok()) {
    print_warnings_text(k.warnings(), err);  // why it failed: a cut-off dump, ...
    return fail(r.error(), err);
  }
  const lr::KModuleReport& rep = r.value();
  auto pick = [&](const lr::KModule& m) {
    return a.names.empty() || std::find(a.names.begin(), a.names.end(), m.name) != a.names.end();
  };
  uint64_t unexplained = 0;
  for (const auto& m : rep.modules)
    if (pick(m) && m.unexplained > 0) ++unexplained;
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s.empty() ? std::string("-") : s;
  };
  if (a.json) {
    nlohmann::json j;
    j["schema"] = "leakref.kernel.modules/1";
    j["dump"] = source;
    auto& mods = j["modules"] = nlohmann::json::array();
    for (const auto& m : rep.modules) {
      if (!pick(m)) continue;
      mods.push_back({{"addr", hex(m.addr)},
                      {"name", m.name},
                      {"state", m.state},
                      {"refcnt", m.refcnt},
                      {"used_by", m.used_by},
                      {"uses", m.uses},
                      {"superblocks", m.superblocks},
                      {"open_files", m.open_files},
                      {"unexplained", m.unexplained}});
    }
    j["summary"] = {{"modules", mods.size()}, {"unexplained", unexplained}};
    if (a.stats) j["summary"]["walk_ns"] = rep.walk_ns;
    j["warnings"] = with_target_warnings(k, rep.warnings);
    emit_json(j, out);
  } else {
    print_warnings_text(with_target_warnings(k, rep.warnings), err);
    out.print("{:<20}  {:<18}  {:<8}  {:>6}  {:>6}  {:>5}  {:>5}  {:>11}  {}\n", "MODULE", "ADDR",
              "STATE", "REFCNT", "DEPS", "SBS", "FILES", "UNEXPLAINED", "USED_BY");
    for (const auto& m : rep.modules) {
      if (!pick(m)) continue;
      out.print("{:<20}  {:<18}  {:<8}  {:>6}  {:>6}  {:>5}  {:>5}  {:>11}  {}\n", m.name,
                hex(m.addr), m.state, m.refcnt, m.used_by.size(), m.superblocks, m.open_files,
                m.unexplained, join(m.used_by));
    }
    out.print(
        "\nrefcnt = 1 (base) + DEPS (modules using it) + SBS (mounted super blocks of its "
        "filesystems) + FILES (open files whose f_op it owns) + UNEXPLAINED\n");
  }
  return fail_on_wants(a.fail_on, "unexplained") && unexplained ? kFindings : kOk;
}

int run_check(lr::KernelTarget& k, const KArgs& a, const std::string& source,
              const lr::KernelLimits& lim, Out& out, Out& err) {
  auto r = lr::kernel_check(k, lim);
  if (!r.ok()) {
    print_warnings_text(k.warnings(), err);  // why it failed: a cut-off dump, ...
    return fail(r.error(), err);
  }
  uint64_t violations = 0;
  for (const auto& c : r.value()) violations += c.violations;
  if (a.json) {
    nlohmann::json j;
    j["schema"] = "leakref.kernel.check/1";
    j["dump"] = source;
    auto& cs = j["checks"] = nlohmann::json::array();
    for (const auto& c : r.value())
      cs.push_back({{"name", c.name},
                    {"description", c.description},
                    {"checked", c.checked},
                    {"violations", c.violations},
                    {"examples", c.examples}});
    j["summary"] = {{"checks", r.value().size()}, {"violations", violations}};
    j["warnings"] = k.warnings();
    emit_json(j, out);
  } else {
    print_warnings_text(k.warnings(), err);
    out.print("{:<18}  {:>9}  {:>10}  {}\n", "CHECK", "CHECKED", "VIOLATIONS", "INVARIANT");
    for (const auto& c : r.value()) {
      out.print("{:<18}  {:>9}  {:>10}  {}\n", c.name, c.checked, c.violations, c.description);
      for (const auto& e : c.examples) out.print("    {}\n", e);
    }
  }
  return fail_on_wants(a.fail_on, "violation") && violations ? kFindings : kOk;
}

}  // namespace

namespace {

// Every kernel subcommand's options, and which subcommand was given.
struct KernelCli {
  KArgs ka;
  WalkArgs w, sw;
  ProfileArgs pa;
  SlabArgs sa;
  KLeaksArgs la;
  KRefsArgs ra;
  RetainedArgs rta;
  CLI::App *walk = nullptr, *ino = nullptr, *mods = nullptr, *prof = nullptr, *slab = nullptr,
           *chk = nullptr, *leaks = nullptr, *refs = nullptr, *ret = nullptr;

  void define(CLI::App& app);
  int check(Out& err, lr::KernelLimits& lim, const std::atomic<bool>* interrupted);
  int run(lr::KernelTarget& k, const std::string& source, const lr::KernelLimits& lim,
          const std::atomic<bool>* interrupted, Out& out, Out& err);
};

void KernelCli::define(CLI::App& app) {
  walk = app.add_subcommand("walk", "walk any list, hlist, chain, array or hash table");
  add_walk_options(walk, w, false);  // or --profile/--set: check_walk_args
  add_walk_run_options(walk, w);
  walk->add_flag("--json", ka.json, "leakref.walk/1 JSON");
  const char* ko_help = "a loaded module's .ko: its types, checked against the dump (repeatable)";
  walk->add_option("--ko", ka.kos, ko_help);
  ino = app.add_subcommand("inodes", "inodes with their dentries and open files");
  ino->add_option("-s,--super-block", ka.sb, "only this super_block (ADDR)");
  ino->add_option("-t,--fstype", ka.fstype, "only super blocks of this type (tmpfs, ext4, ...)");
  ino->add_flag("--all", ka.all, "every inode, not only held or flagged ones");
  ino->add_flag("--flagged", ka.flagged_only, "only inodes with unexplained references");
  ino->add_option("--fail-on", ka.fail_on, "exit 1 if: flagged")->delimiter(',');
  ino->add_flag("--json", ka.json, "leakref.kernel.inodes/1 JSON");
  ino->add_flag("--stats", ka.stats, "timing in the JSON (summary.walk_ns)");
  mods = app.add_subcommand("modules", "module refcounts and their holders");
  mods->add_option("names", ka.names, "only these modules");
  mods->add_option("--fail-on", ka.fail_on, "exit 1 if: unexplained")->delimiter(',');
  mods->add_flag("--json", ka.json, "leakref.kernel.modules/1 JSON");
  mods->add_flag("--stats", ka.stats, "timing in the JSON (summary.walk_ns)");
  prof = app.add_subcommand("profile", "object sets, holders and invariants of a profile file");
  add_profile_options(prof, pa);
  prof->add_flag("--json", ka.json, "leakref.profile/1 JSON");
  prof->add_option("--ko", ka.kos, ko_help);
  slab = app.add_subcommand("slab",
                            "SLUB caches, every allocated object, who allocated it (slub_debug=U)");
  add_slab_options(slab, sa, sw);
  slab->add_flag("--json", ka.json, "leakref.kernel.slab/1 JSON (with --type: leakref.walk/1)");
  slab->add_option("--ko", ka.kos, ko_help);
  chk = app.add_subcommand("check", "kernel invariants: list integrity, counts vs holders");
  chk->add_option("--fail-on", ka.fail_on, "exit 1 if: violation")->delimiter(',');
  chk->add_flag("--json", ka.json, "leakref.kernel.check/1 JSON");
  leaks = app.add_subcommand(
      "leaks", "allocated objects nothing reachable points to (kmemleak's answer, no tracing)");
  add_kleaks_options(leaks, la);
  leaks->add_option("--ko", ka.kos, ko_help);
  refs = app.add_subcommand("refs", "who points into a kernel object, named");
  add_krefs_options(refs, ra);
  refs->add_option("--ko", ka.kos, ko_help);
  ret = app.add_subcommand(
      "retained", "what holds kernel memory: dominator tree, retained sizes, paths from the roots");
  add_retained_options(ret, rta);
  ret->add_flag("--json", ka.json, "leakref.retained/1 JSON");
  ret->add_option("--ko", ka.kos, ko_help);
}

// The checks made before the dump is opened; -1 when the command line holds.
int KernelCli::check(Out& err, lr::KernelLimits& lim, const std::atomic<bool>* interrupted) {
  if (w.limit) lim.max_objects = w.limit;
  if (prof->parsed()) {
    if (auto u = check_profile_args(pa); !u.ok()) return fail(u.error(), err);
  }
  if (ret->parsed())
    if (std::string bad = retained_args_error(rta); !bad.empty()) {
      err.print("leakref: error: {}\n", bad);
      return kUsage;
    }
  for (const auto& f : la.fail_on)
    if (f != "leak" && f != "partial" && f != "any") {
      err.print("leakref: error: --fail-on: unknown finding '{}' (leaks: leak, partial)\n", f);
      return kUsage;
    }
  for (const auto& f : prof->parsed() ? std::vector<std::string>{} : ka.fail_on) {
    bool ok = f == "any" || (ino->parsed() && f == "flagged") ||
              (mods->parsed() && f == "unexplained") || (chk->parsed() && f == "violation");
    if (!ok) {
      err.print("leakref: error: --fail-on: unknown finding '{}'\n", f);
      return kUsage;
    }
  }
  if (walk->parsed()) {
    if (auto u = check_walk_args(w); !u.ok()) return fail(u.error(), err);
  }
  if (slab->parsed()) {
    for (const auto& f : sw.fail_on)
      if (f != "any" && f != "warning" && (sw.type.empty() || f == "warning")) {
        err.print("leakref: error: --fail-on: unknown finding '{}' (slab: warning{})\n", f,
                  sw.type.empty() ? "" : "; with --type: match, fault, ...");
        return kUsage;
      }
    if (!sw.where.empty())
      if (auto u = lr::Filter::check_syntax(sw.where, "--where"); !u.ok())
        return fail(u.error(), err);
    sw.interrupted = interrupted;
    if (sw.limit) lim.max_objects = std::max<uint64_t>(lim.max_objects, sw.limit);
  }
  return -1;
}

int KernelCli::run(lr::KernelTarget& k, const std::string& source, const lr::KernelLimits& lim,
                   const std::atomic<bool>* interrupted, Out& out, Out& err) {
  for (const auto& ko : ka.kos)
    if (auto r = k.add_module_debuginfo(ko); !r.ok()) return fail(r.error(), err);
  // --reconcile: the image's reference index (built once per target).
  std::shared_ptr<lr::KRefIndex> ix;
  std::unique_ptr<lr::KRefSource> found;
  if ((walk->parsed() && w.reconcile) || (slab->parsed() && sw.reconcile) ||
      (prof->parsed() && pa.reconcile)) {
    auto r = kernel_ref_index(k, lim);
    if (!r.ok()) return fail(r.error(), err);
    ix = r.value();
    found = std::make_unique<lr::KRefSource>(*ix);
    w.index = sw.index = pa.index = found.get();
  }
  const std::vector<std::string>& pre = k.warnings();
  if (walk->parsed()) {
    w.interrupted = interrupted;
    return run_and_render_walk(k.prog(), w, ka.json, true, source, pre, out, err);
  }
  if (prof->parsed()) {
    pa.interrupted = interrupted;
    auto p = lr::find_profile(pa.profile, profile_dirs());
    if (!p.ok()) return fail(p.error(), err);
    return run_and_render_profile(k.prog(), p.value(), pa, ka.json, true, source, pre, out, err);
  }
  if (slab->parsed()) return run_slab(k, sa, sw, ka.json, source, lim, out, err);
  if (leaks->parsed()) return run_kleaks(k, la, source, lim, out, err);
  if (refs->parsed()) return run_krefs(k, ra, source, lim, out, err);
  if (ret->parsed()) return run_kretained(k, rta, ka.json, source, lim, out, err);
  if (ino->parsed()) return run_inodes(k, ka, source, lim, out, err);
  if (mods->parsed()) return run_modules(k, ka, source, lim, out, err);
  return run_check(k, ka, source, lim, out, err);
}

}  // namespace

int run_kernel_command(const KernelOpener& open, const std::vector<std::string>& args,
                       const std::string& source, Out& out, Out& err,
                       const std::atomic<bool>* interrupted, const std::string& usage_name) {
  CLI::App app{"leakref kernel analyses", usage_name};
  use_leakref_help(app);
  app.require_subcommand(1);
  KernelCli c;
  c.define(app);
  one_value_per_option(&app);
  // (kernel-level options were taken by the caller: args[0] is the subcommand)
  if (!args.empty())
    if (std::string u = unknown_subcommand(app, args[0]); !u.empty()) {
      err.print("leakref: error: {}\n", u);
      return kUsage;
    }
  std::vector<std::string> rev(args.rbegin(), args.rend());
  try {
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    out.put(app.help());
    return kOk;
  } catch (const CLI::CallForAllHelp&) {
    out.put(app.help("", CLI::AppFormatMode::All));
    return kOk;
  } catch (const CLI::ParseError& e) {
    err.print("leakref: error: {}\n", e.what());
    return kUsage;
  }
  // The CLI's errors only (fail() checks).
  json_errors(c.ka.json || c.w.jsonl || c.pa.jsonl || c.sw.jsonl || c.la.json || c.ra.json);
  lr::KernelLimits lim;
  lim.interrupted = interrupted;
  if (int rc = c.check(err, lim, interrupted); rc >= 0) return rc;
  auto target = open();
  if (!target.ok()) return fail(target.error(), err);
  return c.run(*target.value(), source, lim, interrupted, out, err);
}

}  // namespace lrcli

namespace lrcli {

int cmd_kernel(const std::string& vmcore, const std::string& vmlinux, const lr::DebugOptions& dbg,
               const std::vector<std::string>& args, bool help) {
  if (args.empty())
    return fail_usage(
        "kernel: give a subcommand: walk, inodes, modules, check, slab, leaks, refs, profile");
  std::vector<std::string> a = args;
  if (help) a.push_back("--help");
  std::unique_ptr<lr::KernelTarget> k;
  auto open = [&]() -> lr::Result<lr::KernelTarget*> {
    if (vmcore.empty())
      return lr::make_error(lr::Errc::kInvalidArgument, "kernel: --vmcore is required");
    LR_ASSIGN(k, lr::KernelTarget::open(vmcore, vmlinux, dbg));
    return k.get();
  };
  std::fflush(stdout);
  return run_kernel_command(open, a, vmcore, out_stdout(), out_stderr(), nullptr, "leakref kernel");
}

Command register_kernel(CLI::App& app) {
  struct Args {
    std::string vmcore, vmlinux;
    lr::DebugOptions dbg;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "kernel",
      "a kernel vmcore: walk, inodes, modules, check, slab, leaks, refs, profile (as crash> "
      "leakref ...)");
  // Required for analyses, not for a subcommand's --help (cmd_kernel checks).
  sub->add_option("--vmcore", a->vmcore, "ELF or kdump-compressed vmcore");
  sub->add_option("--vmlinux", a->vmlinux,
                  "vmlinux with DWARF (default: /usr/lib/debug/boot/vmlinux-RELEASE, ...)");
  sub->add_option("--debug-dir", a->dbg.debug_dirs,
                  "where to look for vmlinux first: DIR/.build-id/, DIR/usr/lib/debug/boot/ ...");
  sub->add_option("--sysroot", a->dbg.sysroot, "look for vmlinux under this root too");
  sub->prefix_command();  // the rest is the kernel subcommand and its options
  sub->footer(
      "Subcommands:\n"
      "  walk                        walk any list, hlist, chain, tree, xarray, array or table\n"
      "  inodes                      inodes with their dentries, open files and mappings\n"
      "  modules                     module refcounts and their holders\n"
      "  check                       kernel invariants: list integrity, counts vs holders\n"
      "  slab                        SLUB caches, their objects and who allocated them\n"
      "  leaks                       allocated objects nothing reachable points to\n"
      "  refs                        who points into a kernel object\n"
      "  profile                     a profile file's object sets, holders and invariants\n"
      "'leakref help kernel SUBCOMMAND' for each one's options.");
  // Its JSON flag is among the remaining words; cmd_kernel sets JSON errors.
  return {sub,
          [sub, a] { return cmd_kernel(a->vmcore, a->vmlinux, a->dbg, sub->remaining(), false); },
          [] { return false; }};
}

}  // namespace lrcli
