// gluster: GlusterFS state from a core (text, JSON, or statedump format), and
// `types gluster`: synthesize the DWARF types when there is no debuginfo.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"
#include "targets/glusterfs/gluster.hpp"
#include "targets/glusterfs/gluster_target.hpp"
#include "targets/glusterfs/gluster_types.hpp"
#include "targets/glusterfs/statedump.hpp"

namespace lrcli {

struct GlusterArgs {
  std::string types;  // --types FILE
  std::string format = "text";
  std::vector<std::string> sections;
  bool stats = false;  // timing figures
};
struct TypesArgs {
  std::string out;
  std::string library = "/usr/lib/x86_64-linux-gnu/libglusterfs.so.0";
  std::vector<std::string> omit_defines;
  bool verbose = false;
};

namespace {

// GlusterFS's types for `prog` (the target's: debuginfo, --types, or
// synthesized); a note on stderr when they were built now.
lr::Result<std::string> ensure_types(lr::Program& prog, const GlusterArgs& a) {
  LR_ASSIGN(lr::TypesSource ts, lr::ensure_gluster_types(prog, a.types));
  if (!ts.note.empty()) out_stderr().print("{}\n", ts.note);
  return ts.from;
}

}  // namespace

namespace {

std::string xl_key(const lr::GfXlator& x) {
  return x.is_global ? "global.glusterfs" : x.type + "." + x.name;
}

nlohmann::json fd_json(const lr::GfFd& f) {
  return {{"addr", hex(f.addr)},    {"pid", f.pid},          {"flags", f.flags},
          {"refcount", f.refcount}, {"inode", hex(f.inode)}, {"anonymous", f.anonymous}};
}

using nlohmann::json;

json graphs_json(const lr::GlusterReport& r) {
  json graphs = json::array();
  for (const auto& g : r.graphs) {
    json names = json::array();
    for (size_t i : g.xlators) names.push_back(r.xlators[i].name);
    graphs.push_back({{"addr", hex(g.addr)},
                      {"id", g.id},
                      {"xl_count", g.xl_count},
                      {"active", g.active},
                      {"xlators", names}});
  }
  return graphs;
}

json xlators_json(const lr::GlusterReport& r) {
  json xls = json::array();
  for (const auto& x : r.xlators)
    xls.push_back({{"addr", hex(x.addr)},
                   {"name", x.name},
                   {"type", x.type},
                   {"xl_id", x.xl_id},
                   {"graph", hex(x.graph)},
                   {"itable", hex(x.itable)},
                   {"root", x.is_root},
                   {"global", x.is_global}});
  return xls;
}

json pools_json(const lr::GlusterReport& r) {
  json pools = json::array();
  for (const auto& p : r.pools) {
    json live = json::array();
    for (auto a : p.live) live.push_back(hex(a));
    pools.push_back({{"addr", hex(p.addr)},
                     {"name", p.name},
                     {"xlator", p.xl_name},
                     {"active", p.active},
                     {"live", p.live.size()},
                     {"sizeof_type", p.sizeof_type},
                     {"padded", p.padded},
                     {"shared_pool", hex(p.shared)},
                     {"objects", live}});
  }
  return pools;
}

json memacct_json(const lr::GlusterReport& r) {
  json acct = json::array();
  for (const auto& ma : r.memacct) {
    json types = json::array();
    for (const auto& t : ma.types)
      types.push_back({{"type", t.type},
                       {"typestr", t.typestr},
                       {"num_allocs", t.num_allocs},
                       {"live_blocks", t.live_blocks},
                       {"live_bytes", t.live_bytes}});
    acct.push_back({{"xlator", xl_key(r.xlators[ma.xlator])},
                    {"mem_acct", hex(ma.addr)},
                    {"num_types", ma.num_types},
                    {"types", types}});
  }
  return acct;
}

// One inode of an inode table's list: its counts, who refs it, its
// dentries, fds and the operations in flight on it.
json inode_json(const lr::GlusterReport& r, const lr::GfInode& in) {
  json rbx = json::object();
  for (auto [x, n] : in.ref_by_xl) rbx[x == SIZE_MAX ? "?" : r.xlators[x].name] = n;
  json dents = json::array();
  for (const auto& d : in.dentries) dents.push_back({{"name", d.name}, {"parent", hex(d.parent)}});
  json fds = json::array();
  for (const auto& f : in.fds) fds.push_back(fd_json(f));
  json flight = json::array();
  for (const auto& f : in.in_flight)
    flight.push_back({{"stack", hex(r.stacks[f.stack].addr)},
                      {"unique", r.stacks[f.stack].unique},
                      {"op", r.stacks[f.stack].op_name},
                      {"block", hex(f.block)},
                      {"what", f.what}});
  return {{"addr", hex(in.addr)},    {"gfid", lr::format_gfid(in.gfid)},
          {"ref", in.ref},           {"nlookup", in.nlookup},
          {"fd_count", in.fd_count}, {"active_fd_count", in.active_fd_count},
          {"ia_type", in.ia_type},   {"invalidate_sent", in.invalidate_sent},
          {"ref_by_xl", rbx},        {"child_dentries", in.child_dentries},
          {"dentries", dents},       {"fds", fds},
          {"in_flight", flight}};
}

json itables_json(const lr::GlusterReport& r) {
  json its = json::array();
  for (const auto& t : r.itables) {
    json it = {{"addr", hex(t.addr)},
               {"name", t.name},
               {"xlator", r.xlators[t.xlator].name},
               {"dentry_hashsize", t.dentry_hashsize},
               {"inode_hashsize", t.inode_hashsize},
               {"lru_limit", t.lru_limit}};
    for (int l = 0; l < lr::GfItable::kNumLists; ++l) {
      std::string ln = lr::itable_list_name(l);
      it[ln + "_size"] = t.sizes[l];
      json inodes = json::array();
      for (const auto& in : t.lists[l]) inodes.push_back(inode_json(r, in));
      it[ln] = inodes;
    }
    its.push_back(it);
  }
  return its;
}

json stacks_json(const lr::GlusterReport& r) {
  json stacks = json::array();
  for (const auto& st : r.stacks) {
    json frames = json::array();
    for (size_t i = 0; i < st.frames.size(); ++i)
      frames.push_back({{"addr", hex(st.frames[i])}, {"xlator", st.frame_xlators[i]}});
    stacks.push_back({{"addr", hex(st.addr)},
                      {"unique", st.unique},
                      {"op", st.op_name},
                      {"pid", st.pid},
                      {"state", hex(st.state)},
                      {"frames", frames}});
  }
  return stacks;
}

json dicts_json(const lr::GlusterReport& r) {
  json dicts = json::array();
  for (const auto& d : r.dicts) {
    json pairs = json::array();
    for (const auto& p : d.pairs)
      pairs.push_back({{"key", p.key},
                       {"value", p.value},
                       {"data_refcount", p.data_refcount},
                       {"data_type", p.data_type}});
    dicts.push_back(
        {{"addr", hex(d.addr)}, {"refcount", d.refcount}, {"count", d.count}, {"pairs", pairs}});
  }
  return dicts;
}

json clients_json(const lr::GlusterReport& r) {
  json clients = json::array();
  for (const auto& c : r.clients) {
    json fds = json::array();
    for (const auto& [slot, f] : c.fds) fds.push_back({{"slot", slot}, {"fd", fd_json(f)}});
    clients.push_back({{"index", c.index},
                       {"addr", hex(c.addr)},
                       {"bind", c.bind},
                       {"ref", c.ref},
                       {"bound_xl", c.bound_xl},
                       {"client_uid", c.client_uid},
                       {"fdtable", fds}});
  }
  return clients;
}

// Each iobuf arena with its counters and what its buffers' refs say.
json iobufs_json(const lr::GlusterReport& r) {
  json out = json::array();
  for (const auto& a : r.iobuf_arenas) {
    json j{{"addr", hex(a.addr)},          {"mem_base", hex(a.mem_base)},
           {"arena_size", a.arena_size},   {"page_size", a.page_size},
           {"page_count", a.page_count},   {"active_cnt", a.active_cnt},
           {"passive_cnt", a.passive_cnt}, {"buffers_read", !a.active.empty()}};
    j["active_buffers"] = std::count(a.active.begin(), a.active.end(), true);
    if (!a.why.empty()) j["why"] = a.why;
    out.push_back(std::move(j));
  }
  return out;
}

json report_json(const lr::GlusterReport& r, const std::string& types_from, bool stats) {
  json j = {{"schema", "leakref.gluster/1"}, {"types", types_from}, {"validated", r.validated}};
  json ctxs = json::array();
  for (auto c : r.ctxs) ctxs.push_back(hex(c));
  j["ctxs"] = ctxs;
  j["xlators"] = xlators_json(r);
  j["graphs"] = graphs_json(r);
  j["mempool"] = pools_json(r);
  j["memusage"] = memacct_json(r);
  j["itables"] = itables_json(r);
  j["iobuf_arenas"] = iobufs_json(r);
  j["stacks"] = stacks_json(r);
  j["dicts"] = dicts_json(r);
  j["clients"] = clients_json(r);
  json ffds = json::array();
  for (const auto& [slot, f] : r.fuse_fds) ffds.push_back({{"slot", slot}, {"fd", fd_json(f)}});
  j["fuse_fdtable"] = ffds;
  json findings = json::array();
  for (const auto& f : r.findings)
    findings.push_back({{"kind", f.kind}, {"addr", hex(f.addr)}, {"message", f.message}});
  j["findings"] = findings;
  j["heap"] = {{"in_use", r.heap.in_use},
               {"in_use_bytes", r.heap.in_use_bytes},
               {"arenas", r.heap.arenas},
               {"pooled_objects", r.pooled_live},
               {"pooled_free", r.dead_pooled.size()},
               {"gf_malloc_blocks", r.gf_blocks}};
  if (stats) {  // timing only on request: the same core gives the same output
    j["heap"]["walk_ns"] = static_cast<uint64_t>(r.heap_ms * 1e6);
    j["total_ns"] = static_cast<uint64_t>(r.total_ms * 1e6);
  }
  j["warnings"] = r.warnings;
  return j;
}

// Summary first (one line per section), then the details.
void print_summary(const lr::GlusterReport& r) {
  size_t live = 0, bad_pools = 0, records = 0, blocks = 0;
  for (const auto& p : r.pools) {
    live += p.live.size();
    bad_pools += p.active >= 0 && static_cast<size_t>(p.active) != p.live.size();
  }
  for (const auto& ma : r.memacct)
    for (const auto& t : ma.types) ++records, blocks += t.live_blocks;
  out_stdout().print("GlusterFS: {} ctx, {} graph(s), {} xlators\n", r.ctxs.size(), r.graphs.size(),
                     r.xlators.size());
  out_stdout().print("  mempool   {} pools, {} live pooled objects{}\n", r.pools.size(), live,
                     bad_pools ? fmt::format(" ({} pools' active-count differ)", bad_pools)
                               : " (every active-count equals the live objects found)");
  out_stdout().print(
      "  memusage  {} live GF_MALLOC blocks in {} (xlator, type) records of {} xlators\n", blocks,
      records, r.memacct.size());
  for (const auto& t : r.itables)
    out_stdout().print("  itable    {}: active {}, lru {}, purge {}, invalidate {}\n", t.name,
                       t.sizes[0], t.sizes[1], t.sizes[2], t.sizes[3]);
  size_t client_fds = 0;
  for (const auto& c : r.clients) client_fds += c.fds.size();
  out_stdout().print("  dicts     {} live; clients {} ({} fds); fuse fdtable {} fds\n",
                     r.dicts.size(), r.clients.size(), client_fds, r.fuse_fds.size());
  std::map<std::string, int> kinds;
  for (const auto& f : r.findings) kinds[f.kind]++;
  std::string k;
  for (auto& [name, n] : kinds) k += fmt::format("{}{} {}", k.empty() ? "" : ", ", name, n);
  out_stdout().print("  findings  {}{}\n\n", r.findings.size(), k.empty() ? "" : " (" + k + ")");
}

void print_text(const lr::GlusterReport& r, const std::string& types_from) {
  print_summary(r);
  out_stdout().print("types: {}\nvalidated: {}\n", types_from, fmt::join(r.validated, ", "));
  for (const auto& g : r.graphs) {
    out_stdout().print("graph {} ({}): ", g.id, g.active ? "active" : "old");
    for (size_t i = 0; i < g.xlators.size(); ++i)
      out_stdout().print("{}{}", i ? " -> " : "", r.xlators[g.xlators[i]].name);
    out_stdout().print("\n");
  }
  out_stdout().print("\n{:<32} {:<24} {:>7} {:>5} {:>7} {:>7}\n", "mempool", "xlator", "active",
                     "live", "sizeof", "padded");
  for (const auto& p : r.pools)
    out_stdout().print("{:<32} {:<24} {:>7} {:>5} {:>7} {:>7}\n", p.name, p.xl_name, p.active,
                       p.live.size(), p.sizeof_type, p.padded);
  uint64_t blocks = 0;
  for (const auto& ma : r.memacct)
    for (const auto& t : ma.types) blocks += t.live_blocks;
  out_stdout().print(
      "\nmemory accounting: {} xlators, {} live GF_MALLOC blocks (leakref gluster --json for each "
      "type)\n",
      r.memacct.size(), blocks);
  for (const auto& t : r.itables) {
    out_stdout().print(
        "\ninode table {} ({}): active {}/{} lru {}/{} purge {}/{} invalidate {}/{} "
        "(list/counter)\n",
        t.name, r.xlators[t.xlator].name, t.lists[0].size(), t.sizes[0], t.lists[1].size(),
        t.sizes[1], t.lists[2].size(), t.sizes[2], t.lists[3].size(), t.sizes[3]);
    out_stdout().print("  {:<36} {:>4} {:>7} {:>4} {:>4}  {}\n", "gfid", "ref", "nlookup", "fds",
                       "type", "name / ref_by_xl");
    for (const auto& in : t.lists[0]) {
      std::string rbx;
      for (auto [x, n] : in.ref_by_xl)
        rbx += fmt::format(" {}={}", x == SIZE_MAX ? "?" : r.xlators[x].name, n);
      out_stdout().print("  {} {:>4} {:>7} {:>4} {:>4}  {}{}\n", lr::format_gfid(in.gfid), in.ref,
                         in.nlookup, in.fds.size(), in.ia_type,
                         in.dentries.empty() ? "<no dentry>" : in.dentries[0].name, rbx);
    }
  }
  out_stdout().print("\ndicts: {} live", r.dicts.size());
  for (const auto& c : r.clients)
    out_stdout().print("\nclient {}: {} bind={} ref={} bound_xl={} fds={}", c.index, c.client_uid,
                       c.bind, c.ref, c.bound_xl, c.fds.size());
  if (!r.fuse_fds.empty()) out_stdout().print("\nfuse fdtable: {} open fds", r.fuse_fds.size());
  out_stdout().print("\n\nfindings: {}\n", r.findings.size());
  for (const auto& f : r.findings) out_stdout().print("  [{}] {}\n", f.kind, f.message);
  print_warnings_text(r.warnings);
}

}  // namespace

static int cmd_gluster(const DumpOptions& c, const GlusterArgs& a) {
  lr::GlusterSections sec;
  if (!a.sections.empty()) {
    sec = {false, false, false, false, false, false};
    for (const auto& s : a.sections) {
      if (s == "mempool")
        sec.mempool = true;
      else if (s == "memusage")
        sec.memusage = true;
      else if (s == "itable")
        sec.itable = true;
      else if (s == "dicts")
        sec.dicts = true;
      else if (s == "clients")
        sec.clients = true;
      else if (s == "fds")
        sec.fds = true;
      else
        return fail_usage("--section: unknown section '" + s +
                          "' (mempool,itable,memusage,dicts,clients,fds)");
    }
  }
  auto prog_r = open_program(c);
  if (!prog_r.ok()) return fail(prog_r.error());
  lr::Program& prog = *prog_r.value();
  auto types = ensure_types(prog, a);
  if (!types.ok()) return fail(types.error());
  auto rep = lr::analyze_gluster(prog, sec);
  if (!rep.ok()) return fail(lr::make_error(rep.error().code, c.core + ": " + rep.error().message));
  std::string format = c.json ? "json" : a.format;
  if (format == "json")
    emit_json(report_json(rep.value(), types.value(), a.stats));
  else if (format == "statedump")
    out_stdout().put(lr::gluster_statedump_text(rep.value(), sec, c.core));
  else
    print_text(rep.value(), types.value());
  return kOk;
}

static int cmd_types_gluster(const DumpOptions& c, const TypesArgs& a) {
  std::string out = a.out;
  if (out.empty()) {
    std::string bid;
    if (!c.core.empty()) {
      auto prog = open_program(c);
      if (!prog.ok()) return fail(prog.error());
      lr::Module* lib = lr::libglusterfs_module(prog.value()->modules());
      if (!lib)
        return fail(
            lr::make_error(lr::Errc::kNotFound, c.core + ": libglusterfs.so.0 is not mapped"));
      bid = lib->build_id;
    } else {
      auto b = lr::build_id_of_file(a.library);
      if (!b.ok())
        return fail(lr::make_error(b.error().code, a.library + ": " + b.error().message));
      bid = b.value();
    }
    out = lr::gluster_types_cache_path(bid);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(out).parent_path(), ec);
  }
  lr::GlusterTypesBuild b;
  b.omit_defines = a.omit_defines;
  std::string cmd;
  auto r = lr::build_gluster_types(out, b, &cmd);
  if (!r.ok()) return fail(r.error());
  out_stdout().print("{}\n", out);
  if (a.verbose) out_stderr().print("{}\n", cmd);
  return kOk;
}

Command register_gluster(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<GlusterArgs>();
  auto* sub = app.add_subcommand(
      "gluster", "GlusterFS mem-pools, accounting, inode tables, fds, dicts, clients");
  add_dump_options(sub, c);
  sub->add_option("--format", a->format, "text, json or statedump")
      ->check(CLI::IsMember({"text", "json", "statedump"}));
  sub->add_option("--section", a->sections, "mempool,itable,memusage,dicts,clients,fds")
      ->delimiter(',');
  sub->add_flag("--stats", a->stats, "timing (JSON: heap.walk_ns, total_ns)");
  return {sub, [&c, a] { return cmd_gluster(c, *a); },
          [&c, a] { return c.json || a->format == "json"; }};
}

Command register_types_gluster(CLI::App& types) {
  auto a = std::make_shared<TypesArgs>();
  auto c = std::make_shared<DumpOptions>();
  auto* sub = types.add_subcommand(
      "gluster", "GlusterFS 10.x types from the installed libglusterfs-dev headers");
  sub->add_option("core", c->core, "core whose libglusterfs build-id names the cache file");
  sub->add_option("-o,--output", a->out, "write here instead of the cache");
  sub->add_option("--library", a->library,
                  "libglusterfs whose build-id names the cache file (no core)");
  sub->add_option("--omit-define", a->omit_defines, "leave out a define (to see what it changes)");
  sub->add_flag("-v,--verbose", a->verbose, "print the compiler command");
  sub->add_option("--exe", c->exe, "executable (default: from the core)");
  sub->add_option("--sysroot", c->sysroot, "prefix for paths in the core");
  return {sub, [c, a] { return cmd_types_gluster(*c, *a); }, [] { return false; }};
}

}  // namespace lrcli
