// What is particular to the arm64 kernel (Debian 12's linux-image-arm64
// under qemu-system-aarch64, scripts/kernel-vmcore --kernel arm64); every
// per-kernel test (kernels()) runs on it too. QEMU writes its -z dump in
// 64 KiB blocks, which leakref refuses; a VMCOREINFO that does not place
// the vmemmap is refused, not guessed; the docs' arm64 example runs.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>

#include "harness.hpp"
#include "kernel_guest.hpp"

using namespace lrtest;
using namespace kguest;
using nlohmann::json;

namespace {

// The offset of the first `text` in a file (0 when it has none in its first
// 64 KiB: the notes, VMCOREINFO among them, come first in QEMU's dumps).
uint64_t file_offset_of(const std::string& path, const std::string& text) {
  std::string head(65536, '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  size_t at = head.find(text);
  return at == std::string::npos ? 0 : at;
}

// Overwrites bytes of a file in place.
void patch_file(const std::string& path, uint64_t at, const std::string& bytes) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

}  // namespace

TEST_CASE("kernel on arm64: QEMU's -z dump and a VMCOREINFO without the vmemmap are refused",
          "[kernel][arm64]") {
  const Dump& d = dump("arm64");
  NEED_KERNEL(d);
  SECTION("QEMU's -z dump of an arm64 guest: 64 KiB blocks, 4 KiB pages") {
    RunResult k =
        leakref({"kernel", "--vmcore", d.kdump_z, "--vmlinux", d.vmlinux, "modules"}, 300);
    CHECK(k.status == 3);
    CHECK(k.out.empty());
    CHECK(k.err ==
          fmt::format("leakref: error: {}: kdump file of 65536-byte blocks for a kernel of "
                      "4096-byte pages (QEMU's aarch64 dump-guest-memory -z writes so), "
                      "which libkdumpfile cannot read; dump as ELF (without -z)\n",
                      d.kdump_z));
  }
  SECTION("a VMCOREINFO that does not place the vmemmap") {
    // A copy whose VMCOREINFO lacks VMEMMAP_START: what needs no struct page
    // still reads; slab refuses in one line naming the number.
    const std::string copy = tmp_dir() + "/arm64-vmcoreinfo.elf";
    REQUIRE(run({"/bin/cp", d.pelf, copy}).status == 0);
    const std::string key = "NUMBER(VMEMMAP_START)=0x";
    const uint64_t at = file_offset_of(copy, key);
    REQUIRE(at > 0);
    patch_file(copy, at, "NUMBER(VMEMMAP_XTART)=0x");
    const size_t mods = guest(d).modules.size();
    REQUIRE(mods >= 4);  // the guest's manifest was read: the sizes compared are not both 0
    CHECK(kernel_json(d, copy, {"modules", "--json"})["modules"].size() == mods);
    RunResult s = leakref({"kernel", "--vmcore", copy, "--vmlinux", d.vmlinux, "slab"}, 300);
    CHECK(s.status == 4);
    CHECK(s.out.empty());
    CHECK(s.err.find("this arm64 kernel's VMCOREINFO has no VMEMMAP_START") != std::string::npos);
    // One that places it wrong (0xfffffd... for 0xfffffc...): no slab page
    // is found there, and the error names the base it used.
    patch_file(copy, at, key);
    patch_file(copy, at + key.size() + 5, "d");
    RunResult w = leakref({"kernel", "--vmcore", copy, "--vmlinux", d.vmlinux, "slab"}, 300);
    CHECK(w.status == 3);
    CHECK(w.out.empty());
    CHECK(w.err.find("either the struct pages are not at 0xfffffd") != std::string::npos);
    ::unlink(copy.c_str());
  }
}

// docs/kernel.md's arm64 example, executed as written (addresses, pids,
// jiffies and the count of tasks aside: they differ between boots).
TEST_CASE("docs: the arm64 example runs as written", "[kernel][arm64][docs]") {
  const Dump& d = dump("arm64");
  NEED_KERNEL(d);
  auto norm = [](std::string t) {
    t = std::regex_replace(t, std::regex("0x[0-9a-f]{5,}"), "0xADDR");
    t = std::regex_replace(t, std::regex("(pid|jiffies) [0-9]+"), "$1 N");
    t = std::regex_replace(t, std::regex("\n[0-9]+ tasks, "), "\nN tasks, ");
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  };
  CHECK(run_doc_section("karm64",
                        {{"vmcore-arm64.elf", d.pelf},
                         {"vmlinux-6.1-arm64", d.vmlinux},
                         {"lrkleak.ko", d.ko_leak}},
                        norm) == 3);
}
