// Heap block types (blocktypes.hpp): vtables, given types, and typed
// pointers from typed blocks.
#include "corelib/blocks/blocktypes.hpp"

#include "corelib/base/names.hpp"

#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>
#include <deque>
#include <unordered_map>

namespace lr {

namespace {

// Pointer members of a type, embedded structs and arrays included, as far
// as this depth (a pointer member's own target is another block).
constexpr int kMaxDepth = 8;
constexpr size_t kMaxSlots = 4096;  // per type: a huge array says no more

bool names_a_block(const Type* pointee) {
  const Type* p = pointee ? pointee->strip() : nullptr;
  return p && p->is_aggregate() && p->complete && p->size > 0;
}

void collect(const Type* t, uint64_t base, const std::string& path, int depth,
             std::vector<std::pair<uint64_t, std::pair<const Type*, std::string>>>* out) {
  t = t ? t->strip() : nullptr;
  if (!t || depth > kMaxDepth || out->size() >= kMaxSlots) return;
  if (t->kind == TypeKind::kPointer) {
    if (names_a_block(t->target)) out->push_back({base, {t->target->strip(), path}});
    return;
  }
  if (t->kind == TypeKind::kArray) {
    const Type* e = t->target ? t->target->strip() : nullptr;
    if (!e || !e->size || e->is_char) return;
    for (uint64_t i = 0; i < t->count && out->size() < kMaxSlots; ++i)
      collect(e, base + i * e->size, fmt::format("{}[{}]", path, i), depth + 1, out);
    return;
  }
  if (!t->is_aggregate()) return;
  for (const auto& m : t->members) {
    if (m.bit_size) continue;
    collect(m.type, base + m.offset, m.name.empty() ? path : path + "." + m.name, depth + 1, out);
  }
}

}  // namespace

bool BlockTypes::set(size_t c, BlockType t) {
  if (c >= ix_.chunks()) return false;
  return types_.emplace(static_cast<uint32_t>(c), std::move(t)).second;
}

const BlockType* BlockTypes::get(size_t c) const {
  auto it = types_.find(static_cast<uint32_t>(c));
  return it == types_.end() ? nullptr : &it->second;
}

std::string BlockTypes::vtable_class(uint64_t vptr) const {
  if (!vptr) return "";
  SymbolHit h = prog_.modules().symbolize(vptr);
  if (!h.sym || h.sym->name.rfind("_ZTV", 0) != 0) return "";
  int st = 0;
  char* d = abi::__cxa_demangle(("_Z" + h.sym->name.substr(4)).c_str(), nullptr, nullptr, &st);
  std::string name = st == 0 && d ? d : h.sym->name.substr(4);
  std::free(d);
  return name;
}

bool BlockTypes::from_vtable(size_t c) {
  if (c >= ix_.chunks() || get(c)) return false;
  uint64_t vp = 0;
  if (!prog_.mem().read(ix_.heap().in_use[c].user, &vp, 8).ok()) return false;
  std::string name = vtable_class(vp);
  if (name.empty()) return false;
  BlockType t{nullptr, name, "vtable"};
  if (auto r = prog_.types().find(name); r.ok() && r.value()->strip()->is_aggregate())
    t.type = r.value()->strip();
  return set(c, std::move(t));
}

const std::vector<BlockTypes::PtrSlot>& BlockTypes::slots(const Type* t) {
  auto it = slots_.find(t);
  if (it != slots_.end()) return it->second;
  std::vector<std::pair<uint64_t, std::pair<const Type*, std::string>>> raw;
  collect(t, 0, "", 0, &raw);
  std::vector<PtrSlot> out;
  out.reserve(raw.size());
  for (auto& [off, tp] : raw) out.push_back({off, tp.first, std::move(tp.second)});
  return slots_.emplace(t, std::move(out)).first->second;
}

size_t BlockTypes::from_globals() {
  // Each global holding a root reference, once: its pointer slots, read.
  std::unordered_map<uint64_t, std::pair<uint64_t, const Type*>> vars;  // symbol -> (addr, type)
  size_t typed = 0;
  for (size_t i = 0; i < ix_.root_count(); ++i) {
    const Ref r = ix_.root_ref(i);
    if (r.kind != RefFrom::kGlobal || get(r.target)) continue;
    SymbolHit h = prog_.modules().symbolize(r.from);
    if (!h.sym || !h.module) continue;
    auto it = vars.find(h.sym->addr);
    if (it == vars.end()) {
      auto v = prog_.resolve(h.sym->name + "@" + h.module->basename());
      const Type* t = v.ok() && v.value().addr == h.sym->addr ? v.value().type : nullptr;
      it = vars.emplace(h.sym->addr, std::make_pair(h.sym->addr, t)).first;
    }
    if (!it->second.second) continue;
    const HeapChunk& c = ix_.heap().in_use[r.target];
    uint64_t v = 0;
    if (!prog_.mem().read(r.from, &v, 8).ok() || v != c.user) continue;
    for (const PtrSlot& s : slots(it->second.second))
      if (it->second.first + s.offset == r.from && s.pointee->size <= c.usable() &&
          set(r.target,
              BlockType{s.pointee, s.pointee->display(), demangle(h.sym->name) + s.path, true})) {
        ++typed;
        break;
      }
  }
  return typed;
}

size_t BlockTypes::propagate(const std::vector<uint8_t>& within, size_t max_blocks) {
  const auto& chunks = ix_.heap().in_use;
  auto in = [&](size_t c) { return c < within.size() && (within[c] & 1); };
  std::deque<uint32_t> queue;
  for (const auto& [c, t] : types_)
    if (t.type && in(c)) queue.push_back(c);
  size_t typed = 0;
  while (!queue.empty() && typed < max_blocks) {
    const uint32_t c = queue.front();
    queue.pop_front();
    const BlockType& bt = types_.at(c);
    const Type* t = bt.type;
    const std::string from = bt.name;
    const HeapChunk& h = chunks[c];
    for (const PtrSlot& s : slots(t)) {
      if (s.offset + 8 > h.usable()) continue;
      uint64_t v = 0;
      if (!prog_.mem().read(h.user + s.offset, &v, 8).ok()) continue;
      const size_t d = ix_.chunk_at(v);
      if (d == SIZE_MAX || chunks[d].user != v || !in(d) || get(d)) continue;
      if (s.pointee->size > chunks[d].usable()) continue;  // it cannot hold one
      set(d, BlockType{s.pointee, s.pointee->display(), from + s.path, true});
      queue.push_back(static_cast<uint32_t>(d));
      if (++typed >= max_blocks) break;
    }
  }
  return typed;
}

}  // namespace lr
