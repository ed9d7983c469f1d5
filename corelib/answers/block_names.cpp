// Names for referring words and heap blocks (block_names.hpp).
#include "corelib/answers/block_names.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace lr {

namespace {

// A global's name with the member the word is in, from the variable's
// DWARF type: "owner[30]", "g_cfg.list.next"; "" without a symbol.
std::string global_text(const Program& prog, uint64_t addr) {
  SymbolHit h = prog.modules().symbolize(addr);
  if (!h.sym || !h.module) return "";
  auto v = prog.symbol_variable(h);
  std::string path = v.ok() && v.value().type && v.value().addr == h.sym->addr
                         ? member_path_at(v.value().type, addr - h.sym->addr)
                         : "";
  if (path.empty())
    return h.offset
               ? fmt::format("{}+{:#x} [{}]", demangle(h.sym->name), h.offset, h.module->basename())
               : fmt::format("{} [{}]", demangle(h.sym->name), h.module->basename());
  return fmt::format("{}{} [{}]", demangle(h.sym->name), path, h.module->basename());
}

// The range of `ranges` (disjoint, by address) holding `a`; nullptr.
const RootRange* range_of(const std::vector<RootRange>& ranges, uint64_t a) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), a,
                             [](uint64_t x, const RootRange& r) { return x < r.start; });
  if (it == ranges.begin()) return nullptr;
  --it;
  return a < it->end ? &*it : nullptr;
}

// Collects each object of a profile's sets (their type from set_begin).
class Collect final : public ProfileSink {
 public:
  explicit Collect(std::vector<KnownObjects::Object>* out) : out_(out) {}
  void set_begin(const ProfileSetSummary& s) override {
    type_ = s.type ? s.type->strip() : nullptr;
  }
  void object(const ProfileObject& o) override {
    if (type_ && type_->size) out_->push_back({o.addr, type_->size, type_, o.set->name});
  }
  void set_end(const ProfileSetSummary&) override {}

 private:
  std::vector<KnownObjects::Object>* out_;
  const Type* type_ = nullptr;
};

}  // namespace

Result<void> KnownObjects::add_profile(Program& prog, const Profile& p,
                                       const std::vector<std::string>& sets) {
  ProfileRunOptions ro;
  ro.only_sets = sets;
  Collect sink(&objs_);
  LR_TRY(run_profile(prog, p, ro, sink));
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

const KnownObjects::Object* KnownObjects::in_block(const HeapChunk& c) const {
  auto it = std::lower_bound(objs_.begin(), objs_.end(), c.user,
                             [](const Object& o, uint64_t a) { return o.addr < a; });
  return it != objs_.end() && it->addr - c.user < c.usable() ? &*it : nullptr;
}

uint64_t ref_value(const Program& prog, const Ref& r) {
  if (r.kind == RefFrom::kRegister) return r.value;
  uint64_t v = 0;
  return prog.mem().read(r.from, &v, 8).ok() ? v : r.value;
}

const std::vector<StackFrame>& RefNamer::frames(int tid) {
  auto it = frames_.find(tid);
  if (it == frames_.end()) {
    std::vector<StackFrame> f;
    for (const auto& t : core_.prog->core()->threads())
      if (t.tid == tid) f = unwind_thread(core_.prog->mem(), core_.prog->modules(), t);
    it = frames_.emplace(tid, std::move(f)).first;
  }
  return it->second;
}

// "handle(req*) [fx]" for the frame holding stack word `addr`, its number
// in `number`; "" when no frame does or its pc has no symbol.
std::string RefNamer::frame_function(int tid, uint64_t addr, int* number) {
  const auto& f = frames(tid);
  *number = frame_of(f, addr);
  if (*number < 0) return "";
  SymbolHit h = core_.prog->modules().symbolize(f[*number].pc);
  if (!h.sym) return "";
  return fmt::format("{} [{}]", demangle(h.sym->name), h.module ? h.module->basename() : "?");
}

std::string RefNamer::holder(const Ref& r, std::string* key) {
  std::string k, name;
  switch (r.kind) {
    case RefFrom::kGlobal: {
      SymbolHit h = core_.prog->modules().symbolize(r.from);
      if (h.sym && h.module)
        k = name = fmt::format("global {} [{}]", demangle(h.sym->name), h.module->basename());
      const RootRange* rr = range_of(core_.ci.index->root_ranges(), r.from);
      if (k.empty()) k = name = rr ? "global data of " + rr->what : "global data";
      break;
    }
    case RefFrom::kStack: {
      int n = -1;
      const std::string f = frame_function(r.tid, r.from, &n);
      name = f.empty() ? fmt::format("thread {} stack", r.tid)
                       : fmt::format("thread {} frame #{} {}", r.tid, n, f);
      k = f.empty() ? "stack" : "stack " + f;
      break;
    }
    case RefFrom::kTls:
    case RefFrom::kRegister: {
      const char* what = r.kind == RefFrom::kTls ? "TLS" : "registers";
      name = fmt::format("thread {} {}", r.tid, what), k = what;
      break;
    }
    case RefFrom::kMapping:
    case RefFrom::kReadOnly: {
      const char* what = r.kind == RefFrom::kMapping ? "writable mapping" : "read-only mapping";
      name = k = what;
      if (const RootRange* rr = range_of(core_.ci.index->root_ranges(), r.from)) {
        name = fmt::format("{} {:#x}-{:#x}", what, rr->start, rr->end);
        if (!rr->what.empty()) name += " (" + rr->what + ")", k += " " + rr->what;
      }
      break;
    }
    case RefFrom::kChunk:
      name = k = "heap";
      break;
  }
  if (key) *key = std::move(k);
  return name;
}

std::string RefNamer::frame_text(int tid, uint64_t addr) {
  const auto& frames_of = frames(tid);
  const int i = frame_of(frames_of, addr);
  if (i < 0) return "";
  SymbolHit h = core_.prog->modules().symbolize(frames_of[i].pc);
  if (!h.sym) return fmt::format("frame #{} {}", i, h.format());
  return fmt::format("frame #{} {}+{:#x} [{}]", i, demangle(h.sym->name), h.offset,
                     h.module ? h.module->basename() : "?");
}

std::string RefNamer::local_text(int tid, uint64_t addr) {
  const auto& f = frames(tid);
  const int i = frame_of(f, addr);
  if (i < 0) return "";
  auto it = locals_.find({tid, i});
  if (it == locals_.end())
    it = locals_
             .emplace(std::make_pair(tid, i),
                      frame_variables(core_.prog->modules(), core_.prog->types(), f[i], i == 0))
             .first;
  for (const FrameVariable& v : it->second) {
    const uint64_t size = v.type->strip()->size;
    if (v.pointed_to || addr < v.addr || addr - v.addr >= size) continue;
    return "local " + v.qualified() + member_path_at(v.type, addr - v.addr);
  }
  return "";
}

void RefNamer::type_containers() {
  if (containers_typed_) return;
  containers_typed_ = true;
  type_heap_blocks(core_, types_);
}

uint64_t RefNamer::container_of(size_t c) const {
  const BlockType* t = types_.get(c);
  return t ? t->holder : 0;
}

std::string RefNamer::block_type(size_t c) {
  const HeapChunk h = core_.ci.index->heap().in_use[c];
  if (const auto* k = known_.at(h.user); k && k->addr - h.user < h.usable())
    return fmt::format("{} (set {})", k->type->display(), k->set);
  if (const BlockType* t = types_.get(c)) return std::string(t->name);
  if (types_.from_vtable(c)) return std::string(types_.get(c)->name);
  return core_.program_name(h);
}

// A container holding a block whole (an anchor chain's step): named by
// what holds the container, as the typing named it ("g_conns",
// "Registry.items"), not by the member its first byte happens to be.
std::string RefNamer::describe_whole(const Ref& r) {
  const BlockType* t = types_.get(r.target);
  const std::string via(t && t->holder == r.from ? t->via : "");
  Ref word = r;
  word.whole = false;
  if (via.empty()) return describe(word);
  if (r.kind == RefFrom::kGlobal) {
    SymbolHit h = core_.prog->modules().symbolize(r.from);
    if (h.sym && h.module) return fmt::format("global {} [{}]", via, h.module->basename());
  }
  return fmt::format("{}, holding {}", describe(word), via);
}

std::string RefNamer::describe(const Ref& r) {
  if (r.whole) return describe_whole(r);
  const Program& prog = *core_.prog;
  if (r.stale) {
    for (const auto& sr : core_.ci.index->stale_ranges())
      if (r.from >= sr.start && r.from < sr.end)
        return fmt::format("stale word at {:#x} in the {} {:#x}-{:#x}: not a root", r.from, sr.what,
                           sr.start, sr.end);
    return fmt::format("stale word at {:#x}: not a root", r.from);
  }
  switch (r.kind) {
    case RefFrom::kRegister:
      for (const auto& t : prog.core()->threads())
        if (t.tid == r.tid)
          return fmt::format("thread {} register {}", r.tid, register_name(t, r.from));
      return fmt::format("thread {} register {}", r.tid, r.from);
    case RefFrom::kStack: {
      uint64_t sp = 0;
      for (const auto& t : prog.core()->threads())
        if (t.tid == r.tid) sp = t.sp();
      std::string f = frame_text(r.tid, r.from);
      if (std::string l = local_text(r.tid, r.from); !l.empty()) f += ", " + l;
      return fmt::format("thread {} stack at {:#x} (sp+{:#x}){}", r.tid, r.from, r.from - sp,
                         f.empty() ? "" : ", " + f);
    }
    case RefFrom::kTls: {
      // x86_64: static TLS lies below the thread pointer, the thread's
      // control block at and above it; aarch64 the other way round.
      uint64_t tp = 0;
      for (const auto& t : prog.core()->threads())
        if (t.tid == r.tid) tp = t.tp;
      const bool arm = prog.core()->machine() == EM_AARCH64;
      const char* reg = arm ? "tpidr_el0" : "fs_base";
      const bool tls = arm ? r.from >= tp : r.from < tp;
      return fmt::format("thread {} {} at {:#x} ({}{}{:#x})", r.tid, tls ? "TLS" : "control block",
                         r.from, reg, r.from < tp ? "-" : "+",
                         r.from < tp ? tp - r.from : r.from - tp);
    }
    case RefFrom::kGlobal: {
      std::string g = global_text(prog, r.from);
      if (!g.empty()) return "global " + g;
      if (const RootRange* rr = range_of(core_.ci.index->root_ranges(), r.from))
        return fmt::format("global {:#x} ({} data)", r.from, rr->what);
      return fmt::format("global {:#x}", r.from);
    }
    case RefFrom::kMapping:
      // A mapping the core leaves out, read from its file, says so.
      if (const RootRange* rr = range_of(core_.ci.index->root_ranges(), r.from);
          rr && rr->what.rfind("mapping of ", 0) == 0)
        return fmt::format("{} at {:#x}", rr->what, r.from);
      return fmt::format("writable mapping at {:#x}", r.from);
    case RefFrom::kReadOnly:
      if (const RootRange* rr = range_of(core_.ci.index->root_ranges(), r.from))
        return fmt::format("read-only mapping at {:#x} ({} {:#x}-{:#x})", r.from, rr->what,
                           rr->start, rr->end);
      return fmt::format("read-only mapping at {:#x}", r.from);
    case RefFrom::kChunk:
      break;
  }
  return describe_in_block(r);
}

std::string RefNamer::describe_in_block(const Ref& r) {
  // In a profile's object: its type's member ("struct obj.next of 0x...").
  if (const auto* k = known_.at(r.from)) {
    std::string m = member_path_at(k->type, r.from - k->addr);
    return fmt::format("{}{} of {:#x} (set {})", k->type->display(),
                       m.empty() ? fmt::format("+{:#x}", r.from - k->addr) : m, k->addr, k->set);
  }
  const RefIndex& ix = *core_.ci.index;
  const size_t c = ix.chunk_at(r.from);
  if (c == SIZE_MAX) return fmt::format("{:#x}", r.from);
  const HeapChunk h = ix.heap().in_use[c];
  std::string type = block_type(c), member;
  const BlockType* t = types_.get(c);
  if (t && t->type) member = t->member_at(r.from - h.user);
  // A container's block names its element's member: "node of std::map<int,
  // Conn*> g_conns, element.second".
  if (!member.empty() && t->holder)
    return fmt::format("chunk {:#x}+{:#x} ({} bytes, {}, element{})", h.user, r.from - h.user,
                       h.usable(), type, member);
  return fmt::format("chunk {:#x}+{:#x} ({} bytes{}{})", h.user, r.from - h.user, h.usable(),
                     type.empty() ? "" : ", " + type,
                     member.empty() ? "" : " " + std::string(t->name) + member);
}

}  // namespace lr
