#include "profile_bind.hpp"

#include <fmt/format.h>

#include <cctype>

namespace lr {

namespace {

std::vector<std::string> split_alternatives(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  for (;;) {
    size_t e = s.find('|', b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

bool plain_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

ProfileBinder::ProfileBinder(Program& prog, const Profile& p) : prog_(prog), p_(p) {
  alias_ = [this](const Type* t, std::string_view name) -> std::string {
    auto it = by_type_.find(t ? t->strip() : nullptr);
    if (it == by_type_.end()) return "";
    auto a = it->second->alias.find(std::string(name));
    return a == it->second->alias.end() ? "" : a->second;
  };
  element_ = [this](const Type* owner, std::string_view path) { return element(owner, path); };
}

Error ProfileBinder::fail(Errc c, const std::string& what) const {
  return make_error(c, fmt::format("profile {} ({}): {}", p_.name, p_.source, what));
}

Result<BoundType*> ProfileBinder::bind(const std::string& name) {
  auto it = bound_.find(name);
  if (it != bound_.end()) return it->second;
  const ProfileType* decl = nullptr;
  for (const auto& t : p_.types)
    if (t.name == name) decl = &t;
  // A set may name the C type of a [types] entry: it gets that entry's
  // aliases and requirements, not a bare copy without them.
  for (const auto& t : p_.types)
    if (!decl && t.c == name) decl = &t;
  // `c` may list alternatives ("struct slab|struct page"): the first the
  // target has; `fallback` when it is not the first.
  const std::vector<std::string> cs = split_alternatives(decl ? decl->c : name);
  std::string c = cs[0];
  auto t = prog_.types().find(c);
  bool fallback = false;
  for (size_t i = 1; i < cs.size() && !t.ok(); ++i) {
    auto ti = prog_.types().find(cs[i]);
    if (ti.ok()) c = cs[i], t = std::move(ti), fallback = true;
  }
  if (!t.ok())
    return fail(t.error().code,
                decl ? fmt::format("types.{}: {}", decl->name, t.error().message)
                     : fmt::format("'{}' is neither a [types] name nor a type of the target: {}",
                                   name, t.error().message));
  const Type* s = t.value()->strip();
  if (!s || !s->is_aggregate() || !s->size)
    return fail(Errc::kInvalidArgument,
                fmt::format("{} is {}, not a defined struct or union", c, t.value()->display()));
  // One struct, one set of aliases, whatever name reaches it: two
  // declarations of it would make a member name mean what the first bound said.
  auto prev = by_type_.find(s);
  if (prev != by_type_.end()) {
    BoundType* b = prev->second;
    if (decl && b->decl && decl != b->decl && (fallback || b->fallback)) {
      if (!fallback) {  // the struct's own declaration, after a fallback to it
        const ProfileType* first = b->decl;
        BoundType fresh;
        fresh.decl = decl;
        fresh.c = b->c;
        fresh.type = b->type;
        *b = std::move(fresh);
        LR_TRY(require(*b));
        LR_TRY(share(*b, *first));
      } else {
        LR_TRY(share(*b, *decl));
      }
      return bound_[name] = b;
    }
    if (decl && b->decl && decl != b->decl)
      return fail(Errc::kInvalidArgument, fmt::format("types.{} and types.{} both declare {}",
                                                      b->decl->name, decl->name, s->display()));
    if (decl && !b->decl) {
      b->decl = decl;
      LR_TRY(require(*b));
    }
    return bound_[name] = b;
  }
  BoundType& ref = store_.emplace_back();
  ref.decl = decl;
  ref.c = c;
  ref.type = t.value();
  ref.fallback = fallback;
  bound_[name] = &ref;
  by_type_[s] = &ref;
  LR_TRY(require(ref));
  return &ref;
}

// A declaration whose `c` fell back to a struct another declaration binds
// (types.slab on a kernel before struct slab: struct page) shares that
// binding: its members must be there, and its aliases must agree with the
// other's. Expressions and list element types stay the other's, so a
// fallback declares none.
Result<void> ProfileBinder::share(BoundType& b, const ProfileType& decl) {
  if (!decl.exprs.empty() || !decl.lists.empty())
    return fail(Errc::kInvalidArgument,
                fmt::format("types.{}: falls back to {}, which types.{} declares; a fallback may "
                            "declare no exprs or lists",
                            decl.name, b.type->display(), b.decl->name));
  BoundType mine;
  mine.decl = &decl;
  mine.c = b.c;
  mine.type = b.type;
  LR_TRY(require(mine));
  for (const auto& [from, to] : mine.alias) {
    auto [it, fresh] = b.alias.emplace(from, to);
    if (!fresh && it->second != to)
      return fail(Errc::kInvalidArgument,
                  fmt::format("types.{}: '{}' means {} here but {} in types.{} ({})", decl.name,
                              from, to, it->second, b.decl->name, b.type->display()));
  }
  b.missing.insert(mine.missing.begin(), mine.missing.end());
  return {};
}

// Required members (one alternative must exist), optional ones, and the
// `fields` aliases: every alternative name maps to the member present, so an
// expression written with any of them works on every version.
Result<void> ProfileBinder::require(BoundType& bt) {
  if (!bt.decl) return {};
  const Type* t = bt.type;
  auto present = [&](const std::string& m) { return resolve_path(t, m).ok(); };
  auto choose = [&](const std::string& alts, std::string* chosen) {
    for (const auto& a : split_alternatives(alts))
      if (present(a)) {
        *chosen = a;
        return true;
      }
    return false;
  };
  auto map_alternatives = [&](const std::string& alts, const std::string& chosen) {
    for (const auto& a : split_alternatives(alts))
      if (plain_name(a) && a != chosen) bt.alias[a] = chosen;
  };
  for (const auto& r : bt.decl->require) {
    std::string chosen;
    if (!choose(r, &chosen))
      return fail(
          Errc::kNotFound,
          fmt::format("types.{}: {} has no member {} (required{})", bt.decl->name, t->display(), r,
                      r.find('|') != std::string::npos ? "; any one of them" : ""));
    map_alternatives(r, chosen);
  }
  for (const auto& o : bt.decl->optional) {
    std::string chosen;
    if (choose(o, &chosen))
      map_alternatives(o, chosen);
    else
      for (const auto& a : split_alternatives(o)) bt.missing.insert(a);
  }
  for (const auto& e : bt.decl->enums) {
    auto et = prog_.types().find(e);
    const Type* es = et.ok() && et.value() ? et.value()->strip() : nullptr;
    if (!es || es->kind != TypeKind::kEnum) continue;  // this version has no such enum
    for (const auto& en : es->enumerators) bt.constants.emplace(en.name, en.value);
  }
  for (const auto& [name, alts] : bt.decl->fields) {
    for (const auto& a : split_alternatives(alts))
      if (!plain_name(a))
        return fail(
            Errc::kInvalidArgument,
            fmt::format("types.{}.fields.{}: '{}' is not a member name", bt.decl->name, name, a));
    std::string chosen;
    if (choose(alts, &chosen)) {
      if (name != chosen) bt.alias[name] = chosen;
      map_alternatives(alts, chosen);
      continue;
    }
    bool optional = false;
    for (const auto& o : bt.decl->optional) optional |= o == name;
    if (!optional)
      return fail(Errc::kNotFound, fmt::format("types.{}.fields.{}: {} has none of the members {}",
                                               bt.decl->name, name, t->display(), alts));
    bt.missing.insert(name);
  }
  return {};
}

Result<ListElement> ProfileBinder::element(const Type* owner, std::string_view path) {
  auto it = by_type_.find(owner ? owner->strip() : nullptr);
  const ProfileType* decl = it == by_type_.end() ? nullptr : it->second->decl;
  auto li = decl ? decl->lists.find(std::string(path)) : decltype(decl->lists.end()){};
  if (!decl || li == decl->lists.end())
    return fail(Errc::kNotFound,
                fmt::format("the entries of {}.{} have no declared type (add it to "
                            "[types.NAME.lists])",
                            owner ? owner->display() : "?", path));
  // "TYPE.PATH", or alternatives "TYPE.PATH|TYPE.PATH2": the first that
  // this target's types have.
  const auto alts = split_alternatives(li->second);
  std::string spec = alts.empty() ? li->second : alts.front();
  for (const auto& a : alts) {
    size_t d = a.find('.');
    auto b = bind(a.substr(0, d));
    if (b.ok() && make_field_spec(b.value()->type, a.substr(d + 1), false, &alias_).ok()) {
      spec = a;
      break;
    }
  }
  size_t dot = spec.find('.');
  LR_ASSIGN(BoundType * et, bind(spec.substr(0, dot)));
  LR_ASSIGN(FieldSpec link, make_field_spec(et->type, spec.substr(dot + 1), false, &alias_));
  const Type* lt = link.type ? link.type->strip() : nullptr;
  const bool hlist = is_hlist_node_shape(lt);
  if (link.hops.size() != 1 || !(hlist || is_list_head_shape(lt)))
    return fail(Errc::kInvalidArgument,
                fmt::format("types.{}.lists.{}: {} is {}, not a list_head or hlist_node inside "
                            "the entry",
                            decl->name, path, spec.substr(dot + 1),
                            link.type ? link.type->display() : "unknown"));
  return ListElement{et->type, link.hops[0].offset, hlist};
}

ExprScope ProfileBinder::scope(const BoundType* bt, const std::string& what) const {
  ExprScope sc;
  sc.type = bt->type;
  sc.alias = alias_;
  sc.element = element_;
  sc.what = what;
  if (!bt->constants.empty())
    sc.constant = [bt](std::string_view n, int64_t* v) {
      auto it = bt->constants.find(std::string(n));
      if (it == bt->constants.end()) return false;
      *v = it->second;
      return true;
    };
  return sc;
}

Result<std::unique_ptr<Expr>> ProfileBinder::named_expr(const BoundType* bt,
                                                        const std::string& name) const {
  const std::string tn = bt->decl ? bt->decl->name : bt->c;
  auto it = bt->decl ? bt->decl->exprs.find(name) : decltype(bt->decl->exprs.end()){};
  if (!bt->decl || it == bt->decl->exprs.end())
    return fail(Errc::kNotFound, fmt::format("types.{} declares no expression '{}'", tn, name));
  std::string why;
  for (const auto& alt : it->second) {
    auto e = Expr::compile(alt, scope(bt, fmt::format("types.{}.exprs.{}", tn, name)));
    if (e.ok()) return std::move(e).value();
    std::string m = e.error().message;
    why += fmt::format("\n  '{}': {}", alt, m.substr(0, m.find('\n')));
  }
  return fail(
      Errc::kNotFound,
      fmt::format("types.{}.exprs.{}: no alternative compiles on this target:{}", tn, name, why));
}

Result<int64_t> ProfileBinder::constant(const BoundType* bt, const std::string& name) const {
  LR_ASSIGN(auto e, named_expr(bt, name));
  // A constant reads nothing; should the expression try, it reads no memory.
  struct NoMemory final : Memory {
    const uint8_t* span(uint64_t, size_t) const override { return nullptr; }
    Result<void> read(uint64_t a, void*, size_t) const override {
      return make_error(Errc::kInvalidArgument, fmt::format("{:#x}: no memory here", a));
    }
  };
  static const NoMemory kNoMemory;
  // Evaluated on all-zero and all-one bytes: an expression that reads the
  // object gives two answers (or none) and is refused, not taken as 0.
  const uint64_t size = bt->type ? std::max<uint64_t>(bt->type->strip()->size, 1) : 1;
  std::vector<uint8_t> zeros(size, 0), ones(size, 0xff);
  ExprValue v = e->eval(kNoMemory, zeros.data(), 0);
  ExprValue w = e->eval(kNoMemory, ones.data(), 0);
  if (v.kind != ExprValue::Kind::kInt || w.kind != v.kind || w.i != v.i)
    return make_error(Errc::kInvalidArgument, fmt::format("types.{}.exprs.{} is not a constant",
                                                          bt->decl ? bt->decl->name : bt->c, name));
  return v.i;
}

Result<Variable> ProfileBinder::variable(const std::string& name) const {
  auto it = p_.symbols.find(name);
  const std::string alts = it == p_.symbols.end() ? name : it->second;
  std::string why;
  for (const auto& a : split_alternatives(alts)) {
    auto r = prog_.resolve(a);
    if (r.ok()) return r.value();
    why += (why.empty() ? "" : "; ") + r.error().message;
  }
  return fail(Errc::kNotFound, fmt::format("symbols.{}: {}", name, why));
}

Result<uint64_t> ProfileBinder::symbol(const std::string& name) const {
  LR_ASSIGN(Variable v, variable(name));
  return v.addr;
}

std::string ProfileBinder::uses_missing(const BoundType* bt, const std::string& text) {
  if (bt->missing.empty()) return "";
  size_t i = 0;
  while (i < text.size()) {
    if (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_') {
      size_t b = i;
      while (i < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
        ++i;
      size_t after = text.find_first_not_of(" \t", i);
      bool call = after != std::string::npos && text[after] == '(';
      std::string tok = text.substr(b, i - b);
      if (!call && bt->missing.count(tok)) return tok;
    } else if (text[i] == '"') {
      size_t q = text.find('"', i + 1);
      i = q == std::string::npos ? text.size() : q + 1;
    } else {
      ++i;
    }
  }
  return "";
}

}  // namespace lr
