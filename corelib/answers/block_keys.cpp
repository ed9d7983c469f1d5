// The account's breakdown keys (block_keys.hpp).
#include "corelib/answers/block_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace lr {

BlockKeys::BlockKeys(const IndexedCore& core, RefNamer& names, const KnownObjects& known,
                     BlockKeyBy by)
    : core_(&core), names_(&names), known_(&known), by_(by) {
  vtable_span();
  if (by_ == BlockKeyBy::kType) held_by_caches();
}

std::string_view BlockKeys::operator()(size_t i) {
  const auto& chunks = core_->ci.heap->in_use;
  const HeapChunk c = chunks[i];
  // Blocks come in address order: the first word of one a few blocks on
  // is fetched while this one is named (each is a cache miss otherwise).
  if (hi_ > lo_ && i + kAhead < chunks.size())
    if (const uint8_t* p = core_->prog->mem().direct(st_->ahead, chunks[i + kAhead].user, 8))
      __builtin_prefetch(p);
  if (by_ == BlockKeyBy::kSet) {
    const KnownObjects::Object* k = known_->in_block(c);
    return k ? std::string_view(k->set) : std::string_view("(in no set)");
  }
  if (by_ == BlockKeyBy::kModule) {
    if (std::string_view v = vtable_key(c); !v.empty()) return v;
    return core_->tags.empty() ? "" : std::string_view(st_->named = core_->program_owner(c));
  }
  std::string_view t = type_key(i, c);
  if (st_->kept.empty()) return t;  // no cache keeps objects: no lookup per block
  auto l = st_->kept.find(c.user);
  if (l == st_->kept.end()) return t;
  return st_->named = fmt::format("{} kept by the {}", t.empty() ? "(unknown)" : t,
                                  st_->kept_keys[l->second]);
}

// By type: the leak analysis's, else the profile object's in it, else its
// vtable's class, else the program's name for it.
std::string_view BlockKeys::type_key(size_t i, const HeapChunk& c) {
  if (const BlockType* bt = names_->types().get(i)) return bt->name;
  if (const KnownObjects::Object* k = known_->in_block(c); k && k->type) {
    auto it = st_->types.find(k->type);  // a type's name is made once
    if (it == st_->types.end()) it = st_->types.emplace(k->type, k->type->display()).first;
    return it->second;
  }
  if (std::string_view v = vtable_key(c); !v.empty()) return v;
  return core_->tags.empty() ? "" : std::string_view(st_->named = core_->program_name(c));
}

// The blocks holding the objects the program's caches keep (by the block's
// address): their type's entry says so, with the cache.
void BlockKeys::held_by_caches() {
  const auto& chunks = core_->ci.heap->in_use;
  for (const auto& t : core_->tags) {
    KeptObjects h = t.tagger->kept();
    const uint32_t base = static_cast<uint32_t>(st_->kept_keys.size());
    st_->kept_keys.insert(st_->kept_keys.end(), h.keys.begin(), h.keys.end());
    for (const auto& [addr, k] : h.objects) {
      auto it = std::upper_bound(chunks.begin(), chunks.end(), addr,
                                 [](uint64_t a, const HeapChunk& c) { return a < c.user; });
      if (it == chunks.begin()) continue;
      const HeapChunk c = *(it - 1);
      if (addr - c.user < c.usable()) st_->kept.emplace(c.user, base + k);
    }
  }
}

// Where the modules' vtables (their `_ZTV` symbols) lie: only a first
// word inside that span is looked up, and a program with none (C) reads
// no block's first word at all.
void BlockKeys::vtable_span() {
  for (const auto& m : core_->prog->modules().modules()) {
    if (!m->end || m->types_only) continue;
    for (const auto& sym : m->symbols())
      if (sym.name.compare(0, 4, "_ZTV") == 0 && sym.size)
        lo_ = std::min(lo_, sym.addr), hi_ = std::max(hi_, sym.addr + sym.size);
  }
}

// The vtable's class (by type) or library (by module); "" when the first
// word is no vtable.
std::string_view BlockKeys::vtable_key(const HeapChunk& c) {
  uint64_t vp = 0;
  // Most blocks' first word is data, outside every vtable: one compare.
  if (hi_ <= lo_ || !first_word(c.user, &vp) || vp < lo_ || vp >= hi_) return {};
  const Module* m = core_->prog->modules().module_at(vp);
  if (!m) return {};
  auto it = st_->vtables.find(vp);
  if (it == st_->vtables.end())
    it = st_->vtables.emplace(vp, names_->types().vtable_class(vp)).first;
  if (it->second.empty()) return {};
  return by_ == BlockKeyBy::kModule ? std::string_view(st_->named = m->basename()) : it->second;
}

bool BlockKeys::first_word(uint64_t a, uint64_t* v) {
  if (const uint8_t* p = core_->prog->mem().direct(st_->w, a, 8)) return std::memcpy(v, p, 8), true;
  return core_->prog->mem().read(a, v, 8).ok();
}

}  // namespace lr
