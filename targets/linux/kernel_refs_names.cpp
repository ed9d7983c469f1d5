// Names for the kernel reference index's referring words and objects
// (KRefNamer in kernel_refs.hpp): what a support engineer reads in crash.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "targets/linux/kernel_internal.hpp"
#include "targets/linux/kernel_refs.hpp"

namespace lr {

namespace {

const char* section_of(char type) {
  switch (type | 0x20) {  // lower case
    case 'b':
      return ".bss";
    case 'd':
      return ".data";
    case 'r':
      return ".rodata";
    case 't':
      return ".text";
    default:
      return "?";
  }
}

constexpr size_t kMaxFrameWords = 2048;  // how far down a stack a frame is looked for

}  // namespace

struct KRefNamer::Impl {
  KernelTarget& k;
  const KRefIndex& ix;
  std::vector<std::optional<const Type*>> types;  // per cache, on first use
  uint64_t stext = 0, etext = 0;
  uint64_t pac_mask = 0;             // arm64: the bits a pointer-authentication code takes
  std::optional<kint::PerCpu> pcpu;  // none when the dump does not give it

  Impl(KernelTarget& kt, const KRefIndex& x) : k(kt), ix(x) {
    if (auto a = k.symbol("_stext"); a.ok()) stext = a.value();
    if (auto a = k.symbol("_etext"); a.ok()) etext = a.value();
    const std::string m = k.vmcoreinfo("NUMBER(KERNELPACMASK)");
    if (k.aarch64() && !m.empty()) pac_mask = std::strtoull(m.c_str(), nullptr, 16);
    if (auto pc = kint::per_cpu(k); pc.ok()) pcpu = pc.value();
  }
  const KModSymbol* mod_sym(uint64_t a) { return k.module_symbol_at(a); }
  std::string kernel_sym(uint64_t a, const char* section);
  std::string module_sym(uint64_t a, const std::string& module);
  uint64_t return_address(uint64_t w);
  std::string frame(const KRoot& r, uint64_t at);
  std::string root(const KRoot& r, uint64_t at);
  std::string sym(uint64_t a);
  std::string percpu_var(uint64_t off);
  std::string percpu_name(uint64_t link);
  std::string holder(const KRoot& r, uint64_t at, std::string* key);
};

// " (runqueues+0x10)": the per-CPU variable whose link value is `link` (a
// CPU's address less its __per_cpu_offset). symbolize() does not look for
// it: on x86-64 it lies outside the image (kint::PerCpu). "" when none
// covers it.
std::string KRefNamer::Impl::percpu_var(uint64_t link) {
  Module* m = k.prog().modules().module_at(stext);
  if (!m || !pcpu) return "";
  const uint64_t a = link + pcpu->link_delta;
  if (!pcpu->holds(a)) return "";
  const auto& syms = m->symbols();
  auto it = std::upper_bound(syms.begin(), syms.end(), a,
                             [](uint64_t v, const Symbol& s) { return v < s.addr; });
  if (it == syms.begin()) return "";
  --it;
  if (!it->is_object || a - it->addr >= std::max<uint64_t>(it->size, 1)) return "";
  return a > it->addr ? fmt::format(" ({}+{:#x})", it->name, a - it->addr)
                      : fmt::format(" ({})", it->name);
}

// "sym+0x10 [module]" or "sym+0x10" for vmlinux; the address when no
// symbol covers it.
std::string KRefNamer::Impl::sym(uint64_t a) {
  SymbolHit h = k.prog().modules().symbolize(a);
  if (h.module && h.sym) {
    // A module's .ko given with --ko is a module of the program too.
    std::string mod = h.module->basename();
    if (mod.size() > 3 && mod.compare(mod.size() - 3, 3, ".ko") == 0) mod.resize(mod.size() - 3);
    const std::string at = h.offset ? fmt::format("{}+{:#x}", h.sym->name, h.offset) : h.sym->name;
    return mod.rfind("vmlinux", 0) == 0 ? at : fmt::format("{} [{}]", at, mod);
  }
  if (const KModSymbol* s = mod_sym(a))
    return a > s->addr ? fmt::format("{}+{:#x} [{}]", s->name, a - s->addr, s->module)
                       : fmt::format("{} [{}]", s->name, s->module);
  return fmt::format("{:#x}", a);
}

// A word of the kernel's data: its variable, and the member when the
// variable's type is known ("super_blocks.next (.data)").
std::string KRefNamer::Impl::kernel_sym(uint64_t a, const char* section) {
  SymbolHit h = k.prog().modules().symbolize(a);
  if (!h.module || !h.sym) return fmt::format("{:#x} ({})", a, section);
  auto v = k.prog().resolve(h.sym->name);
  std::string path = v.ok() && v.value().type && v.value().addr == h.sym->addr
                         ? member_path_at(v.value().type, a - h.sym->addr)
                         : "";
  if (!path.empty()) return fmt::format("{}{} ({})", h.sym->name, path, section);
  return h.offset ? fmt::format("{}+{:#x} ({})", h.sym->name, h.offset, section)
                  : fmt::format("{} ({})", h.sym->name, section);
}

std::string KRefNamer::Impl::module_sym(uint64_t a, const std::string& module) {
  const KModSymbol* s = mod_sym(a);
  if (!s) return fmt::format("{:#x} (module {})", a, module);
  const std::string at = a > s->addr ? fmt::format("{}+{:#x}", s->name, a - s->addr) : s->name;
  return fmt::format("{} (module {}, {})", at, s->module, section_of(s->type));
}

// A kernel text address right after a call instruction: the return
// address (arm64's with its pointer-authentication code stripped), else 0.
uint64_t KRefNamer::Impl::return_address(uint64_t w) {
  if (pac_mask && (w >> 55 & 1)) w |= pac_mask;
  const bool text = (w >= stext && w < etext) || [&] {
    const KModSymbol* s = mod_sym(w);
    return s && (s->type | 0x20) == 't';
  }();
  if (!text) return 0;
  uint8_t b[8];
  if (!k.mem().read(w - 8, b, 8).ok()) return 0;
  if (k.aarch64()) {  // bl imm26, or blr Xn
    uint32_t insn;
    std::memcpy(&insn, b + 4, 4);
    return (insn & 0xfc000000) == 0x94000000 || (insn & 0xfffffc1f) == 0xd63f0000 ? w : 0;
  }
  // call rel32 (e8), or call r/m64 (ff /2) of 2, 3, 6 or 7 bytes.
  auto ff2 = [&](int len) { return b[8 - len] == 0xff && ((b[9 - len] >> 3) & 7) == 2; };
  return b[3] == 0xe8 || ff2(2) || ff2(3) || ff2(6) || ff2(7) ? w : 0;
}

// The function whose frame holds stack word `at`: the one the nearest
// return address below it returns into (the frame above a call belongs to
// the caller). Return addresses are found as crash's `bt -t` finds them.
std::string KRefNamer::Impl::frame(const KRoot& r, uint64_t at) {
  for (uint64_t a = at, n = 0; a >= r.sp + 8 && n < kMaxFrameWords; a -= 8, ++n) {
    uint64_t w = 0;
    if (!k.mem().read(a - 8, &w, 8).ok()) break;
    if (!(w = return_address(w))) continue;
    SymbolHit h = k.prog().modules().symbolize(w);
    if (h.sym) return h.sym->name;
    if (const KModSymbol* s = mod_sym(w)) return s->name;
  }
  return "";
}

// The per-CPU variable whose link value is `link`, by name; "" when none.
std::string KRefNamer::Impl::percpu_name(uint64_t link) {
  std::string v = percpu_var(link);  // " (name+0x10)"
  if (v.size() < 4) return "";
  v = v.substr(2, v.size() - 3);
  return v.substr(0, v.find('+'));
}

// What holds the root word at `at`, without the word's own offset: the
// variable, the task's frame, the page (holder()).
std::string KRefNamer::Impl::holder(const KRoot& r, uint64_t at, std::string* key) {
  std::string name, kk;
  switch (r.kind) {
    case KRoot::Kind::kKernelData: {
      SymbolHit h = k.prog().modules().symbolize(at);
      name = h.module && h.sym ? fmt::format("{} ({})", h.sym->name, r.section)
                               : fmt::format("kernel {} (no symbol)", r.section);
      kk = name;
      break;
    }
    case KRoot::Kind::kModule: {
      const KModSymbol* s = mod_sym(at);
      name = s ? fmt::format("{} (module {}, {})", s->name, s->module, section_of(s->type))
               : fmt::format("module {} (no symbol)", r.module);
      kk = name;
      break;
    }
    case KRoot::Kind::kPerCpu: {
      const std::string v = percpu_name(at - r.base);
      name = v.empty() ? fmt::format("per-CPU area of CPU {}", r.cpu)
                       : fmt::format("per-CPU area of CPU {} ({})", r.cpu, v);
      kk = name;
      break;
    }
    case KRoot::Kind::kStack: {
      const std::string f = frame(r, at);
      const std::string where = f.empty() ? "above its frames" : "frame " + f;
      name = fmt::format("task {} ({}) kernel stack, {}", r.pid, r.comm, where);
      kk = fmt::format("task {} kernel stack, {}", r.comm, where);
      break;
    }
    case KRoot::Kind::kRegisters:
      name = kk = fmt::format("CPU {}'s registers", r.cpu);
      break;
    case KRoot::Kind::kPage:
      name = fmt::format("kernel page {:#x} (no slab or vmalloc memory)", at & ~uint64_t{4095});
      kk = "kernel page";
      break;
  }
  if (key) *key = std::move(kk);
  return name;
}

std::string KRefNamer::Impl::root(const KRoot& r, uint64_t at) {
  switch (r.kind) {
    case KRoot::Kind::kKernelData:
      return kernel_sym(at, r.section.c_str());
    case KRoot::Kind::kModule:
      return module_sym(at, r.module);
    case KRoot::Kind::kPerCpu:
      return fmt::format("per-CPU area of CPU {}{}", r.cpu, percpu_var(at - r.base));
    case KRoot::Kind::kStack: {
      std::string f = frame(r, at);
      return fmt::format(
          "task {} ({}) kernel stack, {}", r.pid, r.comm,
          f.empty() ? fmt::format("{:#x} above its stack pointer", at - r.sp) : "frame " + f);
    }
    case KRoot::Kind::kRegisters:  // named from the value (referrer)
      return fmt::format("CPU {}'s registers", r.cpu);
    case KRoot::Kind::kPage: {
      return fmt::format("kernel page {:#x} (no slab or vmalloc memory)", at & ~uint64_t{4095});
    }
  }
  return "?";
}

KRefNamer::KRefNamer(KernelTarget& k, const KRefIndex& ix) : impl_(std::make_unique<Impl>(k, ix)) {}
KRefNamer::~KRefNamer() = default;

const Type* KRefNamer::cache_type(uint32_t cache) {
  Impl& m = *impl_;
  if (cache >= m.ix.caches().size()) return nullptr;
  if (m.types.empty()) m.types.resize(m.ix.caches().size());
  if (m.types[cache]) return *m.types[cache];
  const KSlabCache& c = m.ix.caches()[cache];
  const Type* found = nullptr;
  // The profile's types that say which cache holds them.
  if (auto kn = kint::knowledge(m.k); kn.ok())
    for (const auto& t : kn.value()->profile.types)
      if (t.allocation == "slab:" + c.name)
        if (auto L = kint::Layout::of(m.k, t.name); L.ok()) found = L.value().type;
  // A cache KMEM_CACHE made is named after its struct, of that struct's size.
  if (!found)
    if (auto t = m.k.prog().types().find("struct " + c.name);
        t.ok() && t.value()->strip() && t.value()->strip()->size == c.object_size)
      found = t.value()->strip();
  m.types[cache] = found;
  return found;
}

Result<void> KRefNamer::set_cache_type(const std::string& name, const Type* t) {
  Impl& m = *impl_;
  const auto& cs = m.ix.caches();
  for (uint32_t c = 0; c < cs.size(); ++c) {
    if (cs[c].name != name) continue;
    const Type* s = t ? t->strip() : nullptr;
    if (!s || s->size == 0 || s->size > cs[c].object_size)
      return make_error(
          Errc::kInvalidArgument,
          fmt::format("{} is {} bytes: not the type of {}'s {}-byte objects",
                      t ? t->display() : "?", s ? s->size : 0, name, cs[c].object_size));
    if (m.types.empty()) m.types.resize(cs.size());
    m.types[c] = s;
    return {};
  }
  return make_error(Errc::kNotFound,
                    fmt::format("no allocated object of cache {} in the index", name));
}

std::string KRefNamer::object(size_t i) {
  const KObject& o = impl_->ix.objects()[i];
  switch (o.kind) {
    case KObject::Kind::kSlab: {
      const KSlabCache& c = impl_->ix.caches()[o.cache];
      const Type* t = cache_type(o.cache);
      return t ? fmt::format("{} {:#x} ({})", c.name, o.addr, t->display())
               : fmt::format("{} {:#x}", c.name, o.addr);
    }
    case KObject::Kind::kVmalloc:
      return fmt::format("vmalloc area {:#x} ({} KiB, from {})", o.addr, o.size / 1024,
                         impl_->sym(o.caller));
    case KObject::Kind::kStack:
      return fmt::format("spare kernel stack {:#x}", o.addr);
  }
  return "?";
}

std::string KRefNamer::symbol(uint64_t addr) {
  return impl_->sym(addr);
}

std::string KRefNamer::member(size_t i, uint64_t off) {
  const KObject& o = impl_->ix.objects()[i];
  const Type* t = o.kind == KObject::Kind::kSlab ? cache_type(o.cache) : nullptr;
  return t ? member_path_at(t, off) : "";
}

std::string KRefNamer::holder(const GraphRef& r, std::string* key) {
  Impl& m = *impl_;
  if (r.value_root != GraphRef::kNone) {
    const KRoot& k = m.ix.roots()[m.ix.values()[r.value_root].tag];
    return m.holder(k, 0, key);
  }
  if (r.root == GraphRef::kNone) return referrer(r);
  const GraphRoot& g = m.ix.graph().roots()[r.root];
  return m.holder(m.ix.roots()[g.tag], r.from, key);
}

std::string KRefNamer::referrer(const GraphRef& r) {
  Impl& m = *impl_;
  if (r.object != GraphRef::kNone) {
    const KObject& o = m.ix.objects()[r.object];
    const uint64_t off = r.from - o.addr;
    if (o.kind == KObject::Kind::kSlab)
      if (const Type* t = cache_type(o.cache)) {
        std::string path = member_path_at(t, off);
        if (!path.empty()) return fmt::format("{}{} of {:#x}", t->display(), path, o.addr);
      }
    return fmt::format("{}+{:#x}", object(r.object), off);
  }
  if (r.root != GraphRef::kNone) {
    const GraphRoot& g = m.ix.graph().roots()[r.root];
    if (g.tag < m.ix.roots().size()) return m.root(m.ix.roots()[g.tag], r.from);
  }
  if (r.value_root != GraphRef::kNone) {
    const GraphValue& v = m.ix.values()[r.value_root];
    static const char* kRegs[27] = {"r15",     "r14",      "r13", "r12", "rbp",    "rbx", "r11",
                                    "r10",     "r9",       "r8",  "rax", "rcx",    "rdx", "rsi",
                                    "rdi",     "orig_rax", "rip", "cs",  "eflags", "rsp", "ss",
                                    "fs_base", "gs_base",  "ds",  "es",  "fs",     "gs"};
    return fmt::format("CPU {}'s register {}", m.ix.roots()[v.tag].cpu,
                       v.index < 27 ? kRegs[v.index] : "?");
  }
  return fmt::format("{:#x}", r.from);
}

}  // namespace lr
