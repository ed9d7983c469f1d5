// See kernel_guest.hpp.
#include "kernel_guest.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <sstream>

using namespace lrtest;

namespace kguest {

const std::vector<std::string>& kernels() {
  static const std::vector<std::string> k = {"5.10", "6.1", "6.12", "7.x", "arm64"};
  return k;
}

namespace {

Dump make_dump(const std::string& kernel) {
  Dump r;
  r.kernel = kernel;
  const bool arm = kernel == "arm64";
  const std::vector<const char*> tools =
      arm ? std::vector<const char*>{"qemu-system-aarch64", "makedumpfile", "aarch64-linux-gnu-gcc"}
          : std::vector<const char*>{"qemu-system-x86_64", "makedumpfile", "busybox"};
  for (const char* p : tools)
    if (!have_program(p)) {
      r.why = fmt::format("{} is not installed (make test installs it)", p);
      return r;
    }
  // "kmemleak": a kernel built with kmemleak from Debian's source, one moment.
  const bool km = kernel == "kmemleak";
  const std::vector<std::string> cmd =
      km ? std::vector<std::string>{std::string(LR_SOURCE_DIR) + "/scripts/kernel-kmemleak"}
         : std::vector<std::string>{std::string(LR_SOURCE_DIR) + "/scripts/kernel-vmcore",
                                    "--kernel", kernel};
  RunResult k = run(cmd, 1800);
  if (k.status != 0) {
    r.broken = true;
    r.why = cmd[0] + " " + kernel +
            " failed: " + k.err.substr(k.err.size() > 2000 ? k.err.size() - 2000 : 0);
    return r;
  }
  std::istringstream in(k.out);
  std::string line;
  std::map<std::string, std::string> kv;
  while (std::getline(in, line))
    if (auto eq = line.find('='); eq != std::string::npos)
      kv[line.substr(0, eq)] = line.substr(eq + 1);
  r.vmlinux = kv["VMLINUX"];
  r.pelf = kv["PELF"];
  r.elf = kv["ELF"];
  r.pelf_b = kv["PELF_B"];
  r.kdump = kv["KDUMP"];
  r.kdump_z = kv["KDUMP_Z"];
  r.serial = kv["SERIAL"];
  r.ko = kv["KO"];
  r.ko_leak = kv["KO_LEAK"];
  r.kver = kv["KVER"];
  r.ok = !r.vmlinux.empty() && !r.pelf.empty() && (km || !r.pelf_b.empty()) &&
         (km || arm || !r.kdump.empty()) && (!arm || !r.kdump_z.empty());
  if (!r.ok) {
    r.broken = true;
    r.why = cmd[0] + " printed no paths";
  }
  return r;
}

}  // namespace

const Dump& dump(const std::string& kernel) {
  static std::map<std::string, Dump> dumps;
  auto it = dumps.find(kernel);
  if (it == dumps.end()) it = dumps.emplace(kernel, make_dump(kernel)).first;
  return it->second;
}

std::map<std::string, SlabInfo> slabinfo(const Dump& d, bool b) {
  std::map<std::string, SlabInfo> m;
  std::istringstream in(read_file(d.serial));
  const std::string tag = b ? "LEAKREF-SLABINFO-B " : "LEAKREF-SLABINFO ";
  // name active_objs num_objs objsize objperslab pagesperslab : tunables ... : slabdata
  // active_slabs num_slabs shared
  std::regex row(
      R"((\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+) : tunables .* : slabdata\s+(\d+)\s+(\d+))");
  std::smatch x;
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find(tag);
    if (at == std::string::npos) continue;
    std::string rest = line.substr(at + tag.size());
    if (!std::regex_search(rest, x, row)) continue;
    m[x[1]] = {std::stoll(x[2]), std::stoll(x[3]), std::stoll(x[5]), std::stoll(x[8])};
  }
  return m;
}

std::map<std::string, json> caches_of(const json& j) {
  std::map<std::string, json> m;
  for (const auto& c : j["caches"]) m[c["name"]] = c;
  return m;
}

void check_slabinfo(const json& j, const std::map<std::string, SlabInfo>& si) {
  auto caches = caches_of(j);
  REQUIRE(si.size() > 100);
  std::set<std::string> a, b;
  for (const auto& [n, c] : caches) a.insert(n);
  for (const auto& [n, s] : si) b.insert(n);
  CHECK(a == b);
  for (const auto& [n, s] : si) {
    INFO(n);
    if (!caches.count(n)) continue;
    const json& c = caches[n];
    CHECK(c["slabs"] == s.slabs);
    CHECK(c["objects"] == s.objs);
    CHECK(c["objects_per_slab"] == s.per_slab);
    CHECK(c["slub"]["slabinfo_active"] == s.active);
    CHECK(c["allocated"].get<int64_t>() + c["free"].get<int64_t>() == s.objs);
    CHECK(c["allocated"].get<int64_t>() <= s.active);  // SLUB counts CPU-free objects as active
  }
  // Every kmem_cache is an object of the cache of caches.
  CHECK(caches["kmem_cache"]["allocated"] == caches.size());
  CHECK(j["warnings"].empty());
}

void vfs_profile_agrees(const Dump& d) {
  json ia = kernel_json(d, d.pelf, {"inodes", "--all", "--json"});
  json p = kernel_json(d, d.pelf, {"profile", "--profile", "linux-vfs", "--json"});
  CHECK(p["schema"] == "leakref.profile/1");
  REQUIRE(p["sets"].size() == 2);
  const json& sbs = p["sets"][0];
  const json& inodes = p["sets"][1];
  REQUIRE(sbs["name"] == "super_blocks");
  REQUIRE(inodes["name"] == "inodes");
  std::set<std::string> sb_c, sb_p;
  std::map<std::string, std::pair<int64_t, size_t>> want;  // inode -> i_count, dentries
  for (const auto& sb : ia["super_blocks"]) {
    sb_c.insert(sb["addr"].get<std::string>());
    for (const auto& i : sb["inodes"])
      want[i["addr"]] = {i["i_count"].get<int64_t>(), i["dentries"].size()};
  }
  for (const auto& o : sbs["objects"]) sb_p.insert(o["addr"].get<std::string>());
  CHECK(sb_p == sb_c);
  REQUIRE(inodes["objects"].size() == want.size());
  CHECK(want.size() > 40000);  // the 40,000 files of the guest and the rest
  size_t same = 0;
  for (const auto& o : inodes["objects"]) {
    auto it = want.find(o["addr"]);
    REQUIRE(it != want.end());
    same += o["refcount"] == it->second.first &&
            o["holders"]["aliases"] == static_cast<int64_t>(it->second.second);
    CHECK(o["verdict"] == "ok");
    CHECK(o["violations"].empty());
  }
  CHECK(same == want.size());
  CHECK(inodes["summary"]["warnings"].empty());
  if (!d.kdump.empty())
    CHECK(comparable(kernel_json(d, d.kdump, {"profile", "--profile", "linux-vfs", "--json"})) ==
          comparable(p));
}

std::vector<std::string> openat_frames(const Dump& d) {
  if (d.kernel == "arm64")
    return {"alloc_empty_file",   "path_openat",    "do_filp_open", "do_sys_openat2",
            "__arm64_sys_openat", "invoke_syscall", "el0_svc"};
  return {
      "alloc_empty_file", "path_openat",      d.kernel == "7.x" ? "do_file_open" : "do_filp_open",
      "do_sys_openat2",   "__x64_sys_openat", "do_syscall_64"};
}

std::string syscall_entry(const Dump& d) {
  return d.kernel == "arm64" ? "el0t_64_sync" : "entry_SYSCALL_64";
}

Guest guest(const Dump& d) {
  Guest g;
  std::string text = read_file(d.serial);
  std::istringstream in(text);
  std::string line;
  std::regex hold(R"(LEAKREF-HOLD comm=(\S+) pid=(\d+) fd=(\d+) name=(\S+) ino=(\d+))");
  std::regex mod(R"(LEAKREF-MODULE name=(\S+) users=(\d+) usedby=(\S+))");
  std::regex holder(R"(LEAKREF-HOLDER pid=(\d+) child=\d+ files=(\d+))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (std::regex_search(line, m, hold)) {
      g.holds.push_back({m[1], m[4], std::stoi(m[2]), std::stoi(m[3]), std::stoull(m[5])});
    } else if (std::regex_search(line, m, mod)) {
      std::vector<std::string> users;
      std::string u = m[3];
      if (u != "-") {
        std::istringstream us(u);
        std::string x;
        while (std::getline(us, x, ','))
          if (!x.empty()) users.push_back(x);
      }
      g.modules[m[1]] = {std::stoll(m[2]), users};
    } else if (std::regex_search(line, m, holder)) {
      g.holder_pid = std::stoi(m[1]);
      g.files = std::stoull(m[2]);
    }
  }
  return g;
}

json kernel_json(const Dump& d, const std::string& vmcore, const std::vector<std::string>& args) {
  std::vector<std::string> a = {"kernel", "--vmcore", vmcore, "--vmlinux", d.vmlinux};
  a.insert(a.end(), args.begin(), args.end());
  RunResult r = leakref(a, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return r.json();
}

// The same report from two sources: everything but the dump's path and timings.
json comparable(json j) {
  j.erase("dump");
  j.erase("core");
  if (j.contains("summary")) j["summary"].erase("walk_ns");
  return j;
}

const json* find_inode(const json& sb, uint64_t ino) {
  for (const auto& i : sb["inodes"])
    if (i["ino"].get<uint64_t>() == ino) return &i;
  return nullptr;
}

const json& leak_sb(const json& inodes, uint64_t files) {
  for (const auto& s : inodes["super_blocks"])
    if (s["fstype"] == "tmpfs" && s["inode_count"].get<uint64_t>() == files + 1) return s;
  FAIL("no tmpfs super_block with " << files + 1 << " inodes");
  static json none;
  return none;
}

// Checks an inodes report against the guest's manifest.
void check_inodes(const json& j, const Guest& g) {
  const json& sb = leak_sb(j, g.files);
  CHECK(sb["inodes_walk_stop"] == "end");
  // Every held fd is found on its inode with the right holder.
  for (const auto& h : g.holds) {
    INFO(h.comm << " pid " << h.pid << " fd " << h.fd << " " << h.name << " ino " << h.ino);
    const json* ino = find_inode(sb, h.ino);
    REQUIRE(ino);
    CHECK((*ino)["i_count"] == 1);
    CHECK((*ino)["flagged"] == false);
    bool found = false;
    for (const auto& f : (*ino)["files"])
      for (const auto& x : f["holders"])
        if (x["pid"] == h.pid && x.value("fd", -100) == h.fd && x["comm"] == h.comm) found = true;
    CHECK(found);
    REQUIRE((*ino)["dentries"].size() == 1);
    const json& d = (*ino)["dentries"][0];
    CHECK(d["name"] == h.name);
    // tmpfs pins each dentry once; every struct file on it holds one more.
    CHECK(d["count"].get<int64_t>() == 1 + static_cast<int64_t>((*ino)["files"].size()));
    CHECK(d["unexplained"] == 0);
  }
  auto files_of = [&](uint64_t ino) {
    const json* i = find_inode(sb, ino);
    REQUIRE(i);
    return (*i)["files"];
  };
  // f00020: dup'ed onto 3 fds: one struct file with f_count 3.
  json f20 = files_of(22);
  REQUIRE(f20.size() == 1);
  CHECK(f20[0]["f_count"] == 3);
  CHECK(f20[0]["holders"].size() == 3);
  // f00021: opened twice: two files of f_count 1.
  json f21 = files_of(23);
  REQUIRE(f21.size() == 2);
  CHECK(f21[0]["f_count"] == 1);
  CHECK(f21[1]["f_count"] == 1);
  // f00030: shared with the forked child: f_count 2, held by both.
  json f30 = files_of(32);
  REQUIRE(f30.size() == 1);
  CHECK(f30[0]["f_count"] == 2);
  std::set<std::string> who;
  for (const auto& x : f30[0]["holders"]) who.insert(x["comm"].get<std::string>());
  CHECK(who == std::set<std::string>{"lrchild", "lrholder"});
  // f00050: no fd left, held by the holder's mapping only.
  json f50 = files_of(52);
  REQUIRE(f50.size() == 1);
  CHECK(f50[0]["f_count"] == 1);
  REQUIRE(f50[0]["holders"].size() == 1);
  CHECK(f50[0]["holders"][0]["kind"] == "mmap");
  CHECK(f50[0]["holders"][0]["pid"] == g.holder_pid);
  // f00060: held only by an unread SCM_RIGHTS message: the one finding.
  const json* f60 = find_inode(sb, 62);
  REQUIRE(f60);
  CHECK((*f60)["flagged"] == true);
  CHECK((*f60)["files"].empty());
  REQUIRE((*f60)["dentries"].size() == 1);
  CHECK((*f60)["dentries"][0]["name"] == "f00060");
  // Its path as crash's `files -d` gives it: the guest's init mounted the
  // tmpfs at /mnt/leak (fixtures/kernel/init).
  CHECK((*f60)["dentries"][0]["path"] == "/mnt/leak/f00060");
  CHECK((*f60)["dentries"][0]["unexplained"] == 1);
  // ... and nothing else in the whole kernel is flagged.
  CHECK(j["summary"]["flagged"] == 1);
  CHECK(sb["flagged"] == 1);
}

void check_modules(const json& j, const Guest& g) {
  REQUIRE(g.modules.size() >= 4);
  CHECK(j["modules"].size() == g.modules.size());
  for (const auto& m : j["modules"]) {
    std::string name = m["name"];
    INFO(name);
    auto it = g.modules.find(name);
    REQUIRE(it != g.modules.end());
    // /proc/modules shows refcnt minus the base reference.
    CHECK(m["refcnt"].get<int64_t>() == it->second.first + 1);
    CHECK(m["used_by"].get<std::vector<std::string>>() == it->second.second);
    CHECK(m["state"] == "live");
    CHECK(m["unexplained"] == 0);
  }
  for (const auto& m : j["modules"])
    if (m["name"] == "binfmt_misc") CHECK(m["superblocks"] == 1);  // held by its mount
}

std::map<std::string, std::vector<LockObj>> lrlocks_truth(const Dump& d) {
  std::map<std::string, std::vector<LockObj>> t;
  std::istringstream in(read_file(d.serial));
  std::regex obj(R"(LRLOCKS (ns|res|vc) addr=([0-9a-f]+)(.*))");
  std::regex kv(R"((\w+)=(\S+))");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (!std::regex_search(line, m, obj)) continue;
    LockObj o;
    o.addr = "0x" + m[2].str();
    std::string rest = m[3];
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), kv); it != std::sregex_iterator();
         ++it) {
      std::string k = (*it)[1], v = (*it)[2];
      if (k == "refcount") o.refcount = std::stoll(v);
      if (k == "leaked") o.leaked = std::stoll(v);
      if (k == "granted") o.granted = std::stoll(v);
      if (k == "violates") o.violates.push_back(v);
    }
    t[m[1]].push_back(o);
  }
  return t;
}

// A profile set against the module's truth: the same objects in the same
// order, the same refcounts, exactly the leaked ones flagged with exactly
// their leaked references, and exactly the broken invariants.
void check_lock_set(const json& set, const std::vector<LockObj>& want, bool counted) {
  INFO("set " << set["name"]);
  REQUIRE(set["objects"].size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const json& o = set["objects"][i];
    INFO(want[i].addr);
    CHECK(o["addr"] == want[i].addr);
    CHECK(o["violations"].get<std::vector<std::string>>() == want[i].violates);
    if (!counted) continue;
    CHECK(o["refcount"] == want[i].refcount);
    CHECK(o["verdict"] == (want[i].leaked ? "extra" : "ok"));
    CHECK(o["unexplained"] == want[i].leaked);
  }
  CHECK(set["summary"]["warnings"].empty());
}

const json& named_set(const json& j, const std::string& name) {
  for (const auto& s : j["sets"])
    if (s["name"] == name) return s;
  FAIL("no set " << name);
  static json none;
  return none;
}

// crash in batch mode on the ELF dump, reading `cmdfile`.
std::vector<std::string> crash_argv(const std::string& cmdfile, const std::string& kernel) {
  std::vector<std::string> argv;
#ifdef LR_SANITIZE
  // The extension is built with ASan+UBSan: their runtimes must be loaded
  // first, into an uninstrumented crash. Its own leaks, and its gdb's
  // operator new (malloc) freed by the interceptor's delete, are not ours.
  RunResult asan = run({"gcc", "-print-file-name=libasan.so"});
  RunResult ubsan = run({"gcc", "-print-file-name=libubsan.so"});
  std::string pre =
      asan.out.substr(0, asan.out.find('\n')) + ":" + ubsan.out.substr(0, ubsan.out.find('\n'));
  argv = {"env", "LD_PRELOAD=" + pre,
          "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:alloc_dealloc_mismatch=0",
          "UBSAN_OPTIONS=halt_on_error=1"};
#endif
  for (const char* a : {"crash", "-s", "--no_crashrc"}) argv.push_back(a);
  argv.push_back(dump(kernel).vmlinux);
  argv.push_back(dump(kernel).pelf);
  argv.push_back("-i");
  argv.push_back(cmdfile);
  return argv;
}

std::string write_cmds(const std::vector<std::string>& cmds) {
  std::string f = tmp_dir() + "/crash.cmd";
  std::string text;
  for (const auto& c : cmds) text += c + "\n";
  text += "exit\n";
  write_file(f, text);
  return f;
}

void crash_session(const std::vector<std::string>& cmds, RunResult* out,
                   const std::string& kernel) {
  std::vector<std::string> argv = {"timeout", "-k", "5", "900"};
  for (auto& a : crash_argv(write_cmds(cmds), kernel)) argv.push_back(a);
  *out = run(argv, 960);
}

const std::string& sid_crash_root(std::string* why) {
  static std::string root, fail;
  static bool tried = false;
  if (!tried) {
    tried = true;
    // crash, and what the extension needs that sid has (its own sonames).
    RunResult r = run({std::string(LR_SOURCE_DIR) + "/scripts/debian-root", "crash-sid", "sid",
                       "crash", "libdw1t64", "libelf1t64", "libdebuginfod1t64", "libzstd1",
                       "liblzma5", "liblz4-1", "zlib1g", "libstdc++6", "libaddrxlat3"},
                      900);
    if (r.status == 0 && r.out.rfind("ROOT=", 0) == 0)
      root = r.out.substr(5, r.out.find('\n') - 5);
    else
      fail = "scripts/debian-root crash-sid sid crash failed: " + r.err.substr(0, 2000);
  }
  *why = fail;
  return root;
}

std::string sid_extension(std::string* why) {
  const std::string& root = sid_crash_root(why);
  if (root.empty()) return "";
  // The plain build, never the sanitized one (sid's crash cannot load this
  // machine's ASan runtime), and none of the calling make's variables: a `make test`'s
  // MAKEFLAGS would otherwise carry its BUILD, SAN or OPT into this one.
  const std::string name = root.substr(root.rfind('/') + 1);
#ifdef LR_SANITIZE
  const std::string build = std::string(LR_SOURCE_DIR) + "/build";
#else
  const std::string build = lrtest::build_dir();  // this test binary's own build
#endif
  RunResult r =
      run({"env", "-u", "MAKEFLAGS", "-u", "MFLAGS", "-u", "MAKELEVEL", "make", "-s", "-C",
           LR_SOURCE_DIR, "BUILD=" + build, "CRASH_OTHER=" + root, "extension-other"},
          1800);
  if (r.status != 0) {
    *why = "make extension-other CRASH_OTHER=" + root + " failed: " + r.out + r.err;
    return "";
  }
  return build + "/crash-other/" + name + "/leakref.so";
}

void sid_crash_session(const std::vector<std::string>& cmds, RunResult* out,
                       const std::string& kernel) {
  std::string why;
  const std::string& root = sid_crash_root(&why);
  if (root.empty()) {
    out->status = -1;
    out->err = why;
    return;
  }
  const Dump& d = dump(kernel);
  std::string dir = d.pelf.substr(0, d.pelf.rfind('/'));
  // The dump, its vmlinux and the sources (the extension, profiles) read-only;
  // the test's directory (its command file, the extension's output) writable.
  std::vector<std::string> argv = {"timeout",
                                   "-k",
                                   "5",
                                   "900",
                                   std::string(LR_SOURCE_DIR) + "/scripts/debian-root",
                                   "--in",
                                   root,
                                   "--bind",
                                   dir,
                                   "--bind",
                                   d.vmlinux,
                                   "--bind",
                                   LR_SOURCE_DIR,
                                   "--bind-rw",
                                   tmp_dir(),
                                   "crash",
                                   "-s",
                                   "--no_crashrc",
                                   d.vmlinux,
                                   d.pelf,
                                   "-i",
                                   write_cmds(cmds)};
  *out = run(argv, 960);
}

// Values crash prints for `struct TYPE.a,b ADDR`: the last "NAME = N" per name.
std::map<std::string, int64_t> crash_values(const std::string& text) {
  std::map<std::string, int64_t> v;
  std::regex kv(R"((\w+) = (-?\d+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kv); it != std::sregex_iterator();
       ++it)
    v[(*it)[1]] = std::stoll((*it)[2]);
  return v;
}

// Splits output at "MARK name" lines printed with crash's shell escape
// (crash flushes its own output before running one).
std::map<std::string, std::string> sections(const std::string& out) {
  std::map<std::string, std::string> s;
  std::string cur;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MARK ", 0) == 0) {
      cur = line.substr(5);
      continue;
    }
    if (!cur.empty()) s[cur] += line + "\n";
  }
  return s;
}

size_t run_doc_section(const std::string& name, const std::map<std::string, std::string>& links,
                       const std::function<std::string(std::string)>& norm) {
  std::string part = readme_section(name);
  REQUIRE(!part.empty());
  std::string dir = tmp_dir() + "/doc-" + name;
  REQUIRE(run({"/bin/mkdir", "-p", dir}).status == 0);
  for (const auto& [file, target] : links)
    REQUIRE(run({"/bin/ln", "-sf", target, dir + "/" + file}).status == 0);
  size_t commands = 0;
  for (const auto& [cmd, want] : readme_commands(part)) {
    INFO(cmd);
    RunResult r = run(
        {"/bin/bash", "-c", "cd '" + dir + "' && PATH='" + build_dir() + "':$PATH " + cmd}, 300);
    CHECK(r.status == 0);
    CHECK(norm(r.out) == norm(want));
    ++commands;
  }
  return commands;
}

}  // namespace kguest
