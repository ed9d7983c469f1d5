// Opening a kernel image: the dump (ELF or kdump via libkdumpfile), the
// KASLR offset from VMCOREINFO, and vmlinux as the single module whose DWARF
// and symbols the walks use.
#include <elfutils/debuginfod.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <libkdumpfile/addrxlat.h>
#include <libkdumpfile/kdumpfile.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "corelib/base/fileio.hpp"
#include "corelib/base/names.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/dump/pagecache.hpp"
#include "corelib/dump/physdump.hpp"
#include "targets/linux/kernel.hpp"
#include "targets/linux/kernel_internal.hpp"

namespace lr {

struct KernelTarget::Kdump {
  kdump_ctx_t* ctx = nullptr;
  int fd = -1;
  // A physical-only ELF dump: its pages are read from its PT_LOADs here,
  // and libkdumpfile only translates addresses. libkdumpfile 0.5.1 crashes
  // (SIGSEGV in kdump_read) on a physical page no PT_LOAD holds once the
  // architecture is set, and fills a page partly outside them with zeros;
  // a page missing from the dump must be a failed read instead.
  std::unique_ptr<PhysDump> phys;
  addrxlat_ctx_t* xctx = nullptr;
  addrxlat_sys_t* xsys = nullptr;
  addrxlat_cb_t* cb = nullptr;  // ours, on top of libkdumpfile's
  ~Kdump() {
    if (cb) addrxlat_ctx_del_cb(xctx, cb);
    if (xsys) addrxlat_sys_decref(xsys);
    if (xctx) addrxlat_ctx_decref(xctx);
    if (ctx) kdump_free(ctx);
    if (fd >= 0) close(fd);
  }
  // libkdumpfile 0.5 crashes in kdump_free() on some contexts whose open
  // failed (one whose page size could not be set), so such a context is
  // kept instead, reachable until exit: about 4 MiB each, its page cache.
  // The holder is never destroyed so that it still holds them when
  // LeakSanitizer looks at exit.
  void abandon() {
    static auto* failed = new std::vector<kdump_ctx_t*>;
    failed->push_back(ctx);
    ctx = nullptr;
  }
  // The page tables' pages for the translation, from the PT_LOADs too.
  static addrxlat_status get_page(const addrxlat_cb_t* cb, addrxlat_buffer_t* buf) {
    auto* k = static_cast<Kdump*>(cb->priv);
    if (buf->addr.as != ADDRXLAT_KPHYSADDR && buf->addr.as != ADDRXLAT_MACHPHYSADDR)
      return cb->next->get_page(cb->next, buf);
    const uint64_t pa = buf->addr.addr & ~uint64_t{4095};
    const uint8_t* p = k->phys->at(pa, 4096);
    if (!p) return addrxlat_ctx_err(k->xctx, ADDRXLAT_ERR_NODATA, "page not in the dump");
    buf->addr.addr = pa;
    buf->ptr = p;
    buf->size = 4096;
    buf->byte_order = ADDRXLAT_LITTLE_ENDIAN;
    buf->put_page = &Kdump::put_page;  // called whatever the page (never null)
    return ADDRXLAT_OK;
  }
  static void put_page(const addrxlat_buffer_t*) {}  // the mapping stays
  // Sets up reading `vmcore` by physical address; false when it cannot be
  // (the reads then go through libkdumpfile as for a kdump file).
  bool use_phys(const std::string& vmcore) {
    auto pd = PhysDump::open(vmcore);
    if (!pd.ok() || kdump_get_addrxlat(ctx, &xctx, &xsys) != KDUMP_OK) return false;
    cb = addrxlat_ctx_add_cb(xctx);
    if (!cb) return false;
    cb->priv = this;
    cb->get_page = &Kdump::get_page;
    phys = std::move(pd).value();
    return true;
  }
  static bool read(void* self, uint64_t addr, void* buf, size_t len) {
    auto* k = static_cast<Kdump*>(self);
    if (k->phys) {
      addrxlat_fulladdr_t a{addr, ADDRXLAT_KVADDR};
      if (addrxlat_fulladdr_conv(&a, ADDRXLAT_KPHYSADDR, k->xctx, k->xsys) != ADDRXLAT_OK)
        return false;
      const uint8_t* p = k->phys->at(a.addr, len);
      if (p) std::memcpy(buf, p, len);
      return p != nullptr;
    }
    size_t got = len;
    return kdump_read(k->ctx, KDUMP_KVADDR, addr, buf, &got) == KDUMP_OK && got == len;
  }
};

KernelTarget::~KernelTarget() {
  prog_.reset();  // before the memory it reads
  owned_mem_.reset();
}

namespace {

// A process's core (gcore, a crash) has an auxiliary vector and its mapped
// files; a kernel dump without VMCOREINFO (QEMU's) has neither.
bool is_process_core(const std::string& path) {
  CoreOptions o;
  o.fill_from_files = false;
  auto c = CoreFile::open(path, o);
  return c.ok() && !c.value()->is_kernel() && !c.value()->auxv().empty();
}

// "KEY=value" from VMCOREINFO text; "" when absent.
std::string vmcoreinfo_value(const std::string& text, const std::string& key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    if (text.compare(pos, key.size(), key) == 0 && pos + key.size() < nl &&
        text[pos + key.size()] == '=')
      return text.substr(pos + key.size() + 1, nl - pos - key.size() - 1);
    pos = nl + 1;
  }
  return "";
}

Error process_core_error(const std::string& vmcore) {
  return make_error(Errc::kBadFormat,
                    fmt::format("{}: a process core (it has an auxiliary vector and mapped "
                                "files), not a kernel dump: leakref info, walk or leaks read it",
                                vmcore));
}

bool has_kernel_vaddrs(const CoreFile& c) {
  for (const auto& s : c.segments())
    if (s.kind == SegmentInfo::Kind::kCore && s.start >= 0xffff800000000000ull) return true;
  return false;
}

// Where distributions put the DWARF vmlinux for a release (drgn and crash
// look in the same places), under each --debug-dir (by the dump's build-id
// first, then an unpacked -dbg package's tree) and the sysroot, then
// debuginfod by build-id when the user configured it.
Result<std::string> find_vmlinux(const std::string& vmcore, const std::string& vmcoreinfo,
                                 const DebugOptions& dbg) {
  std::string rel = vmcoreinfo_value(vmcoreinfo, "OSRELEASE");
  std::string bid = vmcoreinfo_value(vmcoreinfo, "BUILD-ID");
  if (rel.empty() && bid.empty())
    return make_error(
        Errc::kNotFound,
        fmt::format("{}: no OSRELEASE in VMCOREINFO; give the vmlinux it needs", vmcore));
  std::vector<std::string> cands;
  auto tree = [&](const std::string& root) {
    if (rel.empty()) return;
    for (const char* d : {"/usr/lib/debug/boot/vmlinux-", "/boot/vmlinux-"})
      cands.push_back(root + d + rel);
    cands.push_back(root + "/usr/lib/debug/lib/modules/" + rel + "/vmlinux");
    cands.push_back(root + "/lib/modules/" + rel + "/build/vmlinux");
  };
  for (const auto& d : dbg.debug_dirs) {
    if (bid.size() > 2)
      cands.push_back(d + "/.build-id/" + bid.substr(0, 2) + "/" + bid.substr(2) + ".debug");
    if (!rel.empty()) cands.push_back(d + "/vmlinux-" + rel);
    tree(d);
  }
  if (!dbg.sysroot.empty()) tree(dbg.sysroot);
  tree("");
  for (const auto& c : cands)
    if (::access(c.c_str(), R_OK) == 0) return c;
  std::string looked;
  for (const auto& c : cands) looked += (looked.empty() ? "" : ", ") + c;
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  if (dbg.use_debuginfod && urls && *urls && bid.size() >= 2) {
    if (debuginfod_client* c = debuginfod_begin()) {
      char* path = nullptr;
      int fd = debuginfod_find_debuginfo(c, reinterpret_cast<const unsigned char*>(bid.c_str()), 0,
                                         &path);
      debuginfod_end(c);
      std::string p = path ? path : "";
      std::free(path);
      if (fd >= 0) {
        ::close(fd);
        if (!p.empty()) return p;
      }
      looked += fmt::format(", debuginfod ({}): {}", urls, std::strerror(fd < 0 ? -fd : ENOENT));
    }
  }
  return make_error(Errc::kNotFound,
                    fmt::format("{}: no vmlinux with DWARF for release {} build-id {} (looked in "
                                "{}); install linux-image-{}-dbg or give its vmlinux",
                                vmcore, rel.empty() ? "?" : rel, bid.empty() ? "?" : bid, looked,
                                rel.empty() ? "RELEASE" : rel));
}

// An ELF header's e_machine (0 when `h` is not one).
uint16_t elf_machine(const uint8_t* h) {
  uint16_t m = 0;
  if (std::memcmp(h, "\177ELF", 4) == 0) std::memcpy(&m, h + 18, 2);
  return m;
}

// The architecture libkdumpfile is told: QEMU leaves a kdump header's
// utsname empty, so a physical ELF dump's e_machine decides, and a
// kdump-compressed file's VMCOREINFO (only arm64 exports kimage_voffset).
const char* kdump_arch(uint16_t machine, const std::string& vmcoreinfo) {
  if (machine) return machine == EM_AARCH64 ? KDUMP_ARCH_AARCH64 : KDUMP_ARCH_X86_64;
  return vmcoreinfo_value(vmcoreinfo, "NUMBER(kimage_voffset)").empty() ? KDUMP_ARCH_X86_64
                                                                        : KDUMP_ARCH_AARCH64;
}

}  // namespace

// A kdump-compressed file (checked first: libkdumpfile crashes on some bad
// headers) or a physical-only ELF dump (`machine` its e_machine), read
// through libkdumpfile, which takes `fd`. Returns the VMCOREINFO text.
Result<std::string> KernelTarget::open_kdump(int fd, const std::string& vmcore, uint16_t machine) {
  std::string header_info;
  if (!machine) {
    auto layout = check_kdump_file(fd, vmcore);
    if (!layout.ok()) {
      close(fd);
      return std::move(layout).error();
    }
    const KdumpLayout& L = layout.value();
    if (uint64_t past = L.pages_past_end)
      warnings_.push_back(fmt::format(
          "{}: {} of the {} dumped pages lie past the end of the file (it was cut off); reads of "
          "them fail",
          vmcore, past, L.dumped_pages));
    // QEMU writes aarch64 kdump files in 64 KiB blocks whatever the guest's
    // page size; libkdumpfile then numbers frames by the kernel's pages and
    // finds none of them.
    std::string ps = vmcoreinfo_value(L.vmcoreinfo, "PAGESIZE");
    if (!ps.empty() && ps != std::to_string(L.block_size)) {
      close(fd);
      return make_error(Errc::kUnsupported,
                        fmt::format("{}: kdump file of {}-byte blocks for a kernel of {}-byte "
                                    "pages (QEMU's aarch64 dump-guest-memory -z writes so), "
                                    "which libkdumpfile cannot read; dump as ELF (without -z)",
                                    vmcore, L.block_size, ps));
    }
    header_info = L.vmcoreinfo;
  }
  kdump_ = std::make_unique<Kdump>();
  kdump_->fd = fd;
  kdump_->ctx = kdump_new();
  if (!kdump_->ctx) return make_error(Errc::kIo, "libkdumpfile: out of memory");
  kdump_set_string_attr(kdump_->ctx, KDUMP_ATTR_ARCH_NAME, kdump_arch(machine, header_info));
  if (kdump_open_fd(kdump_->ctx, kdump_->fd) != KDUMP_OK) {
    auto e = make_error(Errc::kBadFormat, fmt::format("{}: not a kernel dump leakref can read ({})",
                                                      vmcore, kdump_get_err(kdump_->ctx)));
    kdump_->abandon();
    return e;
  }
  kdump_set_string_attr(kdump_->ctx, KDUMP_ATTR_OSTYPE, "linux");
  std::string vmcoreinfo;
  char* raw = nullptr;
  if (kdump_vmcoreinfo_raw(kdump_->ctx, &raw) == KDUMP_OK && raw) {
    vmcoreinfo = raw;
    std::free(raw);
  }
  const char* fmtname = nullptr;
  kdump_get_string_attr(kdump_->ctx, KDUMP_ATTR_FILE_FORMAT, &fmtname);
  format_ = fmtname ? fmtname : "kdump";
  if (machine && !kdump_->use_phys(vmcore))
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: its PT_LOADs cannot be read by physical address", vmcore));
  owned_mem_ = std::make_unique<PagedMemory>(&Kdump::read, kdump_.get(), vmcore);
  return vmcoreinfo;
}

Result<std::unique_ptr<KernelTarget>> KernelTarget::open(const std::string& vmcore,
                                                         const std::string& vmlinux,
                                                         const DebugOptions& dbg) {
  std::unique_ptr<KernelTarget> k(new KernelTarget());
  LR_ASSIGN(int fd, open_input(vmcore, "kernel dump"));  // never waits on a FIFO
  uint8_t magic[20] = {};
  ssize_t n = pread(fd, magic, sizeof magic, 0);
  std::string vmcoreinfo;
  bool via_kdump = true;
  // An ELF dump with physical addresses only (QEMU's dump-guest-memory
  // without -p, virsh dump --memory-only): libkdumpfile reads it, turning
  // kernel addresses into physical ones through the kernel's own page
  // tables (VMCOREINFO names them, with phys_base and the KASLR offset).
  bool phys_elf = false;
  if (n >= 4 && std::memcmp(magic, "\177ELF", 4) == 0) {
    CoreOptions co;
    co.fill_from_files = false;
    auto core = CoreFile::open(vmcore, co);
    if (!core.ok()) {
      close(fd);
      return std::move(core).error();
    }
    if (has_kernel_vaddrs(*core.value())) {
      via_kdump = false;
      vmcoreinfo = core.value()->vmcoreinfo();
      for (const auto& w : core.value()->warnings()) k->warnings_.push_back(w);
      k->owned_mem_ = std::move(core).value();
      k->format_ = "elf";
    } else if (is_process_core(vmcore)) {
      close(fd);
      return process_core_error(vmcore);
    } else {
      phys_elf = true;  // the engine's reader checked its headers first
    }
  } else if (n >= 12 && std::memcmp(magic, "makedumpfile", 12) == 0) {
    close(fd);
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: makedumpfile flattened format; convert it first with "
                                  "'makedumpfile -R {}.kdump < {}'",
                                  vmcore, vmcore, vmcore));
  }
  if (via_kdump && !phys_elf && (n < 8 || std::memcmp(magic, "KDUMP   ", 8) != 0)) {
    close(fd);
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: not a kernel dump leakref reads (neither an ELF vmcore "
                                  "nor kdump-compressed)",
                                  vmcore));
  }
  if (via_kdump) {
    auto text = k->open_kdump(fd, vmcore, phys_elf ? elf_machine(magic) : 0);
    fd = -1;  // the Kdump owns it now, or it was closed
    if (!text.ok()) return std::move(text).error();
    vmcoreinfo = std::move(text).value();
  }
  if (fd >= 0) close(fd);
  if (vmcoreinfo.empty() && is_process_core(vmcore)) return process_core_error(vmcore);
  if (vmcoreinfo.empty())
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: no VMCOREINFO in the dump (QEMU needs -device vmcoreinfo "
                                  "and the guest's qemu_fw_cfg module)",
                                  vmcore));
  std::string vml = vmlinux;
  if (vml.empty()) {
    LR_ASSIGN(vml, find_vmlinux(vmcore, vmcoreinfo, dbg));
  }
  {
    LR_ASSIGN(int vfd, open_input(vml, "vmlinux"));  // a FIFO is refused, not waited on
    close(vfd);
  }
  uint64_t off = 0;
  std::string ko = vmcoreinfo_value(vmcoreinfo, "KERNELOFFSET");
  if (!ko.empty() && !parse_u64("0x" + ko, &off))
    return make_error(Errc::kBadFormat, fmt::format("{}: bad KERNELOFFSET '{}'", vmcore, ko));
  // The dump must be of this vmlinux (its build-id), checked before its
  // DWARF is loaded.
  std::string bid = vmcoreinfo_value(vmcoreinfo, "BUILD-ID");
  auto file_bid = build_id_of_file(vml);
  if (!bid.empty() && file_bid.ok() && file_bid.value() != bid)
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: build-id {} does not match {} (dump's kernel has {})", vml,
                                  file_bid.value(), vmcore, bid));
  LR_TRY(k->load_vmlinux(k->owned_mem_.get(), vml, off));
  k->vmcoreinfo_ = std::move(vmcoreinfo);
  LR_TRY(k->check_banner(vmcore, !k->warnings_.empty()));
  // Module globals resolve from the dump's kallsyms (crash has its own).
  k->prog_->set_symbol_fallback(&KernelTarget::module_symbol_fallback, k.get());
  return k;
}

std::string KernelTarget::vmcoreinfo(const std::string& key) const {
  return vmcoreinfo_value(vmcoreinfo_, key);
}

Result<std::unique_ptr<KernelTarget>> KernelTarget::attach(const Memory* mem,
                                                           const std::string& vmlinux,
                                                           uint64_t kaslr_offset) {
  std::unique_ptr<KernelTarget> k(new KernelTarget());
  k->format_ = "crash";
  LR_TRY(k->load_vmlinux(mem, vmlinux, kaslr_offset));
  return k;
}

Result<void> KernelTarget::load_vmlinux(const Memory* mem, const std::string& vmlinux,
                                        uint64_t off) {
  {
    int fd = ::open(vmlinux.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      return make_error(Errc::kIo,
                        fmt::format("{}: cannot open: {}", vmlinux, std::strerror(errno)));
    uint8_t h[20] = {};
    bool whole = ::pread(fd, h, sizeof h, 0) == static_cast<ssize_t>(sizeof h);
    ::close(fd);
    machine_ = whole ? elf_machine(h) : 0;
    if (machine_ != EM_X86_64 && machine_ != EM_AARCH64)
      return make_error(Errc::kUnsupported,
                        fmt::format("{}: a vmlinux for machine {}; leakref reads x86_64 and "
                                    "aarch64 kernels",
                                    vmlinux, machine_));
  }
  vmlinux_ = vmlinux;
  kaslr_offset_ = off;
  auto mods = ModuleSet::empty(DebugOptions{});
  Module* m = mods->add("vmlinux", vmlinux, 0, 0, off, "", true);
  if (!m->has_dwarf())
    return make_error(Errc::kNotFound,
                      fmt::format("{}: no DWARF (use the vmlinux from the -dbg / debuginfo "
                                  "package, e.g. /usr/lib/debug/boot/vmlinux-RELEASE)",
                                  vmlinux));
  const Symbol* text = m->find_symbol("_text");
  const Symbol* end = m->find_symbol("_end");
  if (!text || !end)
    return make_error(Errc::kBadFormat, fmt::format("{}: not a vmlinux (no _text/_end)", vmlinux));
  m->base = text->addr;
  m->end = end->addr;
  prog_ = std::make_unique<Program>(mem, std::move(mods));
  prog_->types().set_not_found_hint("a loaded module's types are in its .ko file");
  prog_->set_per_cpu(&KernelTarget::per_cpu_hook, this);
  return {};
}

// The kernel's own version string, read through the KASLR offset and the
// dump's page tables, must say the release VMCOREINFO names. A damaged
// KERNELOFFSET or OSRELEASE (which libkdumpfile translates by) otherwise
// reads every list as garbage or nothing, and a diff against a good dump
// would call every object gone.
Result<void> KernelTarget::check_banner(const std::string& vmcore, bool pages_missing) {
  auto at = symbol("linux_banner");
  if (!at.ok()) return {};  // not every vmlinux has it; nothing to check against
  char buf[160] = {};
  auto r = prog_->mem().read(at.value(), buf, sizeof buf - 1);
  std::string_view text(buf, ::strnlen(buf, sizeof buf - 1));
  const std::string ko = vmcoreinfo("KERNELOFFSET"), rel = vmcoreinfo("OSRELEASE");
  auto refuse = [&](const std::string& what) {
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: the kernel's version string (linux_banner at {:#x}) {}: the "
                                  "dump's KERNELOFFSET ({}), OSRELEASE ('{}') or page tables do "
                                  "not fit {}",
                                  vmcore, at.value(), what, ko.empty() ? "none" : visible(ko),
                                  visible(rel), vmlinux_));
  };
  if (!r.ok()) return pages_missing ? Result<void>{} : refuse("is not readable");
  const std::string_view lead = "Linux version ";
  if (text.substr(0, lead.size()) != lead) return refuse("does not start 'Linux version'");
  std::string_view got = text.substr(lead.size());
  got = got.substr(0, got.find(' '));
  // Memory reads right; only the note is wrong: said, not refused.
  if (!rel.empty() && got != rel)
    warnings_.push_back(
        fmt::format("{}: VMCOREINFO says release '{}' but the kernel's version "
                    "string says '{}'",
                    vmcore, visible(rel), visible(got)));
  return {};
}

Result<uint64_t> KernelTarget::per_cpu_hook(void* self, uint64_t addr, int64_t cpu,
                                            bool* is_per_cpu) {
  auto* k = static_cast<KernelTarget*>(self);
  *is_per_cpu = false;
  if (k->pcpu_busy_) return addr;  // the range's own symbols, being looked up
  if (!k->pcpu_range_) {
    k->pcpu_busy_ = true;
    auto sec = kint::per_cpu_section(*k);
    k->pcpu_busy_ = false;
    k->pcpu_range_ = sec.ok() ? std::pair{sec->start, sec->end} : std::pair{0ul, 0ul};
  }
  *is_per_cpu = addr >= k->pcpu_range_->first && addr < k->pcpu_range_->second;
  if (cpu < 0) return addr;
  if (!*is_per_cpu) return make_error(Errc::kInvalidArgument, "not a per-CPU variable");
  LR_ASSIGN(kint::PerCpu pc, kint::per_cpu(*k));
  return kint::per_cpu_var(*k, pc, addr, static_cast<uint64_t>(cpu));
}

Result<uint64_t> KernelTarget::symbol(const std::string& name) const {
  Module* m = prog_->modules().exe();
  const Symbol* s = m ? m->find_symbol(name) : nullptr;
  if (!s) return make_error(Errc::kNotFound, fmt::format("kernel symbol '{}' not found", name));
  return s->addr;
}

std::vector<std::string> KernelTarget::warnings() const {
  std::vector<std::string> w = warnings_;
  for (const auto& s : prog_->modules().warnings()) w.push_back(s);
  return w;
}

}  // namespace lr
