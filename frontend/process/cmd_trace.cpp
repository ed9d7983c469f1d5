// trace-plan: what leakref-trace probes in a live process (bpftrace program
// and leakref-trace header); trace-info: what leakref reads in a trace file.
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <set>

#include "corelib/analyses/trace.hpp"
#include "corelib/analyses/traceplan.hpp"
#include "corelib/profiles/profile.hpp"
#include "corelib/registry/target.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"
#include "frontend/process/cmd_profile.hpp"

namespace lrcli {

struct TracePlanArgs {
  int pid = 0;
  std::string profile;  // functions and refcount offsets from its [[probe]]s
  std::vector<std::string> functions;
  std::vector<std::string> refoffs;  // KIND=OFF:WIDTH
  std::string bpftrace_out;
  std::string ready_file;
  std::string source = "bpftrace";
  bool json = false;
};

namespace {

// A live process's memory is not read here: only its modules' DWARF is.
struct NoMemory final : lr::Memory {
  const uint8_t* span(uint64_t, size_t) const override { return nullptr; }
  lr::Result<void> read(uint64_t addr, void*, size_t) const override {
    return lr::make_error(lr::Errc::kFault,
                          fmt::format("{:#x}: trace-plan reads no process memory", addr));
  }
};

// The refcount offsets of the profile's probed kinds, from the DWARF of the
// modules the process maps (the same files its probes attach to); for the
// built-in glusterfs profile, from GlusterFS's types (synthesized and cached
// when libglusterfs has no debuginfo).
lr::Result<std::map<std::string, std::pair<int64_t, int>>> probe_refoffs(
    const lr::TracePlan& plan, const lr::Profile& p, lr::ProcessTarget* builtin) {
  auto mods = lr::ModuleSet::empty({});
  std::set<std::string> seen;
  for (const auto& m : plan.mappings)
    if (seen.insert(m.path).second)
      mods->add(m.path, m.path, m.start, m.end, 0, m.build_id, m.path == plan.exe);
  static NoMemory none;
  lr::Program prog(&none, std::move(mods));
  if (builtin) {
    LR_ASSIGN(lr::TypesSource ts, builtin->ensure_types(prog, ""));
    if (!ts.note.empty()) out_stderr().print("{}\n", ts.note);
  }
  return lr::profile_probe_refoffs(prog, p);
}

}  // namespace

// The program targets with a built-in profile (GlusterFS).
static std::vector<lr::ProcessTarget*> with_builtin_profile() {
  std::vector<lr::ProcessTarget*> out;
  for (lr::ProcessTarget* t : lr::process_targets())
    if (!t->builtin_profile().empty()) out.push_back(t);
  return out;
}

// The program target whose built-in profile a plan takes when it is given
// no functions and no profile: the one owning a file the live process maps
// (its /proc/PID/maps says); a process whose maps cannot be read is left to
// trace planning to name, with the first such target.
static lr::ProcessTarget* builtin_target(int pid) {
  const auto with = with_builtin_profile();
  std::ifstream in(fmt::format("/proc/{}/maps", pid));
  if (!in) return with.empty() ? nullptr : with.front();
  for (std::string line; std::getline(in, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    lr::ProcessTarget* t = lr::process_target_of_file(line.substr(slash));
    if (t && !t->builtin_profile().empty()) return t;
  }
  return nullptr;
}

static int cmd_trace_plan(const TracePlanArgs& a) {
  std::map<std::string, std::pair<int64_t, int>> refoffs;
  for (const auto& r : a.refoffs) {
    // KIND=OFF[:WIDTH]
    size_t eq = r.find('='), colon = r.find(':');
    uint64_t off = 0, width = 8;
    if (eq == std::string::npos || eq == 0 ||
        !lr::parse_u64(
            r.substr(eq + 1, colon == std::string::npos ? std::string::npos : colon - eq - 1),
            &off) ||
        (colon != std::string::npos && !lr::parse_u64(r.substr(colon + 1), &width)) ||
        (width != 4 && width != 8))
      return fail_usage("--refoff " + r + ": expected KIND=OFFSET[:4|8]");
    refoffs[r.substr(0, eq)] = {static_cast<int64_t>(off), static_cast<int>(width)};
  }
  std::vector<std::string> fns = a.functions;
  lr::Result<lr::Profile> prof = lr::make_error(lr::Errc::kNotFound, "");
  // No functions and no profile: the program's own, from its target's
  // built-in profile's [[probe]]s (GlusterFS's; refcount offsets from its
  // types, built from the headers when libglusterfs has no debuginfo).
  const bool builtin = a.functions.empty() && a.profile.empty();
  lr::ProcessTarget* target = builtin ? builtin_target(a.pid) : nullptr;
  if (builtin && !target) {
    std::string mods, names;
    for (lr::ProcessTarget* t : with_builtin_profile()) {
      mods += (mods.empty() ? "" : " or ") + t->module_hint();
      names += (names.empty() ? "" : " or ") + t->name();
    }
    return fail(lr::make_error(
        lr::Errc::kInvalidArgument,
        fmt::format("process {} maps no {}: say what to trace with --functions "
                    "NAME[:ref|unref|...] or --profile P ({}'s functions are the default "
                    "only in a {} process)",
                    a.pid, mods, names, names)));
  }
  if (builtin) {
    prof = lr::parse_profile(target->builtin_profile(), target->builtin_profile_source());
    if (!prof.ok()) return fail(prof.error());
    fns = lr::profile_probe_functions(prof.value());
  } else if (!a.profile.empty()) {
    if (!fns.empty()) return fail_usage("give --functions or --profile, not both");
    prof = lr::find_profile(a.profile, profile_dirs());
    if (!prof.ok()) return fail(prof.error());
    fns = lr::profile_probe_functions(prof.value());
    if (fns.empty())
      return fail(lr::make_error(lr::Errc::kInvalidArgument,
                                 prof->source + ": declares no [[probe]] to trace"));
  }
  auto plan = lr::plan_trace(a.pid, fns, refoffs);
  if (!plan.ok()) return fail(plan.error());
  if (prof.ok()) {
    auto offs = probe_refoffs(*plan, prof.value(), target);
    if (!offs.ok() && !builtin) return fail(offs.error());
    // GlusterFS without its types (no headers to build them from): the
    // capture still names every call, without the refcount at entry.
    if (!offs.ok())
      plan->warnings.push_back("refcounts at entry are not read: " + offs.error().message);
    else
      for (auto& p : plan->probes) {
        auto it = offs->find(p.kind);
        if (it != offs->end() && !refoffs.count(p.kind)) {  // --refoff still wins
          p.refoff = it->second.first;
          p.refwidth = it->second.second;
        }
      }
  }
  print_warnings_text(plan->warnings);
  if (!a.ready_file.empty() && !lr::shell_safe_path(a.ready_file))
    return fail_usage("--ready-file: use a path of letters, digits and /._-+ only");
  std::string prog = lr::bpftrace_program(*plan, a.ready_file);
  if (!a.bpftrace_out.empty()) {
    std::ofstream f(a.bpftrace_out);
    f << prog;
    if (!f.good()) return fail(lr::make_error(lr::Errc::kIo, a.bpftrace_out + ": cannot write"));
  }
  if (a.json) {
    nlohmann::json j{{"schema", "leakref.trace-plan/1"}, {"pid", plan->pid}, {"exe", plan->exe}};
    auto& pr = j["probes"] = nlohmann::json::array();
    for (const auto& p : plan->probes)
      pr.push_back({{"name", p.name},
                    {"kind", p.kind},
                    {"op", lr::trace_op_name(p.op)},
                    {"module", p.path},
                    {"build_id", p.build_id},
                    {"vaddr", hex(p.vaddr)},
                    {"size", p.size},
                    {"by_address", p.by_address},
                    {"how", p.how},
                    {"refoff", p.refoff >= 0 ? nlohmann::json(p.refoff) : nullptr},
                    {"refwidth", p.refwidth}});
    auto& mp = j["mappings"] = nlohmann::json::array();
    for (const auto& m : plan->mappings)
      mp.push_back({{"start", hex(m.start)},
                    {"end", hex(m.end)},
                    {"offset", hex(m.offset)},
                    {"build_id", m.build_id},
                    {"path", m.path}});
    j["bpftrace"] = prog;
    j["header"] = lr::trace_header(*plan, a.source);
    j["warnings"] = plan->warnings;
    emit_json(j);
    return kOk;
  }
  out_stdout().print("{}", lr::trace_header(*plan, a.source));
  if (a.bpftrace_out.empty()) out_stdout().print("# bpftrace program:\n{}", prog);
  return kOk;
}

static int cmd_trace_info(const std::vector<std::string>& files, const std::string& format,
                          bool json) {
  auto f = lr::trace_format_from_name(format);
  if (!f.ok()) return fail(f.error());
  nlohmann::json all = nlohmann::json::array();
  for (const auto& path : files) {
    auto t = lr::load_trace(path, *f);
    if (!t.ok()) return fail(t.error());
    std::map<std::string, uint64_t> per_fn;
    std::map<std::string, uint64_t> per_kind;
    uint64_t with_stack = 0, first_ts = 0, last_ts = 0;
    for (const auto& e : t->events) {
      ++per_fn[t->functions[e.fn].name];
      ++per_kind[t->functions[e.fn].kind];
      if (e.stack) ++with_stack;
      if (e.ts && (!first_ts || e.ts < first_ts)) first_ts = e.ts;
      last_ts = std::max(last_ts, e.ts);
    }
    if (json) {
      nlohmann::json j{{"file", path},
                       {"format", lr::trace_format_name(t->format)},
                       {"events", t->events.size()},
                       {"events_with_stack", with_stack},
                       {"functions", per_fn},
                       {"kinds", per_kind},
                       {"aggregates", t->aggregates.size()},
                       {"alloc_stacks", t->alloc_stacks.size()},
                       {"mappings", t->mappings.size()},
                       {"lost", t->lost()},
                       {"bad_lines", t->bad_lines},
                       {"truncated", t->truncated},
                       {"complete", t->has_trailer},
                       {"duration_ns", last_ts - first_ts},
                       {"header", t->header},
                       {"warnings", t->warnings}};
      all.push_back(std::move(j));
      continue;
    }
    print_warnings_text(t->warnings);
    out_stdout().print(
        "{}: {} trace, {} events ({} with a stack), {} mappings, {} lost, {} bad line(s){}\n", path,
        lr::trace_format_name(t->format), t->events.size(), with_stack, t->mappings.size(),
        t->lost(), t->bad_lines, t->truncated ? ", truncated" : "");
    if (last_ts > first_ts) out_stdout().print("  window: {:.3f} s\n", (last_ts - first_ts) / 1e9);
    for (const auto& fn : t->functions)
      out_stdout().print("  {:<20} {:<6} {:<6} {:>10}\n", fn.name, fn.kind,
                         lr::trace_op_name(fn.op), per_fn[fn.name]);
    if (!t->aggregates.empty())
      out_stdout().print("  {} aggregate refcount(s)\n", t->aggregates.size());
    if (!t->alloc_stacks.empty())
      out_stdout().print("  {} allocation stack(s)\n", t->alloc_stacks.size());
  }
  if (json) emit_json(nlohmann::json{{"schema", "leakref.trace-info/1"}, {"traces", all}});
  return kOk;
}

Command register_trace_plan(CLI::App& app) {
  auto a = std::make_shared<TracePlanArgs>();
  auto* sub = app.add_subcommand("trace-plan",
                                 "probes for leakref-trace: resolve functions in a live process");
  sub->add_option("-p,--pid", a->pid, "process to trace")->required();
  sub->add_option("--functions", a->functions,
                  "NAME[@MODULE][:ref|unref|new|free|alloc[:KIND]],... (default: GlusterFS dict, "
                  "inode, fd)")
      ->delimiter(',');
  sub->add_option("--refoff", a->refoffs, "KIND=OFFSET[:4|8]: read the refcount at entry");
  sub->add_option("--bpftrace", a->bpftrace_out, "write the bpftrace program here");
  sub->add_option("--ready-file", a->ready_file, "the program creates this file once attached");
  sub->add_flag("--json", a->json, "the plan as JSON (schema leakref.trace-plan/1)");
  sub->add_option("--source", a->source, "H source= value (the tracer and its version)");
  sub->add_option("--profile", a->profile,
                  "functions and refcount offsets from a profile's [[probe]]s (offsets from "
                  "the process's DWARF)");
  return {sub, [a] { return cmd_trace_plan(*a); }, [a] { return a->json; }};
}

Command register_trace_info(CLI::App& app) {
  struct Args {
    std::vector<std::string> files;
    std::string format = "auto";
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("trace-info", "what leakref reads in trace files");
  sub->add_option("trace", a->files, "trace files")->required();
  sub->add_option("--format", a->format, "trace format (default: detected)");
  sub->add_flag("--json", a->json, "machine-readable output");
  return {sub, [a] { return cmd_trace_info(a->files, a->format, a->json); },
          [a] { return a->json; }};
}

}  // namespace lrcli
