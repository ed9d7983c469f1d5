// The expression language (see expr.hpp): a lexer, a precedence-climbing
// parser to an untyped tree, a resolve pass that binds names against the
// object type (members, enumerators, variables, list element types), and an
// evaluator over object bytes.
#include "corelib/objects/expr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <set>

#include "corelib/objects/walkers.hpp"

namespace lr {

namespace {

constexpr size_t kMaxText = 4096;
constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxListEntries = 1'000'000;  // count()/sum() per object

enum class Op {
  kInt,
  kStr,
  kPath,
  kCall,  // before resolve
  kField,
  kAddr,
  kOwner,
  kVar,
  kNeg,
  kNot,
  kCompl,  // resolved leaves and unary
  kMul,
  kDiv,
  kMod,
  kAdd,
  kSub,
  kShl,
  kShr,
  kBitAnd,
  kBitXor,
  kBitOr,
  kLt,
  kLe,
  kGt,
  kGe,
  kEq,
  kNe,
  kAnd,
  kOr,
  kStrEq,
  kStrNe,  // string comparisons
  kCount,
  kSum,
};

}  // namespace

struct Expr::Node {
  Op op = Op::kInt;
  size_t pos = 0;             // where in the text (for messages)
  size_t begin = 0, end = 0;  // call arguments: where the argument's text lies
  int64_t num = 0;
  bool is_unsigned = false;
  std::string text;  // kStr literal, kPath text, kCall name
  std::vector<std::unique_ptr<Node>> kids;
  // resolved
  FieldSpec spec;
  IntField fast;  // one hop, whole integer: read in place
  bool use_fast = false;
  bool is_string = false;  // a field or literal whose value is a string
  const Type* enum_type = nullptr;
  // count/sum
  FieldSpec list;  // the list head member
  bool hlist = false;
  ListElement elem;
  std::unique_ptr<Expr> sub;  // predicate/summand in the element scope
};

namespace {

using NodeP = std::unique_ptr<Expr::Node>;

Error syntax_error(std::string_view text, size_t pos, const std::string& what,
                   const std::string& name) {
  return make_error(Errc::kInvalidArgument,
                    fmt::format("bad {}: {}\n  {}\n  {}^", name, what, text,
                                std::string(std::min(pos, text.size()), ' ')));
}

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

struct Parser {
  std::string_view s;
  std::string name;
  size_t i = 0;

  Error err(const std::string& what, size_t at) { return syntax_error(s, at, what, name); }
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(std::string_view tok) {
    ws();
    if (s.substr(i, tok.size()) != tok) return false;
    // '&' is not '&&', '|' not '||', '<' not '<<' or '<=', '!' not '!='...
    if (tok.size() == 1 && i + 1 < s.size()) {
      char n = s[i + 1];
      if ((tok == "&" && n == '&') || (tok == "|" && n == '|') ||
          (tok == "<" && (n == '<' || n == '=')) || (tok == ">" && (n == '>' || n == '=')) ||
          (tok == "!" && n == '=') || (tok == "=" && n == '='))
        return false;
    }
    i += tok.size();
    return true;
  }
  NodeP mk(Op op, size_t pos) {
    auto n = std::make_unique<Expr::Node>();
    n->op = op;
    n->pos = pos;
    return n;
  }
  NodeP bin(Op op, NodeP a, NodeP b, size_t pos) {
    auto n = mk(op, pos);
    n->kids.push_back(std::move(a));
    n->kids.push_back(std::move(b));
    return n;
  }

  // Levels from loosest to tightest; each entry: tokens and their ops.
  struct Level {
    std::vector<std::pair<const char*, Op>> ops;
  };
  static const std::vector<Level>& levels() {
    static const std::vector<Level> l = {
        {{{"||", Op::kOr}}},
        {{{"&&", Op::kAnd}}},
        {{{"==", Op::kEq}, {"!=", Op::kNe}}},
        {{{"<=", Op::kLe}, {">=", Op::kGe}, {"<", Op::kLt}, {">", Op::kGt}}},
        {{{"|", Op::kBitOr}}},
        {{{"^", Op::kBitXor}}},
        {{{"&", Op::kBitAnd}}},
        {{{"<<", Op::kShl}, {">>", Op::kShr}}},
        {{{"+", Op::kAdd}, {"-", Op::kSub}}},
        {{{"*", Op::kMul}, {"/", Op::kDiv}, {"%", Op::kMod}}},
    };
    return l;
  }

  Result<NodeP> binary(size_t level, int depth) {
    if (depth > kMaxDepth) return err("nesting too deep", i);
    if (level == levels().size()) return unary(depth);
    LR_ASSIGN(NodeP l, binary(level + 1, depth + 1));
    for (;;) {
      ws();
      size_t at = i;
      const Level& lv = levels()[level];
      const std::pair<const char*, Op>* hit = nullptr;
      for (const auto& o : lv.ops)
        if (eat(o.first)) {
          hit = &o;
          break;
        }
      if (!hit) return l;
      LR_ASSIGN(NodeP r, binary(level + 1, depth + 1));
      l = bin(hit->second, std::move(l), std::move(r), at);
    }
  }

  Result<NodeP> unary(int depth) {
    if (depth > kMaxDepth) return err("nesting too deep", i);
    ws();
    size_t at = i;
    if (eat("!")) {
      LR_ASSIGN(NodeP k, unary(depth + 1));
      auto n = mk(Op::kNot, at);
      n->kids.push_back(std::move(k));
      return n;
    }
    if (eat("~")) {
      LR_ASSIGN(NodeP k, unary(depth + 1));
      auto n = mk(Op::kCompl, at);
      n->kids.push_back(std::move(k));
      return n;
    }
    if (i < s.size() && s[i] == '-' &&
        !(i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      ++i;
      LR_ASSIGN(NodeP k, unary(depth + 1));
      auto n = mk(Op::kNeg, at);
      n->kids.push_back(std::move(k));
      return n;
    }
    return primary(depth);
  }

  Result<NodeP> number() {
    size_t at = i;
    bool neg = s[i] == '-';
    if (neg) ++i;
    size_t st = i;
    while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
    std::string body(s.substr(st, i - st));
    int base = body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') ? 16 : 10;
    errno = 0;
    char* end = nullptr;
    const char* b = body.c_str() + (base == 16 ? 2 : 0);
    unsigned long long v = std::strtoull(b, &end, base);
    if (!*b || errno || !end || *end) return err("bad number '" + body + "'", at);
    if (neg && v > static_cast<unsigned long long>(INT64_MAX) + 1)
      return err("number too small", at);
    auto n = mk(Op::kInt, at);
    n->num = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
    n->is_unsigned = !neg && v > static_cast<unsigned long long>(INT64_MAX);
    return n;
  }

  // A name with its member path: a.b[3]->c; $name; or a call f(args).
  Result<NodeP> path_or_call(int depth) {
    size_t at = i;
    if (s[i] == '$') ++i;
    if (i >= s.size() || !ident_start(s[i])) return err("expected a name after '$'", i);
    while (i < s.size()) {
      if (ident_char(s[i])) {
        ++i;
      } else if (s[i] == '.' && i + 1 < s.size() && ident_start(s[i + 1])) {
        ++i;
      } else if (s.substr(i, 2) == "->" && i + 2 < s.size() && ident_start(s[i + 2])) {
        i += 2;
      } else if (s[i] == '[') {
        size_t q = s.find(']', i);
        if (q == std::string_view::npos) return err("expected ']'", i);
        i = q + 1;
      } else {
        break;
      }
    }
    std::string text(s.substr(at, i - at));
    ws();
    if (i < s.size() && s[i] == '(' && text[0] != '$') {
      if (text != "count" && text != "sum")
        return err("unknown function '" + text + "' (functions: count, sum)", at);
      ++i;
      auto n = mk(Op::kCall, at);
      n->text = text;
      for (;;) {
        ws();
        size_t begin = i;
        LR_ASSIGN(NodeP a, binary(0, depth + 1));
        a->begin = begin;
        a->end = i;
        n->kids.push_back(std::move(a));
        if (eat(",")) continue;
        if (eat(")")) break;
        return err("expected ',' or ')'", i);
      }
      return n;
    }
    auto n = mk(Op::kPath, at);
    n->text = std::move(text);
    return n;
  }

  Result<NodeP> primary(int depth) {
    ws();
    if (i >= s.size()) return err("expected a value", i);
    size_t at = i;
    char c = s[i];
    if (c == '(') {
      ++i;
      LR_ASSIGN(NodeP n, binary(0, depth + 1));
      if (!eat(")")) return err("expected ')'", i);
      return n;
    }
    if (c == '"') {
      size_t q = s.find('"', i + 1);
      if (q == std::string_view::npos) return err("unterminated string", at);
      auto n = mk(Op::kStr, at);
      n->text = std::string(s.substr(i + 1, q - i - 1));
      i = q + 1;
      return n;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '-' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))))
      return number();
    if (ident_start(c) || c == '$') return path_or_call(depth);
    if (c == '=') return err("'=' is not a comparison; use '=='", at);
    return err(fmt::format("unexpected '{}'", c), at);
  }
};

Result<NodeP> parse_text(std::string_view text, const std::string& name) {
  if (text.size() > kMaxText) return make_error(Errc::kInvalidArgument, name + " too long");
  Parser p{text, name};
  p.ws();
  if (p.i == text.size()) return p.err("empty expression", 0);
  LR_ASSIGN(NodeP root, p.binary(0, 0));
  p.ws();
  if (p.i != text.size()) {
    if (text[p.i] == '=') return p.err("'=' is not a comparison; use '=='", p.i);
    return p.err("unexpected text", p.i);
  }
  return root;
}

// ---- resolve ----------------------------------------------------------------

// Enumerators of enum members reachable inside `t` (not through pointers).
const Type* find_enumerator(const Type* t, std::string_view name, int64_t* value, int depth = 0) {
  const Type* s = t ? t->strip() : nullptr;
  if (!s || depth > 8) return nullptr;
  if (s->kind == TypeKind::kEnum) {
    for (const auto& e : s->enumerators)
      if (e.name == name) {
        *value = e.value;
        return s;
      }
    return nullptr;
  }
  if (s->kind == TypeKind::kArray) return find_enumerator(s->target, name, value, depth + 1);
  if (s->kind != TypeKind::kStruct && s->kind != TypeKind::kUnion) return nullptr;
  for (const auto& m : s->members)
    if (const Type* e = find_enumerator(m.type, name, value, depth + 1)) return e;
  return nullptr;
}

// The names find_enumerator could find in `t`: what a misspelt one is near.
void enumerator_names(const Type* t, std::vector<std::string>& out, int depth = 0) {
  const Type* s = t ? t->strip() : nullptr;
  if (!s || depth > 8) return;
  if (s->kind == TypeKind::kEnum)
    for (const auto& e : s->enumerators) out.push_back(e.name);
  else if (s->kind == TypeKind::kArray)
    enumerator_names(s->target, out, depth + 1);
  else if (s->kind == TypeKind::kStruct || s->kind == TypeKind::kUnion)
    for (const auto& m : s->members) enumerator_names(m.type, out, depth + 1);
}

// A list member count()/sum() can walk: a list_head or hlist_head shape.
bool is_list_head(const Type* t, bool* hlist) {
  *hlist = is_hlist_head_shape(t);
  return *hlist || is_list_head_shape(t);
}

struct Resolver {
  const ExprScope& sc;
  std::string_view text;

  Error err(const Expr::Node& n, const std::string& what, Errc c = Errc::kInvalidArgument) {
    Error e = syntax_error(text, n.pos, what, sc.what);
    e.code = c;
    return e;
  }

  Result<void> field(Expr::Node& n, std::string_view path, const Type* enum_hint = nullptr) {
    auto fs = resolve_field(sc.type, path, false, &sc);
    if (!fs.ok()) {
      Error e = err(n, fs.error().message, fs.error().code);
      // Suggest a close member name for a missing first step, or a close
      // enumerator for a bare name (LCK_EZ for LCK_EX).
      std::string first(path.substr(0, path.find_first_of(".-[")));
      if (fs.error().code == Errc::kNotFound) {
        std::vector<std::string> names = member_names(sc.type);
        if (first.size() == path.size()) {
          enumerator_names(enum_hint, names);
          enumerator_names(sc.type, names);
        }
        std::string near = closest_name(first, names);
        // The member lookup may have suggested it already.
        if (!near.empty() && near != first &&
            fs.error().message.find("did you mean") == std::string::npos)
          e.message = fmt::format("bad {}: {}; did you mean '{}'?\n  {}\n  {}^", sc.what,
                                  fs.error().message, near, text,
                                  std::string(std::min(n.pos, text.size()), ' '));
      }
      return e;
    }
    n.spec = std::move(fs).value();
    const Type* ft = n.spec.type ? n.spec.type->strip() : nullptr;
    if (!ft) return err(n, "'" + std::string(path) + "' has no type");
    if (field_is_text(n.spec.type)) {
      n.is_string = true;
    } else if (ft->kind == TypeKind::kFloat) {
      return err(n,
                 fmt::format("'{}' is {}: floating point is not supported", path, ft->display()));
    } else if (ft->kind == TypeKind::kStruct || ft->kind == TypeKind::kUnion ||
               ft->kind == TypeKind::kArray) {
      // A refcount wrapper (atomic_t, refcount_t, kref, ...) reads as its
      // integer, exactly as --refcount does; anything else is refused.
      auto fs2 = resolve_field(sc.type, path, true, &sc);
      if (!fs2.ok() || ft->kind == TypeKind::kArray)
        return err(n, fmt::format("'{}' is {}, not a number or string: name a member inside it",
                                  path, n.spec.type->display()));
      n.spec = std::move(fs2).value();
    }
    const Type* rt = n.spec.type ? n.spec.type->strip() : nullptr;
    if (rt && rt->kind == TypeKind::kEnum) n.enum_type = rt;
    if (!n.is_string && n.spec.hops.size() == 1 && rt && rt->kind != TypeKind::kPointer &&
        rt->size <= 8) {
      n.fast = IntField::of(n.spec.hops[0]);
      n.use_fast = true;
    }
    return {};
  }

  // A bare or dotted name: $var, $addr, refcount, a member path, an enumerator.
  Result<void> name(Expr::Node& n, const Type* enum_hint) {
    const std::string& t = n.text;
    if (t[0] == '$') {
      std::string v = t.substr(1);
      if (v == "addr" || (v == "owner" && sc.in_list)) {
        n.op = v == "addr" ? Op::kAddr : Op::kOwner;
        n.is_unsigned = true;
        return {};
      }
      for (size_t k = 0; k < sc.vars.size(); ++k)
        if (sc.vars[k] == v) {
          n.op = Op::kVar;
          n.num = static_cast<int64_t>(k);
          return {};
        }
      std::string names = sc.in_list ? "$addr, $owner" : "$addr";
      for (const auto& x : sc.vars) names += ", $" + x;
      return err(n, fmt::format("unknown variable '{}' (known here: {})", t, names),
                 Errc::kNotFound);
    }
    uint64_t off;
    if (t == "refcount" && sc.refcount && (!sc.type || !find_member(sc.type, "refcount", &off))) {
      n.op = Op::kField;
      n.spec = *sc.refcount;
      const Type* rt = n.spec.type ? n.spec.type->strip() : nullptr;
      if (n.spec.hops.size() == 1 && rt && rt->size <= 8) {
        n.fast = IntField::of(n.spec.hops[0]);
        n.use_fast = true;
      }
      return {};
    }
    bool plain = t.find_first_of(".-[") == std::string::npos;
    if (plain) {
      int64_t v;
      const Type* e = nullptr;
      if (enum_hint && find_enumerator(enum_hint, t, &v)) e = enum_hint;
      std::string real = sc.alias && sc.type ? sc.alias(sc.type->strip(), t) : "";
      bool member = sc.type && find_member(sc.type, real.empty() ? t : real, &off);
      if (!e && !member && sc.type) e = find_enumerator(sc.type, t, &v);
      if ((e || (!member && sc.constant && sc.constant(t, &v))) && !member) {
        n.op = Op::kInt;
        n.num = v;
        return {};
      }
    }
    n.op = Op::kField;
    return field(n, t, enum_hint);
  }

  Result<void> call(Expr::Node& n) {
    const bool is_sum = n.text == "sum";
    if (n.kids.empty() || n.kids.size() > 2 || (is_sum && n.kids.size() != 2))
      return err(n, is_sum ? "sum takes (LIST, EXPR)" : "count takes (LIST) or (LIST, PRED)");
    Expr::Node& l = *n.kids[0];
    if (l.op != Op::kPath || l.text[0] == '$')
      return err(l, "the first argument must name a list_head or hlist_head member");
    LR_ASSIGN(n.list, resolve_field(sc.type, l.text, false, &sc));
    if (!is_list_head(n.list.type, &n.hlist))
      return err(l, fmt::format("'{}' is {}, not a struct list_head or hlist_head", l.text,
                                n.list.type ? n.list.type->display() : "unknown"));
    n.op = is_sum ? Op::kSum : Op::kCount;
    if (n.kids.size() == 2) {
      if (!sc.element)
        return err(l, fmt::format("the entries of '{}' have no declared type; declare it in a "
                                  "profile to use {}(LIST, ...)",
                                  l.text, n.text));
      auto el = sc.element(sc.type, l.text);
      if (!el.ok()) return err(l, el.error().message, el.error().code);
      n.elem = el.value();
      if (n.elem.hlist != n.hlist)
        return err(l, fmt::format("'{}' is {}, but its entries are linked by {}", l.text,
                                  n.hlist ? "an hlist_head" : "a list_head",
                                  n.elem.hlist ? "an hlist_node" : "a list_head"));
      ExprScope sub;
      sub.type = n.elem.type;
      sub.alias = sc.alias;
      sub.element = sc.element;
      sub.what = sc.what;
      sub.constant = sc.constant;
      sub.vars = sc.vars;  // the enclosing expression's $NAMEs, bound to the same values
      sub.in_list = true;  // $owner: the object the list belongs to
      // Re-compile the argument's text in the element's scope.

      size_t a = n.kids[1]->begin, b = n.kids[1]->end;
      std::string_view argtext = text.substr(a, b > a ? b - a : 0);
      auto e = Expr::compile(argtext, sub);
      if (!e.ok()) return std::move(e).error();
      n.sub = std::move(e).value();
    }
    n.kids.clear();
    return {};
  }

  Result<void> operator()(Expr::Node& n, const Type* enum_hint, int depth) {
    if (depth > 2 * kMaxDepth + 8) return err(n, "nesting too deep");
    switch (n.op) {
      case Op::kInt:
        return {};
      case Op::kStr:
        n.is_string = true;
        return {};
      case Op::kPath:
        return name(n, enum_hint);
      case Op::kCall:
        return call(n);
      default:
        break;
    }
    bool cmp = n.op == Op::kEq || n.op == Op::kNe || n.op == Op::kLt || n.op == Op::kLe ||
               n.op == Op::kGt || n.op == Op::kGe;
    if (n.kids.size() == 2 && cmp) {
      // Resolve the side that is not a bare name first: its enum type names
      // the enumerators the other side may use.
      bool l_bare = n.kids[0]->op == Op::kPath;
      Expr::Node& first = l_bare ? *n.kids[1] : *n.kids[0];
      Expr::Node& second = l_bare ? *n.kids[0] : *n.kids[1];
      LR_TRY((*this)(first, nullptr, depth + 1));
      LR_TRY((*this)(second, first.enum_type, depth + 1));
      if (!first.enum_type && second.enum_type && first.op == Op::kPath) {
        LR_TRY((*this)(first, second.enum_type, depth + 1));
      }
    } else {
      for (auto& k : n.kids) LR_TRY((*this)(*k, nullptr, depth + 1));
    }
    return types(n, cmp);
  }

  // Strings only compare with == and != (an enum field also compares with
  // the name of one of its enumerators, as a string).
  Result<void> types(Expr::Node& n, bool cmp) {
    bool any_str = false;
    for (auto& k : n.kids) any_str |= k->is_string;
    if (!any_str) return {};
    if (!cmp || (n.op != Op::kEq && n.op != Op::kNe)) {
      for (auto& k : n.kids)
        if (k->is_string) return err(*k, "a string only compares with == or !=");
    }
    Expr::Node& a = *n.kids[0];
    Expr::Node& b = *n.kids[1];
    if (a.is_string && b.is_string) {
      n.op = n.op == Op::kEq ? Op::kStrEq : Op::kStrNe;
      return {};
    }
    Expr::Node& lit = a.is_string ? a : b;
    Expr::Node& other = a.is_string ? b : a;
    if (lit.op == Op::kStr && other.enum_type) {
      for (const auto& e : other.enum_type->enumerators)
        if (e.name == lit.text) {
          lit.op = Op::kInt;
          lit.num = e.value;
          lit.is_string = false;
          return {};
        }
      return err(
          lit, fmt::format("'{}' is not an enumerator of {}", lit.text, other.enum_type->display()),
          Errc::kNotFound);
    }
    return err(lit.op == Op::kStr ? other : lit, "compares a string with a number");
  }
};

// ---- evaluate ---------------------------------------------------------------

ExprValue error_value(std::string msg) {
  ExprValue v;
  v.kind = ExprValue::Kind::kError;
  v.s = std::move(msg);
  return v;
}

ExprValue string_value(std::string s) {
  ExprValue v;
  v.kind = ExprValue::Kind::kString;
  v.s = std::move(s);
  return v;
}

ExprValue int_value(int64_t i, bool uns = false) {
  ExprValue v;
  v.i = i;
  v.is_unsigned = uns;
  return v;
}

ExprValue from_field(const FieldValue& f) {
  using K = FieldValue::Kind;
  switch (f.kind) {
    case K::kSigned:
      return int_value(f.s);
    case K::kUnsigned:
      return int_value(static_cast<int64_t>(f.u), true);
    case K::kBool:
      return int_value(f.u != 0);
    case K::kPointer:
      return int_value(static_cast<int64_t>(f.u), true);
    case K::kEnum:
      return int_value(f.s);
    case K::kString:
    case K::kUuid:
      return string_value(f.text);
    case K::kFloat:
    case K::kAggregate:
      return error_value("not a number");
    case K::kError:
      return error_value(f.text);
  }
  return error_value("unknown value");
}

bool cmp_values(Op op, const ExprValue& a, const ExprValue& b) {
  // Unsigned when either side is unsigned and neither is negative-signed.
  bool uns = (a.is_unsigned || b.is_unsigned);
  auto go = [op](auto x, auto y) {
    switch (op) {
      case Op::kLt:
        return x < y;
      case Op::kLe:
        return x <= y;
      case Op::kGt:
        return x > y;
      case Op::kGe:
        return x >= y;
      case Op::kEq:
        return x == y;
      default:
        return x != y;
    }
  };
  if (uns) {
    // A negative signed value is below every unsigned one.
    if (!a.is_unsigned && a.i < 0) return go(0, 1);
    if (!b.is_unsigned && b.i < 0) return go(1, 0);
    return go(static_cast<uint64_t>(a.i), static_cast<uint64_t>(b.i));
  }
  return go(a.i, b.i);
}

ExprValue arith(Op op, const ExprValue& a, const ExprValue& b) {
  uint64_t x = static_cast<uint64_t>(a.i), y = static_cast<uint64_t>(b.i);
  bool uns = a.is_unsigned || b.is_unsigned;
  switch (op) {
    case Op::kAdd:
      return int_value(static_cast<int64_t>(x + y), uns);
    case Op::kSub:
      return int_value(static_cast<int64_t>(x - y), uns);
    case Op::kMul:
      return int_value(static_cast<int64_t>(x * y), uns);
    case Op::kDiv:
    case Op::kMod:
      if (!y) return error_value("division by zero");
      if (uns) return int_value(static_cast<int64_t>(op == Op::kDiv ? x / y : x % y), true);
      if (a.i == INT64_MIN && b.i == -1) return error_value("integer overflow in division");
      return int_value(op == Op::kDiv ? a.i / b.i : a.i % b.i);
    case Op::kShl:
    case Op::kShr:
      if (b.i < 0 || b.i > 63) return error_value(fmt::format("shift by {}", b.i));
      if (op == Op::kShl) return int_value(static_cast<int64_t>(x << y), uns);
      return uns || a.i >= 0 ? int_value(static_cast<int64_t>(x >> y), uns) : int_value(a.i >> b.i);
    case Op::kBitAnd:
      return int_value(static_cast<int64_t>(x & y), uns);
    case Op::kBitOr:
      return int_value(static_cast<int64_t>(x | y), uns);
    case Op::kBitXor:
      return int_value(static_cast<int64_t>(x ^ y), uns);
    default:
      return error_value("bad operator");
  }
}

struct Evaluator {
  const Memory& mem;
  const uint8_t* obj;
  uint64_t addr;
  const int64_t* vars;
  uint64_t owner;

  ExprValue list(const Expr::Node& n) {
    auto head = field_address(mem, obj, addr, n.list);
    if (!head.ok()) return error_value(head.error().message);
    WalkLimits lim;
    lim.max_nodes = kMaxListEntries;
    const uint64_t off = n.sub ? n.elem.link_offset : 0;
    WalkResult w =
        n.hlist ? walk_hlist(mem, head.value(), off, lim) : walk_list(mem, head.value(), off, lim);
    if (!w.ok())
      return error_value(fmt::format("{}({}): list {} ({})", n.op == Op::kSum ? "sum" : "count",
                                     n.list.path, walk_stop_name(w.stop), w.stop_detail));
    if (!n.sub) return int_value(static_cast<int64_t>(w.objects.size()));
    const Type* et = n.elem.type->strip();
    std::vector<uint8_t> scratch;
    int64_t acc = 0;
    for (uint64_t e : w.objects) {
      const uint8_t* eb = object_bytes(mem, e, et->size, scratch);
      if (!eb) return error_value(fmt::format("entry {:#x}: {}", e, mem.why_unreadable(e)));
      ExprValue v = n.sub->eval(mem, eb, e, vars, addr);
      if (v.kind == ExprValue::Kind::kError)
        return error_value(fmt::format("entry {:#x}: {}", e, v.s));
      if (v.kind != ExprValue::Kind::kInt) return error_value("not a number");
      acc += n.op == Op::kCount ? (v.i != 0) : v.i;
    }
    return int_value(acc);
  }

  ExprValue operator()(const Expr::Node& n) {
    switch (n.op) {
      case Op::kInt:
        return int_value(n.num, n.is_unsigned);
      case Op::kStr:
        return string_value(n.text);
      case Op::kField:
        if (n.use_fast) return int_value(n.fast.load(obj), !n.fast.is_signed);
        return from_field(eval_field(mem, obj, n.spec));
      case Op::kAddr:
        return int_value(static_cast<int64_t>(addr), true);
      case Op::kOwner:
        return int_value(static_cast<int64_t>(owner), true);
      case Op::kVar:
        return vars ? int_value(vars[n.num], n.is_unsigned) : error_value("variable not bound");
      case Op::kCount:
      case Op::kSum:
        return list(n);
      case Op::kAnd:
      case Op::kOr: {
        ExprValue a = (*this)(*n.kids[0]);
        if (a.kind == ExprValue::Kind::kError) return a;
        if (a.truthy() == (n.op == Op::kOr)) return int_value(n.op == Op::kOr);
        ExprValue b = (*this)(*n.kids[1]);
        if (b.kind == ExprValue::Kind::kError) return b;
        return int_value(b.truthy());
      }
      default:
        break;
    }
    if (n.kids.size() == 1) {
      ExprValue a = (*this)(*n.kids[0]);
      if (a.kind != ExprValue::Kind::kInt)
        return a.kind == ExprValue::Kind::kError ? a : error_value("not a number");
      if (n.op == Op::kNot) return int_value(a.i == 0);
      if (n.op == Op::kCompl)
        return int_value(static_cast<int64_t>(~static_cast<uint64_t>(a.i)), a.is_unsigned);
      return int_value(static_cast<int64_t>(0 - static_cast<uint64_t>(a.i)));
    }
    ExprValue a = (*this)(*n.kids[0]);
    if (a.kind == ExprValue::Kind::kError) return a;
    ExprValue b = (*this)(*n.kids[1]);
    if (b.kind == ExprValue::Kind::kError) return b;
    if (n.op == Op::kStrEq || n.op == Op::kStrNe) {
      if (a.kind != ExprValue::Kind::kString || b.kind != ExprValue::Kind::kString)
        return error_value("not a string");
      return int_value((a.s == b.s) == (n.op == Op::kStrEq));
    }
    if (a.kind != ExprValue::Kind::kInt || b.kind != ExprValue::Kind::kInt)
      return error_value("not a number");
    switch (n.op) {
      case Op::kLt:
      case Op::kLe:
      case Op::kGt:
      case Op::kGe:
      case Op::kEq:
      case Op::kNe:
        return int_value(cmp_values(n.op, a, b));
      default:
        return arith(n.op, a, b);
    }
  }
};

}  // namespace

Expr::~Expr() = default;

Result<std::unique_ptr<Expr>> Expr::compile(std::string_view text, const ExprScope& scope) {
  LR_ASSIGN(NodeP root, parse_text(text, scope.what));
  Resolver r{scope, text};
  LR_TRY(r(*root, nullptr, 0));
  if (root->is_string)
    return syntax_error(text, 0, "a string is not a condition or a number", scope.what);
  auto e = std::make_unique<Expr>();
  e->root_ = std::move(root);
  return e;
}

namespace {
// Without types, what the literals alone show: a string used with an
// operator other than == and != (or as the whole condition).
Result<void> check_literals(const Expr::Node& n, std::string_view text, const std::string& what) {
  for (const auto& k : n.kids) {
    LR_TRY(check_literals(*k, text, what));
    if (k->op == Op::kStr && n.op != Op::kEq && n.op != Op::kNe && n.op != Op::kCall)
      return syntax_error(text, k->pos, "a string only compares with == or !=", what);
  }
  return {};
}
}  // namespace

Result<void> Expr::check_syntax(std::string_view text, const std::string& what) {
  LR_ASSIGN(NodeP root, parse_text(text, what));
  if (root->op == Op::kStr)
    return syntax_error(text, 0, "a string is not a condition or a number", what);
  return check_literals(*root, text, what);
}

ExprValue Expr::eval(const Memory& mem, const uint8_t* obj, uint64_t addr, const int64_t* vars,
                     uint64_t owner) const {
  Evaluator ev{mem, obj, addr, vars, owner};
  return ev(*root_);
}

// ---- member paths -------------------------------------------------------------

Result<FieldSpec> resolve_field(const Type* t, std::string_view path, bool refcount,
                                const ExprScope* scope) {
  return make_field_spec(t, path, refcount, scope && scope->alias ? &scope->alias : nullptr);
}

}  // namespace lr
