// Names for referring words and heap blocks (refs_names.hpp).
#include "refs_names.hpp"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "cmd_gluster.hpp"
#include "cmd_heap.hpp"
#include "corelib/profiles/profile.hpp"

namespace lrcli {

namespace {

// A C++ symbol as its source spells it ("holder_thread(void*)"); C names
// unchanged.
std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int st = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &st);
  std::string out = st == 0 && d ? d : name;
  std::free(d);
  return out;
}

// A global's name with the member the word is in, from the variable's
// DWARF type: "owner[30]", "g_cfg.list.next"; "" without a symbol.
std::string global_text(const lr::Program& prog, uint64_t addr) {
  lr::SymbolHit h = prog.modules().symbolize(addr);
  if (!h.sym || !h.module) return "";
  auto v = prog.resolve(h.sym->name + "@" + h.module->basename());
  std::string path = v.ok() && v.value().type && v.value().addr == h.sym->addr
                         ? lr::member_path_at(v.value().type, addr - h.sym->addr)
                         : "";
  if (path.empty())
    return h.offset
               ? fmt::format("{}+{:#x} [{}]", demangle(h.sym->name), h.offset, h.module->basename())
               : fmt::format("{} [{}]", demangle(h.sym->name), h.module->basename());
  return fmt::format("{}{} [{}]", demangle(h.sym->name), path, h.module->basename());
}

const char* register_name(uint16_t machine, uint64_t i) {
  return i < static_cast<uint64_t>(lr::register_count(machine)) ? lr::register_names(machine)[i]
                                                                : "?";
}

// Collects each object of a profile's sets (their type from set_begin).
class Collect final : public lr::ProfileSink {
 public:
  explicit Collect(std::vector<KnownObjects::Object>* out) : out_(out) {}
  void set_begin(const lr::ProfileSetSummary& s) override {
    type_ = s.type ? s.type->strip() : nullptr;
  }
  void object(const lr::ProfileObject& o) override {
    if (type_ && type_->size) out_->push_back({o.addr, type_->size, type_, o.set->name});
  }
  void set_end(const lr::ProfileSetSummary&) override {}

 private:
  std::vector<KnownObjects::Object>* out_;
  const lr::Type* type_ = nullptr;
};

}  // namespace

GlusterNames gluster_names(lr::Program& prog, std::vector<std::string>* warnings, bool itables) {
  GlusterNames g;
  if (!prog.modules().by_name("libglusterfs.so.0")) return g;
  if (auto t = ensure_gluster_types(prog, ""); !t.ok()) {
    warnings->push_back("GlusterFS blocks are not named: " + t.error().message);
    return g;
  }
  lr::GlusterSections sec;
  sec.dicts = sec.clients = sec.fds = false;
  sec.itable = itables;
  auto r = lr::analyze_gluster(prog, sec);
  if (!r.ok()) {
    warnings->push_back("GlusterFS blocks are not named: " + r.error().message);
    return g;
  }
  g.report = std::make_unique<lr::GlusterReport>(std::move(r).value());
  g.namer = std::make_unique<lr::GfBlockNamer>(*g.report, prog.mem());
  return g;
}

lr::Result<void> KnownObjects::add_profile(lr::Program& prog, const lr::Profile& p,
                                           const std::vector<std::string>& sets) {
  lr::ProfileRunOptions ro;
  ro.only_sets = sets;
  Collect sink(&objs_);
  LR_TRY(lr::run_profile(prog, p, ro, sink));
  // By address; of two at one address (an object and its first member's),
  // the larger first, so the inner one is found last below.
  std::sort(objs_.begin(), objs_.end(), [](const Object& a, const Object& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.size > b.size;
  });
  return {};
}

const KnownObjects::Object* KnownObjects::at(uint64_t a) const {
  auto it = std::upper_bound(objs_.begin(), objs_.end(), a,
                             [](uint64_t x, const Object& o) { return x < o.addr; });
  // The nearest objects starting at or below `a`: the first that holds it
  // (objects nest only a few deep; bounded).
  for (int i = 0; it != objs_.begin() && i < 64; ++i) {
    --it;
    if (a - it->addr < it->size) return &*it;
  }
  return nullptr;
}

uint64_t ref_value(const lr::Program& prog, const lr::Ref& r) {
  if (r.kind == lr::RefFrom::kRegister) return r.value;
  uint64_t v = 0;
  return prog.mem().read(r.from, &v, 8).ok() ? v : r.value;
}

std::string RefNamer::frame_text(int tid, uint64_t addr) {
  auto it = frames_.find(tid);
  if (it == frames_.end()) {
    std::vector<lr::StackFrame> f;
    for (const auto& t : prog_.core()->threads())
      if (t.tid == tid) f = lr::unwind_thread(prog_.mem(), prog_.modules(), t);
    it = frames_.emplace(tid, std::move(f)).first;
  }
  const int i = lr::frame_of(it->second, addr);
  if (i < 0) return "";
  lr::SymbolHit h = prog_.modules().symbolize(it->second[i].pc);
  if (!h.sym) return fmt::format("frame #{} {}", i, h.format());
  return fmt::format("frame #{} {}+{:#x} [{}]", i, demangle(h.sym->name), h.offset,
                     h.module ? h.module->basename() : "?");
}

std::string RefNamer::block_type(size_t c) {
  const lr::HeapChunk& h = ix_.heap().in_use[c];
  if (const auto* k = known_.at(h.user); k && k->addr - h.user < h.usable())
    return fmt::format("{} (set {})", k->type->display(), k->set);
  if (const lr::BlockType* t = types_.get(c)) return t->name;
  if (types_.from_vtable(c)) return types_.get(c)->name;
  return gf_.namer ? gf_.namer->name(h) : "";
}

std::string RefNamer::describe(const lr::Ref& r) {
  switch (r.kind) {
    case lr::RefFrom::kRegister:
      return fmt::format("thread {} register {}", r.tid,
                         register_name(prog_.core()->machine(), r.from));
    case lr::RefFrom::kStack: {
      uint64_t sp = 0;
      for (const auto& t : prog_.core()->threads())
        if (t.tid == r.tid) sp = t.sp();
      std::string f = frame_text(r.tid, r.from);
      return fmt::format("thread {} stack at {:#x} (sp+{:#x}){}", r.tid, r.from, r.from - sp,
                         f.empty() ? "" : ", " + f);
    }
    case lr::RefFrom::kTls: {
      // x86_64: static TLS lies below the thread pointer, the thread's
      // control block at and above it; aarch64 the other way round.
      uint64_t tp = 0;
      for (const auto& t : prog_.core()->threads())
        if (t.tid == r.tid) tp = t.tp;
      const bool arm = prog_.core()->machine() == EM_AARCH64;
      const char* reg = arm ? "tpidr_el0" : "fs_base";
      const bool tls = arm ? r.from >= tp : r.from < tp;
      return fmt::format("thread {} {} at {:#x} ({}{}{:#x})", r.tid, tls ? "TLS" : "control block",
                         r.from, reg, r.from < tp ? "-" : "+",
                         r.from < tp ? tp - r.from : r.from - tp);
    }
    case lr::RefFrom::kGlobal: {
      std::string g = global_text(prog_, r.from);
      if (!g.empty()) return "global " + g;
      for (const auto& rr : ix_.root_ranges())  // .bss past the last mapping: no symbol
        if (r.from >= rr.start && r.from < rr.end)
          return fmt::format("global {:#x} ({} data)", r.from, rr.what);
      return fmt::format("global {:#x}", r.from);
    }
    case lr::RefFrom::kMapping:
      return fmt::format("writable mapping at {:#x}", r.from);
    case lr::RefFrom::kChunk:
      break;
  }
  // In a profile's object: its type's member ("struct obj.next of 0x...").
  if (const auto* k = known_.at(r.from)) {
    std::string m = lr::member_path_at(k->type, r.from - k->addr);
    return fmt::format("{}{} of {:#x} (set {})", k->type->display(),
                       m.empty() ? fmt::format("+{:#x}", r.from - k->addr) : m, k->addr, k->set);
  }
  const size_t c = ix_.chunk_at(r.from);
  if (c == SIZE_MAX) return fmt::format("{:#x}", r.from);
  const lr::HeapChunk& h = ix_.heap().in_use[c];
  std::string type = block_type(c), member;
  if (const lr::BlockType* t = types_.get(c); t && t->type)
    member = lr::member_path_at(t->type, r.from - h.user);
  return fmt::format("chunk {:#x}+{:#x} ({} bytes{}{})", h.user, r.from - h.user, h.usable(),
                     type.empty() ? "" : ", " + type,
                     member.empty() ? "" : " " + types_.get(c)->name + member);
}

nlohmann::json RefNamer::ref_json(const lr::Ref& r) {
  nlohmann::json j = ref_brief_json(r);
  j["what"] = describe(r);
  j["value"] = hex(ref_value(prog_, r));
  return j;
}

}  // namespace lrcli
