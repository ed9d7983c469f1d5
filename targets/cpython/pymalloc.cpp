// pymalloc, CPython's small-object allocator, as a heap layer: it maps 1 MiB
// arenas of its own and carves them into 16 KiB pools, each of one size
// class (16 to 512 bytes in steps of 16). Its in-use blocks join the heap
// walk, so that every command sees a Python object as a heap block.
//
// Objects/obmalloc.c (3.11): `arenas[maxarenas]` is the arena table (an
// entry whose `address` is 0 is unused). An arena's pools start at its
// first pool-aligned address; those below `pool_address` have been carved.
// A carved pool whose count is 0 is empty (on the arena's free-pool list);
// otherwise its blocks of (szidx + 1) * 16 bytes from POOL_OVERHEAD up to
// `nextoffset` have been handed out once, and those on its `freeblock`
// list are free again: `count` is the number in use.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/dump/residency.hpp"
#include "targets/cpython/cpython.hpp"
#include "targets/cpython/cpython_layout.hpp"

namespace lr {

const char* const kGcListCut = "CPython's GC generation list";

namespace {

constexpr uint64_t kMaxArenas = 1u << 24;  // 16 TiB of arenas: past it, the table is damaged
constexpr size_t kMaxWarnings = 8;

// The bytes of an arena by what pymalloc keeps there; they add up to the
// arenas' size.
struct Space {
  uint64_t free_blocks = 0, nfree_blocks = 0;  // on pools' free lists
  uint64_t never_used = 0;                     // past a pool's nextoffset
  uint64_t empty_pools = 0, unused_pools = 0;  // count 0; past pool_address
  uint64_t headers = 0, tails = 0, alignment = 0, unread = 0;
  uint64_t res[9] = {};  // resident bytes of each, in that order
};

class Carver {
 public:
  Carver(const Program& prog, const PyLayout& L, const HeapLimits& lim, HeapWalk& h)
      : mem_(prog.mem()), L_(L), res_(lim.residency), h_(h) {}

  Result<void> run() {
    LR_ASSIGN(auto list, arenas());
    uint64_t end = 0;  // a damaged table may list an arena twice, or overlapping
    for (const auto& [a, entry] : list) {
      if (a < end || a % 16) {
        warn(fmt::format("arena {:#x} overlaps the one before it or is misaligned: not walked", a));
        continue;
      }
      arena(a, entry);
      end = a + L_.arena_size;
    }
    h_.in_use.sort();
    add_space();
    if (warned_ > kMaxWarnings)
      h_.warnings.push_back(fmt::format("pymalloc: {} more damaged pools", warned_ - kMaxWarnings));
    return {};
  }

 private:
  // The arenas in use, each as (address, its table entry), by address.
  Result<std::vector<std::pair<uint64_t, uint64_t>>> arenas() {
    if (!L_.arenas_var || !L_.maxarenas_var)
      return make_error(Errc::kBadFormat, "its arena table (arenas, maxarenas) has no symbol");
    LR_ASSIGN(uint64_t table, mem_.read_u64(L_.arenas_var));
    LR_ASSIGN(uint32_t n, mem_.read_as<uint32_t>(L_.maxarenas_var));
    std::vector<std::pair<uint64_t, uint64_t>> out;
    if (n == 0 || table == 0) return out;  // PYTHONMALLOC=malloc, or nothing allocated yet
    if (n > kMaxArenas)
      return make_error(Errc::kBadFormat, fmt::format("maxarenas is {}, past any heap", n));
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t entry = table + i * L_.arena_size_of;
      auto a = mem_.read_u64(entry + L_.ao_address);
      if (!a.ok())
        return make_error(Errc::kBadFormat, fmt::format("arena table entry {} of {} at {:#x}: {}",
                                                        i, n, table, a.error().message));
      if (a.value()) out.emplace_back(a.value(), entry);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  uint64_t resident(uint64_t a, uint64_t b) const { return res_ ? res_->bytes(a, b) : 0; }
  void add(uint64_t& bytes, int k, uint64_t a, uint64_t b) {
    bytes += b - a;
    s_.res[k] += resident(a, b);
  }

  void warn(std::string w) {
    if (warned_++ < kMaxWarnings) h_.warnings.push_back("pymalloc: " + std::move(w));
  }

  void arena(uint64_t a, uint64_t entry) {
    const uint64_t P = L_.pool_size, end = a + L_.arena_size;
    const uint64_t first = (a + P - 1) & ~(P - 1);
    auto carved_to = mem_.read_u64(entry + L_.ao_pool_address);
    auto total = mem_.read_as<uint32_t>(entry + L_.ao_ntotalpools);
    const uint64_t expect = (L_.arena_size / P) - (a % P ? 1 : 0);
    if (!carved_to.ok() || !total.ok() || total.value() != expect || carved_to.value() < first ||
        carved_to.value() > first + expect * P || (carved_to.value() - first) % P) {
      warn(
          fmt::format("arena {:#x}: its entry does not read as an arena of {} pools; its {} "
                      "bytes are not walked",
                      a, expect, L_.arena_size));
      add(s_.unread, 7, a, end);
      h_.regions.push_back({HeapRegion::Kind::kCarved, a, end, 0, false});
      h_.managed.emplace_back(a, end);
      return;
    }
    add(s_.alignment, 6, a, first);
    add(s_.alignment, 6, first + expect * P, end);
    for (uint64_t p = first; p < carved_to.value(); p += P) pool(p);
    add(s_.unused_pools, 4, carved_to.value(), first + expect * P);
    h_.regions.push_back({HeapRegion::Kind::kCarved, a, end, 0, true});
    h_.managed.emplace_back(a, end);
  }

  void pool(uint64_t p) {
    const uint64_t P = L_.pool_size, O = L_.pool_overhead();
    const uint8_t* hd = mem_.span(p, L_.pool_header_size);
    if (!hd) {
      warn(fmt::format("pool {:#x} is not in the core", p));
      add(s_.unread, 7, p, p + P);
      return;
    }
    uint32_t count, szidx, next, maxnext;
    uint64_t freeblock;
    std::memcpy(&count, hd + L_.ph_count, 4);
    std::memcpy(&szidx, hd + L_.ph_szidx, 4);
    std::memcpy(&next, hd + L_.ph_nextoffset, 4);
    std::memcpy(&maxnext, hd + L_.ph_maxnextoffset, 4);
    std::memcpy(&freeblock, hd + L_.ph_freeblock, 8);
    if (count == 0) {
      add(s_.empty_pools, 3, p, p + P);
      return;
    }
    const uint64_t size = (uint64_t{szidx} + 1) * 16;
    if (size > 512 || maxnext + size != P || next < O || next > P || (next - O) % size) {
      warn(fmt::format("pool {:#x}: its header (size class {}, nextoffset {}) is damaged", p, szidx,
                       next));
      add(s_.unread, 7, p, p + P);
      return;
    }
    const uint64_t carved = (next - O) / size;
    std::vector<bool>& is_free = free_;
    is_free.assign(carved, false);
    uint64_t nfree = 0;
    for (uint64_t f = freeblock; f; ++nfree) {
      const uint64_t k = (f - p - O) / size;
      if (f < p + O || f >= p + next || (f - p - O) % size || nfree >= carved || is_free[k]) {
        warn(fmt::format("pool {:#x}: its free list breaks at {:#x}; its blocks are not walked", p,
                         f));
        add(s_.unread, 7, p, p + P);
        return;
      }
      is_free[k] = true;
      auto nx = mem_.read_u64(f);
      if (!nx.ok()) {
        warn(fmt::format("pool {:#x}: free block {:#x} is not in the core", p, f));
        add(s_.unread, 7, p, p + P);
        return;
      }
      f = nx.value();
    }
    if (carved - nfree != count)
      warn(fmt::format("pool {:#x} counts {} blocks in use, its free list leaves {}", p, count,
                       carved - nfree));
    add(s_.headers, 5, p, p + O);
    for (uint64_t k = 0; k < carved; ++k) {
      const uint64_t b = p + O + k * size;
      if (is_free[k]) {
        ++s_.nfree_blocks;
        add(s_.free_blocks, 0, b, b + size);
      } else {
        h_.in_use.push_back(HeapChunk::make(b, size, false));
      }
    }
    const uint64_t fits = O + (P - O) / size * size;
    add(s_.never_used, 2, p + next, p + fits);
    add(s_.tails, 5, p + fits, p + P);
  }

  void add_space() {
    using K = HeapSpace::Kind;
    struct Row {
      K kind;
      const char* what;
      uint64_t bytes, blocks;
      int res;
    };
    const Row rows[] = {
        {K::kFree, "pymalloc free blocks", s_.free_blocks, s_.nfree_blocks, 0},
        {K::kFree, "pymalloc pools' blocks never used", s_.never_used, 0, 2},
        {K::kFree, "pymalloc empty pools", s_.empty_pools, 0, 3},
        {K::kFree, "pymalloc pools never carved", s_.unused_pools, 0, 4},
        {K::kOverhead, "pymalloc pool headers and tails", s_.headers + s_.tails, 0, 5},
        {K::kOverhead, "pymalloc arena alignment", s_.alignment, 0, 6},
        {K::kUnknown, "pymalloc pools not read", s_.unread, 0, 7},
    };
    for (const Row& r : rows)
      if (r.bytes)
        h_.space.push_back(
            {r.kind, r.what, 0, r.bytes, r.blocks, s_.res[r.res], "pymalloc arenas"});
  }

  const Memory& mem_;
  const PyLayout& L_;
  const Residency* res_;
  HeapWalk& h_;
  Space s_;
  std::vector<bool> free_;
  size_t warned_ = 0;
};

Result<void> carve_pymalloc(const Program& prog, const HeapLimits& lim, HeapWalk& h) {
  auto L = python_layout(prog);
  if (!L.ok()) {
    // Python without its layout: the heap is still walked, without its
    // objects; `python` says why.
    if (L.error().code == Errc::kNotFound) return L.error();
    return make_error(Errc::kUnsupported, L.error().message);
  }
  LR_TRY(Carver(prog, L.value(), lim, h).run());
  return {};
}

}  // namespace

HeapLayer pymalloc_layer() {
  return {"pymalloc", &carve_pymalloc};
}

}  // namespace lr
