// leakref — post-mortem refcount-leak analysis of cores.
#include <fmt/format.h>

#include "common.hpp"
#include "leakref/names.hpp"

using namespace lrcli;

namespace {

// "; did you mean '--where'?" for an unexpected "--wehre" (CLI11 names it only).
std::string option_hint(const CLI::App& app, const std::string& what) {
  size_t at = what.find("--");
  if (what.find("not expected") == std::string::npos || at == std::string::npos) return "";
  std::string bad = what.substr(at);
  bad = bad.substr(0, bad.find_first_of(" =\n"));
  std::vector<std::string> names;
  std::vector<const CLI::App*> apps = {&app};
  for (size_t i = 0; i < apps.size(); ++i) {
    for (const CLI::Option* o : apps[i]->get_options())
      for (const auto& n : o->get_lnames()) names.push_back("--" + n);
    for (const CLI::App* sub : apps[i]->get_subcommands({})) apps.push_back(sub);
  }
  return lr::did_you_mean(bad, names);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"leakref: walk refcounted structures in cores through DWARF", "leakref"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "leakref 0.1.0");

  Common c;
  auto* info = app.add_subcommand("info", "executable, threads, modules, debuginfo, segments");
  add_common(info, c);

  WalkArgs w;
  auto* walk = app.add_subcommand("walk", "walk a list, hash table, chain or array of objects");
  add_common(walk, c);
  add_walk_options(walk, w, false);  // or --profile/--set: check_walk_args
  add_walk_run_options(walk, w);

  std::string show_addr, show_type;
  int show_depth = 8;
  auto* show = app.add_subcommand("show", "all fields of one object, like crash's struct");
  add_common(show, c);
  show->add_option("addr", show_addr, "ADDR or SYMBOL")->required();
  show->add_option("--type", show_type, "type of the object (default: the symbol's type)");
  show->add_option("--depth", show_depth, "nesting depth to expand (default 8)");

  std::string sym_what;
  auto* sym = app.add_subcommand("sym", "symbol to address, or address to sym+off [module]");
  add_common(sym, c);
  sym->add_option("what", sym_what, "NAME, NAME@module or ADDR")->required();

  bool heap_list = false;
  auto* heap =
      app.add_subcommand("heap", "glibc malloc arenas and in-use chunks (chunk-state aware)");
  add_common(heap, c);
  heap->add_flag("--list", heap_list, "list every in-use chunk (address, usable size)");
  bool heap_stats = false;
  heap->add_flag("--stats", heap_stats, "timing (JSON: walk_ns; text: on stderr)");

  GlusterArgs ga;
  auto* gl = app.add_subcommand(
      "gluster", "GlusterFS mem-pools, accounting, inode tables, fds, dicts, clients");
  add_common(gl, c);
  gl->add_option("--format", ga.format, "text, json or statedump")
      ->check(CLI::IsMember({"text", "json", "statedump"}));
  gl->add_option("--section", ga.sections, "mempool,itable,memusage,dicts,clients,fds")
      ->delimiter(',');
  gl->add_flag("--stats", ga.stats, "timing (JSON: heap.walk_ns, total_ns)");

  ProfileArgs pa;
  auto* prof = app.add_subcommand("profile",
                                  "object sets, holders and invariants declared in a profile file");
  add_common(prof, c);
  add_profile_options(prof, pa);

  CorrelateArgs ca;
  auto* corr = app.add_subcommand(
      "correlate", "join ref/unref or malloc traces with the objects live in a core");
  add_common(corr, c);
  corr->add_option("trace", ca.traces,
                   "trace files: leakref-trace, bpftrace, SystemTap ref-leak, mmleak (+ .maps), "
                   "bcc memleak, /proc/PID/maps")
      ->required();
  corr->add_option("--format", ca.format, "trace format (default: detected per file)");
  corr->add_option("--kind", ca.kind,
                   "GlusterFS objects: dict, inode, fd or any; with a walk: "
                   "the trace kind its objects are (default any)");
  corr->add_option("--ptr", ca.ptr, "print the full ref/unref history of this object");
  corr->add_option("--top", ca.top, "call sites to list (default 10)");
  corr->add_option("--fail-on", ca.fail_on,
                   "exit 1 if: flagged, disagree, unreliable, leaked (allocation traces), any")
      ->delimiter(',');
  add_walk_options(corr, ca.walk, false);
  corr->add_option("--profile", ca.profile, "profile file (or NAME) whose --set gives the objects");
  corr->add_option("--set", ca.profile_set, "the profile set to join (walked from a symbol)");

  TracePlanArgs tpa;
  auto* tplan = app.add_subcommand("trace-plan",
                                   "probes for leakref-trace: resolve functions in a live process");
  tplan->add_option("-p,--pid", tpa.pid, "process to trace")->required();
  tplan
      ->add_option("--functions", tpa.functions,
                   "NAME[@MODULE][:ref|unref|new|free|alloc[:KIND]],... (default: GlusterFS dict, "
                   "inode, fd)")
      ->delimiter(',');
  tplan->add_option("--refoff", tpa.refoffs, "KIND=OFFSET[:4|8]: read the refcount at entry");
  tplan->add_option("--bpftrace", tpa.bpftrace_out, "write the bpftrace program here");
  tplan->add_option("--ready-file", tpa.ready_file, "the program creates this file once attached");
  tplan->add_flag("--json", tpa.json, "the plan as JSON (schema leakref.trace-plan/1)");
  tplan->add_option("--source", tpa.source, "H source= value (the tracer and its version)");
  tplan->add_option("--profile", tpa.profile,
                    "functions and refcount offsets from a profile's [[probe]]s (offsets from "
                    "the process's DWARF)");

  std::vector<std::string> ti_files;
  std::string ti_format = "auto";
  bool ti_json = false;
  auto* tinfo = app.add_subcommand("trace-info", "what leakref reads in trace files");
  tinfo->add_option("trace", ti_files, "trace files")->required();
  tinfo->add_option("--format", ti_format, "trace format (default: detected)");
  tinfo->add_flag("--json", ti_json, "machine-readable output");

  TypesArgs ta;
  Common tc;
  auto* types =
      app.add_subcommand("types", "synthesize DWARF types for a program without debuginfo");
  auto* tg = types->add_subcommand(
      "gluster", "GlusterFS 10.x types from the installed libglusterfs-dev headers");
  types->require_subcommand(1);
  TypesBuildArgs tba;
  Common tbc;
  auto* tb = types->add_subcommand(
      "build", "types from C headers, stamped with and cached by the executable's build-id");
  tb->add_option("core", tbc.core, "core whose executable the types are for");
  tb->add_option("--exe", tbc.exe, "the executable (no core; or overriding the core's)");
  tb->add_option("--header", tba.headers, "header to include (repeatable, in order)");
  tb->add_option("--profile", tba.profile, "take headers, includes and defines from its [build]");
  tb->add_option("-I,--include-dir", tba.include_dirs, "include directory (repeatable)");
  tb->add_option("-D,--define", tba.defines, "NAME or NAME=VALUE, as the program was built");
  tb->add_option("-o,--output", tba.out, "write here instead of the cache");
  tb->add_flag("-v,--verbose", tba.verbose, "print the compiler command");
  tg->add_option("core", tc.core, "core whose libglusterfs build-id names the cache file");
  tg->add_option("-o,--output", ta.out, "write here instead of the cache");
  tg->add_option("--library", ta.library,
                 "libglusterfs whose build-id names the cache file (no core)");
  tg->add_option("--omit-define", ta.omit_defines, "leave out a define (to see what it changes)");
  tg->add_flag("-v,--verbose", ta.verbose, "print the compiler command");
  tg->add_option("--exe", tc.exe, "executable (default: from the core)");
  tg->add_option("--sysroot", tc.sysroot, "prefix for paths in the core");

  std::string k_vmcore, k_vmlinux;
  auto* kern = app.add_subcommand(
      "kernel", "a kernel vmcore: walk, inodes, modules, check, profile (as crash> leakref ...)");
  // Required for analyses, not for a subcommand's --help (cmd_kernel checks).
  kern->add_option("--vmcore", k_vmcore, "ELF or kdump-compressed vmcore");
  kern->add_option("--vmlinux", k_vmlinux,
                   "vmlinux with DWARF (default: /usr/lib/debug/boot/vmlinux-RELEASE, ...)");
  kern->prefix_command();  // the rest is the kernel subcommand and its options
  kern->footer(
      "Subcommands:\n"
      "  walk                        walk any list, hlist, chain, tree, xarray, array or table\n"
      "  inodes                      inodes with their dentries, open files and mappings\n"
      "  modules                     module refcounts and their holders\n"
      "  check                       kernel invariants: list integrity, counts vs holders\n"
      "  profile                     a profile file's object sets, holders and invariants\n"
      "'leakref help kernel SUBCOMMAND' for each one's options.");

  one_value_per_option(&app);
  // `leakref help [SUBCOMMAND...]`, and typos named as such.
  std::vector<std::string> words(argv + 1, argv + argc);
  if (!words.empty() && words[0] == "help") {
    if (words.size() == 1) {
      fmt::print("{}", app.help());
      return kOk;
    }
    if (std::string u = unknown_subcommand(app, words[1]); !u.empty()) return fail_usage(u);
    if (words[1] == "kernel" && words.size() > 2)
      return cmd_kernel("", "", {words.begin() + 2, words.begin() + 3}, true);
    CLI::App* sub = app.get_subcommand(words[1]);
    std::string prefix = "leakref";  // what --help's usage line shows
    if (words.size() > 2 && !sub->get_subcommands({}).empty()) {
      if (std::string u = unknown_subcommand(*sub, words[2]); !u.empty()) return fail_usage(u);
      prefix += " " + words[1];
      sub = sub->get_subcommand(words[2]);
    }
    fmt::print("{}", sub->help(prefix));
    return kOk;
  }
  if (!words.empty())
    if (std::string u = unknown_subcommand(app, words[0]); !u.empty()) return fail_usage(u);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "leakref: error: {}{}\n", e.what(), option_hint(app, e.what()));
    fmt::print(stderr, "run 'leakref --help' or 'leakref SUBCOMMAND --help'\n");
    return kUsage;
  }
  json_errors(c.json || w.jsonl || pa.jsonl || tpa.json || ti_json || ga.format == "json");
  try {
    if (*info) return cmd_info(c);
    if (*walk) return cmd_walk(c, w);
    if (*show) return cmd_show(c, show_addr, show_type, show_depth);
    if (*sym) return cmd_sym(c, sym_what);
    if (*heap) return cmd_heap(c, heap_list, heap_stats);
    if (*gl) return cmd_gluster(c, ga);
    if (*prof) return cmd_profile(c, pa);
    if (*tb) return cmd_types_build(tbc, tba);
    if (*types) return cmd_types_gluster(tc, ta);
    if (*corr) return cmd_correlate(c, ca);
    if (*tplan) return cmd_trace_plan(tpa);
    if (*tinfo) return cmd_trace_info(ti_files, ti_format, ti_json);
    if (*kern) return cmd_kernel(k_vmcore, k_vmlinux, kern->remaining(), false);
  } catch (const std::exception& e) {
    fmt::print(stderr, "leakref: internal error: {}\n", e.what());
    return kInternal;
  }
  return kUsage;
}
