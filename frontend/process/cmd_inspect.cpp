// info, show, sym: inspecting a core without walking.
#include <elf.h>
#include <fmt/format.h>

#include "corelib/registry/target.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"

namespace lrcli {

namespace {

std::string human(uint64_t n) {
  if (n >= (1ull << 30)) return fmt::format("{:.1f} GiB", n / double(1ull << 30));
  if (n >= (1ull << 20)) return fmt::format("{:.1f} MiB", n / double(1ull << 20));
  if (n >= (1ull << 10)) return fmt::format("{:.1f} KiB", n / 1024.0);
  return fmt::format("{} B", n);
}

const char* seg_kind(lr::SegmentInfo::Kind k) {
  switch (k) {
    case lr::SegmentInfo::Kind::kCore:
      return "core";
    case lr::SegmentInfo::Kind::kFile:
      return "file";
    case lr::SegmentInfo::Kind::kMissing:
      return "missing";
  }
  return "?";
}

// Each recognized program's stacks in its own language (Python's frames).
struct Stacks {
  std::string target;
  lr::Result<std::optional<lr::LanguageStacks>> got;
};

std::vector<Stacks> language_stacks(lr::Program& prog) {
  std::vector<Stacks> out;
  for (lr::ProcessTarget* t : lr::process_targets_of(prog.modules()))
    out.push_back({t->name(), t->stacks(prog)});
  std::erase_if(out, [](const Stacks& s) { return s.got.ok() && !s.got.value(); });
  return out;
}

nlohmann::json stacks_json(const std::vector<Stacks>& all) {
  auto j = nlohmann::json::array();
  for (const auto& s : all) {
    if (!s.got.ok()) {
      j.push_back({{"language", s.target}, {"error", s.got.error().message}});
      continue;
    }
    auto threads = nlohmann::json::array();
    for (const auto& t : s.got.value()->threads) {
      auto frames = nlohmann::json::array();
      for (const auto& f : t.frames)
        frames.push_back({{"function", f.function},
                          {"file", f.file},
                          {"line", f.line < 0 ? nlohmann::json(nullptr) : nlohmann::json(f.line)}});
      threads.push_back({{"tid", t.tid},
                         {"cut", t.cut.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.cut)},
                         {"frames", frames}});
    }
    j.push_back({{"language", s.got.value()->language}, {"threads", threads}});
  }
  return j;
}

// As gdb's py-bt prints a traceback: most recent call first.
void print_stacks(const std::vector<Stacks>& all) {
  for (const auto& s : all) {
    if (!s.got.ok()) {
      out_stdout().print("{} stacks: unreadable: {}\n", s.target, s.got.error().message);
      continue;
    }
    const auto& st = *s.got.value();
    out_stdout().print("{} stacks: {} thread{}\n", st.language, st.threads.size(),
                       st.threads.size() == 1 ? "" : "s");
    for (const auto& t : st.threads) {
      out_stdout().print("  tid {} (most recent call first):\n", t.tid);
      for (const auto& f : t.frames)
        out_stdout().print("    File \"{}\", line {}, in {}\n", f.file,
                           f.line < 0 ? "?" : std::to_string(f.line), f.function);
      if (!t.cut.empty()) out_stdout().print("    (cut: {})\n", t.cut);
    }
  }
}

}  // namespace

// info --json (leakref.info/1).
static int info_json(const DumpOptions& c, lr::Program& prog,
                     const std::vector<lr::SegmentInfo>& segs) {
  lr::CoreFile& core = *prog.core();
  lr::Module* exe = prog.modules().exe();
  nlohmann::json j;
  j["schema"] = "leakref.info/1";
  j["core"] = c.core;
  j["core_size"] = core.file_size();
  j["arch"] = lr::arch_name(core.machine());
  j["pid"] = core.pid() ? nlohmann::json(core.pid()) : nlohmann::json(nullptr);
  j["prog_name"] = core.prog_name();
  j["prog_args"] = core.prog_args();
  j["executable"] = exe ? nlohmann::json(exe->path) : nlohmann::json(nullptr);
  j["truncated"] = core.truncated();
  auto& th = j["threads"] = nlohmann::json::array();
  for (const auto& t : core.threads()) {
    nlohmann::json jt{
        {"tid", t.tid}, {"signal", t.signo}, {"pc", hex(t.pc())}, {"sp", hex(t.sp())}};
    auto hit = prog.modules().symbolize(t.pc());
    jt["pc_symbol"] = hit.module ? nlohmann::json(hit.format()) : nlohmann::json(nullptr);
    auto& regs = jt["registers"] = nlohmann::json::object();
    const char* const* names = lr::register_names(t.machine);
    for (int i = 0; i < t.nregs(); ++i) regs[names[i]] = hex(t.regs[i]);
    jt["tp"] = t.tp ? nlohmann::json(hex(t.tp)) : nlohmann::json(nullptr);
    th.push_back(jt);
  }
  auto& mods = j["modules"] = nlohmann::json::array();
  for (const auto& m : prog.modules().modules()) {
    mods.push_back(
        {{"path", m->path},
         {"host_path", m->host_path},
         {"base", hex(m->base)},
         {"end", hex(m->end)},
         {"bias", hex(m->bias)},
         {"build_id", m->build_id},
         {"is_exe", m->is_exe},
         {"debuginfo", m->has_dwarf() ? nlohmann::json(m->debug_path) : nlohmann::json(nullptr)},
         {"debuginfo_source", m->debug_how},
         {"debuginfo_missing", m->has_dwarf() ? "" : m->debug_missing}});
  }
  auto& files = j["mapped_files"] = nlohmann::json::array();
  for (const auto& f : core.mapped_files())
    files.push_back({{"path", f.path},
                     {"host_path", f.host_path},
                     {"status", lr::mapped_status_name(f.status)},
                     {"core_build_id", f.core_build_id},
                     {"disk_build_id", f.disk_build_id},
                     {"detail", f.detail}});
  auto& sj = j["segments"] = nlohmann::json::array();
  for (const auto& s : segs)
    sj.push_back(
        {{"start", hex(s.start)}, {"end", hex(s.end)}, {"kind", seg_kind(s.kind)}, {"why", s.why}});
  j["bytes"] = {{"core", core.bytes_in_core()},
                {"files", core.bytes_from_files()},
                {"missing", core.bytes_missing()}};
  {
    auto& ax = j["auxv"] = nlohmann::json::object();
    for (const auto& [k, v] : core.auxv()) ax[std::to_string(k)] = hex(v);
  }
  if (auto st = language_stacks(prog); !st.empty()) j["language_stacks"] = stacks_json(st);
  j["warnings"] = prog.warnings();
  emit_json(j);
  return kOk;
}

static int cmd_info(const DumpOptions& c) {
  auto prog_r = open_program(c);
  if (!prog_r.ok()) return fail(prog_r.error());
  lr::Program& prog = *prog_r.value();
  lr::CoreFile& core = *prog.core();
  auto segs = core.segments();
  size_t n_core = 0, n_file = 0, n_missing = 0;
  for (const auto& s : segs)
    (s.kind == lr::SegmentInfo::Kind::kCore   ? n_core
     : s.kind == lr::SegmentInfo::Kind::kFile ? n_file
                                              : n_missing)++;
  lr::Module* exe = prog.modules().exe();
  if (c.json) return info_json(c, prog, segs);
  print_warnings_text(prog.warnings());
  out_stdout().print("core:        {} ({})\n", c.core, human(core.file_size()));
  if (core.pid() == 0 && core.prog_name().empty())  // not "pid 0, ()": nothing was read
    out_stdout().print("process:     unknown (no NT_PRSTATUS or NT_PRPSINFO note was read)\n");
  else
    out_stdout().print("process:     pid {}, {} ({}), {}\n", core.pid(), core.prog_name(),
                       core.prog_args(), lr::arch_name(core.machine()));
  if (exe)
    out_stdout().print("executable:  {} (build-id {}, debuginfo: {})\n", exe->path,
                       exe->build_id.empty() ? "unknown" : exe->build_id,
                       exe->has_dwarf() ? exe->debug_how : "none");
  else
    out_stdout().print("executable:  unknown (no NT_FILE note; pass --exe)\n");
  out_stdout().print("truncated:   {}\n", core.truncated()
                                              ? "YES (memory beyond the end of the file is missing)"
                                              : "no");
  out_stdout().print("threads:     {}\n", core.threads().size());
  for (const auto& t : core.threads()) {
    auto hit = prog.modules().symbolize(t.pc());
    out_stdout().print("  tid {:<8} pc {:<18} {}  sp {}\n", t.tid, hex(t.pc()),
                       hit.module ? hit.format() : "?", hex(t.sp()));
  }
  print_stacks(language_stacks(prog));
  out_stdout().print("modules:     {}\n", prog.modules().modules().size());
  out_stdout().print("  {:<18} {:<18} {:<40} {:<10} {}\n", "BASE", "END", "BUILD-ID", "DEBUGINFO",
                     "PATH");
  for (const auto& m : prog.modules().modules()) {
    std::string dbg =
        m->has_dwarf() ? (m->debug_how == "embedded" ? "embedded" : "separate") : "none";
    out_stdout().print("  {:<18} {:<18} {:<40} {:<10} {}{}\n", hex(m->base), hex(m->end),
                       m->build_id.empty() ? "-" : m->build_id, dbg, m->path,
                       m->is_exe ? " (exe)" : "");
  }
  for (const auto& m : prog.modules().modules())
    if (m->has_dwarf() && m->debug_how != "embedded")
      out_stdout().print("  debuginfo for {}: {} ({})\n", m->basename(), m->debug_path,
                         m->debug_how);
  out_stdout().print(
      "segments:    {} from the core ({}), {} filled from files ({}), {} missing ({})\n", n_core,
      human(core.bytes_in_core()), n_file, human(core.bytes_from_files()), n_missing,
      human(core.bytes_missing()));
  for (const auto& f : core.mapped_files())
    if (f.status != lr::MappedFileInfo::Status::kVerified)
      out_stdout().print("  not filled: {}: {}{}\n", f.path, lr::mapped_status_name(f.status),
                         f.detail.empty() ? "" : " — " + f.detail);
  return kOk;
}

static int cmd_show(const DumpOptions& c, const std::string& addr_s, const std::string& type_s,
                    int depth) {
  auto prog_r = open_program(c);
  if (!prog_r.ok()) return fail(prog_r.error());
  lr::Program& prog = *prog_r.value();
  auto target = prog.resolve_place(addr_s);
  if (!target.ok()) return fail(target.error());
  const lr::Type* t = target.value().type;
  if (!type_s.empty()) {
    auto tr = prog.types().find(type_s);
    if (!tr.ok()) return fail(tr.error());
    t = tr.value();
  } else if (!t) {
    return fail_usage("give --type (no DWARF type is known for '" + addr_s + "')");
  }
  uint64_t addr = target.value().addr;
  const lr::Type* s = t->strip();
  if (!s || !s->size)
    return fail(lr::make_error(lr::Errc::kNotFound, t->display() + " has no size"));
  if (s->size > lr::kMaxObjectSize)
    return fail(lr::make_error(lr::Errc::kBadFormat,
                               fmt::format("{} claims {} bytes; refusing objects larger than {}",
                                           t->display(), s->size, lr::kMaxObjectSize)));
  std::vector<uint8_t> scratch;
  const uint8_t* obj = lr::object_bytes(prog.mem(), addr, s->size, scratch);
  if (!obj)
    return fail(lr::make_error(lr::Errc::kFault,
                               fmt::format("{:#x}: {}", addr, prog.mem().why_unreadable(addr))));
  if (c.json) {
    nlohmann::ordered_json j;
    j["schema"] = "leakref.show/1";
    j["addr"] = hex(addr);
    j["type"] = t->display();
    j["size"] = s->size;
    lr::TreeLimits lim;
    lim.max_depth = depth;
    lim.max_array = 4096;
    lim.max_nodes = 1'000'000;
    j["value"] = tree_json(lr::value_tree(obj, s->size, t, lim));
    out_stdout().put(json_text(j, 1) + "\n");
  } else {
    out_stdout().print("{}", lr::format_object(prog.mem(), addr, t, &prog.modules(), depth));
  }
  return kOk;
}

static int cmd_sym(const DumpOptions& c, const std::string& what) {
  auto prog_r = open_program(c);
  if (!prog_r.ok()) return fail(prog_r.error());
  lr::Program& prog = *prog_r.value();
  uint64_t a;
  if (lr::parse_u64(what, &a)) {
    auto hit = prog.modules().symbolize(a);
    if (!hit.module)
      return fail(lr::make_error(lr::Errc::kNotFound, fmt::format("{:#x} is in no module", a)));
    if (c.json) {
      emit_json({{"schema", "leakref.sym/1"},
                 {"addr", hex(a)},
                 {"module", hit.module->path},
                 {"symbol", hit.sym ? nlohmann::json(hit.sym->name) : nlohmann::json(nullptr)},
                 {"offset", hit.offset},
                 {"text", hit.format()}});
    } else {
      out_stdout().print("{:#x}: {}\n", a, hit.format());
    }
    return kOk;
  }
  auto hit = prog.types().lookup_symbol(what);
  if (!hit.ok()) return fail(hit.error());
  auto [mod, sym] = hit.value();
  auto var = prog.types().find_variable(what);
  std::string type = var.ok() && var.value().type ? var.value().type->display() : "";
  if (c.json) {
    emit_json({{"schema", "leakref.sym/1"},
               {"symbol", sym->name},
               {"addr", hex(sym->addr)},
               {"size", sym->size},
               {"module", mod->path},
               {"kind", sym->is_func     ? "function"
                        : sym->is_object ? "object"
                                         : "other"},
               {"type", type.empty() ? nlohmann::json(nullptr) : nlohmann::json(type)}});
  } else {
    out_stdout().print("{} = {:#x} [{}] size {}{}\n", sym->name, sym->addr, mod->basename(),
                       sym->size, type.empty() ? "" : ", type " + type);
  }
  return kOk;
}

Command register_info(CLI::App& app, DumpOptions& c) {
  auto* sub = app.add_subcommand("info", "executable, threads, modules, debuginfo, segments");
  add_dump_options(sub, c);
  return {sub, [&c] { return cmd_info(c); }, [&c] { return c.json; }};
}

Command register_show(CLI::App& app, DumpOptions& c) {
  struct Args {
    std::string addr, type;
    int depth = 8;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("show", "all fields of one object, like crash's struct");
  add_dump_options(sub, c);
  sub->add_option("addr", a->addr, "ADDR or SYMBOL")->required();
  sub->add_option("--type", a->type, "type of the object (default: the symbol's type)");
  sub->add_option("--depth", a->depth, "nesting depth to expand (default 8)");
  return {sub, [&c, a] { return cmd_show(c, a->addr, a->type, a->depth); },
          [&c] { return c.json; }};
}

Command register_sym(CLI::App& app, DumpOptions& c) {
  auto what = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("sym", "symbol to address, or address to sym+off [module]");
  add_dump_options(sub, c);
  sub->add_option("what", *what, "NAME, NAME@module or ADDR")->required();
  return {sub, [&c, what] { return cmd_sym(c, *what); }, [&c] { return c.json; }};
}

}  // namespace lrcli
