// shared_ptr control blocks and their owners (shared_census.hpp).
#include "corelib/answers/shared_census.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "corelib/base/huge_pages.hpp"

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

Ref SharedCensus::ref(const ControlBlock& b, const SharedOwner& o) {
  Ref r;
  r.from = o.from;
  r.value = b.addr;
  r.target = b.chunk;
  r.kind = o.kind;
  r.tid = o.tid;
  return r;
}

namespace {

// `n` bytes at `a` through the window `w` (no virtual call while the
// heap's blocks lie in one mapping), else read; false when unreadable.
// Inlined: millions of blocks are read a word at a time, nearly all
// through the window.
[[gnu::always_inline]] inline bool read_at(const Memory& mem, Memory::Window& w, uint64_t a,
                                           void* out, size_t n) {
  if (const uint8_t* p = mem.direct(w, a, n)) return std::memcpy(out, p, n), true;
  return mem.read(a, out, n).ok();
}

// The class of the control block at `addr`, by its first word as the
// census found it; -1 when unreadable.
int32_t class_of(const Memory& mem, Memory::Window& w, const SharedCensus& s, uint64_t addr) {
  uint64_t vptr = 0;
  if (!read_at(mem, w, addr, &vptr, 8)) return -1;
  auto it = s.vtables.find(vptr);
  return it == s.vtables.end() ? -1 : it->second;
}

// An owner is a word that points at the block's start; registers' (a
// stopped thread's copies, as the retained tree sets them aside) and dead
// memory's are not owners.
bool owner_word(const Ref& r, uint64_t addr) {
  return r.value == addr && r.kind != RefFrom::kRegister && !r.stale;
}

// What makes an owner live: a root reaches its block (`reach`), and it lies
// inside its container's elements (`live`, by chunk; empty: all do).
struct Liveness {
  const std::vector<uint8_t>& reach;
  const std::vector<RefIndex::LiveExtent>& live;
};

// The owner words of the blocks in chunks `at` (ascending): the roots'
// first, then each source block's, read once for all the control blocks it
// points at; `fn(k, owner)` for each, k its block's place in `at`.
template <class Fn>
void each_owner(const IndexedCore& core, const std::vector<uint32_t>& at, const Liveness& l,
                Fn fn) {
  const RefIndex& ix = *core.ci.index;
  const auto& chunks = ix.heap().in_use;
  auto place = [&](uint32_t chunk) {
    auto b = std::lower_bound(at.begin(), at.end(), chunk);
    return b == at.end() || *b != chunk ? UINT32_MAX : static_cast<uint32_t>(b - at.begin());
  };
  for (size_t k = 0; k < ix.root_count(); ++k) {  // by target: roots first per block
    const Ref r = ix.root_ref(k);
    const uint32_t i = place(r.target);
    if (i != UINT32_MAX && owner_word(r, chunks[r.target].user))
      fn(i, SharedOwner{r.from, r.tid, r.kind, true, false, false});
  }
  ix.each_chunk_ref_into(at, [&](const Ref& r, uint32_t src) {
    const uint32_t i = place(r.target);
    if (i == UINT32_MAX || !owner_word(r, chunks[r.target].user)) return;
    const bool stale = !l.live.empty() && past_live_extent(l.live, src, chunks[src].user, r.from);
    fn(i, SharedOwner{r.from, r.tid, r.kind, !stale && (l.reach[src] & RefIndex::kReached) != 0,
                      stale, false});
  });
}

// Each block's live owners counted (and the stale words), none kept: most
// blocks are ok, and a core may hold millions. `starts`: the words of
// reached blocks at each block's start (reachable_counting_starts), the
// live owners while the heap is untyped.
std::vector<uint32_t> live_owners(const IndexedCore& core, const Liveness& l,
                                  std::vector<uint32_t> starts, SharedCensus* s) {
  const std::vector<uint32_t>& at = s->found;
  s->stale_words = 0;
  if (!l.live.empty()) {  // the heap typed: words past containers' elements set aside
    std::vector<uint32_t> live(at.size(), 0);
    each_owner(core, at, l, [&](uint32_t k, const SharedOwner& o) {
      live[k] += o.live;
      s->stale_words += o.stale;
    });
    return live;
  }
  // Untyped, every word of a reached block is live: the index counted
  // them; the roots' are added.
  const RefIndex& ix = *core.ci.index;
  for (size_t k = 0; k < ix.root_count(); ++k) {
    const Ref r = ix.root_ref(k);
    auto b = std::lower_bound(at.begin(), at.end(), r.target);
    if (b != at.end() && *b == r.target && owner_word(r, ix.heap().in_use[r.target].user))
      ++starts[static_cast<size_t>(b - at.begin())];
  }
  return starts;
}

// The owners of the blocks listed, kept block by block in one array by a
// counting sort (stable: the roots' first).
void collect_owners(const IndexedCore& core, const Liveness& l, SharedCensus* s) {
  std::vector<uint32_t> at(s->blocks.size());
  for (size_t i = 0; i < at.size(); ++i) at[i] = s->blocks[i].chunk;
  std::vector<std::pair<uint32_t, SharedOwner>> found;
  each_owner(core, at, l, [&](uint32_t i, const SharedOwner& o) { found.push_back({i, o}); });
  std::vector<uint32_t> start(s->blocks.size() + 1, 0);
  for (const auto& f : found) ++start[f.first + 1];
  for (size_t i = 0; i < s->blocks.size(); ++i) {
    start[i + 1] += start[i];
    s->blocks[i].owners_begin = s->blocks[i].owners_end = start[i];
  }
  s->owners.resize(found.size());
  for (const auto& [i, o] : found) s->owners[s->blocks[i].owners_end++] = o;
}

// A block's counts packed as judging needs them: the owners expected, bit
// 30 set while use_count > 0; kCorruptCounts for counts no program reaches
// (negative, or past 2^28; so the owners expected stay below 2^29).
constexpr int32_t kCorruptCounts = -1, kUseAbove0 = int32_t{1} << 30;
int32_t pack_counts(int32_t use, int32_t weak) {
  constexpr int32_t kMaxCount = int32_t{1} << 28;
  if (use < 0 || weak < 0 || use > kMaxCount || weak > kMaxCount) return kCorruptCounts;
  ControlBlock b;
  b.use = use, b.weak = weak;
  return static_cast<int32_t>(b.expected()) | (use > 0 ? kUseAbove0 : 0);
}

SharedVerdict judge(int32_t counts, bool reached, uint32_t live, uint32_t unsure) {
  if (counts == kCorruptCounts) return SharedVerdict::kCorrupt;
  if (!reached && (counts & kUseAbove0)) return SharedVerdict::kLeaked;
  const int64_t expected = counts & ~kUseAbove0;
  if (int64_t{live} < expected) return SharedVerdict::kLeakedOwner;
  if (int64_t{live} - unsure > expected) return SharedVerdict::kExtraOwner;
  return SharedVerdict::kOk;
}

SharedVerdict judge(const ControlBlock& b) {
  return judge(pack_counts(b.use, b.weak), b.reached, b.live, b.unsure);
}

// Counted again without the words past containers' elements: an erased
// shared_ptr's words stay in a vector's spare capacity, and a reader that
// took them for owners would see one owner more than counted, and a cycle
// as reached. `reach` and `live` become the ones the words past the
// elements are left out of; false when no container has such words.
bool set_stale_aside(const IndexedCore& core, RefNamer& names, std::vector<uint8_t>* reach,
                     std::vector<RefIndex::LiveExtent>* live) {
  *live = live_extents(names.types());
  if (live->empty()) return false;
  *reach = core.ci.index->reachable(*live);
  return true;
}

std::string first_template_arg(const std::string& cls);

// The member of another control block's in-place object that holds `at`
// ("Cyc" and ".next._M_refcount._M_pi"); no class when none does. Any
// block found may hold it, listed or not.
struct InPlace {
  uint64_t block = 0, object = 0;
  std::string cls, path;
};
InPlace inplace_member(const IndexedCore& core, const SharedCensus& s, uint64_t at) {
  const auto& chunks = core.ci.index->heap().in_use;
  auto it = std::upper_bound(s.found.begin(), s.found.end(), at,
                             [&](uint64_t a, uint32_t x) { return a < chunks[x].user; });
  if (it == s.found.begin()) return {};
  const HeapChunk& c = chunks[*std::prev(it)];
  Memory::Window w;
  const int32_t found_cls = class_of(core.prog->mem(), w, s, c.user);
  if (found_cls < 0) return {};
  const auto cls = static_cast<size_t>(found_cls);
  const SharedObjectAt& l = s.objects[cls];
  if (!l.known || !l.inside || at < c.user + l.off || at >= c.user + c.usable()) return {};
  InPlace p{c.user, c.user + l.off, first_template_arg(s.classes[cls]), ""};
  auto t = core.prog->types().find(p.cls);
  if (t.ok()) p.path = member_path_at(t.value(), at - p.object);
  return p;
}

// Whether a member path ends in a library's owner member ("._M_pi",
// ".__cntrl_").
bool owner_member(const std::string& path, const std::vector<SharedLayout>& layouts) {
  for (const auto& l : layouts) {
    const std::string m = "." + l.owner_member;
    if (path.size() >= m.size() && path.compare(path.size() - m.size(), m.size(), m) == 0)
      return true;
  }
  return false;
}

// Whether the types known say the word is a shared_ptr's or weak_ptr's
// pointer to its block: a member of a typed heap block, of another block's in-place
// object, or of a global.
bool typed_owner(const IndexedCore& core, RefNamer& names, const SharedCensus& s,
                 const std::vector<SharedLayout>& layouts, const SharedOwner& o) {
  auto pi_member = [&](const std::string& path) { return owner_member(path, layouts); };
  const RefIndex& ix = *core.ci.index;
  if (o.kind == RefFrom::kChunk) {
    const size_t src = ix.chunk_at(o.from);
    if (src == SIZE_MAX) return false;
    if (const BlockType* bt = names.types().get(src); bt && bt->type)
      return pi_member(bt->member_at(o.from - ix.heap().in_use[src].user));
    return pi_member(inplace_member(core, s, o.from).path);
  }
  if (o.kind != RefFrom::kGlobal) return false;
  SymbolHit h = core.prog->modules().symbolize(o.from);
  if (!h.sym || !h.module) return false;
  auto v = core.prog->symbol_variable(h);
  return v.ok() && v->type && pi_member(member_path_at(v->type, o.from - v->addr));
}

// A block with more live owners than counted is proof of an extra owner
// only through words typed as owners: a conservative reader also finds
// stale copies (a dead stack slot, a freed block's old contents reused by
// malloc past the new owner's bytes), which a real daemon has plenty of.
void weigh_untyped(const IndexedCore& core, RefNamer& names,
                   const std::vector<SharedLayout>& layouts, SharedCensus* s) {
  for (ControlBlock& b : s->blocks) {
    if (b.verdict != SharedVerdict::kExtraOwner) continue;
    b.unsure = 0;
    for (uint32_t k = b.owners_begin; k < b.owners_end; ++k) {
      SharedOwner& o = s->owners[k];
      o.unsure = o.live && !typed_owner(core, names, *s, layouts, o);
      b.unsure += o.unsure;
    }
    b.verdict = judge(b);
    s->unsure_blocks += b.verdict != SharedVerdict::kExtraOwner;
    --s->verdicts[static_cast<size_t>(SharedVerdict::kExtraOwner)];
    ++s->verdicts[static_cast<size_t>(b.verdict)];
  }
}

// The control-block classes met, by a block's first word when it points
// into a module (-1: no control block's vtable): a program has a few
// classes, met millions of times. Each class's layout is its library's.
struct BlockClasses {
  std::vector<SharedLayout> libraries = shared_layouts();
  std::unordered_map<uint64_t, int32_t> by_vptr;
  std::vector<SharedCounts> counts;  // by class (their objects: SharedCensus::objects)
};

// The class of a block whose first word is `vptr`, as an index into
// s->classes; -1 when it is no control block's.
Result<int32_t> block_class(Program& prog, RefNamer& names, uint64_t vptr, BlockClasses* bc,
                            SharedCensus* s) {
  if (auto it = bc->by_vptr.find(vptr); it != bc->by_vptr.end()) return it->second;
  // A vtable lies in a module: the heap's own values (pointers, numbers),
  // millions of them, are told apart with no symbol lookup and not kept.
  if (!prog.modules().module_at(vptr)) return -1;
  std::string cls = names.types().vtable_class(vptr);
  int32_t i = -1;
  for (const SharedLayout& l : bc->libraries) {
    if (cls.empty() || !l.block_class(cls)) continue;
    LR_ASSIGN(SharedCounts counts, l.counts(prog, cls));
    i = static_cast<int32_t>(s->classes.size());
    s->objects.push_back(l.object(prog, cls));
    bc->counts.push_back(counts);
    s->classes.push_back(std::move(cls));
    break;
  }
  bc->by_vptr.emplace(vptr, i);
  if (i >= 0) s->vtables.emplace(vptr, i);
  return i;
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

// A count of `c.width` bytes at `at`, as the library means it; -1 (no
// count a program reaches) when unreadable or past an int.
int32_t read_count(const Memory& mem, Memory::Window& w, uint64_t at, const SharedCounts& c) {
  int64_t v = 0;
  if (c.width == 4) {
    int32_t n = 0;
    if (!read_at(mem, w, at, &n, 4)) return -1;
    v = n;
  } else if (c.width != 8 || !read_at(mem, w, at, &v, 8)) {
    return -1;
  }
  if (v > INT32_MAX - c.bias || v < INT32_MIN + 1 - c.bias) return -1;
  return static_cast<int32_t>(v + c.bias);
}

// The control blocks among the heap's blocks: each block's first word
// looked up as a vtable (once a value).
Result<void> find_blocks(const IndexedCore& core, RefNamer& names, BlockClasses* bc,
                         SharedCensus* s) {
  const auto& chunks = core.ci.index->heap().in_use;
  const Memory& mem = core.prog->mem();
  Memory::Window w;
  // The last vtable met and its class: a program's millions of blocks of
  // one class follow one another, and skip the table's hashing.
  uint64_t last = 0;
  int32_t last_cls = -1;
  // Room for every chunk reserved, written only as blocks are found: no
  // regrowth copying millions of entries into fresh pages, and on huge
  // pages (a fault per 2 MiB, not per 4 KiB).
  reserve_huge(s->found, chunks.size());
  reserve_huge(s->found_counts, chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    uint64_t vptr = 0;
    if (!read_at(mem, w, chunks[c].user, &vptr, 8)) continue;
    if (vptr != last || !last) {
      LR_ASSIGN(const int32_t cls, block_class(*core.prog, names, vptr, bc, s));
      if (cls < 0) continue;
      last = vptr, last_cls = cls;
    }
    const SharedCounts& counts = bc->counts[static_cast<size_t>(last_cls)];
    s->found.push_back(static_cast<uint32_t>(c));
    s->found_counts.push_back(
        pack_counts(read_count(mem, w, chunks[c].user + counts.use, counts),
                    read_count(mem, w, chunks[c].user + counts.weak, counts)));
  }
  return {};
}

// A block found, read: its counts and object. Its first word was a
// control block's vtable when found, so its class is found again; memory
// that reads otherwise now is refused, never read as another class.
Result<ControlBlock> read_block(const IndexedCore& core, const BlockClasses& bc,
                                const SharedCensus& s, size_t i, Memory::Window& w) {
  const Memory& mem = core.prog->mem();
  const uint32_t chunk = s.found[i];
  const HeapChunk& c = core.ci.index->heap().in_use[chunk];
  const int32_t found_cls = class_of(mem, w, s, c.user);
  if (found_cls < 0)
    return make_error(Errc::kFault, fmt::format("control block at {:#x}: its first word no longer "
                                                "reads as the vtable it was found by",
                                                c.user));
  ControlBlock b;
  b.addr = c.user;
  b.size = c.usable();
  const auto cls = static_cast<size_t>(found_cls);
  const SharedCounts& counts = bc.counts[cls];
  b.use = read_count(mem, w, b.addr + counts.use, counts);
  b.weak = read_count(mem, w, b.addr + counts.weak, counts);
  const SharedObjectAt& l = s.objects[cls];
  uint64_t obj = 0;
  b.object = !l.known                                   ? 0
             : l.inside                                 ? b.addr + l.off
             : read_at(mem, w, b.addr + l.off, &obj, 8) ? obj
                                                        : 0;
  b.chunk = chunk;
  b.cls = static_cast<uint32_t>(found_cls);
  return b;
}

// Every block judged by its owners live under `l`: the verdicts counted,
// the blocks listed kept whole (those not ok; `all`: every one).
Result<void> judge_all(const IndexedCore& core, const BlockClasses& bc, const Liveness& l,
                       std::vector<uint32_t> starts, bool all, SharedCensus* s) {
  const std::vector<uint32_t> live = live_owners(core, l, std::move(starts), s);
  s->blocks.clear();
  s->verdicts.fill(0);
  Memory::Window w;
  // Judged by the counts packed when found: most blocks are ok, and are
  // not read again.
  for (size_t i = 0; i < s->found.size(); ++i) {
    const bool reached = l.reach[s->found[i]] & RefIndex::kReached;
    const SharedVerdict v = judge(s->found_counts[i], reached, live[i], 0);
    ++s->verdicts[static_cast<size_t>(v)];
    if (!all && v == SharedVerdict::kOk) continue;
    LR_ASSIGN(ControlBlock b, read_block(core, bc, *s, i, w));
    b.live = live[i];
    b.reached = reached;
    b.verdict = v;
    s->blocks.push_back(b);
  }
  return {};
}

}  // namespace

std::string shared_owner_name(const IndexedCore& core, RefNamer& names, const SharedCensus& s,
                              const ControlBlock& b, const SharedOwner& o) {
  if (o.kind == RefFrom::kChunk) {
    const InPlace p = inplace_member(core, s, o.from);
    if (p.block)
      return fmt::format("{} {:#x}{} (in control block {:#x})", p.cls, p.object,
                         p.path.empty() ? fmt::format("+{:#x}", o.from - p.object) : p.path,
                         p.block);
  }
  const std::string n = names.describe(SharedCensus::ref(b, o));
  if (o.stale) return n + " (past its container's elements: stale, not counted)";
  return o.unsure ? n + " (no type says it is a shared_ptr: maybe a stale copy)" : n;
}

Result<SharedCensus> shared_census(const IndexedCore& core, RefNamer& names, bool all_owners) {
  SharedCensus out;
  const RefIndex& ix = *core.ci.index;
  out.partial = ix.partial();
  BlockClasses bc;
  LR_TRY(find_blocks(core, names, &bc, &out));
  std::vector<uint32_t> starts;
  std::vector<uint8_t> reach = ix.reachable_counting_starts(out.found, &starts);
  std::vector<RefIndex::LiveExtent> live;  // none until the heap is typed
  LR_TRY(judge_all(core, bc, {reach, live}, std::move(starts), all_owners, &out));
  // Blocks with more owners than counted are looked at again with the heap
  // typed by the containers the program holds (which reads every one of
  // them, so only then).
  const bool extra = out.count(SharedVerdict::kExtraOwner) > 0;
  if (extra) {
    type_heap_blocks(core, names.types());
    if (set_stale_aside(core, names, &reach, &live))
      LR_TRY(judge_all(core, bc, {reach, live}, {}, all_owners, &out));
  }
  collect_owners(core, {reach, live}, &out);
  if (extra) weigh_untyped(core, names, bc.libraries, &out);
  return out;
}

}  // namespace lr
