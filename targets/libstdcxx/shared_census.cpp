// shared_ptr control blocks and their owners (shared_census.hpp).
#include "targets/libstdcxx/shared_census.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace lr {

const char* shared_verdict_name(SharedVerdict v) {
  switch (v) {
    case SharedVerdict::kOk:
      return "ok";
    case SharedVerdict::kLeakedOwner:
      return "leaked-owner";
    case SharedVerdict::kExtraOwner:
      return "extra-owner";
    case SharedVerdict::kLeaked:
      return "leaked";
    case SharedVerdict::kCorrupt:
      return "corrupt";
  }
  return "?";
}

uint64_t ControlBlock::live_owners() const {
  return static_cast<uint64_t>(
      std::count_if(owners.begin(), owners.end(), [](const SharedOwner& o) { return o.live; }));
}

namespace {

constexpr std::string_view kControl = "std::_Sp_counted_";

// Where the counts are, from the DWARF of the block's base class (its lock
// policy as the block's class names it: "(__gnu_cxx::_Lock_policy)2").
struct Counts {
  uint64_t use = 0, weak = 0;
};
Result<Counts> counts_layout(Program& prog, const std::string& block_class) {
  std::string policy = "2";
  const std::string_view tag = "(__gnu_cxx::_Lock_policy)";
  if (auto at = block_class.rfind(tag); at != std::string::npos)
    policy = block_class.substr(at + tag.size(), 1);
  const std::string base = "std::_Sp_counted_base<(__gnu_cxx::_Lock_policy)" + policy + ">";
  auto t = prog.types().find(base);
  if (!t.ok())
    return make_error(Errc::kNotFound,
                      fmt::format("{} is not in the program's DWARF: the counts of its "
                                  "shared_ptr control blocks cannot be read",
                                  base));
  LR_ASSIGN(FieldLoc u, resolve_path(t.value(), "_M_use_count"));
  LR_ASSIGN(FieldLoc w, resolve_path(t.value(), "_M_weak_count"));
  return Counts{u.offset, w.offset};
}

// Where a block class keeps its object: inside it (make_shared's), or as
// a pointer it holds (a separate or deleter block); looked up once a class.
struct ObjectAt {
  bool known = false, inside = false;
  uint64_t off = 0;
};
ObjectAt object_layout(Program& prog, const std::string& block_class) {
  auto t = prog.types().find(block_class);
  if (!t.ok()) return {};
  if (auto s = resolve_path(t.value(), "_M_impl._M_storage"); s.ok())
    return {true, true, s->offset};
  for (const char* p : {"_M_ptr", "_M_impl._M_ptr"})
    if (auto f = resolve_path(t.value(), p); f.ok()) return {true, false, f->offset};
  return {};
}

// The managed object; 0 when the block's class is not in the DWARF.
uint64_t managed_object(Program& prog, const ObjectAt& l, uint64_t addr) {
  if (!l.known) return 0;
  if (l.inside) return addr + l.off;
  auto v = prog.mem().read_u64(addr + l.off);
  return v.ok() ? v.value() : 0;
}

int64_t read_count(const Memory& mem, uint64_t at) {
  uint32_t v = 0;
  return mem.read(at, &v, 4).ok() ? static_cast<int32_t>(v) : -1;
}

// An owner is a word that points at the block's start; registers' (a
// stopped thread's copies, as the retained tree sets them aside) and dead
// memory's are not owners.
bool owner_word(const Ref& r, uint64_t addr) {
  return r.value == addr && r.kind != RefFrom::kRegister && !r.stale;
}

// Whether the word at `at`, in chunk `c` starting at `user`, lies outside
// its extent in `live` (sorted by chunk): a stale word.
bool stale_word(const std::vector<RefIndex::LiveExtent>& live, size_t c, uint64_t user,
                uint64_t at) {
  auto e = std::lower_bound(live.begin(), live.end(), c,
                            [](const RefIndex::LiveExtent& x, size_t k) { return x.chunk < k; });
  return e != live.end() && e->chunk == c && (at - user < e->begin || at - user >= e->end);
}

// The roots' owners of each block, then every heap block's, each source
// block read once for all the control blocks it points at (`at`: the
// blocks' chunk numbers, ascending, as `s.blocks` is ordered).
void find_owners(const IndexedCore& core, const std::vector<uint32_t>& at,
                 const std::vector<uint8_t>& reach, SharedCensus* s) {
  const RefIndex& ix = *core.ci.index;
  for (size_t i = 0; i < at.size(); ++i) {
    ControlBlock& b = s->blocks[i];
    for (const Ref& r : ix.root_refs_to(at[i]))
      if (owner_word(r, b.addr)) b.owners.push_back({r, true});
  }
  ix.each_chunk_ref_into(at, [&](const Ref& r) {
    const size_t i =
        static_cast<size_t>(std::lower_bound(at.begin(), at.end(), r.target) - at.begin());
    ControlBlock& b = s->blocks[i];
    if (!owner_word(r, b.addr)) return;
    const size_t src = ix.chunk_at(r.from);
    b.owners.push_back({r, src == SIZE_MAX || (reach[src] & RefIndex::kReached) != 0});
  });
}

SharedVerdict judge(const ControlBlock& b) {
  constexpr int64_t kMaxCount = int64_t{1} << 28;
  if (b.use < 0 || b.weak < 0 || b.use > kMaxCount || b.weak > kMaxCount)
    return SharedVerdict::kCorrupt;
  if (!b.reached && b.use > 0) return SharedVerdict::kLeaked;
  const auto live = static_cast<int64_t>(b.live_owners());
  if (live < b.expected()) return SharedVerdict::kLeakedOwner;
  if (live > b.expected()) return SharedVerdict::kExtraOwner;
  return SharedVerdict::kOk;
}

// Counted again without the words past containers' elements: an erased
// shared_ptr's words stay in a vector's spare capacity, and a reader that
// took them for owners would see one owner more than counted, and a cycle
// as reached. Only when some block has more owners than counted: the
// containers' typing reads every container the program holds.
void set_stale_aside(const IndexedCore& core, RefNamer& names, const std::vector<uint32_t>& at,
                     SharedCensus* s) {
  if (std::none_of(s->blocks.begin(), s->blocks.end(),
                   [](const ControlBlock& b) { return b.verdict == SharedVerdict::kExtraOwner; }))
    return;
  type_heap_blocks(core, names.types());
  std::vector<RefIndex::LiveExtent> live;
  names.types().each([&](uint32_t c, const BlockType& bt) {
    if (bt.live_end != UINT64_MAX) live.push_back({c, bt.offset, bt.live_end});
  });
  if (live.empty()) return;
  std::sort(live.begin(), live.end(),
            [](const RefIndex::LiveExtent& a, const RefIndex::LiveExtent& b) {
              return a.chunk < b.chunk;
            });
  const RefIndex& ix = *core.ci.index;
  const std::vector<uint8_t> reach = ix.reachable(live);
  const auto& chunks = ix.heap().in_use;
  s->stale_words = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    ControlBlock& b = s->blocks[i];
    b.reached = reach[at[i]] & RefIndex::kReached;
    for (SharedOwner& o : b.owners) {
      const size_t src = o.ref.kind == RefFrom::kChunk ? ix.chunk_at(o.ref.from) : SIZE_MAX;
      if (src == SIZE_MAX) continue;  // a root's word stays an owner
      o.stale = stale_word(live, src, chunks[src].user, o.ref.from);
      o.live = !o.stale && (reach[src] & RefIndex::kReached);
      s->stale_words += o.stale;
    }
    b.verdict = judge(b);
  }
}

// "Cyc" from "std::_Sp_counted_ptr_inplace<Cyc, std::allocator<void>, ...>".
std::string first_template_arg(const std::string& cls) {
  const size_t b = cls.find('<');
  if (b == std::string::npos) return "";
  int depth = 0;
  for (size_t i = b + 1; i < cls.size(); ++i) {
    if (cls[i] == '<' || cls[i] == '(') ++depth;
    if (cls[i] == '>' || cls[i] == ')') --depth;
    if (depth < 0 || (depth == 0 && cls[i] == ',')) return cls.substr(b + 1, i - b - 1);
  }
  return "";
}

}  // namespace

std::string shared_owner_name(const IndexedCore& core, RefNamer& names, const SharedCensus& s,
                              const SharedOwner& o) {
  const uint64_t at = o.ref.from;
  auto it = std::upper_bound(s.blocks.begin(), s.blocks.end(), at,
                             [](uint64_t a, const ControlBlock& x) { return a < x.addr; });
  if (o.ref.kind == RefFrom::kChunk && it != s.blocks.begin()) {
    const ControlBlock& in = *std::prev(it);
    if (in.object >= in.addr && at >= in.object && at < in.addr + in.size) {
      const std::string cls = first_template_arg(in.type);
      auto t = core.prog->types().find(cls);
      const std::string path = t.ok() ? member_path_at(t.value(), at - in.object) : "";
      return fmt::format("{} {:#x}{} (in control block {:#x})", cls, in.object,
                         path.empty() ? fmt::format("+{:#x}", at - in.object) : path, in.addr);
    }
  }
  const std::string n = names.describe(o.ref);
  return o.stale ? n + " (past its container's elements: stale, not counted)" : n;
}

Result<SharedCensus> shared_census(const IndexedCore& core, RefNamer& names) {
  SharedCensus out;
  const RefIndex& ix = *core.ci.index;
  out.partial = ix.partial();
  const auto& chunks = ix.heap().in_use;
  const Memory& mem = core.prog->mem();
  const std::vector<uint8_t> reach = ix.reachable();
  std::optional<Counts> counts;
  std::unordered_map<std::string, ObjectAt> layouts;  // by block class
  std::vector<uint32_t> at;                           // each block's chunk
  for (size_t c = 0; c < chunks.size(); ++c) {
    auto vptr = mem.read_u64(chunks[c].user);
    if (!vptr.ok()) continue;
    std::string cls = names.types().vtable_class(vptr.value());
    if (cls.rfind(kControl, 0) != 0) continue;
    if (!counts) {
      LR_ASSIGN(Counts l, counts_layout(*core.prog, cls));
      counts = l;
    }
    ControlBlock b;
    b.addr = chunks[c].user;
    b.size = chunks[c].usable();
    b.use = read_count(mem, b.addr + counts->use);
    b.weak = read_count(mem, b.addr + counts->weak);
    auto l = layouts.find(cls);
    if (l == layouts.end()) l = layouts.emplace(cls, object_layout(*core.prog, cls)).first;
    b.object = managed_object(*core.prog, l->second, b.addr);
    b.type = std::move(cls);
    b.reached = reach[c] & RefIndex::kReached;
    out.blocks.push_back(std::move(b));
    at.push_back(static_cast<uint32_t>(c));
  }
  find_owners(core, at, reach, &out);
  for (ControlBlock& b : out.blocks) b.verdict = judge(b);
  set_stale_aside(core, names, at, &out);
  return out;
}

}  // namespace lr
