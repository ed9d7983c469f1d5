// Trace x core join: lifetimes, balance, agreement with the core, blame.
#include "corelib/analyses/correlate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "corelib/blocks/refindex.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/dump/elfcore.hpp"

namespace lr {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kFlagged:
      return "flagged";
    case Verdict::kExplained:
      return "explained";
    case Verdict::kBalanced:
      return "balanced";
    case Verdict::kBeforeWindow:
      return "before-window";
    case Verdict::kUnreliable:
      return "unreliable";
    case Verdict::kDisagree:
      return "disagree";
    case Verdict::kNotInTrace:
      return "not-in-trace";
  }
  return "?";
}

// ---- frames ---------------------------------------------------------------

FrameResolver::FrameResolver(const ModuleSet* mods, const CoreFile* core)
    : mods_(mods), core_(core) {
  if (core_) entry_ = core_->auxv_value(9 /* AT_ENTRY */);
}

static const Module* core_module_for(const ModuleSet& mods, const TraceMapping& m) {
  if (!m.build_id.empty())
    for (const auto& mod : mods.modules())
      if (mod->build_id == m.build_id) return mod.get();
  std::string key = module_key(m.path);
  for (const auto& mod : mods.modules())
    if (mod->path == m.path) return mod.get();
  for (const auto& mod : mods.modules())
    if (module_key(mod->path) == key) return mod.get();
  return nullptr;
}

uint64_t FrameResolver::core_address(const Trace& t, const TraceFrame& f) const {
  if (!mods_) return 0;
  if (f.addr) {
    if (t.mappings.empty()) return f.addr;  // same process instance as the core
    for (const auto& m : t.mappings) {
      if (f.addr < m.start || f.addr >= m.end) continue;
      const Module* mod = core_module_for(*mods_, m);
      if (!mod) return 0;
      uint64_t file_off = f.addr - m.start + m.offset;
      // The core's VMA of the same file at the same file offset.
      if (core_)
        for (const auto& r : core_->mapped_ranges())
          if (r.path == mod->path && file_off >= r.file_offset &&
              file_off < r.file_offset + (r.end - r.start))
            return r.start + (file_off - r.file_offset);
      return mod->base + file_off;  // offset-linear layout
    }
    return 0;
  }
  if (f.module.empty()) return 0;
  const Module* mod = mods_->by_name(f.module);
  if (!mod) {
    std::string key = module_key(f.module);
    for (const auto& m : mods_->modules())
      if (module_key(m->path) == key) {
        mod = m.get();
        break;
      }
  }
  if (!mod) return 0;
  // mtrace() prints the caller relative to its object's base (the C
  // library's 2.36 does; older releases printed the address, as its own
  // mtrace script allows): a value inside the object that is no offset in
  // it is an address.
  if (f.has_modoff && f.modoff >= mod->end - mod->base && f.modoff >= mod->base &&
      f.modoff < mod->end)
    return f.modoff;
  if (f.has_modoff) return mod->base + f.modoff;
  if (!f.sym.empty()) {
    auto hit = mods_->lookup(f.sym + "@" + mod->path);
    if (hit.ok()) return hit->second->addr + f.symoff;
  }
  return 0;
}

ResolvedFrame FrameResolver::resolve(const Trace& t, const TraceFrame& f) const {
  // Symbolic frames carry their own text; only bare addresses are cached.
  if (!f.addr || !f.sym.empty() || !f.module.empty()) return resolve_uncached(t, f);
  auto key = std::make_pair(&t, f.addr);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (cache_.size() > (1u << 20)) cache_.clear();  // bounded on hostile traces
  return cache_.emplace(key, resolve_uncached(t, f)).first->second;
}

ResolvedFrame FrameResolver::resolve_uncached(const Trace& t, const TraceFrame& f) const {
  ResolvedFrame r;
  uint64_t a = core_address(t, f);
  if (a && mods_ && entry_ && a == entry_) {
    // gdb's `call` (and lr_inject) return to the entry point: no call
    // instruction precedes it, so a-1 would name the function before _start.
    const Module* m = mods_->module_at(a);
    std::string base = m ? m->basename() : std::string("?");
    r.key = m ? fmt::format("{}+{:#x}", module_key(base), a - m->bias) : fmt::format("{:#x}", a);
    r.func = "_start";
    r.text = fmt::format("_start [{}] (entry point: a debugger-injected call)", base);
    return r;
  }
  if (a && mods_) {
    // Return addresses: look the function up at a-1 (a call can be the last
    // instruction of a function) but show the offset of `a` itself.
    SymbolHit h = mods_->symbolize(a - 1);
    if (h.module) {
      std::string base = h.module->basename();
      r.key = fmt::format("{}+{:#x}", module_key(base), a - h.module->bias);
      if (h.sym) {
        r.func = h.sym->name;
        r.text = fmt::format("{}+{:#x} [{}]", h.sym->name, a - h.sym->addr, base);
      } else {
        r.text = fmt::format("{}+{:#x}", base, a - h.module->bias);
      }
      return r;
    }
  }
  // Nothing in the core: keep what the tool printed, normalised.
  std::string mk = f.module.empty() ? std::string() : module_key(f.module);
  if (!f.sym.empty()) {
    r.func = f.sym;
    r.key = fmt::format("{}:{}+{:#x}", mk, f.sym, f.symoff);
    r.text = mk.empty() ? fmt::format("{}+{:#x}", f.sym, f.symoff)
                        : fmt::format("{}+{:#x} [{}]", f.sym, f.symoff, f.module);
  } else if (f.has_modoff) {
    r.key = fmt::format("{}+{:#x}", mk, f.modoff);
    r.text = fmt::format("{}+{:#x}", f.module, f.modoff);
  } else if (f.addr) {
    // An absolute address the core cannot place: module+offset from the
    // trace's own mappings at least.
    for (const auto& m : t.mappings)
      if (f.addr >= m.start && f.addr < m.end) {
        std::string base = m.path.substr(m.path.rfind('/') + 1);
        r.key = fmt::format("{}+file{:#x}", module_key(base), f.addr - m.start + m.offset);
        r.text = fmt::format("{:#x} [{}+file {:#x}]", f.addr, base, f.addr - m.start + m.offset);
        return r;
      }
    r.key = r.text = fmt::format("{:#x}", f.addr);
  } else {
    r.key = r.text = "?";
  }
  return r;
}

// ---- holders from the reference index --------------------------------------

std::map<uint64_t, int64_t> count_references(
    const RefIndex& index, const std::vector<std::pair<uint64_t, uint64_t>>& targets) {
  std::map<uint64_t, int64_t> out;
  for (auto [addr, size] : targets) {
    auto refs = index.refs_into(addr, size);
    if (!refs.ok()) {
      out[addr] = -1;
      continue;
    }
    int64_t n = 0;
    for (const Ref& r : refs.value())
      n += (r.kind == RefFrom::kChunk || r.kind == RefFrom::kGlobal ||
            r.kind == RefFrom::kMapping) &&
           (r.value & ~uint64_t{7}) == addr;
    out[addr] = n;
  }
  return out;
}

}  // namespace lr
