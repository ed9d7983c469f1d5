// Containers' own blocks, typed by what holds them (container_blocks.hpp).
#include "corelib/answers/container_blocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "corelib/base/names.hpp"
#include "corelib/debuginfo/frame_vars.hpp"
#include "corelib/walks/container_kinds.hpp"

namespace lr {

namespace {

constexpr size_t kMaxWarnings = 20;
constexpr int kMaxDepth = 8;              // members inside members, as blocktypes reads them
constexpr size_t kMaxSlots = 256;         // containers in one type: an array of them says no more
constexpr uint64_t kMaxArray = 256;       // elements of an array member looked into
constexpr size_t kMaxQueued = 4'000'000;  // containers waiting to be read

const ContainerKind* kind_of(const Type* t) {
  static const std::vector<const ContainerKind*> kinds = container_kinds();
  t = t ? t->strip() : nullptr;
  if (!t || !t->is_aggregate()) return nullptr;
  for (const ContainerKind* k : kinds)
    if (k->holds && k->own_blocks && k->holds(t)) return k;
  return nullptr;
}

// A container inside an object of some type: where, and its member path.
struct Slot {
  uint64_t offset;
  const Type* type;
  const ContainerKind* kind;
  std::string path;
};

// A typed block as the holder of its containers: "Registry" for "struct
// Registry" (C++ writes no keyword; the container's name follows).
std::string holder_name(const std::string& type) {
  for (std::string_view k : {"struct ", "union ", "class "})
    if (type.rfind(k, 0) == 0) return type.substr(k.size());
  return type;
}

class Typer {
 public:
  Typer(const IndexedCore& core, BlockTypes& types, const std::vector<uint8_t>& within,
        uint64_t max_blocks)
      : prog_(*core.prog),
        ix_(*core.ci.index),
        types_(types),
        within_(within),
        max_blocks_(max_blocks),
        examined_(ix_.chunks(), 0),
        inner_read_(ix_.chunks(), 0) {}

  void from_globals();
  // Each thread's frames' variables in memory: their containers queued;
  // their typed pointers wait for type_frames_pointees (after the
  // containers' blocks are typed, as for globals).
  void from_frames();
  void add_pointee(const FrameVariable& v);
  size_t type_frames_pointees();
  // The blocks typed since the last call whose type holds containers.
  void from_typed_blocks();
  // Reads the queued containers; returns how many blocks it typed.
  uint64_t run();
  ContainerTyping result() { return std::move(out_); }

 private:
  struct Job {
    const ContainerKind* kind;
    const Type* type;
    uint64_t addr;
    std::string via;
  };
  const std::vector<Slot>& slots(const Type* t);
  // The containers inside `n` objects of type `t` from `addr` on, named
  // `via` and their member path.
  void queue(const Type* t, uint64_t addr, uint64_t n, const std::string& via);
  void warn(std::string w);
  void type_block(const Job& j, std::string_view container, const OwnBlock& b);

  Program& prog_;
  const RefIndex& ix_;
  BlockTypes& types_;
  const std::vector<uint8_t>& within_;
  uint64_t max_blocks_;
  std::deque<Job> jobs_;
  std::vector<FrameVariable> locals_;
  std::unordered_map<const Type*, std::vector<Slot>> slots_;
  std::vector<uint8_t> examined_;    // per chunk: a typed block already looked into
  std::vector<uint8_t> inner_read_;  // per chunk: typed before, its contents queued once
  uint64_t not_queued_ = 0;          // containers past kMaxQueued
  // The last block name made, and what it was made of.
  std::string name_, name_via_;
  const char* name_role_ = nullptr;
  std::string_view name_container_;
  ContainerTyping out_;
};

const std::vector<Slot>& Typer::slots(const Type* t) {
  auto it = slots_.find(t);
  if (it != slots_.end()) return it->second;
  std::vector<Slot> out;
  struct Item {
    const Type* t;
    uint64_t off;
    std::string path;
    int depth;
  };
  std::vector<Item> stack{{t, 0, "", 0}};
  while (!stack.empty() && out.size() < kMaxSlots) {
    Item i = std::move(stack.back());
    stack.pop_back();
    const Type* s = i.t ? i.t->strip() : nullptr;
    if (!s || i.depth > kMaxDepth) continue;
    if (const ContainerKind* k = kind_of(s)) {
      out.push_back({i.off, s, k, i.path});
    } else if (s->kind == TypeKind::kArray && s->target && s->target->strip() &&
               s->target->strip()->is_aggregate()) {
      const uint64_t es = s->target->strip()->size;
      for (uint64_t n = std::min(s->count, kMaxArray); es && n-- > 0;)
        stack.push_back({s->target, i.off + n * es, fmt::format("{}[{}]", i.path, n), i.depth + 1});
    } else if (s->is_aggregate()) {
      for (auto m = s->members.rbegin(); m != s->members.rend(); ++m)
        if (!m->bit_size)
          stack.push_back({m->type, i.off + m->offset,
                           m->name.empty() ? i.path : i.path + "." + m->name, i.depth + 1});
    }
  }
  return slots_.emplace(t, std::move(out)).first->second;
}

void Typer::queue(const Type* t, uint64_t addr, uint64_t n, const std::string& via) {
  const auto& ss = slots(t);
  if (ss.empty()) return;
  const uint64_t size = t->strip()->size;
  for (uint64_t i = 0; i < (size ? n : 1); ++i)
    for (const Slot& s : ss) {
      // The queue is bounded like the blocks typed: a vector of millions of
      // strings queues no more than the typing would read.
      if (jobs_.size() >= kMaxQueued) {
        ++not_queued_;
        continue;
      }
      jobs_.push_back({s.kind, s.type, addr + i * size + s.offset, via + s.path});
    }
}

void Typer::warn(std::string w) {
  if (out_.warning_count++ < kMaxWarnings) out_.warnings.push_back(std::move(w));
}

// Each global holding a root reference, once, by its DWARF type.
void Typer::from_globals() {
  std::unordered_set<uint64_t> seen;
  uint64_t lo = 0, hi = 0;  // the last symbol's bytes: a big table's words look it up once
  for (size_t i = 0; i < ix_.root_count(); ++i) {
    const Ref r = ix_.root_ref(i);
    if (r.kind != RefFrom::kGlobal || (r.from >= lo && r.from < hi)) continue;
    SymbolHit h = prog_.modules().symbolize(r.from);
    if (h.sym) lo = h.sym->addr, hi = h.sym->addr + h.sym->size;
    if (!h.sym || !h.module || !seen.insert(h.sym->addr).second) continue;
    auto v = prog_.symbol_variable(h);
    if (!v.ok() || v.value().addr != h.sym->addr || !v.value().type) continue;
    queue(v.value().type, h.sym->addr, 1, source_name(h.sym->name));
  }
}

void Typer::from_frames() {
  const CoreFile* core = prog_.core();
  if (!core) return;
  for (const ThreadInfo& t : core->threads()) {
    const auto frames = unwind_thread(prog_.mem(), prog_.modules(), t);
    for (size_t i = 0; i < frames.size(); ++i)
      for (FrameVariable& v : frame_variables(prog_.modules(), prog_.types(), frames[i], i == 0)) {
        if (!v.pointed_to) add_pointee(v);
        queue(v.type, v.addr, 1, v.qualified());
        locals_.push_back(std::move(v));
      }
  }
}

// A pointer or reference local in memory (a parameter spilled to the
// stack) also gives the object it points at, for the containers inside it.
void Typer::add_pointee(const FrameVariable& v) {
  const Type* p = v.type->strip();
  const Type* target = p->kind == TypeKind::kPointer && p->target ? p->target->strip() : nullptr;
  uint64_t at = 0;
  if (!target || !target->is_aggregate() || !target->size ||
      !prog_.mem().read(v.addr, &at, 8).ok() || !at)
    return;
  FrameVariable d{at, p->target, v.name, v.function, true};
  queue(d.type, d.addr, 1, d.qualified());
  locals_.push_back(std::move(d));
}

size_t Typer::type_frames_pointees() {
  size_t typed = 0;
  for (const FrameVariable& v : locals_) {
    // A pointer in a register: the object it points at may be a block.
    if (v.pointed_to) typed += types_.point_at(v.addr, v.type, v.qualified());
    typed += types_.from_object(v.addr, v.type, v.qualified());
  }
  return typed;
}

void Typer::from_typed_blocks() {
  // Most programs' typed blocks hold no container: one look per type.
  bool any = false;
  for (const Type* t : types_.distinct_types()) any = any || !slots(t).empty();
  if (!any) return;
  const auto& chunks = ix_.heap().in_use;
  types_.each([&](uint32_t c, const BlockType& bt) {
    if (c >= within_.size() || !(within_[c] & 1) || !bt.type || examined_[c] ||
        slots(bt.type).empty())
      return;
    examined_[c] = 1;
    const uint64_t size = bt.type->strip()->size;
    const uint64_t room = chunks[c].usable() > bt.offset ? chunks[c].usable() - bt.offset : 0;
    const uint64_t n = size ? std::min(bt.live_count(), room / size) : 0;
    if (n)
      queue(bt.type, chunks[c].user + bt.offset, n,
            holder_name(std::string(bt.name)) + (n > 1 ? "[]" : ""));
  });
}

void Typer::type_block(const Job& j, std::string_view container, const OwnBlock& b) {
  const size_t c = ix_.chunk_at(b.addr);
  const auto& chunks = ix_.heap().in_use;
  if (c == SIZE_MAX || chunks[c].user != b.addr) {
    if (b.maybe_inside) return;
    warn(fmt::format("{} {}: its {} at {:#x} is no heap block's start", container, j.via, b.role,
                     b.addr));
    return;
  }
  if (c >= within_.size() || !(within_[c] & 1)) return;
  const uint64_t es = b.elem ? b.elem->strip()->size : 0;
  const uint64_t room = chunks[c].usable() > b.elem_offset ? chunks[c].usable() - b.elem_offset : 0;
  // A count read from the core: compared by division, never multiplied.
  if (es && std::max<uint64_t>(b.elem_count, 1) > room / es) {
    warn(fmt::format("{} {}: its {} at {:#x} is smaller than what it holds", container, j.via,
                     b.role, b.addr));
    return;
  }
  // One name for all of a container's blocks of one role (a million
  // nodes), made once.
  if (b.role != name_role_ || container != name_container_ || j.via != name_via_) {
    name_role_ = b.role, name_container_ = container, name_via_ = j.via;
    name_ = fmt::format("{} of {} {}", b.role, container, j.via);
  }
  BlockType t{b.elem,
              name_,
              j.via,
              false,
              b.elem_offset,
              std::max<uint64_t>(b.elem_count, 1),
              b.only_elements ? b.elem_offset + b.elem_count * es : UINT64_MAX,
              j.addr};
  if (!types_.set(c, std::move(t))) {
    // Typed already (a control block by its vtable, reached first through
    // a typed pointer): what the container says it holds is still read.
    if (b.elem && b.elem_offset && !inner_read_[c]) {
      inner_read_[c] = 1;
      queue(b.elem, b.addr + b.elem_offset, b.elem_count, j.via + "[]");
    }
    return;
  }
  ++out_.blocks;
  // A container's elements are one of many ("g_names[].first").
  if (b.elem) queue(b.elem, b.addr + b.elem_offset, b.elem_count, j.via + "[]");
}

uint64_t Typer::run() {
  const uint64_t before = out_.blocks;
  WalkLimits lim;
  while (!jobs_.empty() && out_.blocks < max_blocks_) {
    Job j = std::move(jobs_.front());
    jobs_.pop_front();
    auto r = j.kind->own_blocks(prog_, j.type, j.addr, lim);
    ++out_.containers;
    if (!r.ok()) {
      warn(fmt::format("{}: {}", j.via, r.error().message));
      continue;
    }
    if (!r.value().warning.empty()) warn(r.value().warning);
    for (const OwnBlock& b : r.value().blocks) type_block(j, r.value().container, b);
  }
  if (!jobs_.empty() || not_queued_)
    warn(fmt::format("containers typed {} blocks, the most they type; {} containers not read",
                     out_.blocks, jobs_.size() + not_queued_));
  jobs_.clear();
  not_queued_ = 0;
  return out_.blocks - before;
}

}  // namespace

bool is_container_type(const Type* t) {
  return kind_of(t) != nullptr;
}

bool is_container_link(const Type* t) {
  static const std::vector<const ContainerKind*> kinds = container_kinds();
  t = t ? t->strip() : nullptr;
  if (!t || !t->is_aggregate()) return false;
  for (const ContainerKind* k : kinds)
    if (k->link && k->link(t)) return true;
  return false;
}

ContainerTyping type_heap_blocks(const IndexedCore& core, BlockTypes& types,
                                 const std::vector<uint8_t>* within, uint64_t max_blocks) {
  const std::vector<uint8_t> all(within ? 0 : core.ci.index->chunks(), 1);
  const std::vector<uint8_t>& in = within ? *within : all;
  // A container's own links (a list's node base, a shared_ptr's control
  // block pointer) are left to its reader, which types its blocks whole.
  types.set_opaque(&is_container_type, &is_container_link);
  Typer typer(core, types, in, max_blocks);
  if (!within) {
    typer.from_globals();
    typer.from_frames();
    typer.run();
    types.from_globals();
    typer.type_frames_pointees();
  }
  // Each round types what the typed blocks point at, then the blocks of
  // the containers inside them; a round whose containers type nothing new
  // ends it (propagate has followed every typed block's pointers already).
  for (int round = 0; round < 64; ++round) {
    types.propagate(in);
    typer.from_typed_blocks();
    if (typer.run() == 0) break;
  }
  return typer.result();
}

std::vector<RefIndex::LiveExtent> live_extents(const BlockTypes& types) {
  std::vector<RefIndex::LiveExtent> live;
  types.each([&](uint32_t c, const BlockType& bt) {
    if (bt.live_end != UINT64_MAX) live.push_back({c, bt.offset, bt.live_end});
  });
  std::sort(live.begin(), live.end(),
            [](const RefIndex::LiveExtent& a, const RefIndex::LiveExtent& b) {
              return a.chunk < b.chunk;
            });
  return live;
}

bool past_live_extent(const std::vector<RefIndex::LiveExtent>& live, size_t c, uint64_t user,
                      uint64_t at) {
  auto e = std::lower_bound(live.begin(), live.end(), c,
                            [](const RefIndex::LiveExtent& x, size_t k) { return x.chunk < k; });
  return e != live.end() && e->chunk == c && (at - user < e->begin || at - user >= e->end);
}

void set_past_extents_aside(const RefIndex& ix, const std::vector<RefIndex::LiveExtent>& live,
                            std::vector<Ref>* refs, std::vector<Ref>* stale) {
  if (live.empty()) return;
  const auto& chunks = ix.heap().in_use;
  auto past = [&](const Ref& r) {
    if (r.kind != RefFrom::kChunk) return false;
    const size_t src = ix.chunk_at(r.from);
    return src != SIZE_MAX && past_live_extent(live, src, chunks[src].user, r.from);
  };
  for (const auto& r : *refs)
    if (past(r)) stale->push_back(r);
  refs->erase(std::remove_if(refs->begin(), refs->end(), past), refs->end());
}

bool may_hold_containers(Program& prog) {
  for (const ContainerKind* k : container_kinds())
    if (k->own_blocks && (k->runtime_symbol.empty() || prog.modules().defines(k->runtime_symbol)))
      return true;
  return false;
}

void add_tagger_spans(const IndexedCore& core, std::vector<RefIndex::LiveExtent>& live) {
  const RefIndex& ix = *core.ci.index;
  const size_t typed = live.size();
  for (const auto& t : core.tags) {
    if (t.tagger->heap() && t.tagger->heap() != &ix.heap()) continue;  // another walk's blocks
    for (const auto& s : t.tagger->live_spans())
      if (const size_t c = ix.chunk_at(s.user); c != SIZE_MAX && ix.heap().in_use[c].user == s.user)
        live.push_back({static_cast<uint32_t>(c), s.begin, s.end});
  }
  if (live.size() == typed) return;
  auto by_chunk = [](const RefIndex::LiveExtent& a, const RefIndex::LiveExtent& b) {
    return a.chunk < b.chunk;
  };
  std::stable_sort(live.begin(), live.end(), by_chunk);
  live.erase(std::unique(live.begin(), live.end(),
                         [](const RefIndex::LiveExtent& a, const RefIndex::LiveExtent& b) {
                           return a.chunk == b.chunk;
                         }),
             live.end());
}

TypedReach typed_reach(const IndexedCore& core, BlockTypes& types) {
  TypedReach out;
  const RefIndex& ix = *core.ci.index;
  if (may_hold_containers(*core.prog)) {
    out.typing = type_heap_blocks(core, types);
    out.typed = true;
    out.live = live_extents(types);
  }
  add_tagger_spans(core, out.live);
  out.reach = out.live.empty() ? ix.reachable() : ix.reachable(out.live);
  return out;
}

}  // namespace lr
