// leakref kernel slab on real Debian 5.10, 6.1, 6.12, 7.x and arm64 vmcores, against truth
// from outside: /proc/slabinfo as the guest printed it right before each dump
// (every cache's slabs, objects and SLUB's active count), crash 8.0.2's own
// `kmem -S` on 5.10 and 6.1 (every object it lists, every slab's allocated count, every
// cache's totals), the inode report (every shmem inode object is an inode it
// finds), and the guest's own manifest (the SCM_RIGHTS file lrholder opened
// with openat(2), whose allocation stack must say so).
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "harness.hpp"
#include "kernel_guest.hpp"

using namespace lrtest;
using namespace kguest;
using nlohmann::json;

namespace {

uint64_t hexval(const json& j) {
  return std::stoull(j.get<std::string>(), nullptr, 16);
}

}  // namespace

TEST_CASE(
    "kernel slab: every cache against the guest's /proc/slabinfo, on 5.10, 6.1, 6.12, 7.x and "
    "arm64",
    "[kernel][slab]") {
  for (const auto& kv : kernels()) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      json a = kernel_json(d, d.pelf, {"slab", "--json"});
      CHECK(a["schema"] == "leakref.kernel.slab/1");
      CHECK(a["summary"]["scanned"] == true);
      check_slabinfo(a, slabinfo(d));
      // The kdump file through libkdumpfile says the same.
      json k = kernel_json(d, kdump_or_elf(d), {"slab", "--json"});
      CHECK(comparable(k) == comparable(a));
      // Moment B (25 more files held): its own slabinfo.
      json b = kernel_json(d, d.pelf_b, {"slab", "--json"});
      check_slabinfo(b, slabinfo(d, true));
      // filp carries allocation tracks (slub_debug=U,filp): its full slabs
      // are listed, so its objects come from SLUB's lists; the page array
      // scan gives the same ones.
      json f = kernel_json(d, d.pelf, {"slab", "--cache", "filp", "--json"});
      json fs = kernel_json(d, d.pelf, {"slab", "--cache", "filp", "--scan-pages", "--json"});
      CHECK(f["summary"]["scanned"] == false);
      CHECK(f["objects"] == fs["objects"]);
      CHECK(f["objects"].size() == caches_of(a)["filp"]["allocated"]);
      CHECK(caches_of(f)["filp"]["store_user"] == true);
      for (const auto& o : f["objects"]) CHECK(o.contains("alloc"));
    }
}

// Every shmem inode object (shmem_inode_info) of the cache is an inode the
// inode report finds on its super block, and every inode of those super
// blocks is one of the cache's objects.
TEST_CASE("kernel slab: shmem_inode_cache objects are the inodes `inodes` finds",
          "[kernel][slab]") {
  for (const auto& kv : kernels()) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      json w =
          kernel_json(d, d.pelf,
                      {"slab", "--cache", "shmem_inode_cache", "--type", "struct shmem_inode_info",
                       "--show", "vfs_inode.i_sb,vfs_inode.i_ino", "--json"});
      CHECK(w["schema"] == "leakref.walk/1");
      CHECK(w["mode"] == "slab");
      std::set<std::pair<uint64_t, uint64_t>> from_slab;
      std::set<uint64_t> sbs;
      for (const auto& o : w["objects"]) {
        uint64_t sb = hexval(o["fields"]["vfs_inode.i_sb"]);
        from_slab.insert({sb, o["fields"]["vfs_inode.i_ino"].get<uint64_t>()});
        sbs.insert(sb);
      }
      REQUIRE(from_slab.size() > 40000);  // the guest's tmpfs files
      json ia = kernel_json(d, d.pelf, {"inodes", "--all", "--json"});
      std::set<std::pair<uint64_t, uint64_t>> from_sbs;
      for (const auto& sb : ia["super_blocks"])
        if (sbs.count(hexval(sb["addr"])))
          for (const auto& i : sb["inodes"])
            from_sbs.insert({hexval(sb["addr"]), i["ino"].get<uint64_t>()});
      CHECK(from_slab.size() == w["objects"].size());
      CHECK(from_slab == from_sbs);
    }
}

// The file lrholder sent over a unix socket and closed (f00060) is held only
// by the queued SCM_RIGHTS message: `inodes` flags its dentry and finds the
// struct file among filp's objects, with the stack that allocated it: the
// openat(2) path, in lrholder's process.
TEST_CASE("kernel slab: the SCM_RIGHTS file's allocation stack names the openat path",
          "[kernel][slab]") {
  for (const auto& kv : kernels()) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      Guest g = guest(d);
      REQUIRE(g.holder_pid > 0);
      json j = kernel_json(d, kdump_or_elf(d), {"inodes", "--flagged", "--json"});
      CHECK(j["summary"]["flagged"] == 1);
      CHECK(j["summary"]["unheld_files"] == 1);
      const json& sb = leak_sb(j, g.files);
      const json* f60 = find_inode(sb, 62);
      REQUIRE(f60);
      const json& den = (*f60)["dentries"][0];
      CHECK(den["name"] == "f00060");
      CHECK(den["unexplained"] == 1);
      REQUIRE(den["unheld_files"].size() == 1);
      const json& file = den["unheld_files"][0];
      CHECK(file["unheld"] == true);
      CHECK(file["f_count"] == 1);
      CHECK(file["dentry"] == den["addr"]);
      CHECK(file["holders"].empty());
      REQUIRE(file.contains("alloc"));
      CHECK(file["alloc"]["pid"] == g.holder_pid);
      std::vector<std::string> frames;
      for (const auto& f : file["alloc"]["stack"]) {
        std::string s = f;
        frames.push_back(s.substr(0, s.find('+')));
      }
      INFO(file.dump());
      // Innermost first: the allocation inside alloc_empty_file, down to the
      // syscall's entry.
      const std::vector<std::string> want = openat_frames(d);
      size_t at = 0;
      for (const auto& f : frames)
        if (at < want.size() && f == want[at]) ++at;
      CHECK(at == want.size());
      REQUIRE(!frames.empty());
      CHECK(frames.back().rfind(syscall_entry(d), 0) == 0);
      // The text report says the same.
      RunResult t = leakref(
          {"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "inodes", "--flagged"}, 300);
      CHECK(t.out.find("held by no task, mapping or exe") != std::string::npos);
      CHECK(t.out.find(fmt::format("allocated by pid {}", g.holder_pid)) != std::string::npos);
      CHECK(t.out.find("do_sys_openat2") != std::string::npos);
      // The walk machinery over filp's objects finds exactly that file.
      json w = kernel_json(d, d.pelf,
                           {"slab", "--cache", "filp", "--type", "struct file", "--where",
                            "f_path.dentry == " + den["addr"].get<std::string>(), "--refcount",
                            file_count_member(d), "--json"});
      REQUIRE(w["objects"].size() == 1);
      CHECK(w["objects"][0]["addr"] == file["addr"]);
      // --stacks groups filp's objects by stack: the openat path holds most.
      json st = kernel_json(d, d.pelf, {"slab", "--cache", "filp", "--stacks", "--json"});
      REQUIRE(!st["stacks"].empty());
      uint64_t total = 0;
      for (const auto& s : st["stacks"]) total += s["objects"].get<uint64_t>();
      CHECK(total == caches_of(st)["filp"]["allocated"]);
      bool openat = false;
      for (const auto& f : st["stacks"][0]["frames"])
        openat |= f.get<std::string>().rfind(openat_frames(d)[4], 0) == 0;
      CHECK(openat);
    }
}

namespace {

// One cache's section of crash's `kmem -S NAME`.
struct KmemS {
  int64_t allocated = -1, total = -1, slabs = -1;
  std::map<uint64_t, int64_t> slab_allocated;           // every slab line
  std::map<uint64_t, std::set<uint64_t>> slab_objects;  // slabs whose objects are listed
};

KmemS parse_kmem_s(const std::string& text) {
  KmemS k;
  std::regex cache(R"(^[0-9a-f]{16}\s+\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s*$)");
  std::regex slab(R"(^\s+([0-9a-f]{16})\s+[0-9a-f]{16}\s+\d+\s+\d+\s+(\d+)\s+\d+\s*$)");
  std::regex used(R"(^\s+\[([0-9a-f]{16})\]\s*$)");
  std::istringstream in(text);
  std::smatch m;
  uint64_t cur = 0;
  for (std::string line; std::getline(in, line);) {
    if (k.total < 0 && std::regex_match(line, m, cache)) {
      k.allocated = std::stoll(m[1]);
      k.total = std::stoll(m[2]);
      k.slabs = std::stoll(m[3]);
    } else if (std::regex_match(line, m, slab)) {
      cur = std::stoull(m[1], nullptr, 16);
      k.slab_allocated[cur] = std::stoll(m[2]);
    } else if (std::regex_match(line, m, used)) {
      k.slab_objects[cur].insert(std::stoull(m[1], nullptr, 16));
    } else if (line.find("FREE / [ALLOCATED]") != std::string::npos) {
      k.slab_objects[cur];  // this slab's objects are listed, even if none is allocated
    }
  }
  return k;
}

}  // namespace

namespace {

// Every cache of slab report `a` (with --objects) against its section of
// crash's `kmem -S` output: totals, every slab's allocated count, and the
// objects of every slab crash lists object by object.
void compare_kmem_s(const json& a, std::map<std::string, std::string>& sec) {
  std::map<std::string, std::map<uint64_t, std::set<uint64_t>>> ours;  // cache -> slab -> objects
  for (const auto& o : a["objects"]) ours[o["cache"]][hexval(o["slab"])].insert(hexval(o["addr"]));
  size_t listed = 0, counted = 0;
  for (const auto& [n, c] : caches_of(a)) {
    INFO(n << ":\n" << sec[n].substr(0, 3000));
    KmemS k = parse_kmem_s(sec[n]);
    REQUIRE(k.total >= 0);
    CHECK(k.allocated == c["allocated"]);
    CHECK(k.total == c["objects"]);
    CHECK(k.slabs == c["slabs"]);
    for (const auto& [slab, n_alloc] : k.slab_allocated) {
      auto it = ours[n].find(slab);
      size_t mine = it == ours[n].end() ? 0 : it->second.size();
      CHECK(static_cast<int64_t>(mine) == n_alloc);
      ++counted;
    }
    for (const auto& [slab, objs] : k.slab_objects) {
      CHECK(objs == ours[n][slab]);
      listed += objs.size();
    }
  }
  CHECK(counted > 100);
  CHECK(listed > 100);  // crash listed objects of CPU slabs address for address
}

using Session =
    std::function<void(const std::vector<std::string>&, RunResult*, const std::string&)>;

// In one crash session (`session`: bookworm's crash or sid's) with the
// extension `ext`: its report equal to the CLI's, and every cache against
// crash's own kmem -S.
void check_kmem_s(const Dump& d, const std::string& ext, const Session& session) {
  json a = kernel_json(d, d.pelf, {"slab", "--objects", "--json"});
  auto caches = caches_of(a);
  std::string dir = tmp_dir() + "/kslab";
  REQUIRE(run({"mkdir", "-p", dir}).status == 0);
  std::vector<std::string> cmds = {"extend " + ext,
                                   "leakref slab --objects --json > " + dir + "/slab.json",
                                   // the session's slab heads, kept from the first scan
                                   "leakref slab --objects --json > " + dir + "/slab2.json",
                                   "leakref slab --cache dentry --json > " + dir + "/dentry.json"};
  for (const auto& [n, c] : caches) {
    cmds.push_back("!echo MARK " + n);
    cmds.push_back("kmem -S " + n);
  }
  RunResult r;
  session(cmds, &r, d.kernel);
  INFO(r.err.substr(0, 4000));
  REQUIRE(r.status == 0);
  CHECK(comparable(json::parse(read_file(dir + "/slab.json"))) == comparable(a));
  // Later commands of the session read only the slab heads the first scan
  // found: the same report, and one cache's objects as the whole report has.
  CHECK(comparable(json::parse(read_file(dir + "/slab2.json"))) == comparable(a));
  {
    json dj = json::parse(read_file(dir + "/dentry.json"));
    CHECK(dj["summary"]["pages"] == a["summary"]["pages"]);
    std::set<uint64_t> got, want;
    for (const auto& o : dj["objects"]) got.insert(hexval(o["addr"]));
    for (const auto& o : a["objects"])
      if (o["cache"] == "dentry") want.insert(hexval(o["addr"]));
    CHECK(want.size() > 1000);
    CHECK(got == want);
  }
  auto sec = sections(r.out);
  compare_kmem_s(a, sec);
}

}  // namespace

// Every cache of the 5.10 and 6.1 dumps, address for address as crash's own `kmem -S`
// lists them (CPU slabs and CPU partial slabs object by object; node partial
// and tracked full slabs as counts), its totals as `kmem -S` heads them, and
// the extension's report inside the same session equal to the CLI's.
TEST_CASE("kernel slab on 5.10 and 6.1: every cache's objects as crash's kmem -S lists them",
          "[kernel][slab]") {
  NEED_CRASH();
  for (const char* kv : {"5.10", "6.1"}) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      check_kmem_s(d, build_dir() + "/leakref.so", crash_session);
    }
}

// The 6.12 dump, which bookworm's crash cannot open, in the newest crash
// Debian ships (sid's 9.x, run in a tree of sid's packages) with the
// extension built against its defs.h: the extension's report equal to the
// CLI's, and every cache's objects as crash's own `kmem -S` lists them.
TEST_CASE("kernel slab on 6.12: sid's crash 9 with the extension built for it, against its kmem -S",
          "[kernel][slab][crash-sid]") {
  const Dump& d = dump("6.12");
  NEED_KERNEL(d);
  std::string why;
  std::string ext = sid_extension(&why);
  INFO(why);
  REQUIRE(!ext.empty());
  check_kmem_s(d, ext, sid_crash_session);
}

// sid's crash 9.x cannot open sid's own 7.x kernel's dump (7.x dropped
// struct module's num_gpl_syms): the README says so; the standalone CLI
// reads it (the 7.x sections of the tests above).
TEST_CASE("kernel: sid's crash 9 stops on a 7.x dump as the README says",
          "[kernel][slab][crash-sid]") {
  const Dump& d = dump("7.x");
  NEED_KERNEL(d);
  RunResult r;
  sid_crash_session({"sys"}, &r, d.kernel);
  std::string all = r.out + r.err;
  INFO(all.substr(all.size() > 3000 ? all.size() - 3000 : 0));
  CHECK(r.status == 1);
  CHECK(all.find("invalid structure member offset: module_num_gpl_syms") != std::string::npos);
  CHECK(all.find("crash> ") == std::string::npos);
  std::string readme = lrtest::docs_text();
  CHECK(readme.find("invalid structure member offset: module_num_gpl_syms") != std::string::npos);
}

// crash 8.0.2 (bookworm's) cannot open a 6.12 dump: the README says what it
// does; leakref is the tool a Debian 12 user has there.
TEST_CASE("kernel: crash 8.0.2 stops on a 6.12 dump as the README says", "[kernel][slab]") {
  const Dump& d = dump("6.12");
  NEED_KERNEL(d);
  if (!have_program("crash")) LR_SKIP("crash is not installed (make test installs it)");
  std::string cmd = write_cmds({"sys"});
  // It exits 1 right after gdb's banner: it does not find the KASLR offset
  // (where KASLR put the kernel decides whether it then says "do not match!"
  // or nothing), and never reaches a prompt ...
  RunResult r = run(
      {"timeout", "-k", "5", "300", "crash", "--no_crashrc", d.vmlinux, d.pelf, "-i", cmd}, 320);
  std::string all = r.out + r.err;
  INFO(all.substr(all.size() > 3000 ? all.size() - 3000 : 0));
  CHECK(r.status == 1);
  size_t banner = all.find("Type \"apropos word\"");
  REQUIRE(banner != std::string::npos);
  std::string after = all.substr(banner);
  CHECK(after.find("crash> ") == std::string::npos);
  CHECK(after.find("SYSTEM MAP") == std::string::npos);
  // ... and given the offset (VMCOREINFO's KERNELOFFSET) it stops at 6.4's
  // new struct module layout.
  RunResult ko = run(
      {"/bin/sh", "-c", "grep -a -m1 -o 'KERNELOFFSET=[0-9a-f]*' '" + d.pelf + "' | cut -d= -f2"});
  std::string off = ko.out.substr(0, ko.out.find('\n'));
  REQUIRE(!off.empty());
  RunResult k = run({"timeout", "-k", "5", "300", "crash", "--no_crashrc", "--kaslr=0x" + off,
                     d.vmlinux, d.pelf, "-i", cmd},
                    320);
  CHECK(k.status == 1);
  CHECK((k.out + k.err).find("invalid structure member offset: module_core_size") !=
        std::string::npos);
  std::string readme = lrtest::docs_text();
  CHECK(readme.find("invalid structure member offset: module_core_size") != std::string::npos);
  CHECK(readme.find("do not match!") != std::string::npos);
}

// The README's 6.12 example, executed as written on the 6.12 dump (addresses,
// pids and jiffies aside: they differ between boots; and in the diff, the
// caches the guest's own kernel threads use, which move by a few objects
// between the two moments on some boots and not others: how many classes
// moved, and which shrank).
TEST_CASE("README: the 6.12 slab and inodes example runs as written", "[kernel][slab][docs]") {
  const Dump& d = dump("6.12");
  NEED_KERNEL(d);
  auto norm = [](std::string t) {
    t = std::regex_replace(t, std::regex("0x[0-9a-f]{5,}"), "0xADDR");
    t = std::regex_replace(t, std::regex("(pid|jiffies) [0-9]+"), "$1 N");
    t = std::regex_replace(t, std::regex("lrholder\\([0-9]+\\)"), "lrholder(N)");
    // The kernel's own worker threads come and go: a guest booted again
    // can have one task more than the README's.
    t = std::regex_replace(t, std::regex("\n[0-9]+ tasks, "), "\nN tasks, ");
    t = std::regex_replace(t, std::regex("[0-9]+ grew, [0-9]+ shrank, [0-9]+ unchanged"),
                           "N grew, N shrank, N unchanged");
    t = std::regex_replace(t, std::regex("first 3 of [0-9]+;"), "first 3 of N;");
    // How a cache's slabs split between SLUB's partial and full lists (the
    // row under the cache's) depends on which slab each allocation landed on
    // in this boot; the totals above it do not.
    t = std::regex_replace(t, std::regex("( [0-9]+ +[0-9]+ +)[0-9]+( +)[0-9]+( +[0-9]+  \\[)"),
                           "$1N$2N$3");
    // Which of the kernel's own caches shrank differs between boots.
    t = std::regex_replace(t, std::regex("\nshrank most[^\n]*\n([^\n]+\n)+"), "\n");
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  };
  CHECK(run_doc_section("kslab",
                        {{"vmcore-6.12.pelf", d.pelf},
                         {"vmlinux-6.12", d.vmlinux},
                         {"vmcore-6.12-b.pelf", d.pelf_b}},
                        norm) == 4);
}

namespace {

// An ELF vmcore's file offsets by virtual address (harness: elf_offset).
struct ElfSegs {
  int fd;
  explicit ElfSegs(const std::string& path) : fd(::open(path.c_str(), O_RDONLY)) {}
  ~ElfSegs() {
    if (fd >= 0) ::close(fd);
  }
  ElfSegs(const ElfSegs&) = delete;
  ElfSegs& operator=(const ElfSegs&) = delete;
  uint64_t offset(uint64_t va) const {
    const uint64_t o = elf_offset(fd, va, 1);
    if (!o) FAIL("virtual address " << std::hex << va << " is not in the dump");
    return o;
  }
};

// A copy of a dump, read and patched at virtual addresses.
struct Patched {
  std::string path;
  ElfSegs segs;
  std::fstream f;
  Patched(const std::string& from, const std::string& to)
      : path((run({"cp", from, to}, 300), to)),
        segs(to),
        f(to, std::ios::in | std::ios::out | std::ios::binary) {}
  uint64_t get(uint64_t va, int width = 8) {
    uint64_t v = 0;
    f.seekg(static_cast<std::streamoff>(segs.offset(va)));
    f.read(reinterpret_cast<char*>(&v), width);
    return v;
  }
  void put(uint64_t va, uint64_t v, int width = 8) {
    f.seekp(static_cast<std::streamoff>(segs.offset(va)));
    f.write(reinterpret_cast<const char*>(&v), width);
    f.flush();
  }
};

// Member offsets from gdb's reading of the same vmlinux (an outside oracle).
std::map<std::string, uint64_t> gdb_offsets(const std::string& vmlinux,
                                            const std::vector<std::string>& members) {
  std::string cmds;
  for (const auto& m : members) {
    auto dot = m.find('.');
    cmds += "print (long)&((struct " + m.substr(0, dot) + " *)0)->" + m.substr(dot + 1) + "\n";
  }
  std::string f = tmp_dir() + "/offsets.gdb";
  write_file(f, cmds);
  RunResult r = run({"gdb", "-q", "-batch", "-x", f, vmlinux}, 300);
  std::map<std::string, uint64_t> out;
  std::regex v(R"(\$(\d+) = (\d+))");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), v); it != std::sregex_iterator();
       ++it)
    out[members.at(std::stoul((*it)[1]) - 1)] = std::stoull((*it)[2]);
  REQUIRE(out.size() == members.size());
  return out;
}

bool has_warning(const json& j, const std::string& a, const std::string& b = "") {
  for (const auto& w : j["warnings"]) {
    std::string s = w;
    if (s.find(a) != std::string::npos && s.find(b) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

// A dump whose slab data is damaged where the new paths read it: a freelist
// pointer to nowhere, a freelist that loops, a node partial list that loops,
// a slab page claiming a cache that does not exist, a cache of impossible
// size, and an allocation track with a stack depot handle to nowhere. Each is
// a warning naming what is wrong (or, for the handle, the stack's error), the
// rest of the report stands, and nothing hangs.
TEST_CASE("kernel slab: hostile dumps give bounded results with warnings",
          "[kernel][slab][hostile]") {
  const Dump& d = dump("6.1");
  NEED_KERNEL(d);
  json all = kernel_json(d, d.pelf, {"slab", "--objects", "--json"});
  auto caches = caches_of(all);
  // cache -> slab on a node (or CPU) partial list -> its allocated objects
  std::map<std::string, std::map<uint64_t, std::set<uint64_t>>> partial, cpu_partial;
  std::map<std::string, uint64_t> other_slab;
  for (const auto& o : all["objects"]) {
    uint64_t slab = hexval(o["slab"]), a = hexval(o["addr"]);
    if (o["where"] == "node-partial") partial[o["cache"]][slab].insert(a);
    if (o["where"] == "cpu-partial") cpu_partial[o["cache"]][slab].insert(a);
    if (o["where"] == "other") other_slab[o["cache"]] = slab;
  }
  auto off = gdb_offsets(d.vmlinux, {"slab.slab_list", "slab.next", "slab.freelist",
                                     "slab.slab_cache", "kmem_cache.size", "kmem_cache.random"});
  Patched p(d.pelf, tmp_dir() + "/hostile-slab.pelf");
  std::set<std::string> used;
  // A cache with a slab on `lists` holding free objects (and not used yet).
  auto pick = [&](const std::map<std::string, std::map<uint64_t, std::set<uint64_t>>>& lists,
                  size_t min_slabs, size_t min_free) -> std::pair<std::string, uint64_t> {
    for (const auto& [n, slabs] : lists)
      if (!used.count(n) && slabs.size() >= min_slabs && n != "filp")
        for (const auto& [s, objs] : slabs)
          if (caches[n]["objects_per_slab"].get<size_t>() - objs.size() >= min_free) {
            used.insert(n);
            return {n, s};
          }
    FAIL("no cache with a partial slab to damage");
    return {};
  };
  // 3. A node partial list whose slab links to itself, and a CPU partial
  // list whose slab is its own next.
  auto [c3, s3] = pick(partial, 1, 0);
  p.put(s3 + off["slab.slab_list"], s3 + off["slab.slab_list"]);
  auto [c3c, s3c] = pick(cpu_partial, 1, 0);
  p.put(s3c + off["slab.next"], s3c);
  // 1. A free pointer to nowhere.
  auto [c1, s1] = pick(cpu_partial, 1, 2);
  uint64_t head1 = p.get(s1 + off["slab.freelist"]);
  REQUIRE(head1);
  p.put(head1 + caches[c1]["free_pointer_offset"].get<uint64_t>(), 0x4141414141414141ull);
  // 2. A free object whose (hardened) pointer names itself.
  auto [c2, s2] = pick(cpu_partial, 1, 1);
  uint64_t head2 = p.get(s2 + off["slab.freelist"]);
  uint64_t fpo2 = caches[c2]["free_pointer_offset"];
  uint64_t random2 = p.get(hexval(caches[c2]["addr"]) + off["kmem_cache.random"]);
  p.put(head2 + fpo2, head2 ^ random2 ^ __builtin_bswap64(head2 + fpo2));
  // 4. A slab page naming a cache that is not on slab_caches.
  std::string c4;
  for (const auto& [n, s] : other_slab)
    if (!used.count(n)) c4 = n;
  REQUIRE(!c4.empty());
  used.insert(c4);
  p.put(other_slab[c4] + off["slab.slab_cache"], hexval(caches[c4]["addr"]) + 0x40);
  // 5. A cache of size 0.
  std::string c5;
  for (const auto& [n, c] : caches)
    if (!used.count(n) && c["slabs"].get<uint64_t>() > 0 && n.rfind("kmalloc-", 0) == 0) c5 = n;
  REQUIRE(!c5.empty());
  p.put(hexval(caches[c5]["addr"]) + off["kmem_cache.size"], 0, 4);
  // 6. The SCM_RIGHTS file's allocation track: a handle to no pool.
  json ino = kernel_json(d, d.pelf, {"inodes", "--flagged", "--json"});
  const json& file =
      (*find_inode(leak_sb(ino, guest(d).files), 62))["dentries"][0]["unheld_files"][0];
  uint64_t faddr = hexval(file["addr"]);
  uint32_t handle = file["alloc"]["handle"];
  bool patched = false;
  for (uint64_t a = faddr; a < faddr + caches["filp"]["size"].get<uint64_t>() && !patched; a += 4)
    if (p.get(a, 4) == handle) {
      p.put(a, 0x7ffffff0u, 4);
      patched = true;
    }
  REQUIRE(patched);
  // 7. max_pfn at the largest value leakref takes (2^40): the struct page
  // scan stops at the first 2^28 unreadable struct pages in a row, with a
  // warning, instead of making 2^34 failed reads.
  {
    RunResult ko = run({"/bin/sh", "-c",
                        "grep -a -m1 -o 'KERNELOFFSET=[0-9a-f]*' '" + d.pelf + "' | cut -d= -f2"});
    RunResult sym = run({"gdb", "-q", "-batch", "-ex", "print/x (long)&max_pfn", d.vmlinux}, 300);
    std::smatch m;
    REQUIRE(std::regex_search(sym.out, m, std::regex(R"(= (0x[0-9a-f]+))")));
    uint64_t at = std::stoull(m[1].str(), nullptr, 16) +
                  std::stoull(ko.out.substr(0, ko.out.find('\n')), nullptr, 16);
    REQUIRE(p.get(at) < (uint64_t{1} << 28));  // this guest's real max_pfn
    p.put(at, uint64_t{1} << 40);
  }

  RunResult r =
      leakref({"kernel", "--vmcore", p.path, "--vmlinux", d.vmlinux, "slab", "--json"}, 120);
  INFO(r.err);
  REQUIRE(!r.timed_out);
  REQUIRE(r.status == 0);
  json j = r.json();
  INFO(j["warnings"].dump(1));
  // (the damaged pointer is named as decoded: XORed with the cache's secret)
  CHECK(has_warning(j, c1 + ": slab " + fmt::format("{:#x}", s1) + ": slab freelist reaches 0x",
                    "not an object of the slab"));
  CHECK(has_warning(j, c2 + ": slab " + fmt::format("{:#x}", s2),
                    fmt::format("freelist loops back to {:#x}", head2)));
  CHECK(has_warning(j, c3 + ": node partial list walk stopped"));
  CHECK(has_warning(j, c3c + ": cpu 0 partial list loops at " + fmt::format("{:#x}", s3c)));
  CHECK(has_warning(j, fmt::format("slab page {:#x}", other_slab[c4]), "no cache on slab_caches"));
  CHECK(has_warning(j, c5 + "): size 0", "not a cache SLUB could make"));
  CHECK(has_warning(j, "struct page array: the 268435456 struct pages from pfn",
                    "before max_pfn 0x10000000000 (corrupt?)"));
  // The damaged freelists' objects after the damage count as allocated: never fewer.
  auto after = caches_of(j);
  CHECK(after[c1]["allocated"].get<uint64_t>() > caches[c1]["allocated"].get<uint64_t>());
  CHECK(after[c1]["allocated"].get<uint64_t>() + after[c1]["free"].get<uint64_t>() ==
        caches[c1]["objects"].get<uint64_t>());
  // Caches nobody damaged are reported exactly as before.
  CHECK(after["kmem_cache"] == caches["kmem_cache"]);
  // --fail-on warning makes it a finding.
  RunResult fw = leakref(
      {"kernel", "--vmcore", p.path, "--vmlinux", d.vmlinux, "slab", "--fail-on", "warning"}, 120);
  CHECK(fw.status == 1);
  // The bad handle: the file is still found and flagged, its stack says why it is missing.
  json hi = json::parse(leakref({"kernel", "--vmcore", p.path, "--vmlinux", d.vmlinux, "inodes",
                                 "--flagged", "--json"},
                                120)
                            .out);
  const json& hf = (*find_inode(leak_sb(hi, guest(d).files), 62))["dentries"][0]["unheld_files"][0];
  CHECK(hf["addr"] == file["addr"]);
  CHECK(hf["alloc"]["stack"].empty());
  CHECK(hf["alloc"]["stack_error"].get<std::string>().find("stack depot handle 0x7ffffff0") !=
        std::string::npos);
  json st = json::parse(leakref({"kernel", "--vmcore", p.path, "--vmlinux", d.vmlinux, "slab",
                                 "--cache", "filp", "--stacks", "--top", "100", "--json"},
                                120)
                            .out);
  bool said = false;
  for (const auto& s : st["stacks"])
    said |= s["handle"] == 0x7ffffff0u && s.contains("error") && s["frames"].empty();
  CHECK(said);
}

// Two dumps of one guest, between which lrholder opened and held 25 more
// files (the guest's LEAKREF-MORE lines say which, on which fds): diff names
// exactly those 25 dentries as climbed 1 -> 2, exactly those 25 struct files
// as new and held by lrholder on those fds, and filp and lrholder's fds as
// grown by 25.
TEST_CASE("kernel diff: the guest holds 25 more files between two dumps", "[kernel][diff]") {
  for (const auto& kv : kernels()) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      std::set<std::string> names, holders;
      std::regex more(R"(LEAKREF-MORE comm=(\S+) pid=(\d+) fd=(\d+) name=(\S+) ino=\d+)");
      std::istringstream in(read_file(d.serial));
      std::smatch m;
      for (std::string line; std::getline(in, line);)
        if (std::regex_search(line, m, more)) {
          names.insert("dentry:/mnt/leak/" + m[4].str());
          holders.insert(fmt::format("{}({}) fd {}", m[1].str(), m[2].str(), m[3].str()));
        }
      REQUIRE(names.size() == 25);
      auto r = leakref({"diff", d.pelf, d.pelf_b, "--vmlinux", d.vmlinux, "--json"}, 600);
      INFO(r.err);
      REQUIRE(r.status == 0);
      json j = r.json();
      CHECK(j["old"]["kind"] == "vmcore");
      std::set<std::string> climbed, fresh_holders;
      for (const auto& o : j["objects"]) {
        INFO(o.dump());
        if (o["change"] == "climbed") {
          climbed.insert(o["key"]);
          CHECK(o["before"] == 1);
          CHECK(o["after"] == 2);
        } else if (o["change"] == "new") {
          CHECK(o["key"].get<std::string>().rfind("file@0x", 0) == 0);
          CHECK(o["after"] == 1);
          fresh_holders.insert(o["held"]);
        } else {
          FAIL("nothing went or dropped: " << o.dump());
        }
      }
      CHECK(climbed == names);
      CHECK(fresh_holders == holders);
      std::map<std::string, int64_t> delta;
      for (const auto& c : j["classes"])
        delta[c["kind"].get<std::string>() + " " + c["name"].get<std::string>()] = c["delta"];
      CHECK(delta["fds lrholder"] == 25);
      CHECK(delta["slab filp"] == 25);
      CHECK(delta["inodes tmpfs tmpfs /mnt/leak"] == 0);
      // The text shows the grown classes first.
      auto t =
          leakref({"diff", kdump_or_elf(d), d.pelf_b, "--vmlinux", d.vmlinux, "--top", "3"}, 600);
      CHECK(t.status == 0);
      CHECK(t.out.find("fds       lrholder") != std::string::npos);
      CHECK(t.out.find("refcount climbed (25, first 3):") != std::string::npos);
      // kdump against ELF, and saved snapshots, say the same; --fail-on climbed finds it.
      auto k = leakref({"diff", kdump_or_elf(d), d.pelf_b, "--vmlinux", d.vmlinux, "--json"}, 600);
      REQUIRE(k.status == 0);
      CHECK(k.json()["objects"] == j["objects"]);
      std::string sa = tmp_dir() + "/ksnap-a-" + kv + ".json",
                  sb = tmp_dir() + "/ksnap-b-" + kv + ".json";
      for (auto [from, to] : {std::pair{d.pelf, sa}, {d.pelf_b, sb}}) {
        auto s = leakref({"snapshot", from, "--vmlinux", d.vmlinux, "--json"}, 600);
        REQUIRE(s.status == 0);
        write_file(to, s.out);
      }
      auto fromsaved = leakref({"diff", sa, sb, "--json"}, 300);
      REQUIRE(fromsaved.status == 0);
      CHECK(fromsaved.json()["objects"] == j["objects"]);
      CHECK(leakref({"diff", d.pelf, d.pelf_b, "--vmlinux", d.vmlinux, "--fail-on", "climbed"}, 600)
                .status == 1);
    }
  SECTION("dumps that do not pair are refused") {
    const Dump& a = dump("6.1");
    const Dump& b = dump("6.12");
    NEED_KERNEL(a);
    NEED_KERNEL(b);
    // Each one's vmlinux is found by its build-id under the extracted -dbg tree.
    std::string dbg = a.vmlinux.substr(0, a.vmlinux.find("/usr/lib/debug/"));
    auto r = leakref({"diff", a.pelf, b.pelf, "--debug-dir", dbg}, 600);
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find("different builds (kernel build-id") != std::string::npos);
    auto c = leakref({"diff", a.pelf, fixture_path("fx_structs")}, 600);
    CHECK(c.status != 0);
  }
}
