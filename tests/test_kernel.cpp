// Kernel: a real Debian 6.1 vmcore (scripts/kernel-vmcore boots Debian's
// kernel under QEMU TCG with a busybox initramfs that sets up known state and
// prints it), checked three ways: against what the guest says it set up,
// against crash 8.0.2's own `struct`/`list` output with the extension loaded,
// and the standalone CLI (ELF reader and libkdumpfile) against the extension.
#include <fmt/format.h>
#include <sys/stat.h>
#include <catch2/catch.hpp>
#include <cstring>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "harness.hpp"

using namespace lrtest;
using nlohmann::json;

namespace {

struct Dump {
  bool ok = false;
  bool broken = false;  // our own set-up failed: a failure, not a skip
  std::string why;
  std::string vmlinux, pelf, kdump, serial, ko, kver;
};

const Dump& dump() {
  static Dump d = [] {
    Dump r;
    for (const char* p : {"qemu-system-x86_64", "crash", "makedumpfile", "busybox"})
      if (!have_program(p)) {
        r.why = fmt::format("{} is not installed (make deps installs it)", p);
        return r;
      }
    RunResult k = run({std::string(LR_SOURCE_DIR) + "/scripts/kernel-vmcore"}, 1200);
    if (k.status != 0) {
      r.broken = true;
      r.why = "scripts/kernel-vmcore failed: " +
              k.err.substr(k.err.size() > 2000 ? k.err.size() - 2000 : 0);
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
    r.kdump = kv["KDUMP"];
    r.serial = kv["SERIAL"];
    r.ko = kv["KO"];
    r.kver = kv["KVER"];
    r.ok = !r.vmlinux.empty() && !r.pelf.empty();
    if (!r.ok) {
      r.broken = true;
      r.why = "scripts/kernel-vmcore printed no paths";
    }
    return r;
  }();
  return d;
}

// Skips only when a facility is missing (QEMU, crash, ...); a failure of
// scripts/kernel-vmcore itself fails the test.
#define NEED_DUMP()                                           \
  do {                                                        \
    if (dump().broken) FAIL("kernel vmcore: " << dump().why); \
    if (!dump().ok) LR_SKIP("kernel vmcore: " + dump().why);  \
  } while (0)

// What the guest said it set up (fixtures/kernel/lrholder.c and init).
struct Hold {
  std::string comm, name;
  int pid = 0, fd = 0;
  uint64_t ino = 0;
};
struct Guest {
  std::vector<Hold> holds;
  std::map<std::string, std::pair<int64_t, std::vector<std::string>>> modules;  // users, used-by
  int holder_pid = 0;
  uint64_t files = 0;
};

Guest guest() {
  Guest g;
  std::string text = read_file(dump().serial);
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

json kernel_json(const std::string& vmcore, const std::vector<std::string>& args) {
  std::vector<std::string> a = {"kernel", "--vmcore", vmcore, "--vmlinux", dump().vmlinux};
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

// What the lrlocks module (fixtures/kernel/lrlocks.c) logged about itself:
// per object set, addresses in walk order, refcounts, leaked references and
// the invariants it broke on purpose.
struct LockObj {
  std::string addr;
  int64_t refcount = 0, leaked = 0, granted = 0;
  std::vector<std::string> violates;
};
std::map<std::string, std::vector<LockObj>> lrlocks_truth() {
  std::map<std::string, std::vector<LockObj>> t;
  std::istringstream in(read_file(dump().serial));
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
std::vector<std::string> crash_argv(const std::string& cmdfile) {
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
  argv.push_back(dump().vmlinux);
  argv.push_back(dump().pelf);
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

void crash_session(const std::vector<std::string>& cmds, RunResult* out) {
  std::vector<std::string> argv = {"timeout", "-k", "5", "900"};
  for (auto& a : crash_argv(write_cmds(cmds))) argv.push_back(a);
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

}  // namespace

// For the batch archive: both forms of the guest's dump, and the directory
// tree holding its vmlinux (DIR/usr/lib/debug/boot/vmlinux-RELEASE).
lrtest::SharedDumps lrtest::kernel_dumps() {
  SharedDumps r;
  const Dump& d = dump();
  if (!d.ok) {
    r.why = "kernel vmcore: " + d.why;
    r.broken = d.broken;
    return r;
  }
  r.paths = {d.pelf, d.kdump};
  size_t at = d.vmlinux.find("/usr/lib/debug/");
  r.debug_dir =
      at == std::string::npos ? d.vmlinux.substr(0, d.vmlinux.rfind('/')) : d.vmlinux.substr(0, at);
  return r;
}

TEST_CASE("kernel: standalone inodes, modules, check and walk on a real Debian 6.1 vmcore",
          "[kernel]") {
  NEED_DUMP();
  Guest g = guest();
  REQUIRE(g.holds.size() >= 20);
  REQUIRE(g.files >= 10000);
  // The ELF dump through the engine's ELF reader, the kdump file through
  // libkdumpfile: the same answers.
  json ie = kernel_json(dump().pelf, {"inodes", "--json"});
  json ik = kernel_json(dump().kdump, {"inodes", "--json"});
  check_inodes(ie, g);
  CHECK(comparable(ie) == comparable(ik));
  json me = kernel_json(dump().pelf, {"modules", "--json"});
  check_modules(me, g);
  CHECK(comparable(me) == comparable(kernel_json(dump().kdump, {"modules", "--json"})));
  json ce = kernel_json(dump().pelf, {"check", "--json"});
  for (const auto& c : ce["checks"]) {
    INFO(c.dump());
    CHECK(c["violations"] == 0);
    CHECK(c["checked"].get<uint64_t>() > 0);
  }
  // The big list walks whole, every inode with i_count 1.
  const json& sb = leak_sb(ie, g.files);
  json w = kernel_json(dump().kdump, {"walk", "--type", "struct inode", "--head", sb["s_inodes"],
                                      "--list-member", "i_sb_list", "--refcount", "i_count",
                                      "--show", "i_ino", "--group-by", "i_state", "--json"});
  CHECK(w["summary"]["visited"] == g.files + 1);
  CHECK(w["summary"]["stop"] == "end");
  CHECK(w["summary"]["histogram"] == json{{"1", g.files + 1}});
  uint64_t grouped = 0;
  for (const auto& x : w["summary"]["groups"]) grouped += x["count"].get<uint64_t>();
  CHECK(grouped == g.files + 1);
  // --fail-on flags the in-flight file; usage errors are exit 2.
  RunResult f = leakref({"kernel", "--vmcore", dump().pelf, "--vmlinux", dump().vmlinux, "inodes",
                         "--fail-on", "flagged"},
                        300);
  CHECK(f.status == 1);
  CHECK(f.out.find("f00060") != std::string::npos);
  RunResult u = leakref({"kernel", "--vmcore", dump().pelf, "--vmlinux", dump().vmlinux, "inodes",
                         "--no-such-option"},
                        300);
  CHECK(u.status == 2);
}

TEST_CASE("kernel: hostile dumps and vmlinux give one clear error", "[kernel]") {
  NEED_DUMP();
  // A kernel dump given where a process core goes is named as one (it read
  // as a process with pid 1, or "bad magic").
  for (const auto& d : {dump().pelf, dump().kdump})
    for (const char* sub : {"info", "heap"}) {
      RunResult k = leakref({sub, d});
      INFO(sub << " " << d << ": " << k.err);
      CHECK(k.status == 3);
      CHECK(k.out.empty());
      CHECK(k.err.find(" is a kernel dump (") != std::string::npos);
      CHECK(k.err.find("use 'leakref kernel --vmcore " + d) != std::string::npos);
    }
  std::string dir = tmp_dir();
  write_file(dir + "/empty", "");
  RunResult e =
      leakref({"kernel", "--vmcore", dir + "/empty", "--vmlinux", dump().vmlinux, "modules"});
  CHECK(e.status == 3);
  CHECK(e.err.find(dir + "/empty") != std::string::npos);
  // A user-space program is not a vmlinux.
  RunResult v = leakref(
      {"kernel", "--vmcore", dump().kdump, "--vmlinux", fixture_path("fx_structs"), "modules"});
  CHECK((v.status == 3 || v.status == 4));
  CHECK(v.err.find("fx_structs") != std::string::npos);
  // Damaged kdump files (libkdumpfile 0.5 crashed on most of these, in
  // kdump_free after its failed open or reading past the end of the file):
  // each is one error line naming the file and what is wrong, exit 3; a dump
  // whose page data was cut off says so and cannot start its walks (exit 4).
  std::string data = read_file(dump().kdump);
  REQUIRE(data.size() > (8 << 20));
  REQUIRE(data.compare(0, 8, "KDUMP   ") == 0);
  auto patched = [&](size_t off, uint64_t v, size_t width) {
    std::string d = data;
    std::memcpy(&d[off], &v, width);
    return d;
  };
  std::string page0 = data;
  size_t ps = page0.find("PAGESIZE=4096\n");
  REQUIRE(ps != std::string::npos);
  page0.replace(ps, 14, "PAGESIZE=0\n\n\n\n");
  // The VMCOREINFO ELF note's descriptor cut right after "PAGESIZE=": the
  // text around it still says 4096, libkdumpfile read 0 and asked malloc for
  // 2^63 bytes (found by fuzz_kdump).
  std::string notecut = data;
  {
    uint64_t noff, nsize;
    std::memcpy(&noff, &data[4096 + 48], 8);
    std::memcpy(&nsize, &data[4096 + 56], 8);
    REQUIRE(noff + nsize <= data.size());
    size_t vi = data.find(std::string("VMCOREINFO\0", 11), noff);
    REQUIRE(vi != std::string::npos);
    REQUIRE(vi < noff + nsize);
    size_t desc = vi + 12, p = data.find("PAGESIZE=", desc);
    REQUIRE(p != std::string::npos);
    uint32_t cut = static_cast<uint32_t>(p + 9 - desc);
    std::memcpy(&notecut[vi - 8], &cut, 4);  // the note header's descsz
  }
  struct Bad {
    const char* name;
    std::string bytes;
    int status;
    const char* says;
  } bad[] = {
      {"cut8", data.substr(0, 8), 3, "cut off in its header"},
      {"cut412", data.substr(0, 412), 3, "cut off in its header"},
      {"cut8192", data.substr(0, 8192), 3, "cut off before its page table"},
      {"block0", patched(428, 0, 4), 3, "block size 0"},
      {"blockbig", patched(428, 0x7fffffff, 4), 3, "block size 2147483647"},
      {"subhdrbig", patched(432, 0x7fffffff, 4), 3, "cut off before its page table"},
      {"bitmapbig", patched(436, 0xffffffff, 4), 3, "bitmap blocks"},
      {"mapnr64", patched(4096 + 96, 0xffffffffull, 8), 3, "page frames but its bitmaps hold"},
      {"vmcoreinfo-past-end", patched(4096 + 40, 1 << 30, 8), 3, "past its end"},
      {"version9", patched(8, 9, 4), 3, "header version 9"},
      {"pagesize0", page0, 3, "PAGESIZE=0"},
      {"note-pagesize-cut", notecut, 3, "PAGESIZE=0"},
      {"cut-pages", data.substr(0, data.size() / 2), 4, "the walk cannot start"},
  };
  for (const auto& b : bad) {
    std::string f = dir + "/" + b.name + ".kdump";
    write_file(f, b.bytes);
    for (const char* sub : {"inodes", "modules", "check"}) {
      RunResult t = leakref({"kernel", "--vmcore", f, "--vmlinux", dump().vmlinux, sub}, 300);
      INFO(b.name << " " << sub << ": status " << t.status << ", stderr: " << t.err);
      CHECK(t.status == b.status);
      CHECK(t.out.empty());
      CHECK(t.err.find(b.says) != std::string::npos);
      CHECK(t.err.find("leakref: error: ") != std::string::npos);
      if (b.status == 3) CHECK(t.err.rfind("leakref: error: " + f + ": ", 0) == 0);
    }
  }
  // The cut-off dump says why its walks cannot start.
  RunResult cw = leakref(
      {"kernel", "--vmcore", dir + "/cut-pages.kdump", "--vmlinux", dump().vmlinux, "modules"});
  CHECK(cw.err.find("dumped pages lie past the end of the file (it was cut off)") !=
        std::string::npos);
  // A FIFO as the dump is refused at once instead of waiting for a writer.
  std::string fifo = dir + "/fifo.kdump";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  RunResult ff = leakref({"kernel", "--vmcore", fifo, "--vmlinux", dump().vmlinux, "modules"}, 20);
  CHECK(!ff.timed_out);
  CHECK(ff.status == 3);
  CHECK(ff.err.find("is a FIFO, not a regular file") != std::string::npos);
  RunResult fv = leakref({"kernel", "--vmcore", dump().kdump, "--vmlinux", fifo, "modules"}, 20);
  CHECK(!fv.timed_out);
  CHECK(fv.status == 3);
  CHECK(fv.err.find(fifo + ": vmlinux is a FIFO, not a regular file") != std::string::npos);
  // Without --vmlinux it is looked for by the dump's release, and the error
  // says where (the -dbg package is extracted, not installed, here).
  if (access("/usr/lib/debug/boot/vmlinux-6.1.0-56-amd64", F_OK) != 0 &&
      dump().vmlinux.find("6.1.0-56-amd64") != std::string::npos) {
    RunResult nv = leakref({"kernel", "--vmcore", dump().kdump, "modules"});
    CHECK(nv.status == 4);
    CHECK(nv.err.find("/usr/lib/debug/boot/vmlinux-6.1.0-56-amd64") != std::string::npos);
  }
  // The flattened format QEMU writes is named, with the command that fixes it.
  std::string flat = dir + "/flat";
  write_file(flat, std::string("makedumpfile") + std::string(4096, '\0'));
  RunResult fl = leakref({"kernel", "--vmcore", flat, "--vmlinux", dump().vmlinux, "modules"});
  CHECK(fl.status == 3);
  CHECK(fl.err.find("makedumpfile -R") != std::string::npos);
}

// The bundled linux-vfs profile (data, no C++) against the C++ inode report:
// the same super blocks, every inode with the same i_count and as many
// aliases as that report lists dentries; ELF and kdump give the same answer.
TEST_CASE("kernel: the linux-vfs profile agrees with the inode report", "[kernel]") {
  NEED_DUMP();
  json ia = kernel_json(dump().pelf, {"inodes", "--all", "--json"});
  json p = kernel_json(dump().pelf, {"profile", "--profile", "linux-vfs", "--json"});
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
  CHECK(want.size() > 50000);
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
  CHECK(comparable(kernel_json(dump().kdump, {"profile", "--profile", "linux-vfs", "--json"})) ==
        comparable(p));
}

TEST_CASE("kernel: crash 8.0.2 with the extension agrees with crash's own output and the CLI",
          "[kernel]") {
  NEED_DUMP();
  Guest g = guest();
  json ie = kernel_json(dump().pelf, {"inodes", "--json"});
  json me = kernel_json(dump().pelf, {"modules", "--json"});
  json ce = kernel_json(dump().pelf, {"check", "--json"});
  const json& sb = leak_sb(ie, g.files);
  std::string head = sb["s_inodes"];
  std::string walk = "leakref walk --type \"struct inode\" --head " + head +
                     " --list-member i_sb_list --refcount i_count --show i_ino --json";
  std::string dir = tmp_dir() + "/ext";
  RunResult mk = run({"mkdir", "-p", dir});
  REQUIRE(mk.status == 0);
  std::vector<std::string> cmds = {
      "extend " + build_dir() + "/leakref.so",
      "!echo MARK ps",
      "ps lrholder lrchild",
      "leakref inodes --json > " + dir + "/inodes.json",
      "leakref modules --json > " + dir + "/modules.json",
      "leakref check --json > " + dir + "/check.json",
      "leakref profile --profile linux-vfs --json > " + dir + "/profile.json",
      walk + " > " + dir + "/walk.json",
      "list -o inode.i_sb_list -H " + head + " > " + dir + "/list.txt",
      // A symbol of a loaded module (binfmt_misc's format list), known to
      // crash and not to vmlinux: the empty list points at itself.
      "leakref walk --type \"struct list_head\" --head entries --array --count 1 --show "
      "next --json > " +
          dir + "/modsym.json",
      "!echo MARK usage",
      "leakref inodes --no-such-option",
      "!echo MARK nosym",
      "leakref walk --type int --head no_such_symbol_xyz --array --count 1",
      "leakref modules | head -n 1 > " + dir + "/head.txt",
      "!echo MARK end",
  };
  // crash's own view of the objects leakref reported.
  std::vector<std::pair<std::string, const json*>> held;
  for (const auto& i : sb["inodes"]) {
    if (i["files"].empty() && !i["flagged"].get<bool>()) continue;
    std::string a = i["addr"];
    cmds.push_back("!echo MARK inode " + a);
    cmds.push_back("struct inode.i_ino,i_count " + a);
    std::string d = i["dentries"][0]["addr"];
    cmds.push_back("!echo MARK dentry " + a);
    cmds.push_back("struct dentry.d_lockref " + d);
    for (const auto& f : i["files"]) {
      std::string fa = f["addr"];
      cmds.push_back("!echo MARK file " + fa);
      cmds.push_back("struct file.f_count " + fa);
    }
  }
  for (const auto& m : me["modules"]) {
    std::string a = m["addr"];
    cmds.push_back("!echo MARK module " + a);
    cmds.push_back("struct module.refcnt " + a);
  }
  RunResult r;
  crash_session(cmds, &r);
  INFO(r.err.substr(0, 4000));
  REQUIRE(r.status == 0);
  auto sec = sections(r.out);
  // The struct pid fix gave crash its task table back.
  CHECK(sec["ps"].find("lrholder") != std::string::npos);
  CHECK(sec["ps"].find("lrchild") != std::string::npos);
  // Extension == standalone, on the same dump.
  json xi = json::parse(read_file(dir + "/inodes.json"));
  CHECK(comparable(xi) == comparable(ie));
  check_inodes(xi, g);
  json xm = json::parse(read_file(dir + "/modules.json"));
  CHECK(comparable(xm) == comparable(me));
  check_modules(xm, g);
  CHECK(comparable(json::parse(read_file(dir + "/check.json"))) == comparable(ce));
  // The profile, found by name beside leakref.so, gives what it gives standalone.
  CHECK(comparable(json::parse(read_file(dir + "/profile.json"))) ==
        comparable(kernel_json(dump().pelf, {"profile", "--profile", "linux-vfs", "--json"})));
  // leakref walk visits exactly the addresses crash's list prints.
  json xw = json::parse(read_file(dir + "/walk.json"));
  std::set<uint64_t> ours, theirs;
  for (const auto& o : xw["objects"])
    ours.insert(std::stoull(o["addr"].get<std::string>(), nullptr, 16));
  std::istringstream ls(read_file(dir + "/list.txt"));
  std::string line;
  while (std::getline(ls, line))
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])))
      theirs.insert(std::stoull(line, nullptr, 16));
  CHECK(ours.size() == g.files + 1);
  CHECK(ours == theirs);
  json ms = json::parse(read_file(dir + "/modsym.json"));
  CHECK(ms["head_addr"].get<std::string>().rfind("0xffffffffc", 0) == 0);
  CHECK(ms["objects"][0]["fields"]["next"] == ms["head_addr"]);
  // Errors come back as crash-style messages, and `| head` stops the output.
  CHECK(r.out.find("exit status 2") != std::string::npos);
  // A missing symbol is an error (exit 4), not a crash abort: the session goes on.
  CHECK(r.out.find("no_such_symbol_xyz") != std::string::npos);
  CHECK(r.out.find("exit status 4") != std::string::npos);
  CHECK(read_file(dir + "/head.txt").rfind("MODULE ", 0) == 0);
  CHECK(read_file(dir + "/head.txt").find("vfat") == std::string::npos);
  // Every count leakref reported equals the one crash's `struct` prints.
  for (const auto& i : sb["inodes"]) {
    if (i["files"].empty() && !i["flagged"].get<bool>()) continue;
    std::string a = i["addr"];
    auto iv = crash_values(sec["inode " + a]);
    INFO("inode " << a << ": " << sec["inode " + a]);
    CHECK(iv["i_ino"] == i["ino"].get<int64_t>());
    CHECK(iv["counter"] == i["i_count"].get<int64_t>());
    auto dv = crash_values(sec["dentry " + a]);
    CHECK(dv["count"] == i["dentries"][0]["count"].get<int64_t>());
    for (const auto& f : i["files"]) {
      auto fv = crash_values(sec["file " + f["addr"].get<std::string>()]);
      CHECK(fv["counter"] == f["f_count"].get<int64_t>());
    }
  }
  for (const auto& m : me["modules"]) {
    auto mv = crash_values(sec["module " + m["addr"].get<std::string>()]);
    CHECK(mv["counter"] == m["refcnt"].get<int64_t>());
  }
}

TEST_CASE("kernel: Ctrl-C stops a long leakref command and crash goes on with its input",
          "[kernel]") {
  NEED_DUMP();
  json ie = kernel_json(dump().pelf, {"inodes", "--json"});
  // An array walk over 400 M bytes of the direct map: ~20 s uninterrupted.
  std::string base = ie["super_blocks"][0]["addr"];
  std::string dir = tmp_dir();
  std::string started = dir + "/walk-started";
  std::string f = write_cmds({
      "extend " + build_dir() + "/leakref.so",
      "!touch " + started,
      "leakref walk --type char --head " + base +
          " --array --count 400000000 --limit 400000000 --summary",
      "leakref modules vfat",
  });
  Background b = spawn(crash_argv(f));
  REQUIRE(wait_for_file(started, 300));
  usleep(1500 * 1000);
  auto t0 = std::chrono::steady_clock::now();
  kill(b.pid, SIGINT);
  int status = finish(b, 0, 120);  // signal 0: just wait for the exit
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string out = read_file(b.out_path) + read_file(b.err_path);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("stopped: interrupted") != std::string::npos);
  CHECK(out.find("leakref: interrupted") != std::string::npos);
  CHECK(out.find("vfat") != std::string::npos);  // the next command still ran
  CHECK(secs < 15);
}

// A kernel module leakref has no C++ for: a profile file alone (types from
// the module's .ko, roots SYMBOL@MODULE) finds exactly the references the
// module leaked and the rules it broke, standalone (ELF and kdump) and inside
// crash, and crash's own `struct` agrees with every refcount.
TEST_CASE("kernel: a profile file finds the lrlocks module's leaks, standalone and in crash",
          "[kernel]") {
  NEED_DUMP();
  auto truth = lrlocks_truth();
  REQUIRE(truth["ns"].size() == 2);
  REQUIRE(truth["res"].size() == 10);
  REQUIRE(truth["vc"].size() == 60);
  std::string prof = std::string(LR_SOURCE_DIR) + "/tests/profiles/lrlocks.toml";
  std::vector<std::string> args = {"profile", "--profile", prof, "--ko", dump().ko, "--json"};
  json j = kernel_json(dump().pelf, args);
  CHECK(j["profile"]["name"] == "lrlocks");
  check_lock_set(named_set(j, "namespaces"), truth["ns"], false);
  check_lock_set(named_set(j, "resources"), truth["res"], true);
  check_lock_set(named_set(j, "vcaches"), truth["vc"], true);
  int64_t granted = 0;
  for (const auto& r : truth["res"]) granted += r.granted;
  CHECK(named_set(j, "granted")["objects"].size() == static_cast<size_t>(granted));
  CHECK(comparable(kernel_json(dump().kdump, args)) == comparable(j));

  // Without the .ko the module's types are unknown: said, with where they are.
  RunResult r = leakref({"kernel", "--vmcore", dump().pelf, "--vmlinux", dump().vmlinux, "profile",
                         "--profile", prof});
  CHECK(r.status == 4);
  CHECK(r.err.find("struct ldlm_namespace") != std::string::npos);
  CHECK(r.err.find(".ko") != std::string::npos);
  // A .ko of another build of the module is refused, naming what differs.
  std::string dir = tmp_dir() + "/lrlocks-other";
  REQUIRE(run({"mkdir", "-p", dir}).status == 0);
  std::string src = read_file(std::string(LR_SOURCE_DIR) + "/fixtures/kernel/lrlocks.c");
  auto at = src.find("#define VCSIZE 16");
  REQUIRE(at != std::string::npos);
  src.replace(at, 17, "#define VCSIZE 17");
  write_file(dir + "/lrlocks.c", src);
  write_file(dir + "/Kbuild", "obj-m := lrlocks.o\n");
  RunResult mk = run(
      {"make", "-s", "-C", "/usr/src/linux-headers-" + dump().kver, "M=" + dir, "modules"}, 300);
  INFO(mk.err);
  REQUIRE(mk.status == 0);
  r = leakref({"kernel", "--vmcore", dump().pelf, "--vmlinux", dump().vmlinux, "profile",
               "--profile", prof, "--ko", dir + "/lrlocks.ko"});
  CHECK(r.status == 3);
  CHECK(r.err.find("does not match the loaded module lrlocks: afs_vhashT is 136 bytes in the "
                   "file and 128 in the dump") != std::string::npos);
  r = leakref({"kernel", "--vmcore", dump().pelf, "--vmlinux", dump().vmlinux, "walk", "--type",
               "int", "--head", "afs_vhashT@lrlocks", "--array", "--count", "1", "--ko",
               dump().vmlinux});
  CHECK(r.status == 3);
  CHECK(r.err.find("not a kernel module") != std::string::npos);
  // A FIFO named as the .ko is refused at once, never waited on.
  REQUIRE(run({"mkfifo", dir + "/fifo.ko"}).status == 0);
  r = leakref({"kernel", "--vmcore", dump().pelf, "--vmlinux", dump().vmlinux, "profile",
               "--profile", prof, "--ko", dir + "/fifo.ko"},
              60);
  CHECK(r.status == 3);
  CHECK(r.err.find("not a regular file") != std::string::npos);

  // Inside crash: `mod -s` gives the extension the module's types too.
  std::string out = tmp_dir() + "/lrlocks-crash.json";
  std::vector<std::string> cmds = {
      "extend " + build_dir() + "/leakref.so",
      "mod -s lrlocks " + dump().ko,
      "leakref profile --profile " + prof + " --json > " + out,
  };
  for (const char* kind : {"res", "vc"})
    for (const auto& o : truth[kind]) {
      cmds.push_back("!echo MARK " + o.addr);
      cmds.push_back(std::string(kind) == "res" ? "struct ldlm_resource.lr_refcount " + o.addr
                                                : "struct vcache.vrefCount " + o.addr);
    }
  crash_session(cmds, &r);
  INFO(r.err.substr(0, 4000));
  REQUIRE(r.status == 0);
  CHECK(comparable(json::parse(read_file(out))) == comparable(j));
  auto sec = sections(r.out);
  for (const char* kind : {"res", "vc"})
    for (const auto& o : truth[kind]) {
      INFO(o.addr << ": " << sec[o.addr]);
      CHECK(crash_values(sec[o.addr])["counter"] == o.refcount);
    }
}

// The README's kernel-module example, executed as written (addresses aside).
TEST_CASE("README: the kernel module profile example runs as written", "[kernel]") {
  NEED_DUMP();
  std::string part = readme_section("kmodule");
  REQUIRE(!part.empty());
  std::string dir = tmp_dir() + "/readme-kmodule";
  REQUIRE(run({"/bin/mkdir", "-p", dir}).status == 0);
  for (auto [from, to] : {std::pair{dump().pelf, "vmcore.pelf"},
                          {dump().vmlinux, "vmlinux"},
                          {dump().ko, "lrlocks.ko"}})
    REQUIRE(run({"/bin/ln", "-sf", from, dir + "/" + to}).status == 0);
  write_file(dir + "/lrlocks.toml",
             read_file(std::string(LR_SOURCE_DIR) + "/tests/profiles/lrlocks.toml"));
  const std::regex addr("0x[0-9a-f]{6,}");
  size_t commands = 0;
  for (const auto& [cmd, want] : readme_commands(part)) {
    INFO(cmd);
    RunResult r =
        run({"/bin/bash", "-c", "cd '" + dir + "' && PATH='" + build_dir() + "':$PATH " + cmd});
    // The README block ends at its last line; the set's closing blank line is not shown.
    auto trim = [](std::string t) {
      while (!t.empty() && t.back() == '\n') t.pop_back();
      return t;
    };
    CHECK(std::regex_replace(trim(r.out), addr, "0xADDR") ==
          std::regex_replace(trim(want), addr, "0xADDR"));
    ++commands;
  }
  CHECK(commands == 2);
}

// Every EXAMPLE in `crash> help leakref` runs as written (one failed with
// "type 'inode' not found"; another needed an address from some dump).
TEST_CASE("kernel: the examples in crash's help leakref run as written", "[kernel]") {
  NEED_DUMP();
  RunResult help;
  crash_session({"extend " + build_dir() + "/leakref.so", "help leakref"}, &help);
  INFO(help.out << help.err);
  REQUIRE(help.status == 0);
  size_t ex = help.out.find("EXAMPLE");
  REQUIRE(ex != std::string::npos);
  // "    crash> leakref ... \" continued on the next lines.
  std::vector<std::string> examples;
  std::istringstream in(help.out.substr(ex));
  std::string line;
  bool cont = false;
  while (std::getline(in, line)) {
    size_t p = line.find("crash> leakref");
    if (!cont && p == std::string::npos) continue;
    std::string part = cont ? line : line.substr(p + 7);
    while (!part.empty() && part[0] == ' ' && cont) part.erase(0, 1);
    cont = !part.empty() && part.back() == '\\';
    if (cont) part.pop_back();
    if (p != std::string::npos && !examples.empty() && examples.back().empty()) examples.pop_back();
    if (p != std::string::npos)
      examples.push_back(part);
    else
      examples.back() += " " + part;
  }
  REQUIRE(examples.size() >= 3);
  // man leakref-crash's EXAMPLES too, as written.
  size_t from_help = examples.size();
  for (const auto& m : man_examples("leakref-crash.7"))
    if (m.rfind("crash> ", 0) == 0) examples.push_back(m.substr(7));
  CHECK(examples.size() == from_help + 3);
  std::vector<std::string> cmds = {"extend " + build_dir() + "/leakref.so"};
  for (size_t i = 0; i < examples.size(); ++i) {
    cmds.push_back("!echo MARK ex" + std::to_string(i));
    cmds.push_back(examples[i]);
  }
  RunResult r;
  crash_session(cmds, &r);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto secs = sections(r.out);
  for (size_t i = 0; i < examples.size(); ++i) {
    INFO(examples[i]);
    const std::string& out = secs["ex" + std::to_string(i)];
    CHECK(out.find("leakref: error") == std::string::npos);
    CHECK(out.size() > 40);  // each prints a report, not nothing
  }
  CHECK(r.err.find("leakref: error") == std::string::npos);
}

// `man leakref`'s kernel example as written, on the dump and its vmlinux;
// it lists what `inodes --flagged --json` counts.
TEST_CASE("man leakref: the kernel example runs as written", "[kernel][docs]") {
  NEED_DUMP();
  int examples = 0;
  for (std::string cmd : man_examples("leakref.1")) {
    if (cmd.rfind("leakref kernel ", 0) != 0) continue;
    ++examples;
    REQUIRE(cmd.find("--vmcore vmcore --vmlinux vmlinux ") != std::string::npos);
    cmd.replace(cmd.find("--vmcore vmcore"), 15, "--vmcore '" + dump().kdump + "'");
    cmd.replace(cmd.find("--vmlinux vmlinux"), 17, "--vmlinux '" + dump().vmlinux + "'");
    RunResult r = run({"sh", "-c", "PATH='" + build_dir() + "':$PATH " + cmd}, 300);
    INFO(cmd << "\n" << r.err);
    REQUIRE(r.status == 0);
    json j = kernel_json(dump().kdump, {"inodes", "--flagged", "--json"});
    uint64_t flagged = j["summary"]["flagged"];
    REQUIRE(flagged > 0);  // the guest leaks file references on purpose
    CHECK(r.out.find(fmt::format("{} flagged", flagged)) != std::string::npos);
  }
  CHECK(examples == 1);
}
