// An arm64 kernel: Debian 12's linux-image-arm64 booted under
// qemu-system-aarch64 (scripts/kernel-vmcore --kernel arm64) with the same
// guest as the x86-64 kernels, dumped by QEMU as a physical-address ELF
// (libkdumpfile walks the guest's page tables). inodes, modules, check, slab
// and diff are checked against what the guest printed (its manifest and
// /proc/slabinfo); what leakref does not read on arm64 is refused in one line.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "harness.hpp"
#include "kernel_guest.hpp"

using namespace lrtest;
using namespace kguest;
using nlohmann::json;

namespace {

// The SCM_RIGHTS file (f00060, held by no task): flagged, with the stack
// that opened it, down arm64's syscall path to its EL0 exception entry.
void check_scm_rights_file(const Dump& d, const Guest& g, const json& flagged) {
  const json* f60 = find_inode(leak_sb(flagged, g.files), 62);
  REQUIRE(f60);
  const json& den = (*f60)["dentries"][0];
  CHECK(den["name"] == "f00060");
  CHECK(den["unexplained"] == 1);
  REQUIRE(den["unheld_files"].size() == 1);
  const json& file = den["unheld_files"][0];
  CHECK(file["f_count"] == 1);
  CHECK(file["alloc"]["pid"] == g.holder_pid);
  std::vector<std::string> frames;
  for (const auto& f : file["alloc"]["stack"]) {
    std::string s = f;
    frames.push_back(s.substr(0, s.find('+')));
  }
  INFO(file.dump());
  const std::vector<std::string> want = {"alloc_empty_file",    "path_openat",    "do_filp_open",
                                         "do_sys_openat2",      "__arm64_sys_openat",
                                         "invoke_syscall",      "el0_svc"};
  size_t at = 0;
  for (const auto& f : frames)
    if (at < want.size() && f == want[at]) ++at;
  CHECK(at == want.size());
  REQUIRE(!frames.empty());
  CHECK(frames.back() == "el0t_64_sync");
  // The walk machinery over filp's objects finds exactly that file.
  json w = kernel_json(d, d.pelf,
                       {"slab", "--cache", "filp", "--type", "struct file", "--where",
                        "f_path.dentry == " + den["addr"].get<std::string>(), "--refcount",
                        "f_count", "--json"});
  REQUIRE(w["objects"].size() == 1);
  CHECK(w["objects"][0]["addr"] == file["addr"]);
}

// Dump B holds 25 more files: diff names exactly them.
void check_diff(const Dump& d) {
  std::set<std::string> names;
  std::regex more(R"(LEAKREF-MORE comm=\S+ pid=\d+ fd=\d+ name=(\S+) ino=\d+)");
  std::istringstream in(read_file(d.serial));
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, more)) names.insert("dentry:/mnt/leak/" + m[1].str());
  REQUIRE(names.size() == 25);
  auto r = leakref({"diff", d.pelf, d.pelf_b, "--vmlinux", d.vmlinux, "--json"}, 600);
  INFO(r.err);
  REQUIRE(r.status == 0);
  json j = r.json();
  std::set<std::string> climbed;
  size_t fresh = 0;
  for (const auto& o : j["objects"]) {
    INFO(o.dump());
    if (o["change"] == "climbed") climbed.insert(o["key"]);
    CHECK((o["change"] == "climbed" || o["change"] == "new"));
    fresh += o["change"] == "new";
  }
  CHECK(climbed == names);
  CHECK(fresh == 25);
  std::map<std::string, int64_t> delta;
  for (const auto& c : j["classes"])
    delta[c["kind"].get<std::string>() + " " + c["name"].get<std::string>()] = c["delta"];
  CHECK(delta["fds lrholder"] == 25);
  CHECK(delta["slab filp"] == 25);
}

}  // namespace

TEST_CASE("kernel on arm64: inodes, modules, check, slab and diff of Debian 12's arm64 kernel",
          "[kernel][arm64]") {
  const Dump& d = dump("arm64");
  NEED_KERNEL(d);
  Guest g = guest(d);
  REQUIRE(g.holds.size() >= 20);
  REQUIRE(g.files >= 10000);
  SECTION("the guest's manifest: inodes, modules, check") {
    json ie = kernel_json(d, d.pelf, {"inodes", "--json"});
    check_inodes(ie, g);
    check_modules(kernel_json(d, d.pelf, {"modules", "--json"}), g);
    json ce = kernel_json(d, d.pelf, {"check", "--json"});
    REQUIRE(ce["checks"].size() >= 8);
    for (const auto& c : ce["checks"]) {
      INFO(c.dump());
      CHECK(c["violations"] == 0);
      CHECK(c["checked"].get<uint64_t>() > 0);
    }
    check_scm_rights_file(d, g, kernel_json(d, d.pelf, {"inodes", "--flagged", "--json"}));
  }
  SECTION("slab against the guest's /proc/slabinfo at both moments") {
    check_slabinfo(kernel_json(d, d.pelf, {"slab", "--json"}), slabinfo(d));
    check_slabinfo(kernel_json(d, d.pelf_b, {"slab", "--json"}), slabinfo(d, true));
  }
  SECTION("diff") { check_diff(d); }
  SECTION("what leakref does not read on arm64 is refused in one line") {
    // QEMU's -z dump of an arm64 guest: 64 KiB blocks, 4 KiB pages.
    RunResult k = leakref({"kernel", "--vmcore", d.kdump, "--vmlinux", d.vmlinux, "modules"}, 300);
    CHECK(k.status == 3);
    CHECK(k.out.empty());
    CHECK(k.err == fmt::format("leakref: error: {}: kdump file of 65536-byte blocks for a kernel of "
                               "4096-byte pages (QEMU's aarch64 dump-guest-memory -z writes so), "
                               "which libkdumpfile cannot read; dump as ELF (without -z)\n",
                               d.kdump));
    // The reference scan's roots are x86-64's.
    RunResult l = leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "leaks"}, 300);
    CHECK(l.status == 3);
    CHECK(l.out.empty());
    CHECK(l.err.find("reads x86_64 kernels only; this dump is of an arm64 kernel") !=
          std::string::npos);
  }
}
