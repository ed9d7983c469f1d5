// What holds a kernel's memory: the retained-size tree (corelib's
// retained.hpp) over the kernel's reference index. Blocks are the index's
// objects (slab objects, vmalloc areas, spare stacks); holders are the
// variables, per-CPU variables, tasks' stack frames, CPUs' registers and
// kernel pages whose words point at them. Objects the index knows are no
// leak though no root reaches them (waiting for RCU, spare stacks,
// kmemleak's metadata or its not-leak marks) hang below a holder saying so,
// and objects not wholly in the dump below one saying that; the rest no
// root reaches are "leaked", as `leaks` lists them.
#include <fmt/format.h>

#include "targets/linux/kernel_retained.hpp"

namespace lr {

namespace {

class KernelGraph final : public RetainedGraph {
 public:
  explicit KernelGraph(const KRefIndex& ix) : ix_(ix), g_(ix.graph()) {}
  size_t blocks() const override { return g_.size(); }
  uint64_t address(uint32_t b) const override { return ix_.objects()[b].addr; }
  uint64_t size(uint32_t b) const override { return ix_.objects()[b].size; }
  std::span<const uint32_t> row(uint32_t b) const override { return g_.row(b); }
  size_t find(uint64_t addr) const override { return g_.find(addr); }

 private:
  const KRefIndex& ix_;
  const ObjectGraph& g_;
};

// The holder an unreached object that is no leak hangs below, or "".
const char* no_leak_holder(const KObject& o) {
  if (o.unread) return "objects not wholly in the dump (not known)";
  if (o.kind == KObject::Kind::kStack) return "spare kernel stacks (no leak)";
  if (o.rcu) return "objects waiting for an RCU grace period (no leak)";
  if (o.untracked) return "kmemleak's own metadata (no leak)";
  if (o.kmemleak & KmemleakNote::kNotLeak) return "objects marked kmemleak_not_leak (no leak)";
  return "";
}

// What the referrer's name says beyond its holder's: ".next" of
// "pack_list.next (.data)" below "pack_list (.data)", "+0x8" of "per-CPU
// area of CPU 0 (x+0x8)"; the whole name when they differ more.
std::string beyond(const std::string& holder, const std::string& ref) {
  size_t p = 0, s = 0;
  while (p < holder.size() && p < ref.size() && holder[p] == ref[p]) ++p;
  while (s < holder.size() - p && s < ref.size() - p &&
         holder[holder.size() - 1 - s] == ref[ref.size() - 1 - s])
    ++s;
  if (p + s != holder.size()) return ref;  // the holder is not inside it
  const std::string mid = ref.substr(p, ref.size() - p - s);
  return mid.find(' ') == std::string::npos ? mid : ref;
}

class KernelNamer final : public RetainedNamer {
 public:
  KernelNamer(KernelTarget& k, const KRefIndex& ix, KRefNamer& names)
      : k_(k), ix_(ix), names_(names) {}

  std::string edge(const RetainedTree& t, uint32_t from, uint32_t to) override {
    if (!t.is_block(to) || from == t.top() || from == t.leaked()) return "";
    if (!t.is_block(from)) {
      for (const GraphRef& r : ix_.graph().referrers(to)) {
        if (r.object != GraphRef::kNone || names_.holder(r, nullptr) != t.holder(from).name)
          continue;
        return beyond(t.holder(from).name, names_.referrer(r));
      }
      return "";
    }
    const std::vector<uint64_t> words = ix_.graph().words_from(from, to);
    if (words.empty()) return "";
    const uint64_t off = words.front() - t.block_address(from);
    const std::string m = names_.member(from, off);
    return m.empty() ? fmt::format("+{:#x}", off) : m;
  }

  Result<uint64_t> address_of(const std::string& place) override {
    return k_.prog().resolve_address(place);
  }

 private:
  KernelTarget& k_;
  const KRefIndex& ix_;
  KRefNamer& names_;
};

// The holders of the index's root references, and of the unreached objects
// that are no leak.
void add_holders(const KRefIndex& ix, KRefNamer& names, RetainedParts* p) {
  std::unordered_map<std::string, uint32_t> ids;
  auto holder = [&](std::string name, std::string key, RefFrom kind) {
    auto [it, added] = ids.emplace(name, static_cast<uint32_t>(p->holders.size()));
    if (added)
      p->holders.push_back({std::move(name), std::move(key), kind, kind == RefFrom::kRegister});
    return it->second;
  };
  const ObjectGraph& g = ix.graph();
  for (size_t i = 0; i < g.root_count(); ++i) {
    const GraphRef r = g.root_ref(i);
    std::string key;
    std::string name = names.holder(r, &key);
    const RefFrom kind = r.value_root != GraphRef::kNone
                             ? RefFrom::kRegister
                             : kernel_root_kind(ix.roots()[g.roots()[r.root].tag]);
    p->holder_edges.emplace_back(holder(std::move(name), std::move(key), kind), r.target);
  }
  const std::vector<uint8_t> seen = g.reachable();
  for (uint32_t i = 0; i < ix.objects().size(); ++i) {
    if (seen[i] & ObjectGraph::kReached) continue;
    if (const char* h = no_leak_holder(ix.objects()[i]); *h)
      p->holder_edges.emplace_back(holder(h, h, RefFrom::kMapping), i);
  }
}

}  // namespace

Result<KernelRetained> kernel_retained(KernelTarget& k, const KRefIndex& ix, KRefNamer& names,
                                       bool all_roots) {
  RetainedParts parts;
  parts.all_roots = all_roots;
  parts.partial = ix.partial();
  add_holders(ix, names, &parts);
  // Types: a cache's DWARF type when known, else the cache's name.
  std::vector<std::string> cache_types(ix.caches().size());
  for (uint32_t c = 0; c < cache_types.size(); ++c) {
    const Type* t = names.cache_type(c);
    cache_types[c] = t ? t->display() : ix.caches()[c].name;
  }
  parts.type = [&](uint32_t b) -> std::string_view {
    const KObject& o = ix.objects()[b];
    switch (o.kind) {
      case KObject::Kind::kSlab:
        return cache_types[o.cache];
      case KObject::Kind::kVmalloc:
        return "vmalloc area";
      case KObject::Kind::kStack:
        return "spare kernel stack";
    }
    return "";
  };
  LR_ASSIGN(RetainedTree t, build_retained(std::make_unique<KernelGraph>(ix), std::move(parts)));
  KernelRetained out{std::move(t), std::make_unique<KernelNamer>(k, ix, names)};
  return out;
}

}  // namespace lr
