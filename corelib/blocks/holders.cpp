#include "corelib/blocks/holders.hpp"

#include <algorithm>

namespace lr {

namespace {

constexpr uint64_t kTagMask = ~uint64_t{7};  // rb colour and other low tag bits

// Whether the node at `x` (words `w`) points back at the word at `from`.
bool points_back(const uint64_t (&w)[3], uint64_t from) {
  for (uint64_t word : w)
    for (uint64_t k : {0, 8, 16})
      if (word && (word & kTagMask) == from - k) return true;
  return false;
}

// One group of words pointing at the same address `x`.
void count_group(const Memory& mem, uint64_t x, const Ref* begin, const Ref* end, HolderCount* c) {
  uint64_t w[3] = {};
  bool readable = mem.read(x, w, sizeof w).ok();
  uint64_t links = 0, others = 0;
  for (const Ref* r = begin; r != end; ++r) {
    // A register's "address" is its index: never a link word.
    bool link = readable && r->kind != RefFrom::kRegister && points_back(w, r->from);
    (link ? links : others) += 1;
  }
  c->holders += others;
  if (links && !others) {
    c->holders += 1;
    c->memberships += 1;
  }
}

}  // namespace

HolderCount count_holders(const Memory& mem, const std::vector<Ref>& refs) {
  HolderCount c;
  c.words = refs.size();
  std::vector<Ref> by_target(refs);
  std::sort(by_target.begin(), by_target.end(),
            [](const Ref& a, const Ref& b) { return (a.value & kTagMask) < (b.value & kTagMask); });
  for (size_t i = 0; i < by_target.size();) {
    size_t j = i;
    uint64_t x = by_target[i].value & kTagMask;
    while (j < by_target.size() && (by_target[j].value & kTagMask) == x) ++j;
    if (j - i == 1)
      c.holders += 1;  // a lone word is one holder whatever it is
    else
      count_group(mem, x, by_target.data() + i, by_target.data() + j, &c);
    i = j;
  }
  return c;
}

}  // namespace lr
