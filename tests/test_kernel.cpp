// Kernel: real Debian 5.10, 6.1, 6.12, 7.x and arm64 vmcores (scripts/kernel-vmcore boots
// Debian's kernels under QEMU TCG with a busybox initramfs that sets up known
// state and prints it), checked three ways: against what the guest says it
// set up, against crash 8.0.2's own `struct`/`list` output with the extension
// loaded (6.1: crash 8.0.2 cannot open 6.12 dumps), and the standalone CLI
// (ELF reader and libkdumpfile) against the extension.
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
#include "kernel_guest.hpp"

using namespace lrtest;
using namespace kguest;
using nlohmann::json;

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

namespace {

void standalone_reports(const Dump& d) {
  Guest g = guest(d);
  REQUIRE(g.holds.size() >= 20);
  REQUIRE(g.files >= 10000);
  // The ELF dump through the engine's ELF reader, the kdump file through
  // libkdumpfile: the same answers.
  json ie = kernel_json(d, d.pelf, {"inodes", "--json"});
  json ik = kernel_json(d, kdump_or_elf(d), {"inodes", "--json"});
  check_inodes(ie, g);
  CHECK(comparable(ie) == comparable(ik));
  // QEMU's default dump has physical addresses only: libkdumpfile reads it
  // through the kernel's own page tables (VMCOREINFO names them).
  CHECK(comparable(ie) == comparable(kernel_json(d, d.elf, {"inodes", "--json"})));
  json me = kernel_json(d, d.pelf, {"modules", "--json"});
  check_modules(me, g);
  CHECK(comparable(me) == comparable(kernel_json(d, kdump_or_elf(d), {"modules", "--json"})));
  json ce = kernel_json(d, d.pelf, {"check", "--json"});
  for (const auto& c : ce["checks"]) {
    INFO(c.dump());
    CHECK(c["violations"] == 0);
    CHECK(c["checked"].get<uint64_t>() > 0);
  }
  // The big list walks whole, every inode with i_count 1.
  const json& sb = leak_sb(ie, g.files);
  json w = kernel_json(
      d, kdump_or_elf(d),
      {"walk", "--type", "struct inode", "--head", sb["s_inodes"], "--list-member", "i_sb_list",
       "--refcount", "i_count", "--show", "i_ino", "--group-by", "i_state", "--json"});
  CHECK(w["summary"]["visited"] == g.files + 1);
  CHECK(w["summary"]["stop"] == "end");
  CHECK(w["summary"]["histogram"] == json{{"1", g.files + 1}});
  uint64_t grouped = 0;
  for (const auto& x : w["summary"]["groups"]) grouped += x["count"].get<uint64_t>();
  CHECK(grouped == g.files + 1);
  // --fail-on flags the in-flight file; usage errors are exit 2.
  RunResult f = leakref(
      {"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "inodes", "--fail-on", "flagged"},
      300);
  CHECK(f.status == 1);
  CHECK(f.out.find("f00060") != std::string::npos);
  RunResult u = leakref(
      {"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "inodes", "--no-such-option"}, 300);
  CHECK(u.status == 2);
}

}  // namespace

TEST_CASE(
    "kernel: standalone inodes, modules, check and walk on Debian's 5.10, 6.1, 6.12, 7.x and arm64 "
    "vmcores",
    "[kernel]") {
  for (const auto& kv : kernels()) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      standalone_reports(d);
    }
}

TEST_CASE("kernel: hostile dumps and vmlinux give one clear error", "[kernel][hostile]") {
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
      // A dump taken 4096 microseconds into its second: libkdumpfile takes
      // the header as 32-bit (its block size from tv_usec, found by fuzz_kdump).
      {"usec4096", patched(416, 4096, 4), 3, "also reads as a 32-bit one (block size 4096"},
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

// A VMCOREINFO whose KERNELOFFSET or OSRELEASE was overwritten read every
// list as garbage or nothing, and a diff against the good dump said "102
// shrank, 50649 objects gone". The kernel's own version string, read
// through them, must say the release: otherwise the dump is refused. A dump
// whose walks cannot run (its pages cut off) is unknown in a diff, never
// empty: nothing is called gone.
TEST_CASE("kernel: a damaged VMCOREINFO is refused, a dump not read whole is unknown in diff",
          "[kernel][hostile][diff]") {
  NEED_DUMP();
  std::string dir = tmp_dir(), data = read_file(dump().kdump);
  const std::string key = "KERNELOFFSET=";
  size_t ko = data.find(key);
  REQUIRE(ko != std::string::npos);
  std::string off = data;
  char& digit = off[ko + key.size() + 2];  // the third hex digit: a 1 MiB step, still aligned
  digit = digit == 'f' ? 'e' : digit == '9' ? 'a' : static_cast<char>(digit + 1);
  write_file(dir + "/offset.kdump", off);
  write_file(dir + "/cut.kdump", data.substr(0, data.size() / 2));
  RunResult m = leakref(
      {"kernel", "--vmcore", dir + "/offset.kdump", "--vmlinux", dump().vmlinux, "modules"}, 300);
  INFO(m.err);
  CHECK(m.status == 3);
  CHECK(m.out.empty());
  CHECK(m.err.find("the kernel's version string (linux_banner at 0x") != std::string::npos);
  RunResult d =
      leakref({"diff", dump().kdump, dir + "/offset.kdump", "--vmlinux", dump().vmlinux}, 300);
  CHECK(d.status == 3);
  CHECK(d.out.empty());
  d = leakref({"diff", dump().kdump, dir + "/cut.kdump", "--vmlinux", dump().vmlinux, "--json"},
              300);
  INFO(d.err);
  REQUIRE(d.status == 0);
  json j = json::parse(d.out);
  CHECK(j["summary"]["gone"] == 0);
  CHECK(j["summary"]["new"] == 0);
  CHECK(j["summary"]["shrank"] == 0);
  CHECK(j["summary"]["objects_unknown"].get<uint64_t>() > 40000);
  CHECK(j["summary"]["unknown"].get<uint64_t>() > 100);
  CHECK(j["warnings"].dump().find("slab is unknown in " + dir + "/cut.kdump") != std::string::npos);
}

TEST_CASE(
    "kernel: the linux-vfs profile agrees with the inode report on 5.10, 6.1, 6.12, 7.x and arm64",
    "[kernel]") {
  for (const auto& kv : kernels()) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      vfs_profile_agrees(d);
    }
}

TEST_CASE("kernel: crash 8.0.2 with the extension agrees with crash's own output and the CLI",
          "[kernel]") {
  NEED_CRASH();
  Guest g = guest(dump());
  json ie = kernel_json(dump(), dump().pelf, {"inodes", "--json"});
  json me = kernel_json(dump(), dump().pelf, {"modules", "--json"});
  json ce = kernel_json(dump(), dump().pelf, {"check", "--json"});
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
        comparable(
            kernel_json(dump(), dump().pelf, {"profile", "--profile", "linux-vfs", "--json"})));
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
  NEED_CRASH();
  json ie = kernel_json(dump(), dump().pelf, {"inodes", "--json"});
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
  kill(b.pid, SIGINT);
  int status = finish(b, 0, 120);  // signal 0: just wait for the exit
  std::string out = read_file(b.out_path) + read_file(b.err_path);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("stopped: interrupted") != std::string::npos);
  CHECK(out.find("leakref: interrupted") != std::string::npos);
  CHECK(out.find("vfat") != std::string::npos);  // the next command still ran
  // The walk stopped where the interrupt found it, not after the whole
  // array: fewer objects visited than the 400,000,000 asked for.
  size_t at = out.find(" visited");
  REQUIRE(at != std::string::npos);
  size_t from = out.rfind(' ', at - 1) + 1;
  CHECK(std::stoull(out.substr(from, at - from)) < 400000000ull);
}

// A kernel module leakref has no C++ for: a profile file alone (types from
// the module's .ko, roots SYMBOL@MODULE) finds exactly the references the
// module leaked and the rules it broke, standalone (ELF and kdump) and inside
// crash, and crash's own `struct` agrees with every refcount.
namespace {

void lrlocks_standalone(const Dump& d) {
  auto truth = lrlocks_truth(d);
  REQUIRE(truth["ns"].size() == 2);
  REQUIRE(truth["res"].size() == 10);
  REQUIRE(truth["vc"].size() == 60);
  std::string prof = std::string(LR_SOURCE_DIR) + "/tests/profiles/lrlocks.toml";
  std::vector<std::string> args = {"profile", "--profile", prof, "--ko", d.ko, "--json"};
  json j = kernel_json(d, d.pelf, args);
  CHECK(j["profile"]["name"] == "lrlocks");
  check_lock_set(named_set(j, "namespaces"), truth["ns"], false);
  check_lock_set(named_set(j, "resources"), truth["res"], true);
  check_lock_set(named_set(j, "vcaches"), truth["vc"], true);
  int64_t granted = 0;
  for (const auto& r : truth["res"]) granted += r.granted;
  CHECK(named_set(j, "granted")["objects"].size() == static_cast<size_t>(granted));
  CHECK(comparable(kernel_json(d, kdump_or_elf(d), args)) == comparable(j));

  // Without the .ko the module's types are unknown: said, with where they are.
  RunResult r =
      leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "profile", "--profile", prof});
  CHECK(r.status == 4);
  CHECK(r.err.find("struct ldlm_namespace") != std::string::npos);
  CHECK(r.err.find(".ko") != std::string::npos);
  // A .ko of another build of the module is refused, naming what differs.
  std::string dir = tmp_dir() + "/lrlocks-other-" + d.kernel;
  REQUIRE(run({"mkdir", "-p", dir}).status == 0);
  std::string src = read_file(std::string(LR_SOURCE_DIR) + "/fixtures/kernel/lrlocks.c");
  auto at = src.find("#define VCSIZE 16");
  REQUIRE(at != std::string::npos);
  src.replace(at, 17, "#define VCSIZE 17");
  write_file(dir + "/lrlocks.c", src);
  write_file(dir + "/Kbuild", "obj-m := lrlocks.o\n");
  // Built as the fixture modules were (the script knows each kernel's headers and compiler).
  RunResult mk = run({std::string(LR_SOURCE_DIR) + "/scripts/kernel-vmcore", "--kernel", d.kernel,
                      "--build-modules", dir},
                     300);
  INFO(mk.err);
  REQUIRE(mk.status == 0);
  r = leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "profile", "--profile", prof,
               "--ko", dir + "/lrlocks.ko"});
  CHECK(r.status == 3);
  // Debian's arm64 kernel keeps no data symbols in kallsyms (no
  // CONFIG_KALLSYMS_ALL): there the build-id the kernel loaded tells.
  const std::string differs =
      d.kernel == "arm64" ? "build-id " : "afs_vhashT is 136 bytes in the file and 128 in the dump";
  CHECK(r.err.find("does not match the loaded module lrlocks: " + differs) != std::string::npos);
  // The same source a line longer: every size as loaded, another build-id.
  src = read_file(std::string(LR_SOURCE_DIR) + "/fixtures/kernel/lrlocks.c");
  write_file(dir + "/lrlocks.c", "\n" + src);
  mk = run({std::string(LR_SOURCE_DIR) + "/scripts/kernel-vmcore", "--kernel", d.kernel,
            "--build-modules", dir},
           300);
  REQUIRE(mk.status == 0);
  r = leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "profile", "--profile", prof,
               "--ko", dir + "/lrlocks.ko"});
  CHECK(r.status == 3);
  CHECK(r.err.find("does not match the loaded module lrlocks: build-id ") != std::string::npos);
  r = leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "walk", "--type", "int",
               "--head", "afs_vhashT@lrlocks", "--array", "--count", "1", "--ko", d.vmlinux});
  CHECK(r.status == 3);
  CHECK(r.err.find("not a kernel module") != std::string::npos);
  // A FIFO named as the .ko is refused at once, never waited on.
  REQUIRE(run({"mkfifo", dir + "/fifo.ko"}).status == 0);
  r = leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "profile", "--profile", prof,
               "--ko", dir + "/fifo.ko"},
              60);
  CHECK(r.status == 3);
  CHECK(r.err.find("not a regular file") != std::string::npos);
}

}  // namespace

TEST_CASE(
    "kernel: a profile file finds the lrlocks module's leaks on 5.10, 6.1, 6.12, 7.x and arm64, "
    "standalone and "
    "in "
    "crash (6.1)",
    "[kernel]") {
  for (const auto& kv : kernels()) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      lrlocks_standalone(d);
    }
  SECTION("in crash 8.0.2 on 6.1") {
    NEED_CRASH();
    auto truth = lrlocks_truth(dump());
    std::string prof = std::string(LR_SOURCE_DIR) + "/tests/profiles/lrlocks.toml";
    std::vector<std::string> args = {"profile", "--profile", prof, "--ko", dump().ko, "--json"};
    json j = kernel_json(dump(), dump().pelf, args);
    RunResult r;
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
  NEED_CRASH();
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
    json j = kernel_json(dump(), dump().kdump, {"inodes", "--flagged", "--json"});
    uint64_t flagged = j["summary"]["flagged"];
    REQUIRE(flagged > 0);  // the guest leaks file references on purpose
    CHECK(r.out.find(fmt::format("{} flagged", flagged)) != std::string::npos);
  }
  CHECK(examples == 1);
}
