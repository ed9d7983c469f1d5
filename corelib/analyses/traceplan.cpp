// Capture planning for a live process: function resolution (symbol tables,
// then the first direct call of a wrapper for statics) and the generated
// bpftrace program and leakref-trace header.
#include "corelib/analyses/traceplan.hpp"
#include "corelib/base/fileio.hpp"

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "corelib/debuginfo/modules.hpp"

namespace lr {

bool shell_safe_path(const std::string& path) {
  return !path.empty() &&
         path.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") ==
             std::string::npos;
}

namespace {

struct ElfFile {
  int fd = -1;
  Elf* e = nullptr;
  explicit ElfFile(const std::string& path) {
    elf_version(EV_CURRENT);
    if (auto f = open_input(path, "ELF file"); f.ok()) fd = f.value();  // never waits on a FIFO
    if (fd >= 0) e = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (e && elf_kind(e) != ELF_K_ELF) {
      elf_end(e);
      e = nullptr;
    }
  }
  ~ElfFile() {
    if (e) elf_end(e);
    if (fd >= 0) ::close(fd);
  }
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  std::string build_id() const {
    const void* p = nullptr;
    ssize_t n = e ? dwelf_elf_gnu_build_id(e, &p) : -1;
    std::string s;
    for (ssize_t i = 0; i < n && i < 64; ++i)
      s += fmt::format("{:02x}", static_cast<const uint8_t*>(p)[i]);
    return s;
  }
  // Lowest PT_LOAD vaddr, page-aligned: runtime base - this = load bias.
  uint64_t first_load() const {
    size_t n = 0;
    uint64_t lo = UINT64_MAX;
    if (!e || elf_getphdrnum(e, &n) != 0) return 0;
    for (size_t i = 0; i < n && i < 4096; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(e, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
        lo = std::min<uint64_t>(lo, ph.p_vaddr & ~uint64_t(0xfff));
    }
    return lo == UINT64_MAX ? 0 : lo;
  }

  // The target of the first direct `call rel32` in [vaddr, vaddr+size) that
  // lands on a function start (a CFI FDE begins there) outside the PLT.
  // Scanning bytes rather than decoding instructions is safe because both
  // checks must hold for a false E8 to pass; 0 when there is none.
  uint64_t first_direct_callee(uint64_t vaddr, uint64_t size, uint64_t* callee_size) const {
    if (!e || size < 5 || size > (1u << 20)) return 0;
    size_t shstrndx = 0;
    if (elf_getshdrstrndx(e, &shstrndx) != 0) return 0;
    std::vector<std::pair<uint64_t, uint64_t>> exec, plt;
    const uint8_t* body = nullptr;
    for (Elf_Scn* s = elf_nextscn(e, nullptr); s; s = elf_nextscn(e, s)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(s, &sh) || !(sh.sh_flags & SHF_EXECINSTR)) continue;
      const char* name = elf_strptr(e, shstrndx, sh.sh_name);
      if (name && std::string_view(name).rfind(".plt", 0) == 0)
        plt.emplace_back(sh.sh_addr, sh.sh_addr + sh.sh_size);
      else
        exec.emplace_back(sh.sh_addr, sh.sh_addr + sh.sh_size);
      if (sh.sh_type == SHT_PROGBITS && vaddr >= sh.sh_addr &&
          vaddr + size <= sh.sh_addr + sh.sh_size) {
        Elf_Data* d = elf_getdata(s, nullptr);
        if (d && d->d_buf && d->d_size >= sh.sh_size)
          body = static_cast<const uint8_t*>(d->d_buf) + (vaddr - sh.sh_addr);
      }
    }
    if (!body) return 0;
    Dwarf_CFI* cfi = dwarf_getcfi_elf(e);
    if (!cfi) return 0;
    auto in = [](const auto& v, uint64_t a) {
      return std::any_of(v.begin(), v.end(), [a](auto r) { return a >= r.first && a < r.second; });
    };
    uint64_t found = 0;
    for (uint64_t i = 0; i + 5 <= size && !found; ++i) {
      if (body[i] != 0xe8) continue;
      int32_t rel;
      std::memcpy(&rel, body + i + 1, 4);
      uint64_t target = vaddr + i + 5 + static_cast<int64_t>(rel);
      if (in(plt, target) || !in(exec, target) || (target >= vaddr && target < vaddr + size))
        continue;
      Dwarf_Frame* fr = nullptr;
      if (dwarf_cfi_addrframe(cfi, target, &fr) != 0) continue;
      Dwarf_Addr start = 0, end = 0;
      if (dwarf_frame_info(fr, &start, &end, nullptr) >= 0 && start == target) {
        found = target;
        *callee_size = end - start;
      }
      free(fr);
    }
    dwarf_cfi_end(cfi);
    return found;
  }
};

struct ProcModule {
  std::string path;
  uint64_t base = UINT64_MAX, end = 0;
  std::vector<TraceMapping> exec;
};

}  // namespace

namespace {

// Every file-backed VMA of /proc/PID/maps, grouped by file: base/end for
// the load bias; the executable ones for the M lines.
std::vector<ProcModule> proc_modules(const std::string& maps) {
  std::vector<ProcModule> pmods;
  std::istringstream ls(maps);
  std::string line;
  while (std::getline(ls, line)) {
    unsigned long long s, e, off;
    char perms[8] = {};
    int path_at = 0;
    if (sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &s, &e, perms, &off, &path_at) < 4 ||
        path_at <= 0 || static_cast<size_t>(path_at) >= line.size() || line[path_at] != '/')
      continue;
    std::string path = line.substr(static_cast<size_t>(path_at));
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0)
      path.resize(path.size() - 10);
    auto it = std::find_if(pmods.begin(), pmods.end(), [&](auto& m) { return m.path == path; });
    if (it == pmods.end()) {
      pmods.emplace_back();
      pmods.back().path = path;
      it = pmods.end() - 1;
    }
    it->base = std::min<uint64_t>(it->base, s);
    it->end = std::max<uint64_t>(it->end, e);
    if (perms[2] == 'x') it->exec.push_back({s, e, off, "", path});
  }
  return pmods;
}

// A probe's role and kind from NAME[@MODULE][:OP[:KIND]], or guessed from
// the name; kInvalidArgument when neither says.
Result<ProbeSpec> probe_role(const std::string& spec, std::string* name) {
  std::string op_s, kind;
  *name = spec;
  size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    *name = spec.substr(0, colon);
    std::string rest = spec.substr(colon + 1);
    size_t c2 = rest.find(':');
    op_s = rest.substr(0, c2);
    if (c2 != std::string::npos) kind = rest.substr(c2 + 1);
  }
  ProbeSpec p;
  p.name = name->substr(0, name->find('@'));
  TraceOp guessed_op = TraceOp::kRef;
  std::string guessed_kind;
  bool guessed = guess_function_role(p.name, &guessed_kind, &guessed_op);
  if (!op_s.empty()) {
    if (!trace_op_from_name(op_s, &p.op))
      return make_error(Errc::kInvalidArgument,
                        fmt::format("function '{}': unknown role '{}' (ref, unref, new, free, "
                                    "alloc)",
                                    spec, op_s));
  } else if (guessed) {
    p.op = guessed_op;
  } else {
    return make_error(Errc::kInvalidArgument,
                      fmt::format("function '{}': cannot tell whether it takes or drops a "
                                  "reference; write {}:ref or {}:unref",
                                  spec, *name, *name));
  }
  p.kind = !kind.empty()             ? kind
           : p.op == TraceOp::kAlloc ? "alloc"
           : guessed                 ? guessed_kind
                                     : "obj";
  return p;
}

// Where probe `p` goes: its symbol, or for a "__NAME" no symbol table has,
// the first direct call NAME makes. Null when neither is found.
const Module* place_probe(ModuleSet& mods, const std::map<const Module*, std::string>& host_of,
                          const std::string& name, ProbeSpec& p) {
  auto hit = mods.lookup(name);
  if (hit.ok()) {
    p.vaddr = hit->second->addr - hit->first->bias;
    p.size = hit->second->size;
    p.how = "symbol";
    return hit->first;
  }
  if (p.name.rfind("__", 0) != 0) return nullptr;
  std::string wrapper = name.substr(2);
  auto w = mods.lookup(wrapper);
  if (!w.ok()) return nullptr;
  auto host = host_of.find(w->first);
  if (host == host_of.end()) return nullptr;
  ElfFile ef(host->second);
  uint64_t callee_size = 0;
  uint64_t t =
      ef.first_direct_callee(w->second->addr - w->first->bias, w->second->size, &callee_size);
  if (!t) return nullptr;
  p.vaddr = t;
  p.size = callee_size;
  p.by_address = true;
  p.how = "first call in " + wrapper.substr(0, wrapper.find('@'));
  return w->first;
}

// realloc's record frees the old block: a capture with realloc needs free
// declared too (its P line), or the freed half would be an unknown function.
bool realloc_without_free(const TracePlan& plan) {
  bool has_free = std::any_of(plan.probes.begin(), plan.probes.end(), [](const ProbeSpec& p) {
    return p.kind == "alloc" && p.op == TraceOp::kFree && p.name == "free";
  });
  for (const auto& p : plan.probes)
    if (p.op == TraceOp::kAlloc && p.name == "realloc" && !has_free) return true;
  return false;
}

}  // namespace

Result<TracePlan> plan_trace(int pid, const std::vector<std::string>& functions,
                             const std::map<std::string, std::pair<int64_t, int>>& refoffs) {
  TracePlan plan;
  plan.pid = pid;
  std::string proc = fmt::format("/proc/{}", pid);
  std::ifstream mf(proc + "/maps");
  if (!mf)
    return make_error(Errc::kIo, fmt::format("{}/maps: cannot read (no such process, or not "
                                             "permitted)",
                                             proc));
  std::stringstream ss;
  ss << mf.rdbuf();
  char exe[4096];
  ssize_t n = readlink((proc + "/exe").c_str(), exe, sizeof exe - 1);
  if (n > 0) plan.exe.assign(exe, static_cast<size_t>(n));

  auto mods = ModuleSet::empty({});
  std::map<const Module*, std::string> host_of;
  for (auto& pm : proc_modules(ss.str())) {
    if (pm.exec.empty()) continue;
    // The file as this process sees it (containers: its own root).
    std::string host = proc + "/root" + pm.path;
    if (access(host.c_str(), R_OK) != 0) host = pm.path;
    ElfFile ef(host);
    if (!ef.e) continue;
    std::string bid = ef.build_id();
    for (auto& m : pm.exec) {
      m.build_id = bid;
      plan.mappings.push_back(m);
    }
    Module* m = mods->add(pm.path, host, pm.base, pm.end, pm.base - ef.first_load(), bid,
                          pm.path == plan.exe);
    host_of[m] = host;
  }
  if (plan.mappings.empty())
    return make_error(Errc::kNotFound, fmt::format("{}: no executable file mappings", proc));

  for (const std::string& spec : functions) {
    std::string name;
    LR_ASSIGN(ProbeSpec p, probe_role(spec, &name));
    const Module* mod = place_probe(*mods, host_of, name, p);
    if (!mod) {
      plan.warnings.push_back(
          fmt::format("{}: not found in pid {}'s modules; not probed", name, pid));
      continue;
    }
    p.path = mod->path;
    p.build_id = mod->build_id;
    auto ro = refoffs.find(p.kind);
    if (ro != refoffs.end()) {
      p.refoff = ro->second.first;
      p.refwidth = ro->second.second;
    }
    plan.probes.push_back(std::move(p));
  }
  if (realloc_without_free(plan))
    return make_error(Errc::kInvalidArgument,
                      "realloc:alloc needs free:free:alloc in the same capture (a realloc "
                      "frees the block it moves)");
  if (plan.probes.empty())
    return make_error(Errc::kNotFound,
                      fmt::format("none of the functions was found in pid {}: {}", pid,
                                  plan.warnings.empty() ? "" : plan.warnings[0]));
  return plan;
}

namespace {

// An allocator: the size and the caller are read at entry, the block is the
// return value. calloc's size is n * size; realloc's (old, size) records the
// old block's free first. Each allocator keeps its own maps: the C library's
// realloc(NULL, n) calls malloc at the same address the malloc probe is on,
// and the inner call must not overwrite the outer one's caller and size.
std::string alloc_probe(const ProbeSpec& p, const std::string& loc, int pid,
                        std::vector<std::string>* maps) {
  std::string ra = "@lr_ra_" + p.name, sz = "@lr_sz_" + p.name, old = "@lr_old_" + p.name;
  bool re = p.name == "realloc";
  std::string size = p.name == "calloc" ? "arg0 * arg1" : re ? "arg1" : "arg0";
  maps->insert(maps->end(), {ra, sz});
  if (re) maps->push_back(old);
  std::string out =
      fmt::format("uprobe:{} /pid == {}/ {{ {}[tid] = *(uint64 *)reg(\"sp\"); {}[tid] = {};{} }}\n",
                  loc, pid, ra, sz, size, re ? fmt::format(" {}[tid] = arg0;", old) : "");
  std::string free_old =
      re ? fmt::format(
               "if ({0}[tid] != 0) {{ printf(\"E %llu %d free 0x%lx - 0x%lx\\n\", nsecs, "
               "tid, {0}[tid], {1}[tid]); }} ",
               old, ra)
         : "";
  out += fmt::format(
      "uretprobe:{} /pid == {}/ {{ if (retval != 0) {{ {}printf(\"E %llu %d {} 0x%lx - 0x%lx "
      "size=%lu\\n\", nsecs, tid, retval, {}[tid], {}[tid]); }} delete({}[tid]); "
      "delete({}[tid]);{} }}\n",
      loc, pid, free_old, p.name, ra, sz, ra, sz, re ? fmt::format(" delete({}[tid]);", old) : "");
  return out;
}

}  // namespace

std::string bpftrace_program(const TracePlan& plan, const std::string& ready_file) {
  std::string out = "BEGIN { printf(\"# attached\\n\");";
  // The path goes into a shell command: refuse anything but plain characters.
  if (shell_safe_path(ready_file)) out += fmt::format(" system(\"touch {}\");", ready_file);
  out += " }\n";
  std::vector<std::string> maps;  // per-thread state, cleared at the end
  for (const ProbeSpec& p : plan.probes) {
    std::string loc = p.by_address ? fmt::format("{}:{:#x}", p.path, p.vaddr)
                                   : fmt::format("{}:{}", p.path, p.name);
    std::string pred = fmt::format("/pid == {}/", plan.pid);
    if (p.op == TraceOp::kAlloc) {
      out += alloc_probe(p, loc, plan.pid, &maps);
      continue;
    }
    if (p.op == TraceOp::kNew) {
      if (maps.empty() || maps.front() != "@lr_ra") maps.insert(maps.begin(), "@lr_ra");
      // The object is the return value; the caller is read at entry.
      out += fmt::format("uprobe:{} {} {{ @lr_ra[tid] = *(uint64 *)reg(\"sp\"); }}\n", loc, pred);
      out += fmt::format(
          "uretprobe:{} {} {{ if (retval != 0) {{ printf(\"E %llu %d {} 0x%lx - 0x%lx\\n\", "
          "nsecs, tid, retval, @lr_ra[tid]); }} delete(@lr_ra[tid]); }}\n",
          loc, pred, p.name);
      continue;
    }
    std::string before = "-";
    std::string arg;
    if (p.refoff >= 0 && (p.refwidth == 4 || p.refwidth == 8)) {
      before = "%lld";
      arg = fmt::format(", *({} *)(arg0 + {})", p.refwidth == 4 ? "uint32" : "int64", p.refoff);
    }
    out += fmt::format(
        "uprobe:{} /pid == {} && arg0 != 0/ {{ printf(\"E %llu %d {} 0x%lx {} 0x%lx\\n\", nsecs, "
        "tid, arg0{}, *(uint64 *)reg(\"sp\")); }}\n",
        loc, plan.pid, p.name, before, arg);
  }
  // bpftrace refuses to clear a map no probe uses: only those in use.
  if (!maps.empty()) {
    out += "END {";
    for (const auto& m : maps) out += " clear(" + m + ");";
    out += " }\n";
  }
  return out;
}

std::string trace_header(const TracePlan& plan, const std::string& source) {
  std::string out = "#leakref-trace 1\n";
  out += fmt::format("H pid={} exe={} source={} clock=mono\n", plan.pid,
                     plan.exe.empty() ? "-" : plan.exe, source);
  std::map<std::string, const ProbeSpec*> kinds;
  for (const auto& p : plan.probes)
    if (p.refoff >= 0) kinds.emplace(p.kind, &p);
  for (auto& [k, p] : kinds)
    out += fmt::format("K {} - refoff={} refwidth={}\n", k, p->refoff, p->refwidth);
  for (const auto& p : plan.probes)
    out += fmt::format(
        "P {} {} {} addr={:#x} size={:#x} how={} module={}\n", p.name, p.kind, trace_op_name(p.op),
        p.vaddr, p.size,
        p.how.find(' ') == std::string::npos ? p.how : "first-call-in:" + p.how.substr(14), p.path);
  for (const auto& m : plan.mappings)
    out += fmt::format("M {:#x} {:#x} {:#x} {} {}\n", m.start, m.end, m.offset,
                       m.build_id.empty() ? "-" : m.build_id, m.path);
  return out;
}

}  // namespace lr
