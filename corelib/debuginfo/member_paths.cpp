// Member paths ("a.b[3].c") parsed and resolved to a field's place, the
// member a byte offset lies in, and refcount fields with the encodings
// targets register (types.hpp).
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "corelib/base/names.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/type_memo.hpp"
#include "corelib/debuginfo/types.hpp"
#include "corelib/debuginfo/types_internal.hpp"

namespace lr {

using namespace dwarf_detail;

Result<std::vector<PathStep>> parse_member_path(std::string_view p) {
  std::vector<PathStep> out;
  size_t i = 0;
  auto bad = [&](const char* what) {
    return make_error(Errc::kInvalidArgument,
                      fmt::format("bad member path '{}': {} at position {}", p, what, i));
  };
  auto ident = [&]() -> std::string {
    size_t s = i;
    while (i < p.size() && (std::isalnum(static_cast<unsigned char>(p[i])) || p[i] == '_')) ++i;
    return std::string(p.substr(s, i - s));
  };
  if (p.empty()) return bad("empty path");
  if (p == ".") return out;  // the object itself (a container's int elements)
  if (p.size() > 4096) return bad("path too long");
  bool need_ident = true;
  while (i < p.size()) {
    char c = p[i];
    if (need_ident) {
      if (std::isspace(static_cast<unsigned char>(c))) return bad("unexpected space");
      if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '_'))
        return bad("expected a member name");
      out.push_back({PathStep::Op::kMember, ident(), 0});
      need_ident = false;
      continue;
    }
    if (c == '.') {
      ++i;
      need_ident = true;
    } else if (c == '-' && i + 1 < p.size() && p[i + 1] == '>') {
      i += 2;
      out.push_back({PathStep::Op::kDeref, "", 0});
      need_ident = true;
    } else if (c == '[') {
      ++i;
      size_t s = i;
      bool neg = i < p.size() && p[i] == '-';
      if (neg) ++i;
      int64_t v = 0;
      if (i >= p.size() || !std::isdigit(static_cast<unsigned char>(p[i])))
        return bad("expected an index");
      while (i < p.size() && std::isdigit(static_cast<unsigned char>(p[i]))) {
        if (v > (INT64_MAX - 9) / 10) return bad("index too large");
        v = v * 10 + (p[i] - '0');
        ++i;
      }
      (void)s;
      if (i >= p.size() || p[i] != ']') return bad("expected ']'");
      ++i;
      out.push_back({PathStep::Op::kIndex, "", neg ? -v : v});
    } else {
      return bad("unexpected character");
    }
  }
  if (need_ident) return bad("path ends after a separator");
  return out;
}

std::vector<std::string> member_names(const Type* t) {
  std::vector<std::string> out;
  t = t ? t->strip() : nullptr;
  if (!t) return out;
  for (const auto& m : t->members) {
    if (!m.name.empty()) {
      out.push_back(m.name);
    } else {  // an anonymous struct or union's members are the parent's
      auto inner = member_names(m.type);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  }
  return out;
}

const Member* find_member(const Type* t, std::string_view name, uint64_t* offset) {
  t = t ? t->strip() : nullptr;
  if (!t || (t->kind != TypeKind::kStruct && t->kind != TypeKind::kUnion)) return nullptr;
  for (const auto& m : t->members) {
    if (m.name == name) {
      *offset = m.offset;
      return &m;
    }
  }
  // Anonymous members are searched after named ones, depth-first.
  for (const auto& m : t->members) {
    if (!m.name.empty() || !m.type) continue;
    uint64_t inner = 0;
    if (const Member* r = find_member(m.type, name, &inner)) {
      *offset = m.offset + inner;
      return r;
    }
  }
  return nullptr;
}

namespace {
// A class with no data: no members but empty bases of its own
// (std::allocator<T> : std::__new_allocator<T>).
bool empty_class(const Type* t, int depth = 0) {
  if (!t || !t->is_aggregate() || depth > 8) return false;
  for (const Member& m : t->members)
    if (!m.is_base || !empty_class(m.type ? m.type->strip() : nullptr, depth + 1)) return false;
  return true;
}
}  // namespace

namespace {

// Whether `t` holds nothing but bytes: a char array, or structs and unions
// of them beside empty ones (std::aligned_storage's alignment member, an
// empty base).
bool bytes_only(const Type* t, int depth) {
  t = t ? t->strip() : nullptr;
  if (!t || depth > 4) return false;
  if (t->kind == TypeKind::kArray) return t->target && t->target->strip()->is_char;
  if (!t->is_aggregate()) return false;
  bool bytes = false;
  for (const auto& m : t->members) {
    const Type* mt = m.type ? m.type->strip() : nullptr;
    if (mt && mt->is_aggregate() && mt->members.empty()) continue;  // empty
    if (m.bit_size || !bytes_only(m.type, depth + 1)) return false;
    bytes = true;
  }
  return bytes;
}

// The type a class template holds as raw bytes (a C++ library's aligned
// buffer of T: make_shared's object, a node's element), when `t` is such
// storage: bytes only, as large as its first parameter, a class. Its bytes
// are then named as that class's members.
const Type* stored_type(const Type* t) {
  if (t->template_args.empty()) return nullptr;
  const Type* held = t->template_args[0] ? t->template_args[0]->strip() : nullptr;
  if (!held || !held->is_aggregate() || !held->size || held->size > t->size) return nullptr;
  return bytes_only(t, 0) ? held : nullptr;
}

}  // namespace

std::string member_path_at(const Type* t, uint64_t off, int depth) {
  t = t ? t->strip() : nullptr;
  if (!t || off >= t->size || depth > 16) return "";
  if (t->kind == TypeKind::kArray) {
    const Type* e = t->target ? t->target->strip() : nullptr;
    if (!e || !e->size || e->is_char) return "";
    return fmt::format("[{}]{}", off / e->size, member_path_at(e, off % e->size, depth + 1));
  }
  if (t->kind != TypeKind::kStruct && t->kind != TypeKind::kUnion) return "";
  if (const Type* held = stored_type(t)) return member_path_at(held, off, depth + 1);
  // The member whose bytes hold `off`: in a union the first that does.
  for (const auto& m : t->members) {
    const Type* mt = m.type ? m.type->strip() : nullptr;
    if (m.bit_size || !mt || off < m.offset || off - m.offset >= mt->size) continue;
    // An empty base (std::allocator) holds no byte: it shares its offset
    // with what follows it.
    if (m.is_base && empty_class(mt)) continue;
    std::string inner = member_path_at(mt, off - m.offset, depth + 1);
    if (m.name.empty()) return inner;  // anonymous: its members are the parent's
    return "." + m.name + inner;
  }
  return "";
}

uint64_t field_bytes(const FieldLoc& loc) {
  if (loc.bit_size) return (uint64_t{loc.bit_offset} + loc.bit_size + 7) / 8;
  const Type* t = loc.type ? loc.type->strip() : nullptr;
  return t ? t->size : 0;
}

namespace {
// Walkers read exactly sizeof(root) bytes per object; a field must lie inside.
Result<FieldLoc> within(const Type* root, const FieldLoc& loc) {
  const Type* r = root ? root->strip() : nullptr;
  uint64_t size = r ? r->size : 0;
  uint64_t need = field_bytes(loc);
  if (loc.offset > size || need > size - loc.offset)
    return make_error(Errc::kBadFormat,
                      fmt::format("field at offset {} ({} bytes) lies outside {} ({} bytes): "
                                  "corrupt DWARF, or an index past a flexible array",
                                  loc.offset, need, root ? root->display() : "?", size));
  return loc;
}
}  // namespace

Result<FieldLoc> resolve_path(const Type* t, const std::vector<PathStep>& steps) {
  FieldLoc loc;
  loc.type = t;
  for (const auto& s : steps) {
    const Type* cur = loc.type ? loc.type->strip() : nullptr;
    if (!cur) return make_error(Errc::kNotFound, "path steps into an unknown type");
    if (s.op == PathStep::Op::kDeref)
      return make_error(Errc::kInvalidArgument,
                        "'->' needs memory; this path must stay inside one object");
    if (s.op == PathStep::Op::kIndex) {
      if (cur->kind != TypeKind::kArray)
        return make_error(Errc::kInvalidArgument,
                          fmt::format("cannot index '{}': not an array", cur->display()));
      if (s.index < 0 || (!cur->flexible && static_cast<uint64_t>(s.index) >= cur->count))
        return make_error(Errc::kInvalidArgument,
                          fmt::format("index {} out of range for {}", s.index, cur->display()));
      uint64_t esz = cur->target ? cur->target->strip()->size : 0;
      loc.offset += esz * static_cast<uint64_t>(s.index);
      loc.type = cur->target;
      loc.bit_offset = loc.bit_size = 0;
      continue;
    }
    uint64_t off = 0;
    const Member* m = find_member(cur, s.name, &off);
    if (!m)
      return make_error(Errc::kNotFound,
                        fmt::format("{} has no member '{}'{}", cur->display(), s.name,
                                    did_you_mean(s.name, member_names(cur))));
    loc.offset += off;
    loc.bit_offset = m->bit_offset;
    loc.bit_size = m->bit_size;
    loc.type = m->type;
  }
  return within(t, loc);
}

// Found paths are kept with the type (a failed one says why each time: a
// reader asks it rarely, and its message names the path).
Result<FieldLoc> resolve_path(const Type* t, std::string_view path) {
  constexpr size_t kKept = 16;  // paths kept per type
  TypeMemo* m = t ? &memo_of(t) : nullptr;
  if (m)
    for (const auto& [p, loc] : m->paths)
      if (p == path) return loc;
  LR_ASSIGN(auto steps, parse_member_path(path));
  auto r = resolve_path(t, steps);
  if (m && r.ok() && m->paths.size() < kKept) m->paths.emplace_back(std::string(path), r.value());
  return r;
}

Result<FieldLoc> resolve_refcount(const Type* t, std::string_view path) {
  LR_ASSIGN(FieldLoc loc, resolve_path(t, path));
  return descend_refcount(t, loc, path);
}

namespace {
std::map<std::string, RefEncoding, std::less<>>& encodings() {
  static std::map<std::string, RefEncoding, std::less<>> m;
  return m;
}
// The encoding `t` or a typedef on the way to its struct was registered with.
const RefEncoding* encoding_of(const Type* t) {
  const auto& m = encodings();
  for (int i = 0; t && i < 16 && !m.empty(); ++i, t = t->target) {
    if (auto it = m.find(t->name); it != m.end() && !t->name.empty()) return &it->second;
    if (t->kind != TypeKind::kTypedef) break;
  }
  return nullptr;
}
}  // namespace

void register_refcount_encoding(const std::string& type_name, RefEncoding e) {
  encodings()[type_name] = e;
}

Result<FieldLoc> descend_refcount(const Type* t, FieldLoc loc, std::string_view path) {
  static const char* kNames[] = {"counter", "refs", "refcount", "count", "value",
                                 "ref",     "val",  "usage",    "_count"};
  for (int depth = 0; depth < 16; ++depth) {
    const Type* cur = loc.type ? loc.type->strip() : nullptr;
    if (!cur) return make_error(Errc::kNotFound, "refcount field has no type");
    if (const RefEncoding* e = encoding_of(loc.type)) loc.enc = *e;
    if (cur->is_integer_like() && cur->kind != TypeKind::kPointer) return within(t, loc);
    if (cur->kind != TypeKind::kStruct && cur->kind != TypeKind::kUnion)
      return make_error(
          Errc::kInvalidArgument,
          fmt::format("refcount field '{}' has type {}, not an integer", path, cur->display()));
    const Member* pick = nullptr;
    uint64_t off = 0;
    for (const char* n : kNames)
      if ((pick = find_member(cur, n, &off))) break;
    if (!pick && cur->members.size() == 1) {
      pick = &cur->members[0];
      off = pick->offset;
    }
    if (!pick)
      return make_error(Errc::kInvalidArgument,
                        fmt::format("refcount field '{}' is {}; name the integer inside it "
                                    "(e.g. {}.<member>)",
                                    path, cur->display(), path));
    loc.offset += off;
    loc.bit_offset = pick->bit_offset;
    loc.bit_size = pick->bit_size;
    loc.type = pick->type;
  }
  return make_error(Errc::kInvalidArgument, "refcount field nests too deeply");
}

}  // namespace lr
