// The account (account.hpp): the heap from the allocator's walk, then the
// rest of the writable address space painted in order of precedence (heap,
// stacks, TLS, module data, file mappings, anonymous), each byte once.
#include "corelib/analyses/account.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace lr {

namespace {

// The writable bytes not yet given a category, as disjoint [start, end).
class Unclaimed {
 public:
  Unclaimed(const std::vector<SegmentInfo>& segs, const Residency* res) : res_(res) {
    for (const auto& s : segs)
      if (s.writable && s.end > s.start) add(s.start, s.end);
  }
  uint64_t total() const { return total_; }
  // Removes [a, b) and returns how many of its bytes were unclaimed (and
  // in `resident`, how many of those were resident).
  uint64_t take(uint64_t a, uint64_t b, uint64_t* resident = nullptr) {
    uint64_t got = 0;
    auto it = free_.upper_bound(a);
    if (it != free_.begin()) --it;
    while (it != free_.end() && it->first < b) {
      const uint64_t s = it->first, e = it->second;
      if (e <= a) {
        ++it;
        continue;
      }
      it = free_.erase(it);
      if (s < a) free_.emplace(s, a);
      if (e > b) free_.emplace(b, e);
      got += std::min(e, b) - std::max(s, a);
      if (resident && res_) *resident += res_->bytes(std::max(s, a), std::min(e, b));
    }
    return got;
  }
  // The segment-sized pieces left, for the last category.
  std::vector<std::pair<uint64_t, uint64_t>> rest() const { return {free_.begin(), free_.end()}; }

 private:
  // Overlapping program headers (a forged core) count once.
  void add(uint64_t a, uint64_t b) {
    const uint64_t twice = take(a, b);
    free_.emplace(a, b);
    total_ += b - a - twice;
  }
  std::map<uint64_t, uint64_t> free_;
  uint64_t total_ = 0;
  const Residency* res_;
};

AccountNode* child(AccountNode& n, const std::string& name) {
  for (auto& c : n.children)
    if (c.name == name) return &c;
  n.children.push_back({name, 0, 0, 0, {}});
  return &n.children.back();
}

void add_to(AccountNode& n, uint64_t bytes, uint64_t blocks, uint64_t resident = 0) {
  n.bytes += bytes;
  n.blocks += blocks;
  n.resident += resident;
}

// A node's resident bytes before finish() has summed its children.
uint64_t resident_in(const AccountNode& n) {
  uint64_t r = n.resident;
  for (const auto& c : n.children) r += resident_in(c);
  return r;
}

// Children summed bottom-up, largest first; past `keep`, one "(N more)".
void finish(AccountNode& n, size_t keep) {
  if (n.children.empty()) return;
  n.bytes = n.blocks = n.resident = 0;
  for (auto& c : n.children) {
    finish(c, keep);
    add_to(n, c.bytes, c.blocks, c.resident);
  }
  std::stable_sort(n.children.begin(), n.children.end(),
                   [](const AccountNode& a, const AccountNode& b) { return a.bytes > b.bytes; });
  if (n.children.size() <= keep) return;
  AccountNode more{fmt::format("({} more)", n.children.size() - keep), 0, 0, 0, {}};
  for (size_t i = keep; i < n.children.size(); ++i)
    add_to(more, n.children[i].bytes, n.children[i].blocks, n.children[i].resident);
  n.children.resize(keep);
  n.children.push_back(std::move(more));
}

std::string arena_name(const HeapWalk& h, uint64_t arena) {
  // Arena 0: mmapped chunks outside every arena, or bytes an allocator
  // counts over all its arenas.
  if (arena == 0) {
    for (const auto& r : h.regions)
      if (r.kind == HeapRegion::Kind::kMmapped) return "mmapped chunks";
    return "all arenas";
  }
  for (const auto& r : h.regions)
    if (r.arena == arena && r.kind == HeapRegion::Kind::kMain)
      return fmt::format("arena {:#x} (main)", arena);
  return fmt::format("arena {:#x}", arena);
}

// In-use chunks by class and key; the allocator's own chunks are in its
// space, not here. Returns the usable bytes counted.
uint64_t account_chunks(const AccountInput& in, AccountNode& live, AccountNode& leaked,
                        AccountNode& pooled) {
  const HeapWalk& h = *in.heap;
  std::unordered_map<std::string, size_t> slot[3];
  AccountNode* parent[3] = {&live, &leaked, &pooled};
  auto own = h.own_chunks.begin();  // both sorted by address
  std::string last_key[3];          // neighbours mostly share a key: no hash then
  size_t last_slot[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
  uint64_t sum = 0;
  for (size_t i = 0; i < h.in_use.size(); ++i) {
    const HeapChunk c = h.in_use[i];
    while (own != h.own_chunks.end() && *own < c.user) ++own;
    if (own != h.own_chunks.end() && *own == c.user) continue;
    const int k = static_cast<int>(in.chunk_class[i]);
    sum += c.usable();
    const uint64_t res = in.residency ? in.residency->bytes(c.user, c.user + c.usable()) : 0;
    if (!in.key_of) {
      add_to(*parent[k], c.usable(), 1, res);
      continue;
    }
    std::string_view key = in.key_of(i);
    if (key.empty()) key = "(unknown)";
    if (last_slot[k] == SIZE_MAX || key != last_key[k]) {
      last_key[k] = key;
      auto [it, fresh] = slot[k].try_emplace(last_key[k], parent[k]->children.size());
      if (fresh) parent[k]->children.push_back({last_key[k], 0, 0, 0, {}});
      last_slot[k] = it->second;
    }
    add_to(parent[k]->children[last_slot[k]], c.usable(), 1, res);
  }
  return sum;
}

// The allocator's free lists, structures and unwalked bytes, per arena.
uint64_t account_space(const HeapWalk& h, AccountNode& free_, AccountNode& overhead,
                       AccountNode& unknown) {
  uint64_t sum = 0;
  for (const auto& s : h.space) {
    AccountNode& cat = s.kind == HeapSpace::Kind::kFree       ? free_
                       : s.kind == HeapSpace::Kind::kOverhead ? overhead
                                                              : unknown;
    AccountNode* what = child(cat, s.what);
    add_to(*child(*what, s.where.empty() ? arena_name(h, s.arena) : s.where), s.bytes, s.blocks,
           s.resident);
    sum += s.bytes;
  }
  return sum;
}

// The heap's categories; the bytes the allocator's ranges take from the
// writable memory are claimed, and the two totals are checked against
// each other.
void account_heap(const AccountInput& in, Unclaimed& u, AccountNode& total, Account& out) {
  const HeapWalk& h = *in.heap;
  AccountNode &live = total.children[0], &leaked = total.children[1], &free_ = total.children[2],
              &overhead = total.children[3], &unknown = total.children[4];
  AccountNode pooled{"pooled", 0, 0, 0, {}};
  uint64_t inside = account_chunks(in, live, leaked, pooled);
  if (pooled.blocks || !pooled.children.empty()) free_.children.push_back(std::move(pooled));
  inside += account_space(h, free_, overhead, unknown);
  uint64_t claimed = 0, managed = 0, managed_res = 0;
  for (const auto& [a, b] : h.managed) {
    claimed += u.take(a, b);
    managed += b - a;
    if (in.residency) managed_res += in.residency->bytes(a, b);
  }
  if (inside != managed)
    out.warnings.push_back(fmt::format(
        "the {} heap's walk accounts {} bytes of the {} its ranges hold; the difference is "
        "counted as unknown",
        h.allocator, inside, managed));
  if (managed > inside) {
    // Its resident bytes: the ranges' less what the walk placed.
    uint64_t placed = 0;
    for (const auto* c : {&live, &leaked, &free_, &overhead, &unknown}) placed += resident_in(*c);
    add_to(*child(unknown, "not accounted by the heap walk"), managed - inside, 0,
           managed_res > placed ? managed_res - placed : 0);
  }
  if (claimed != managed)
    out.warnings.push_back(fmt::format(
        "{} bytes of the heap's ranges are not in the core's writable memory", managed - claimed));
}

// The program's own ranges, each under its key when blocks are broken
// down (else straight into the category, as the heap's blocks are then).
void account_ranges(const AccountInput& in, Unclaimed& u, AccountNode& total) {
  auto& cat = total.children;
  for (const auto& r : in.ranges) {
    uint64_t res = 0;
    const uint64_t n = r.end > r.start ? u.take(r.start, r.end, &res) : 0;
    if (!n) continue;
    AccountNode* parent = r.cls == AccountRange::Class::kLive     ? &cat[0]
                          : r.cls == AccountRange::Class::kPooled ? child(cat[2], "pooled")
                                                                  : &cat[4];
    add_to(in.key_of ? *child(*parent, r.key) : *parent, n, r.blocks, res);
  }
}

// Stacks (the mapping each thread's stack pointer is in, and the stacks the
// C library keeps of exited threads) and TLS (the mapping of a thread
// pointer that is no stack: the main thread's, which the dynamic linker
// maps; only its TLS block when the C library gives the bounds).
void account_threads(const CoreFile& core, const std::vector<SegmentInfo>& segs,
                     const ThreadMemory* tm, Unclaimed& u, AccountNode& stacks, AccountNode& tls) {
  auto seg_at = [&](uint64_t a) -> const SegmentInfo* {
    for (const auto& s : segs)
      if (s.writable && a >= s.start && a < s.end) return &s;
    return nullptr;
  };
  for (const auto& t : core.threads())
    if (const SegmentInfo* s = seg_at(t.sp()))
      if (uint64_t r = 0, n = u.take(s->start, s->end, &r); n)  // 0: a stack in the heap
        add_to(*child(stacks, fmt::format("thread {}", t.tid)), n, 1, r);
  if (tm)
    for (const auto& d : tm->dead_stacks)
      if (uint64_t r = 0, n = u.take(d.start, d.end, &r); n)
        add_to(*child(stacks, "exited threads (kept for reuse)"), n, 1, r);
  for (const auto& t : core.threads()) {
    const SegmentInfo* s = t.tp ? seg_at(t.tp) : nullptr;
    if (!s) continue;
    uint64_t a = s->start, b = s->end;
    if (tm)
      for (const auto& k : tm->tls)
        if (k.tid == t.tid) a = std::max(a, k.start), b = std::min(b, k.end);
    if (uint64_t r = 0, n = a < b ? u.take(a, b, &r) : 0; n)
      add_to(*child(tls, fmt::format("thread {}", t.tid)), n, 1, r);
  }
}

// Each module's writable data, and its .bss: the anonymous mapping that
// starts where the module's last mapping ends.
void account_modules(const std::vector<SegmentInfo>& segs, const ModuleSet& mods, Unclaimed& u,
                     AccountNode& data) {
  for (const auto& m : mods.modules()) {
    if (!m->end || m->types_only) continue;
    uint64_t r = 0, n = u.take(m->base, m->end, &r), blocks = n ? 1 : 0;
    for (const auto& s : segs)
      if (s.writable && s.start == m->end) n += u.take(s.start, s.end, &r), ++blocks;
    if (n) add_to(*child(data, m->basename()), n, blocks, r);
  }
}

void account_files(const CoreFile& core, Unclaimed& u, AccountNode& files) {
  for (const auto& f : core.mapped_ranges())
    if (uint64_t r = 0, n = u.take(f.start, f.end, &r); n) add_to(*child(files, f.path), n, 1, r);
}

}  // namespace

const std::vector<std::string>& account_categories() {
  static const std::vector<std::string> names{"live",        "leaked",   "free", "overhead",
                                              "unknown",     "stacks",   "tls",  "data",
                                              "file-backed", "anonymous"};
  return names;
}

Result<Account> build_account(const AccountInput& in) {
  if (in.heap->managed.empty() && !in.heap->in_use.empty())
    return make_error(Errc::kUnsupported,
                      fmt::format("the {} heap walk does not say where its bytes are; it cannot "
                                  "be accounted",
                                  in.heap->allocator));
  if (in.chunk_class.size() != in.heap->in_use.size())
    return make_error(Errc::kInvalidArgument, "account: one class per in-use chunk is needed");
  Account out;
  out.total.name = "total";
  for (const auto& n : account_categories()) out.total.children.push_back({n, 0, 0, 0, {}});
  // The core's segments, once (segments() builds them anew on each call).
  const std::vector<SegmentInfo> segs = in.core->segments();
  Unclaimed u(segs, in.residency);
  out.writable_bytes = u.total();
  auto& cat = out.total.children;
  account_heap(in, u, out.total, out);
  account_ranges(in, u, out.total);
  account_threads(*in.core, segs, in.threads, u, cat[5], cat[6]);
  account_modules(segs, *in.mods, u, cat[7]);
  account_files(*in.core, u, cat[8]);
  for (const auto& [a, b] : u.rest())
    add_to(cat[9], b - a, 1, in.residency ? in.residency->bytes(a, b) : 0);
  for (auto& c : cat) finish(c, in.max_children);
  for (const auto& c : cat) add_to(out.total, c.bytes, 0, c.resident);
  uint64_t missing = 0;
  for (const auto& s : segs)
    if (s.writable && s.kind == SegmentInfo::Kind::kMissing) missing += s.end - s.start;
  if (missing)
    out.warnings.push_back(fmt::format(
        "{} writable bytes are not in the core (counted where their mapping belongs)", missing));
  return out;
}

}  // namespace lr
