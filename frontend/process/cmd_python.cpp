// `leakref python CORE`: every object of a CPython process by type, with its
// reference count against the references found in live memory: references
// counted that nothing holds (a forgotten Py_DECREF), and objects no root
// reaches that the GC does not track (never freed).
#include <fmt/format.h>

#include <memory>

#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/render.hpp"
#include "targets/cpython/py_names.hpp"
#include "targets/cpython/py_reconcile.hpp"

namespace lrcli {

namespace {

using nlohmann::ordered_json;

struct PythonArgs {
  std::string type;  // --type: list its objects
  size_t top = 30;
  std::vector<std::string> fail_on;
  std::string holders;  // --holders ADDR: who holds this object
};

// What names the objects: made once, when an answer names one.
struct Names {
  std::vector<lr::PyThreadStack> stacks;
  std::unique_ptr<lr::PyNamer> namer;
  Names(const lr::IndexedCore& core, const lr::PyReport& r)
      : stacks(lr::python_stacks(lr::PyValues(core.prog->mem(), r.census().layout))),
        namer(std::make_unique<lr::PyNamer>(core, r.census(), stacks)) {}
};

bool shown(const lr::PyReport& r, size_t i, const PythonArgs& a) {
  const lr::PyObj& o = r.census().objects[i];
  if (!a.type.empty()) return r.census().type(o).name == a.type;
  return o.live() && (r.refs[i].excess(o.refcnt) > 0 || r.leaked_object(i));
}

ordered_json object_json(const lr::PyReport& r, size_t i, const Names* names) {
  const lr::PyObj& o = r.census().objects[i];
  const lr::PyObjRefs& f = r.refs[i];
  const std::string path = names && f.reached ? names->namer->path(o) : "";
  return {{"addr", hex(o.addr)},
          {"path", path.empty() ? ordered_json(nullptr) : ordered_json(path)},
          {"type", r.census().type(o).name},
          {"bytes", o.bytes},
          {"refcnt", o.refcnt},
          {"found", f.found},
          {"from_unreachable", f.from_dead},
          {"excess", std::max<int64_t>(0, f.excess(o.refcnt))},
          {"reached", f.reached},
          {"tracked", (o.flags & lr::PyObj::kTracked) != 0},
          {"interned", (o.flags & lr::PyObj::kInterned) != 0},
          {"immortal", f.immortal},
          {"free_list", !o.live()},
          {"leaked", r.leaked_object(i)}};
}

std::string object_text(const lr::PyReport& r, size_t i, const Names* names) {
  const lr::PyObj& o = r.census().objects[i];
  const lr::PyObjRefs& f = r.refs[i];
  std::string s = fmt::format("{:#x} {} ({} bytes): refcnt {}, {} found", o.addr,
                              r.census().type(o).name, o.bytes, o.refcnt, f.found);
  if (const std::string p = names && f.reached ? names->namer->path(o) : ""; !p.empty())
    s += fmt::format(" [{}]", p);
  if (f.from_dead) s += fmt::format(" (+{} from unreachable blocks)", f.from_dead);
  if (const int64_t e = f.excess(o.refcnt); e > 0 && o.live())
    s += fmt::format("; {} counted that nothing live holds", e);
  if (r.leaked_object(i))
    s += "; leaked: no root reaches it, and no collection frees it";
  else if (!f.reached && o.live())
    s += "; no root reaches it: cyclic garbage the next collection frees";
  if (!o.live()) s += "; on a free list";
  if (f.immortal) s += "; immortal";
  return s;
}

// --holders: the object at the address and every word holding it, named.
ordered_json holders_json(const lr::PyReport& r, size_t i, const Names& names) {
  ordered_json j = object_json(r, i, &names);
  ordered_json hs = ordered_json::array();
  for (const auto& h : names.namer->holders(r.census().objects[i]))
    hs.push_back({{"from", hex(h.from)}, {"name", h.name}, {"root", h.root}});
  j["holders"] = std::move(hs);
  return j;
}

void print_json(const DumpOptions& c, const lr::IndexedCore& core, const lr::PyReport& r,
                const PythonArgs& a, const Names* names, size_t held) {
  const lr::PyLayout& L = r.census().layout;
  ordered_json types = ordered_json::array(), objects = ordered_json::array();
  for (const auto& row : r.rows)
    types.push_back({{"type", r.census().types[row.type].name},
                     {"objects", row.objects},
                     {"bytes", row.bytes},
                     {"tracked", row.tracked},
                     {"free_list", row.free_listed},
                     {"excess_objects", row.excess_objects},
                     {"excess_refs", row.excess_refs},
                     {"unreachable", row.unreachable},
                     {"leaked", row.leaked},
                     {"immortal", row.immortal}});
  for (size_t i = 0; i < r.census().objects.size() && objects.size() < a.top; ++i)
    if (shown(r, i, a)) objects.push_back(object_json(r, i, a.type.empty() ? names : nullptr));
  std::vector<std::string> warnings = core.warnings;
  for (const auto& w : r.census().warnings) warnings.push_back("python: " + w);
  ordered_json j{{"schema", "leakref.python/1"},
                 {"core", c.core},
                 {"version", L.version},
                 {"interpreter", L.module ? L.module->path : ""},
                 {"partial", !r.partial.empty()},
                 {"partial_reasons", r.partial},
                 {"interpreters", r.census().interpreters},
                 {"pymalloc",
                  {{"arenas", r.census().arenas},
                   {"blocks", r.census().pymalloc_blocks},
                   {"raw_blocks", r.census().raw_blocks}}},
                 {"objects", r.live},
                 {"bytes", r.live_bytes},
                 {"free_list", r.free_listed},
                 {"tracked", r.census().tracked},
                 {"excess_objects", r.excess_objects},
                 {"excess_refs", r.excess_refs},
                 {"unreachable", r.unreachable},
                 {"leaked", r.leaked},
                 {"immortal", r.immortal},
                 {"types", std::move(types)},
                 {"listed", std::move(objects)},
                 {"warnings", warnings}};
  if (held != SIZE_MAX) j["holders"] = holders_json(r, held, *names);
  out_stdout().print("{}\n", json_text(j, 1));
}

void print_holders(const lr::PyReport& r, size_t i, const Names& names) {
  Out& out = out_stdout();
  out.print("\n{}\n", object_text(r, i, &names));
  const auto hs = names.namer->holders(r.census().objects[i]);
  out.print("held by {} word{}:\n", hs.size(), hs.size() == 1 ? "" : "s");
  for (const auto& h : hs) out.print("  {:#x}  {}\n", h.from, h.name);
}

void print_text(const lr::IndexedCore& core, const lr::PyReport& r, const PythonArgs& a,
                const Names* names, size_t held) {
  print_warnings_text(core.warnings, out_stderr());
  for (const auto& w : r.census().warnings) out_stderr().print("leakref: warning: python: {}\n", w);
  const lr::PyLayout& L = r.census().layout;
  Out& out = out_stdout();
  out.print(
      "{}CPython {} ({}): {} live objects, {} bytes; {} on free lists; {} tracked by the GC\n",
      r.partial.empty() ? "" : "partial: ", L.version, L.module->basename(), r.live, r.live_bytes,
      r.free_listed, r.census().tracked);
  out.print("pymalloc: {} arenas, {} blocks in use; {} of its requests passed on to malloc\n",
            r.census().arenas, r.census().pymalloc_blocks, r.census().raw_blocks);
  out.print(
      "references: {} objects have {} references counted that no live memory holds; {} "
      "objects no root reaches, {} of them leaked (no collection frees them)\n",
      r.excess_objects, r.excess_refs, r.unreachable, r.leaked);
  if (r.immortal)
    out.print(
        "immortal: {} objects, whose counts never change (no excess or leak is said of "
        "them)\n",
        r.immortal);
  for (const auto& p : r.partial) out.print("partial: {}\n", p);
  out.print("\n{:>10} {:>12} {:>9} {:>8} {:>8} {:>8}  {}\n", "OBJECTS", "BYTES", "TRACKED",
            "EXCESS", "UNREACH", "LEAKED", "TYPE");
  size_t n = 0;
  for (const auto& row : r.rows) {
    if (!a.type.empty() && r.census().types[row.type].name != a.type) continue;
    if (n++ == a.top) {
      out.print("{:>10} ({} more types)\n", "", r.rows.size() - a.top);
      break;
    }
    out.print("{:>10} {:>12} {:>9} {:>8} {:>8} {:>8}  {}\n", row.objects, row.bytes, row.tracked,
              row.excess_refs, row.unreachable, row.leaked, r.census().types[row.type].name);
  }
  size_t listed = 0;
  for (size_t i = 0; i < r.census().objects.size(); ++i) {
    if (!shown(r, i, a)) continue;
    if (listed == 0)
      out.print("\n{}:\n", a.type.empty() ? "objects with references nothing live holds, or leaked"
                                          : "objects of type " + a.type);
    if (listed++ == a.top) {
      out.print("  ... (--top shows more)\n");
      break;
    }
    out.print("  {}\n", object_text(r, i, a.type.empty() ? names : nullptr));
  }
  if (held != SIZE_MAX) print_holders(r, held, *names);
}

// The census's object at --holders' address (SIZE_MAX: none asked).
lr::Result<size_t> held_object(const lr::PyReport& r, const std::string& addr) {
  if (addr.empty()) return SIZE_MAX;
  uint64_t a = 0;
  if (!lr::parse_u64(addr, &a))
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "--holders: '" + addr + "' is no address (0x... or id()'s decimal)");
  const lr::PyObj* o = r.census().find(a);
  if (!o || !o->live())
    return lr::make_error(lr::Errc::kNotFound,
                          fmt::format("--holders: no live Python object at {:#x} (give the "
                                      "object's address, id() of it)",
                                      a));
  return static_cast<size_t>(o - r.census().objects.data());
}

int cmd_python(const DumpOptions& c, const PythonArgs& a) {
  for (const auto& f : a.fail_on)
    if (f != "excess" && f != "leaked" && f != "partial" && f != "any")
      return fail_usage("--fail-on: unknown finding '" + f + "'");
  auto core = open_indexed_core(c);
  if (!core.ok()) return fail(core.error());
  auto rep = lr::python_report(core.value());
  if (!rep.ok()) return fail(rep.error());
  const lr::PyReport& r = rep.value();
  auto held = held_object(r, a.holders);
  if (!held.ok()) return fail(held.error());
  // Paths name the listed objects a root reaches, and --holders' object.
  std::unique_ptr<Names> names;
  if (held.value() != SIZE_MAX || (a.type.empty() && r.excess_objects > r.leaked))
    names = std::make_unique<Names>(core.value(), r);
  if (c.json)
    print_json(c, core.value(), r, a, names.get(), held.value());
  else
    print_text(core.value(), r, a, names.get(), held.value());
  if (!r.partial.empty() && fail_on_wants(a.fail_on, "partial")) return kFindings;
  if (r.excess_objects && fail_on_wants(a.fail_on, "excess")) return kFindings;
  if (r.leaked && fail_on_wants(a.fail_on, "leaked")) return kFindings;
  return kOk;
}

}  // namespace

Command register_python(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<PythonArgs>();
  auto* sub = app.add_subcommand(
      "python", "CPython objects by type: refcounts against the references found, leaked objects");
  add_dump_options(sub, c);
  sub->add_option("--type", a->type, "list the objects of this type (its tp_name)");
  sub->add_option("--top", a->top, "types and objects shown (default 30)");
  sub->add_option("--holders", a->holders,
                  "the object at this address (its id()): every word holding it, named");
  sub->add_option("--fail-on", a->fail_on, "exit 1 if: excess, leaked, partial, any")
      ->delimiter(',');
  return {sub, [&c, a] { return cmd_python(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
