#include "leakref/filter.hpp"

#include <fmt/format.h>

#include <cctype>

namespace lr {

struct Filter::Node {
  enum class Kind { kAnd, kOr, kCmp } kind = Kind::kCmp;
  std::unique_ptr<Node> a, b;
  // kCmp
  std::string field;
  FieldSpec spec;
  std::string op;  // == != < <= > >=
  bool is_string = false;
  int64_t num = 0;
  std::string str;
};

namespace {

struct Parser {
  std::string_view s;
  size_t i = 0;
  const Type* type;
  const FieldSpec* refcount;
  bool typed;

  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  Error err(const std::string& what) {
    return make_error(Errc::kInvalidArgument,
                      fmt::format("bad --where '{}': {} at position {}", s, what, i));
  }
  // a || b: operands are && chains; a && b: operands are atoms.
  Result<std::unique_ptr<Filter::Node>> parse_or(int depth) {
    if (depth > 64) return err("nesting too deep");
    return parse_chain(depth, "||", Filter::Node::Kind::kOr);
  }
  Result<std::unique_ptr<Filter::Node>> parse_chain(int depth, const char* op,
                                                    Filter::Node::Kind kind) {
    const bool is_or = kind == Filter::Node::Kind::kOr;
    auto operand = [&]() {
      return is_or ? parse_chain(depth, "&&", Filter::Node::Kind::kAnd) : parse_atom(depth);
    };
    LR_ASSIGN(auto l, operand());
    for (;;) {
      ws();
      if (s.substr(i, 2) != op) return l;
      i += 2;
      LR_ASSIGN(auto r, operand());
      auto n = std::make_unique<Filter::Node>();
      n->kind = kind;
      n->a = std::move(l);
      n->b = std::move(r);
      l = std::move(n);
    }
  }
  Result<std::unique_ptr<Filter::Node>> parse_atom(int depth) {
    ws();
    if (i < s.size() && s[i] == '(') {
      ++i;
      LR_ASSIGN(auto n, parse_or(depth + 1));
      ws();
      if (i >= s.size() || s[i] != ')') return err("expected ')'");
      ++i;
      return n;
    }
    auto n = std::make_unique<Filter::Node>();
    size_t st = i;
    while (i < s.size() &&
           (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '.' ||
            s[i] == '[' || s[i] == ']' || (s[i] == '-' && i + 1 < s.size() && s[i + 1] == '>') ||
            (s[i] == '>' && i > st && s[i - 1] == '-')))
      ++i;
    n->field = std::string(s.substr(st, i - st));
    if (n->field.empty()) return err("expected a field name");
    ws();
    static const char* ops[] = {"==", "!=", "<=", ">=", "<", ">"};
    for (const char* op : ops) {
      size_t l = std::strlen(op);
      if (s.substr(i, l) == op) {
        n->op = op;
        i += l;
        break;
      }
    }
    if (n->op.empty()) return err("expected ==, !=, <, <=, > or >=");
    ws();
    if (i < s.size() && s[i] == '"') {
      ++i;
      size_t q = s.find('"', i);
      if (q == std::string_view::npos) return err("unterminated string");
      n->is_string = true;
      n->str = std::string(s.substr(i, q - i));
      i = q + 1;
      if (n->op != "==" && n->op != "!=") return err("strings compare only with == or !=");
    } else {
      size_t st2 = i;
      if (i < s.size() && s[i] == '-') ++i;
      while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
      std::string lit(s.substr(st2, i - st2));
      bool neg = !lit.empty() && lit[0] == '-';
      std::string body = neg ? lit.substr(1) : lit;
      if (body.empty()) return err("expected a number or \"string\"");
      int base = body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') ? 16 : 10;
      errno = 0;
      char* end = nullptr;
      unsigned long long v = std::strtoull(body.c_str() + (base == 16 ? 2 : 0), &end, base);
      if (errno || !end || *end) return err("bad number '" + lit + "'");
      n->num = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    }
    if (typed) {
      uint64_t off;
      bool is_rc =
          n->field == "refcount" && refcount && (!type || !find_member(type, "refcount", &off));
      if (is_rc) {
        n->spec = *refcount;
      } else {
        auto spec = make_field_spec(type, n->field, false);
        if (!spec.ok()) return std::move(spec).error();
        n->spec = std::move(spec).value();
      }
    }
    return n;
  }
};

bool eval(const Filter::Node& n, const Memory& mem, const uint8_t* obj) {
  using K = Filter::Node::Kind;
  if (n.kind == K::kAnd) return eval(*n.a, mem, obj) && eval(*n.b, mem, obj);
  if (n.kind == K::kOr) return eval(*n.a, mem, obj) || eval(*n.b, mem, obj);
  FieldValue v = eval_field(mem, obj, n.spec);
  if (n.is_string) {
    bool eq = (v.kind == FieldValue::Kind::kString || v.kind == FieldValue::Kind::kUuid ||
               v.kind == FieldValue::Kind::kEnum) &&
              v.text == n.str;
    return n.op == "==" ? eq : !eq;
  }
  int64_t x;
  if (!v.as_int(&x)) return false;
  // Unsigned values above INT64_MAX compare as unsigned.
  bool uns = v.kind == FieldValue::Kind::kUnsigned || v.kind == FieldValue::Kind::kPointer;
  auto cmp = [&](auto a, auto b) {
    if (n.op == "==") return a == b;
    if (n.op == "!=") return a != b;
    if (n.op == "<") return a < b;
    if (n.op == "<=") return a <= b;
    if (n.op == ">") return a > b;
    return a >= b;
  };
  if (uns && n.num >= 0) return cmp(v.u, static_cast<uint64_t>(n.num));
  if (uns && n.num < 0) return cmp(1, 0);  // any unsigned value > a negative literal
  return cmp(x, n.num);
}

}  // namespace

Filter::~Filter() = default;

Result<std::unique_ptr<Filter>> Filter::parse(std::string_view expr, const Type* t,
                                              const FieldSpec* refcount) {
  if (expr.size() > 4096) return make_error(Errc::kInvalidArgument, "--where expression too long");
  Parser p{expr, 0, t, refcount, true};
  LR_ASSIGN(auto root, p.parse_or(0));
  p.ws();
  if (p.i != expr.size()) return p.err("unexpected text");
  auto f = std::make_unique<Filter>();
  f->root_ = std::move(root);
  return f;
}

Result<void> Filter::check_syntax(std::string_view expr) {
  if (expr.size() > 4096) return make_error(Errc::kInvalidArgument, "--where expression too long");
  Parser p{expr, 0, nullptr, nullptr, false};
  LR_ASSIGN(auto root, p.parse_or(0));
  (void)root;
  p.ws();
  if (p.i != expr.size()) return p.err("unexpected text");
  return {};
}

bool Filter::matches(const Memory& mem, const uint8_t* obj) const {
  return eval(*root_, mem, obj);
}

}  // namespace lr
