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

// What collect passes over: containers' own links (`opaque`, not looked
// into) and pointers to a container's nodes (`link`: their pointee too).
struct Skip {
  bool (*opaque)(const Type*) = nullptr;
  bool (*link)(const Type*) = nullptr;
  bool inside(const Type* t) const {
    return t->is_aggregate() && ((opaque && opaque(t)) || (link && link(t)));
  }
  bool pointee(const Type* p) const { return link && p && link(p->strip()); }
};

void collect(const Type* t, uint64_t base, const std::string& path, int depth, Skip skip,
             std::vector<std::pair<uint64_t, std::pair<const Type*, std::string>>>* out) {
  t = t ? t->strip() : nullptr;
  if (!t || depth > kMaxDepth || out->size() >= kMaxSlots) return;
  if (skip.inside(t)) return;
  if (t->kind == TypeKind::kPointer) {
    if (names_a_block(t->target) && !skip.pointee(t->target))
      out->push_back({base, {t->target->strip(), path}});
    return;
  }
  if (t->kind == TypeKind::kArray) {
    const Type* e = t->target ? t->target->strip() : nullptr;
    if (!e || !e->size || e->is_char) return;
    for (uint64_t i = 0; i < t->count && out->size() < kMaxSlots; ++i)
      collect(e, base + i * e->size, fmt::format("{}[{}]", path, i), depth + 1, skip, out);
    return;
  }
  if (!t->is_aggregate()) return;
  for (const auto& m : t->members) {
    if (m.bit_size) continue;
    collect(m.type, base + m.offset, m.name.empty() ? path : path + "." + m.name, depth + 1, skip,
            out);
  }
}

}  // namespace

uint64_t BlockType::live_count() const {
  const uint64_t size = type ? type->strip()->size : 0;
  if (live_end == UINT64_MAX || !size) return count;
  return live_end > offset ? std::min(count, (live_end - offset) / size) : 0;
}

std::string BlockType::member_at(uint64_t off) const {
  const Type* t = type ? type->strip() : nullptr;
  if (!t || !t->size || off < offset || (off - offset) / t->size >= count) return "";
  const uint64_t i = (off - offset) / t->size, rel = (off - offset) % t->size;
  std::string m = member_path_at(t, rel);
  return count > 1 ? fmt::format("[{}]{}", i, m) : m;
}

std::string_view BlockTypes::keep(std::string_view s) {
  auto it = kept_.find(s);
  if (it == kept_.end()) it = kept_.emplace(s).first;
  return *it;
}

bool BlockTypes::set(size_t c, BlockType t) {
  if (c >= ix_.chunks()) return false;
  const Type* type = t.type;
  auto [at, added] = types_.try_emplace(static_cast<uint32_t>(c), t);
  if (!added) return false;
  at->second.name = keep(t.name);
  at->second.via = keep(t.via);
  if (type && type != last_type_) distinct_.insert(last_type_ = type);
  return true;
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
  collect(t, 0, "", 0, Skip{opaque_, link_}, &raw);
  std::vector<PtrSlot> out;
  out.reserve(raw.size());
  for (auto& [off, tp] : raw) out.push_back({off, tp.first, std::move(tp.second)});
  return slots_.emplace(t, std::move(out)).first->second;
}

namespace {

// The class whose members lie at offset 0 of `s` (its first non-empty
// base), when that is a base: an empty base (std::_Mutex_base) shares
// offset 0 with what follows it and is passed over.
const Type* base_at_zero(const Type* s) {
  for (const Member& m : s->members) {
    if (m.offset != 0) break;
    const Type* b = m.is_base && m.type ? m.type->strip() : nullptr;
    if (!b || !b->members.empty()) return b;
  }
  return nullptr;
}

}  // namespace

bool BlockTypes::polymorphic(const Type* t) {
  auto it = polymorphic_.find(t);
  if (it != polymorphic_.end()) return it->second;
  bool yes = false;
  const Type* s = t ? t->strip() : nullptr;
  // The vptr is the first member at offset 0, or the first base's
  // (bounded: bases nest).
  for (int depth = 0; s && s->is_aggregate() && depth < kMaxDepth; ++depth) {
    for (const Member& m : s->members)
      if (m.offset == 0 && m.name.rfind("_vptr", 0) == 0) yes = true;
    if (yes) break;
    s = base_at_zero(s);
  }
  return polymorphic_.emplace(t, yes).first->second;
}

bool BlockTypes::type_pointee(size_t d, const Type* pointee, std::string path) {
  if (polymorphic(pointee) && from_vtable(d)) return true;
  const std::string name = pointee->display();
  return set(d, BlockType{pointee, name, path, true});
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
      auto v = prog_.symbol_variable(h);
      const Type* t = v.ok() && v.value().addr == h.sym->addr ? v.value().type : nullptr;
      it = vars.emplace(h.sym->addr, std::make_pair(h.sym->addr, t)).first;
    }
    if (!it->second.second) continue;
    const HeapChunk& c = ix_.heap().in_use[r.target];
    uint64_t v = 0;
    if (!prog_.mem().read(r.from, &v, 8).ok() || v != c.user) continue;
    for (const PtrSlot& s : slots(it->second.second))
      if (it->second.first + s.offset == r.from && s.pointee->size <= c.usable() &&
          type_pointee(r.target, s.pointee, source_name(h.sym->name) + s.path)) {
        ++typed;
        break;
      }
  }
  return typed;
}

size_t BlockTypes::from_object(uint64_t addr, const Type* t, const std::string& name) {
  size_t typed = 0;
  for (const PtrSlot& s : slots(t)) {
    uint64_t v = 0;
    if (prog_.mem().read(addr + s.offset, &v, 8).ok())
      typed += point_at(v, s.pointee, name + s.path);
  }
  return typed;
}

bool BlockTypes::point_at(uint64_t v, const Type* pointee, const std::string& name) {
  const auto& chunks = ix_.heap().in_use;
  const size_t d = ix_.chunk_at(v);
  const Type* p = pointee ? pointee->strip() : nullptr;
  if (!p || d == SIZE_MAX || chunks[d].user != v || get(d) || p->size > chunks[d].usable())
    return false;
  return type_pointee(d, p, name);
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
    const BlockType& bt = types_.at(c);  // a node: stays put while types_ grows
    const Type* t = bt.type;
    if (slots(t).empty()) continue;
    const std::string from(bt.name);
    const HeapChunk& h = chunks[c];
    const uint64_t size = t->strip()->size;
    // A block of many elements (a vector's array) is read element by
    // element, as far as the block holds them.
    const uint64_t n = size ? bt.live_count() : 1;
    for (uint64_t i = 0; i < n && typed < max_blocks; ++i) {
      const uint64_t base = bt.offset + i * size;
      if (base >= h.usable()) break;
      for (const PtrSlot& s : slots(t)) {
        if (base + s.offset + 8 > h.usable()) continue;
        uint64_t v = 0;
        if (!prog_.mem().read(h.user + base + s.offset, &v, 8).ok()) continue;
        const size_t d = ix_.chunk_at(v);
        if (d == SIZE_MAX || chunks[d].user != v || !in(d) || get(d)) continue;
        if (s.pointee->size > chunks[d].usable()) continue;  // it cannot hold one
        type_pointee(d, s.pointee, from + (bt.count > 1 ? "[]" : "") + s.path);
        if (get(d)->type) queue.push_back(static_cast<uint32_t>(d));
        if (++typed >= max_blocks) break;
      }
    }
  }
  return typed;
}

}  // namespace lr
