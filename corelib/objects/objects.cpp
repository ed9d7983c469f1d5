#include "corelib/objects/objects.hpp"

#include <fmt/format.h>

#include <cstring>

#include "corelib/debuginfo/modules.hpp"

namespace lr {

bool FieldValue::as_int(int64_t* out) const {
  switch (kind) {
    case Kind::kSigned:
    case Kind::kEnum:
      *out = s;
      return true;
    case Kind::kUnsigned:
    case Kind::kBool:
    case Kind::kPointer:
      *out = static_cast<int64_t>(u);
      return true;
    default:
      return false;
  }
}

std::string FieldValue::to_string() const {
  switch (kind) {
    case Kind::kSigned:
      return fmt::format("{}", s);
    case Kind::kUnsigned:
      return fmt::format("{}", u);
    case Kind::kBool:
      return u ? "true" : "false";
    case Kind::kPointer:
      return u ? fmt::format("{:#x}", u) : "0x0";
    case Kind::kEnum:
      return text.empty() ? fmt::format("{}", s) : text;
    case Kind::kString: {
      std::string o = "\"";
      for (unsigned char c : text) {
        if (c == '"' || c == '\\') {
          o += '\\';
          o += static_cast<char>(c);
        } else if (c < 32 || c >= 127) {
          o += fmt::format("\\{:03o}", c);
        } else {
          o += static_cast<char>(c);
        }
      }
      return o + (truncated ? "\"..." : "\"");
    }
    case Kind::kUuid:
      return text;
    case Kind::kFloat:
      return fmt::format("{}", f);
    case Kind::kAggregate:
      return "{...}";
    case Kind::kError:
      return "<" + text + ">";
  }
  return "?";
}

Result<FieldSpec> make_field_spec(const Type* t, std::string_view path, bool refcount,
                                  const MemberAlias* alias) {
  LR_ASSIGN(auto steps, parse_member_path(path));
  FieldSpec spec;
  spec.path = std::string(path);
  spec.is_refcount = refcount;
  const Type* base = t;  // the type the current hop starts in
  FieldLoc loc;
  loc.type = t;
  auto start_hop = [&](const Type* target) -> Result<void> {
    const Type* b = base ? base->strip() : nullptr;
    if (!b || loc.offset > b->size || b->size - loc.offset < 8)
      return make_error(Errc::kBadFormat, fmt::format("'{}': pointer lies outside {}", path,
                                                      base ? base->display() : "?"));
    spec.hops.push_back(loc);
    base = target;
    loc = FieldLoc{};
    loc.type = target;
    return {};
  };
  for (size_t k = 0; k < steps.size(); ++k) {
    const PathStep& s = steps[k];
    const Type* cur = loc.type ? loc.type->strip() : nullptr;
    if (!cur)
      return make_error(Errc::kNotFound, fmt::format("'{}': step into an unknown type", path));
    if (s.op == PathStep::Op::kDeref ||
        (s.op == PathStep::Op::kMember && cur->kind == TypeKind::kPointer)) {
      // '->', or '.' through a pointer to a struct (as gdb and drgn allow).
      const Type* tt =
          cur->kind == TypeKind::kPointer && cur->target ? cur->target->strip() : nullptr;
      if (!tt || (s.op == PathStep::Op::kMember && !tt->is_aggregate()))
        return make_error(Errc::kInvalidArgument,
                          fmt::format("'{}': '{}' applied to {}, not a pointer to a struct", path,
                                      s.op == PathStep::Op::kDeref ? "->" : ".", cur->display()));
      LR_TRY(start_hop(cur->target));
      if (s.op == PathStep::Op::kDeref) continue;
      cur = loc.type->strip();
    }
    std::vector<PathStep> one{s};
    if (s.op == PathStep::Op::kMember && alias && *alias) {
      std::string a = (*alias)(cur, s.name);
      if (!a.empty()) one[0].name = a;
    }
    LR_ASSIGN(FieldLoc step, resolve_path(loc.type, one));
    loc.offset += step.offset;
    loc.bit_offset = step.bit_offset;
    loc.bit_size = step.bit_size;
    loc.type = step.type;
  }
  if (refcount) {
    LR_ASSIGN(loc, descend_refcount(base, loc, path));
  }
  // The last hop must lie inside the type it starts in.
  const Type* b = base ? base->strip() : nullptr;
  uint64_t need = field_bytes(loc);
  if (!b || loc.offset > b->size || need > b->size - loc.offset)
    return make_error(Errc::kBadFormat,
                      fmt::format("'{}' lies outside {} (corrupt DWARF, or an index past a "
                                  "flexible array)",
                                  path, base ? base->display() : "?"));
  spec.hops.push_back(loc);
  spec.type = loc.type;
  return spec;
}

IntField IntField::of(const FieldLoc& loc) {
  IntField f;
  const Type* t = loc.type ? loc.type->strip() : nullptr;
  f.offset = loc.offset;
  f.bit_offset = loc.bit_offset;
  f.bit_size = loc.bit_size;
  f.width = static_cast<uint8_t>(t && t->size && t->size <= 8 ? t->size : 8);
  f.is_signed = t && t->is_signed;
  f.enc = loc.enc;
  return f;
}

int64_t IntField::load_any(const uint8_t* obj) const {
  uint64_t u;
  unsigned bits;
  if (!bit_size) {
    u = load_uint(obj + offset, width);
    bits = width * 8u;
  } else {
    size_t nbytes = (bit_offset + bit_size + 7) / 8;
    unsigned __int128 v = 0;
    std::memcpy(&v, obj + offset, nbytes > 16 ? 16 : nbytes);
    v >>= bit_offset;
    u = static_cast<uint64_t>(v) &
        (bit_size >= 64 ? ~uint64_t{0} : ((uint64_t{1} << bit_size) - 1));
    bits = bit_size;
  }
  if (is_signed && bits < 64 && ((u >> (bits - 1)) & 1)) u |= ~uint64_t{0} << bits;
  return static_cast<int64_t>(u);
}

namespace {

bool looks_uuid(const Type* declared, const Type* s) {
  if (!s || s->kind != TypeKind::kArray || s->count != 16) return false;
  const Type* e = s->target ? s->target->strip() : nullptr;
  if (!e || e->size != 1) return false;
  for (const Type* t = declared; t; t = t->kind == TypeKind::kTypedef ? t->target : nullptr)
    if (t->name == "uuid_t" || t->name == "guid_t" || t->name == "uuid_le" || t->name == "uuid_be")
      return true;
  return false;
}

std::string uuid_text(const uint8_t* p) {
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:"
      "02x}"
      "{:02x}",
      p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14],
      p[15]);
}

}  // namespace

FieldValue format_scalar(const uint8_t* obj, const FieldLoc& loc) {
  FieldValue v;
  const Type* t = loc.type ? loc.type->strip() : nullptr;
  if (!t) {
    v.text = "unknown type";
    return v;
  }
  switch (t->kind) {
    case TypeKind::kInt:
      if (t->is_signed) {
        v.kind = FieldValue::Kind::kSigned;
        v.s = load_field_s(obj, loc);
      } else {
        v.kind = FieldValue::Kind::kUnsigned;
        v.u = load_field_u(obj, loc);
      }
      return v;
    case TypeKind::kBool:
      v.kind = FieldValue::Kind::kBool;
      v.u = load_field_u(obj, loc);
      return v;
    case TypeKind::kEnum: {
      v.kind = FieldValue::Kind::kEnum;
      v.s = t->is_signed ? load_field_s(obj, loc) : static_cast<int64_t>(load_field_u(obj, loc));
      for (const auto& e : t->enumerators)
        if (e.value == v.s) v.text = e.name;
      return v;
    }
    case TypeKind::kFloat:
      v.kind = FieldValue::Kind::kFloat;
      if (t->size == 4) {
        float f;
        std::memcpy(&f, obj + loc.offset, 4);
        v.f = f;
      } else if (t->size == 8) {
        std::memcpy(&v.f, obj + loc.offset, 8);
      } else {
        // long double: x87's 80 bits on x86-64, IEEE binary128 on aarch64;
        // the type does not say which, and a wrong guess prints a number.
        v.kind = FieldValue::Kind::kError;
        v.text = fmt::format("{}-byte floating point: not decoded", t->size);
      }
      return v;
    case TypeKind::kPointer: {
      v.kind = FieldValue::Kind::kPointer;
      v.u = load_uint(obj + loc.offset, 8);
      return v;
    }
    case TypeKind::kArray: {
      const Type* e = t->target ? t->target->strip() : nullptr;
      if (looks_uuid(loc.type, t)) {
        v.kind = FieldValue::Kind::kUuid;
        v.text = uuid_text(obj + loc.offset);
        return v;
      }
      if (e && e->kind == TypeKind::kInt && e->is_char && e->size == 1) {
        v.kind = FieldValue::Kind::kString;
        const char* s = reinterpret_cast<const char*>(obj + loc.offset);
        v.text.assign(s, strnlen(s, t->count));
        return v;
      }
      v.kind = FieldValue::Kind::kAggregate;
      v.text = t->display();
      return v;
    }
    case TypeKind::kStruct:
    case TypeKind::kUnion:
      v.kind = FieldValue::Kind::kAggregate;
      v.text = t->display();
      return v;
    default:
      v.text = "cannot show " + t->display();
      return v;
  }
}

const uint8_t* object_bytes(const Memory& mem, uint64_t addr, size_t size,
                            std::vector<uint8_t>& scratch) {
  if (const uint8_t* p = mem.span(addr, size)) return p;
  if (size > kMaxObjectSize) return nullptr;
  scratch.resize(size);
  if (!mem.read(addr, scratch.data(), size).ok()) return nullptr;
  return scratch.data();
}

bool field_is_text(const Type* declared) {
  const Type* s = declared ? declared->strip() : nullptr;
  if (!s || (s->kind != TypeKind::kPointer && s->kind != TypeKind::kArray)) return false;
  if (looks_uuid(declared, s)) return true;
  const Type* e = s->target ? s->target->strip() : nullptr;
  return e && e->kind == TypeKind::kInt && e->is_char && e->size == 1;
}

Result<uint64_t> field_address(const Memory& mem, const uint8_t* obj, uint64_t addr,
                               const FieldSpec& spec) {
  uint64_t base = addr;
  const uint8_t* cur = obj;
  std::vector<uint8_t> scratch;
  for (size_t i = 0; i + 1 < spec.hops.size(); ++i) {
    uint64_t next = load_uint(cur + spec.hops[i].offset, 8);
    if (!next) return make_error(Errc::kFault, fmt::format("NULL on the way to '{}'", spec.path));
    const Type* pt = spec.hops[i].type ? spec.hops[i].type->strip() : nullptr;
    const Type* tt = pt && pt->target ? pt->target->strip() : nullptr;
    cur = object_bytes(mem, next, tt && tt->size ? tt->size : 8, scratch);
    if (!cur)
      return make_error(Errc::kFault, fmt::format("{:#x}: {}", next, mem.why_unreadable(next)));
    base = next;
  }
  return base + spec.hops.back().offset;
}

namespace {
const Type* pointee(const Member* x) {
  const Type* p = x && x->type ? x->type->strip() : nullptr;
  return p && p->kind == TypeKind::kPointer && p->target ? p->target->strip() : nullptr;
}
}  // namespace

bool is_list_head_shape(const Type* t) {
  const Type* m = t ? t->strip() : nullptr;
  uint64_t off;
  return m && m->kind == TypeKind::kStruct && pointee(find_member(m, "next", &off)) == m &&
         pointee(find_member(m, "prev", &off)) == m;
}

bool is_hlist_node_shape(const Type* t) {
  const Type* m = t ? t->strip() : nullptr;
  uint64_t off;
  if (!m || m->kind != TypeKind::kStruct || pointee(find_member(m, "next", &off)) != m)
    return false;
  const Type* b = pointee(find_member(m, "pprev", &off));
  return b && b->kind == TypeKind::kPointer && b->target && b->target->strip() == m;
}

bool is_hlist_head_shape(const Type* t) {
  const Type* m = t ? t->strip() : nullptr;
  uint64_t off;
  return m && m->kind == TypeKind::kStruct && m->members.size() == 1 &&
         is_hlist_node_shape(pointee(find_member(m, "first", &off)));
}

bool same_type(const Type* a, const Type* b) {
  a = a ? a->strip() : nullptr;
  b = b ? b->strip() : nullptr;
  if (a == b) return true;  // both void (a null target) included
  if (!a || !b || a->kind != b->kind || a->size != b->size) return false;
  switch (a->kind) {
    case TypeKind::kPointer:
      return same_type(a->target, b->target);
    case TypeKind::kArray:
      return a->count == b->count && same_type(a->target, b->target);
    default:
      // Named types compare by name; two anonymous structs are not known to match.
      return !a->name.empty() && a->name == b->name;
  }
}

FieldValue eval_field(const Memory& mem, const uint8_t* obj, const FieldSpec& spec) {
  std::vector<uint8_t> scratch;
  const uint8_t* cur = obj;
  for (size_t i = 0; i < spec.hops.size(); ++i) {
    const FieldLoc& loc = spec.hops[i];
    if (i + 1 == spec.hops.size()) {
      FieldValue v = format_scalar(cur, loc);
      // char * : read the string it points to.
      const Type* t = loc.type ? loc.type->strip() : nullptr;
      if (v.kind == FieldValue::Kind::kPointer && t && t->target) {
        const Type* e = t->target->strip();
        if (e && e->kind == TypeKind::kInt && e->is_char && v.u) {
          bool complete = false;
          auto s = mem.read_cstring(v.u, 256, &complete);
          FieldValue sv;
          if (s.ok()) {
            sv.kind = FieldValue::Kind::kString;
            sv.text = s.value();
            sv.truncated = !complete;
            sv.u = v.u;
            return sv;
          }
          sv.kind = FieldValue::Kind::kError;
          sv.text = fmt::format("{:#x}: {}", v.u, mem.why_unreadable(v.u));
          return sv;
        }
      }
      return v;
    }
    uint64_t next = load_uint(cur + loc.offset, 8);
    const Type* pt = loc.type ? loc.type->strip() : nullptr;
    const Type* target = pt && pt->target ? pt->target->strip() : nullptr;
    FieldValue err;
    if (!next) {
      err.text = "NULL";
      return err;
    }
    size_t need = target && target->size ? target->size : 8;
    cur = object_bytes(mem, next, need, scratch);
    if (!cur) {
      err.text = fmt::format("{:#x}: {}", next, mem.why_unreadable(next));
      return err;
    }
  }
  FieldValue none;
  none.text = "empty path";
  return none;
}

namespace {

struct TreeBuilder {
  const uint8_t* obj;
  uint64_t size;
  TreeLimits lim;
  uint64_t nodes = 0;

  void build(ValueNode& n, const FieldLoc& loc, int depth) {
    n.type = loc.type;
    const Type* t = loc.type ? loc.type->strip() : nullptr;
    uint64_t need = field_bytes(loc);
    if (loc.offset > size || need > size - loc.offset) {
      n.value.text = fmt::format("outside the object: offset {} + {} bytes > {} (corrupt DWARF?)",
                                 loc.offset, need, size);
      return;
    }
    bool aggregate = t && (t->kind == TypeKind::kStruct || t->kind == TypeKind::kUnion);
    if (!aggregate) n.value = format_scalar(obj, loc);
    if (t && t->kind == TypeKind::kArray && n.value.kind != FieldValue::Kind::kAggregate) return;
    if (!aggregate && !(t && t->kind == TypeKind::kArray)) return;
    n.value.kind = FieldValue::Kind::kAggregate;
    n.value.text = t->display();
    if (depth <= 0) return;
    if (aggregate) {
      for (const auto& m : t->members) {
        if (!add(n)) return;
        // gdb's form for a base class subobject: <Base> = {...}.
        n.children.back().name =
            m.is_base ? "<" + (m.type ? m.type->strip()->name : std::string("?")) + ">" : m.name;
        build(n.children.back(),
              FieldLoc{loc.offset + m.offset, m.bit_offset, m.bit_size, m.type, {}}, depth - 1);
      }
      // What has no fixed place is said, never silently dropped.
      for (const auto& o : t->omitted) {
        if (!add(n)) return;
        n.children.back().name = "<" + o + ">";
        n.children.back().value.text = "not shown: the DWARF gives it no fixed offset";
      }
      return;
    }
    n.is_array = true;
    uint64_t es = t->target && t->target->strip() ? t->target->strip()->size : 0;
    uint64_t count = std::min<uint64_t>(t->count, lim.max_array);
    n.more = t->count - count;
    for (uint64_t i = 0; i < count; ++i) {
      if (!add(n)) {
        n.more = t->count - i;
        return;
      }
      build(n.children.back(), FieldLoc{loc.offset + i * es, 0, 0, t->target, {}}, depth - 1);
    }
  }
  // Appends a child unless the whole tree is at its node budget.
  bool add(ValueNode& n) {
    n.children.emplace_back();
    if (++nodes <= lim.max_nodes) return true;
    n.children.back().value.text = fmt::format("output cut at {} values", lim.max_nodes);
    return false;
  }
};

void render_text(const Memory& mem, ModuleSet* mods, const ValueNode& n, int indent,
                 std::string& out) {
  const std::string pad(indent * 2, ' ');
  if (n.value.kind == FieldValue::Kind::kAggregate && !n.is_array) {
    if (n.children.empty()) {
      out += "{...}";
      return;
    }
    out += "{\n";
    for (const auto& c : n.children) {
      out += pad + "  ";
      if (!c.name.empty()) out += c.name + " = ";
      render_text(mem, mods, c, indent + 1, out);
      out += ",\n";
    }
    out += pad + "}";
    return;
  }
  if (n.is_array) {
    out += "{";
    for (size_t i = 0; i < n.children.size(); ++i) {
      if (i) out += ", ";
      render_text(mem, mods, n.children[i], indent + 1, out);
    }
    if (n.more) out += fmt::format(", ...<{} more>", n.more);
    out += "}";
    return;
  }
  const FieldValue& v = n.value;
  out += v.to_string();
  if (v.kind == FieldValue::Kind::kPointer && v.u && mods) {
    SymbolHit h = mods->symbolize(v.u);
    if (h.sym) out += " <" + h.format() + ">";
    const Type* t = n.type ? n.type->strip() : nullptr;
    const Type* e = t && t->target ? t->target->strip() : nullptr;
    if (e && e->kind == TypeKind::kInt && e->is_char) {
      bool complete = false;
      auto s = mem.read_cstring(v.u, 64, &complete);
      if (s.ok()) {
        FieldValue sv;
        sv.kind = FieldValue::Kind::kString;
        sv.text = s.value();
        sv.truncated = !complete;
        out += " " + sv.to_string();
      }
    }
  } else if (v.kind == FieldValue::Kind::kEnum && !v.text.empty()) {
    // gdb prints just the name; keep the number too for refcount work.
    out += fmt::format(" ({})", v.s);
  }
}

}  // namespace

ValueNode value_tree(const uint8_t* obj, uint64_t size, const Type* t, const TreeLimits& lim) {
  TreeBuilder b{obj, size, lim};
  ValueNode root;
  b.build(root, FieldLoc{0, 0, 0, t, {}}, lim.max_depth);
  return root;
}

std::string format_object(const Memory& mem, uint64_t addr, const Type* t, ModuleSet* mods,
                          int max_depth) {
  const Type* s = t ? t->strip() : nullptr;
  if (!s || !s->size) return fmt::format("<{}: type has no size>", t ? t->display() : "?");
  std::vector<uint8_t> scratch;
  const uint8_t* obj = object_bytes(mem, addr, s->size, scratch);
  if (!obj) return fmt::format("<{:#x}: {}>", addr, mem.why_unreadable(addr));
  std::string out = t->display() + " ";
  TreeLimits lim;
  lim.max_depth = max_depth;
  render_text(mem, mods, value_tree(obj, s->size, t, lim), 0, out);
  out += "\n";
  return out;
}

}  // namespace lr
