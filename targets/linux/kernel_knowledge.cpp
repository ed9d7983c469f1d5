// The built-in linux-kernel profile (linux-kernel.toml beside this file, in
// the library's read-only data) bound to a kernel's types once, and the
// layouts the kernel reports read through it: member alternatives, declared
// enums and named expressions, so a kernel version differs in data only.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include <algorithm>

#include "kernel_internal.hpp"

// The profile text, NUL-terminated. The assembler reads the file relative to
// the directory make runs in (the source tree's root); the Makefile makes
// this object depend on it.
asm(".pushsection .rodata.leakref_profiles,\"a\"\n"
    ".globl lr_linux_kernel_toml\n"
    ".hidden lr_linux_kernel_toml\n"
    "lr_linux_kernel_toml:\n"
    ".incbin \"targets/linux/linux-kernel.toml\"\n"
    ".byte 0\n"
    ".popsection\n");
extern "C" __attribute__((visibility("hidden"))) const char lr_linux_kernel_toml[];

namespace lr {

namespace kint {

Result<KernelKnowledge*> knowledge(KernelTarget& k) {
  std::shared_ptr<KernelKnowledge>& slot = k.knowledge_slot();
  if (slot) return slot.get();
  auto p = parse_profile(linux_kernel_profile_text(), "linux-kernel (built in)");
  if (!p.ok()) return std::move(p).error();  // a build defect: the tests parse it
  auto kn = std::make_shared<KernelKnowledge>();
  kn->profile = std::move(p).value();
  kn->binder = std::make_unique<ProfileBinder>(k.prog(), kn->profile);
  slot = std::move(kn);
  return slot.get();
}

std::string_view linux_kernel_profile_text() {
  return std::string_view(lr_linux_kernel_toml);
}

Result<Layout> Layout::of(KernelTarget& k, const std::string& name) {
  LR_ASSIGN(KernelKnowledge * kn, knowledge(k));
  LR_ASSIGN(BoundType * bt, kn->binder->bind(name));
  Layout l;
  l.type = bt->type;
  l.bound = bt;
  const Type* s = bt->type->strip();
  if (!s->complete || s->size == 0)
    return make_error(Errc::kNotFound,
                      fmt::format("{} has no complete definition in {}", bt->c, k.vmlinux()));
  l.size = s->size;
  l.scope = kn->binder->scope(bt, "types." + name);
  return l;
}

Result<FieldLoc> Layout::loc(std::string_view path, bool refcount) const {
  LR_ASSIGN(FieldSpec fs, resolve_field(type, path, refcount, &scope));
  if (fs.hops.size() != 1)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{}: '{}' crosses a pointer; the kernel reports read members "
                                  "inside the object",
                                  bound->c, path));
  return fs.hops[0];
}

Result<uint64_t> Layout::off(std::string_view path) const {
  LR_ASSIGN(FieldLoc l, loc(path, false));
  return l.offset;
}

Result<IntField> Layout::field(std::string_view path, bool refcount) const {
  LR_ASSIGN(FieldLoc l, loc(path, refcount));
  return IntField::of(l);
}

Result<std::pair<uint64_t, uint64_t>> Layout::bytes(std::string_view path) const {
  LR_ASSIGN(FieldLoc l, loc(path, false));
  return std::make_pair(l.offset, field_bytes(l));
}

Result<bool> Layout::hlist(std::string_view path) const {
  LR_ASSIGN(FieldSpec fs, resolve_field(type, path, false, &scope));
  const Type* t = fs.type ? fs.type->strip() : nullptr;
  if (is_hlist_head_shape(t)) return true;
  if (is_list_head_shape(t)) return false;
  return make_error(Errc::kInvalidArgument,
                    fmt::format("{}.{} is {}, neither a list_head nor an hlist_head", bound->c,
                                path, fs.type ? fs.type->display() : "of no type"));
}

Result<std::unique_ptr<Expr>> Layout::expr(KernelTarget& k, const std::string& name) const {
  LR_ASSIGN(KernelKnowledge * kn, knowledge(k));
  return kn->binder->named_expr(bound, name);
}

Result<int64_t> Layout::constant(KernelTarget& k, const std::string& name) const {
  LR_ASSIGN(KernelKnowledge * kn, knowledge(k));
  return kn->binder->constant(bound, name);
}

Result<std::vector<std::pair<uint64_t, std::string>>> Layout::constants(
    KernelTarget& k, const std::string& prefix) const {
  std::vector<std::pair<uint64_t, std::string>> out;
  if (!bound->decl) return out;
  for (const auto& [name, alts] : bound->decl->exprs) {
    if (name.rfind(prefix, 0) != 0) continue;
    LR_ASSIGN(int64_t v, constant(k, name));
    out.emplace_back(static_cast<uint64_t>(v), name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<Variable> kvariable(KernelTarget& k, const std::string& name) {
  LR_ASSIGN(KernelKnowledge * kn, knowledge(k));
  auto it = kn->variables.find(name);
  if (it == kn->variables.end()) it = kn->variables.emplace(name, kn->binder->variable(name)).first;
  return it->second;
}

Result<uint64_t> ksymbol(KernelTarget& k, const std::string& name) {
  LR_ASSIGN(Variable v, kvariable(k, name));
  return v.addr;
}

// An unsigned integer variable of the width its DWARF type gives (8 without).
Result<uint64_t> read_uint_var(KernelTarget& k, const std::string& name) {
  LR_ASSIGN(Variable v, kint::kvariable(k, name));
  const uint64_t addr = v.addr;
  uint64_t width = 8;
  if (v.type && v.type->strip()) width = std::clamp<uint64_t>(v.type->strip()->size, 1, 8);
  uint64_t out = 0;
  if (auto r = k.mem().read(addr, &out, width); !r.ok())
    return make_error(Errc::kFault, fmt::format("{} at {:#x} is not readable in this dump: {}",
                                                name, addr, k.mem().why_unreadable(addr)));
  return out;
}

uint64_t release_number(KernelTarget& k) {
  std::string rel = k.vmcoreinfo("OSRELEASE");
  if (rel.empty()) {
    auto at = ksymbol(k, "init_uts_ns");
    auto L = Layout::of(k, "uts_namespace");
    if (at.ok() && L.ok())
      if (auto o = L.value().off("name.release"); o.ok())
        if (auto s = k.mem().read_cstring(at.value() + o.value(), 65); s.ok()) rel = s.value();
  }
  unsigned major = 0, minor = 0;
  if (std::sscanf(rel.c_str(), "%u.%u", &major, &minor) != 2) return 0;
  return uint64_t{major} * 1000 + minor;
}

namespace {

// arm64 (Documentation/arch/arm64/memory.rst, asm/memory.h): the linear map
// puts physical PHYS_OFFSET at PAGE_OFFSET = -(1 << VA_BITS), and vmemmap
// holds the struct page of frame pfn at VMEMMAP_START + (pfn - PHYS_OFFSET /
// page size) * sizeof(struct page). Both bases are given here for frame 0,
// so that page_offset + pfn * page and vmemmap + pfn * sizeof(page) hold as
// on x86-64 (modulo 2^64). VMCOREINFO gives all three numbers; the
// VMEMMAP_START formula changed between releases, so a kernel that does not
// export it is refused, not guessed.
Result<MemoryBases> arm64_memory_bases(KernelTarget& k) {
  auto number = [&](const char* key, int base) -> Result<uint64_t> {
    std::string v = k.vmcoreinfo(std::string("NUMBER(") + key + ")");
    char* end = nullptr;
    uint64_t n = v.empty() ? 0 : std::strtoull(v.c_str(), &end, base);
    if (v.empty() || *end)
      return make_error(Errc::kNotFound,
                        fmt::format("this arm64 kernel's VMCOREINFO has no {}{}: its linear map "
                                    "and vmemmap cannot be placed",
                                    key,
                                    k.dump_format() == "crash" ? " (leakref reads VMCOREINFO "
                                                                 "only standalone)"
                                                               : ""));
    return n;
  };
  LR_ASSIGN(uint64_t va_bits, number("VA_BITS", 10));
  LR_ASSIGN(uint64_t phys_offset, number("PHYS_OFFSET", 16));
  LR_ASSIGN(uint64_t vmemmap_start, number("VMEMMAP_START", 16));
  LR_ASSIGN(Layout page, Layout::of(k, "page"));
  // The slab and reference passes count in 4 KiB pages (RHEL's arm64
  // kernels use 64 KiB).
  const std::string ps = k.vmcoreinfo("PAGESIZE");
  if (!ps.empty() && ps != "4096")
    return make_error(Errc::kUnsupported,
                      fmt::format("this arm64 kernel has {}-byte pages; leakref reads kernels of "
                                  "4096-byte pages",
                                  ps));
  if (va_bits < 36 || va_bits > 52 || phys_offset % 4096)
    return make_error(Errc::kBadFormat,
                      fmt::format("VMCOREINFO says VA_BITS={} and PHYS_OFFSET={:#x}: not an "
                                  "arm64 kernel's (corrupt?)",
                                  va_bits, phys_offset));
  MemoryBases b;
  b.page_offset = (uint64_t{0} - (uint64_t{1} << va_bits)) - phys_offset;
  b.vmemmap = vmemmap_start - (phys_offset / 4096) * page.size;
  b.min_pfn = phys_offset / 4096;
  return b;
}

}  // namespace

Result<uint64_t> image_voffset(KernelTarget& k) {
  if (k.aarch64()) return read_uint_var(k, "kimage_voffset");
  constexpr uint64_t kStartKernelMap = 0xffffffff80000000ull;  // x86-64's image base
  LR_ASSIGN(uint64_t phys_base, read_uint_var(k, "phys_base"));
  return kStartKernelMap - phys_base;
}

Result<PerCpuSection> per_cpu_section(KernelTarget& k) {
  PerCpuSection sec;
  LR_ASSIGN(sec.end, ksymbol(k, "per_cpu_end"));
  // x86-64 (SMP) links the section at 0 (vmlinux.lds.S's PERCPU_VADDR): its
  // end is a small value, and its start, of value 0, is in no symbol table
  // of ours (crash knows it, unbiased). Its symbols carry KASLR's bias here,
  // not in the kernel.
  const uint64_t kaslr = k.kaslr_offset();
  if (!k.aarch64() && sec.end >= kaslr && sec.end - kaslr < (1ull << 31)) {
    sec.start = sec.link_delta = kaslr;
  } else {
    LR_ASSIGN(sec.start, ksymbol(k, "per_cpu_start"));
  }
  if (sec.end < sec.start || sec.end - sec.start > (1u << 30))
    return make_error(
        Errc::kBadFormat,
        fmt::format("per-CPU section {:#x}-{:#x}: not a kernel's (corrupt?)", sec.start, sec.end));
  return sec;
}

Result<PerCpu> per_cpu(KernelTarget& k) {
  PerCpu pc;
  LR_ASSIGN(static_cast<PerCpuSection&>(pc), per_cpu_section(k));
  LR_ASSIGN(pc.offsets, ksymbol(k, "per_cpu_offset"));
  LR_ASSIGN(pc.ncpu, read_uint_var(k, "nr_cpu_ids"));
  if (pc.ncpu == 0 || pc.ncpu > 8192)
    return make_error(Errc::kBadFormat,
                      fmt::format("nr_cpu_ids {}: not a machine's (corrupt?)", pc.ncpu));
  return pc;
}

Result<uint64_t> per_cpu_var(KernelTarget& k, const PerCpu& pc, uint64_t sym, uint64_t cpu) {
  if (!pc.holds(sym))
    return make_error(Errc::kInvalidArgument, fmt::format("{:#x} is not a per-CPU variable", sym));
  if (cpu >= pc.ncpu)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("CPU {}: this kernel has {} (nr_cpu_ids)", cpu, pc.ncpu));
  uint64_t off = 0;
  LR_TRY(k.mem().read(pc.offsets + cpu * 8, &off, 8));
  return sym - pc.link_delta + off;
}

// With CONFIG_RANDOMIZE_MEMORY (every distribution's kernel) both bases are
// variables; without it they are the fixed addresses of the paging mode,
// which VMCOREINFO's pgtable_l5_enabled gives (Documentation/arch/x86/
// x86_64/mm.rst).
Result<MemoryBases> memory_bases(KernelTarget& k) {
  if (k.aarch64()) return arm64_memory_bases(k);
  MemoryBases b;
  auto po = read_uint_var(k, "page_offset_base");
  if (po.ok() || po.error().code != Errc::kNotFound) {
    LR_ASSIGN(b.page_offset, std::move(po));
    LR_ASSIGN(b.vmemmap, read_uint_var(k, "vmemmap_base"));
    return b;
  }
  const std::string l5 = k.vmcoreinfo("NUMBER(pgtable_l5_enabled)");
  if (l5 != "0" && l5 != "1")
    return make_error(Errc::kNotFound,
                      "this kernel has no page_offset_base (no CONFIG_RANDOMIZE_MEMORY) and its "
                      "VMCOREINFO no pgtable_l5_enabled: the direct map's address is unknown");
  if (!ksymbol(k, "vmemmap_populate").ok())
    return make_error(Errc::kUnsupported,
                      "this kernel keeps its struct pages in mem_section (no "
                      "CONFIG_SPARSEMEM_VMEMMAP); leakref finds them only in the vmemmap");
  b.page_offset = l5 == "1" ? 0xff11000000000000 : 0xffff888000000000;
  b.vmemmap = l5 == "1" ? 0xffd4000000000000 : 0xffffea0000000000;
  return b;
}

}  // namespace kint
}  // namespace lr
