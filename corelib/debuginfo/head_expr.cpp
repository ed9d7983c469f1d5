// Program::resolve: the place a walk starts or an object to show, written as
// gdb, crash and drgn users write it:
//   SYMBOL  SYMBOL@module  ADDR  &SYMBOL  *SYMBOL  SYMBOL[3]  a.b  a->b
//   a.b through a pointer (as gdb and drgn allow)  *(struct T *)ADDR
//   (struct T *)ADDR  X+0x10 / X-0x10 (bytes; the type is then unknown)
//   VAR:CPU (a per-CPU variable on that CPU, as crash writes it; the host
//   that has them says where: Program::set_per_cpu)
// A pointer value (&x, a cast, a plain address) names what it points to.
// "*X+N" is refused as ambiguous: C reads (*X)+N, the old syntax *(X+N).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "corelib/debuginfo/program.hpp"

namespace lr {

namespace {

// An lvalue: `addr` holds an object of `type` (nullptr: unknown).
struct Val {
  uint64_t addr = 0;
  const Type* type = nullptr;
  std::string name;  // the symbol it came from, for messages and Variable::name
  Module* module = nullptr;
  bool is_address = false;  // &X: `addr` is a pointer value to X, not a place holding one
};

class HeadParser {
 public:
  struct Fallback {
    Program::SymbolFallback fn = nullptr;
    void* ctx = nullptr;
  };
  struct PerCpu {
    Program::PerCpu fn = nullptr;
    void* ctx = nullptr;
  };
  HeadParser(TypeRegistry& types, const Memory& mem, const std::string& text, Fallback fb,
             PerCpu pc)
      : types_(types), mem_(mem), s_(text), fb_(fb), pc_(pc) {}
  // A per-CPU variable was named without a CPU somewhere in the text.
  bool per_cpu_seen() const { return per_cpu_seen_; }

  Result<Val> parse() {
    LR_ASSIGN(Val v, additive());
    skip();
    if (i_ != s_.size()) return bad(fmt::format("unexpected '{}'", s_.substr(i_)));
    return v;
  }

 private:
  TypeRegistry& types_;
  const Memory& mem_;
  const std::string& s_;
  Fallback fb_;
  PerCpu pc_;
  bool per_cpu_seen_ = false;
  size_t i_ = 0;
  int depth_ = 0;

  Error bad(const std::string& what) const {
    return make_error(Errc::kInvalidArgument, fmt::format("'{}': {}", s_, what));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(std::string_view tok) {
    skip();
    if (s_.compare(i_, tok.size(), tok) != 0) return false;
    i_ += tok.size();
    return true;
  }
  Result<uint64_t> number() {
    skip();
    size_t j = i_;
    while (j < s_.size() && std::isalnum(static_cast<unsigned char>(s_[j]))) ++j;
    uint64_t v = 0;
    if (j == i_ || !parse_u64(s_.substr(i_, j - i_), &v)) return bad("expected a number");
    i_ = j;
    return v;
  }

  // X+N, X-N: byte offsets; the type is then unknown (the place lies inside X).
  Result<Val> additive() {
    bool starred = (skip(), i_ < s_.size() && s_[i_] == '*');
    LR_ASSIGN(Val v, unary());
    while (true) {
      skip();
      if (i_ >= s_.size() || (s_[i_] != '+' && s_[i_] != '-') || s_.compare(i_, 2, "->") == 0)
        break;
      if (starred) return bad("ambiguous: write '*(X+N)' for the pointer at X+N, or '(*X)+N'");
      bool minus = s_[i_++] == '-';
      LR_ASSIGN(uint64_t n, number());
      v.addr = minus ? v.addr - n : v.addr + n;
      v.type = nullptr;
    }
    return v;
  }

  Result<Val> unary() {
    if (++depth_ > 64) return bad("nested too deeply");
    skip();
    if (eat("*")) {
      size_t from = i_;
      LR_ASSIGN(Val v, unary());
      --depth_;
      return deref(v, text(from, i_));
    }
    if (eat("&")) {  // the address of X; as a place, it names X (see the header)
      LR_ASSIGN(Val v, unary());
      --depth_;
      v.is_address = true;
      return v;
    }
    if (cast_ahead()) {
      LR_ASSIGN(const Type* t, cast_type());
      LR_ASSIGN(Val v, unary());
      --depth_;
      // (T *)X: the value of X is the address of a T. A typed X is read for
      // its value (a pointer variable); a plain address is that value.
      uint64_t value = v.addr;
      if (v.type && !v.is_address) {
        const Type* vt = v.type->strip();
        if (!vt || (vt->kind != TypeKind::kPointer && !vt->is_integer_like()))
          return bad(fmt::format("cannot cast {} to a pointer", v.type->display()));
        LR_ASSIGN(value, mem_.read_u64(v.addr));
      }
      return Val{value, t, "", nullptr, true};
    }
    LR_ASSIGN(Val v, postfix());
    --depth_;
    return v;
  }

  // The expression's text in [from, to), trimmed: what a message names.
  std::string text(size_t from, size_t to) const {
    std::string t = s_.substr(from, to > from ? to - from : 0);
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(0, 1);
    return t;
  }

  // `what` is the pointer's text: a NULL is named where it is met, not as
  // a fault at a small address further on.
  Result<Val> deref(const Val& v, const std::string& what) {
    if (v.is_address) return Val{v.addr, v.type, v.name, v.module};  // *&X is X
    const Type* t = v.type ? v.type->strip() : nullptr;
    if (t && t->kind == TypeKind::kArray) return Val{v.addr, t->target, v.name, v.module};
    if (t && t->kind != TypeKind::kPointer)
      return bad(fmt::format("'*' applied to {}, not a pointer", v.type->display()));
    LR_ASSIGN(uint64_t p, mem_.read_u64(v.addr));
    if (p == 0 && t)
      return make_error(Errc::kFault, fmt::format("'{}' is NULL", what.empty() ? v.name : what));
    return Val{p, t ? t->target : nullptr, "", v.module};
  }

  // "(struct T *)", "(T *)": a '(' whose contents end in '*'.
  bool cast_ahead() {
    skip();
    if (i_ >= s_.size() || s_[i_] != '(') return false;
    size_t close = s_.find(')', i_);
    if (close == std::string::npos) return false;
    std::string in = s_.substr(i_ + 1, close - i_ - 1);
    while (!in.empty() && std::isspace(static_cast<unsigned char>(in.back()))) in.pop_back();
    return !in.empty() && in.back() == '*' && in.find('(') == std::string::npos;
  }
  Result<const Type*> cast_type() {
    size_t close = s_.find(')', i_);
    std::string in = s_.substr(i_ + 1, close - i_ - 1);
    i_ = close + 1;
    if (std::count(in.begin(), in.end(), '*') != 1)
      return bad("only casts to one level of pointer, (T *), are supported");
    in.erase(in.find('*'));
    while (!in.empty() && std::isspace(static_cast<unsigned char>(in.back()))) in.pop_back();
    while (!in.empty() && std::isspace(static_cast<unsigned char>(in.front()))) in.erase(0, 1);
    return types_.find(in);
  }

  Result<Val> postfix() {
    skip();
    const size_t from = i_;
    LR_ASSIGN(Val v, primary());
    while (true) {
      skip();
      if (eat("->")) {
        LR_ASSIGN(v, deref(v, text(from, i_ - 2)));
        LR_ASSIGN(v, member(v));
      } else if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        const Type* t = v.type ? v.type->strip() : nullptr;
        if (t && t->kind == TypeKind::kPointer) {  // '.' through a pointer
          LR_ASSIGN(v, deref(v, text(from, i_ - 1)));
        }
        LR_ASSIGN(v, member(v));
      } else if (eat("[")) {
        LR_ASSIGN(uint64_t n, number());
        if (!eat("]")) return bad("expected ']'");
        LR_ASSIGN(v, index(v, n));
      } else {
        return v;
      }
    }
  }

  Result<Val> member(const Val& v) {
    skip();
    size_t j = i_;
    while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
    if (j == i_) return bad("expected a member name");
    std::string name = s_.substr(i_, j - i_);
    i_ = j;
    if (!v.type)
      return bad(fmt::format("'{}' has no type to find member '{}' in",
                             v.name.empty() ? fmt::format("{:#x}", v.addr) : v.name, name));
    LR_ASSIGN(FieldLoc loc, resolve_path(v.type, name));
    return Val{v.addr + loc.offset, loc.type, v.name, v.module};
  }

  Result<Val> index(const Val& v, uint64_t n) {
    const Type* t = v.type ? v.type->strip() : nullptr;
    if (!t || (t->kind != TypeKind::kArray && t->kind != TypeKind::kPointer))
      return bad("'[]' needs an array or a pointer");
    Val base = v;
    if (t->kind == TypeKind::kPointer) {
      LR_ASSIGN(base, deref(v, v.name));
    }
    const Type* et = t->target ? t->target->strip() : nullptr;
    if (!et || !et->size) return bad("'[]' on elements of unknown size");
    if (t->kind == TypeKind::kArray && t->count && n >= t->count)
      return bad(fmt::format("index {} past the array's {} elements", n, t->count));
    return Val{base.addr + n * et->size, t->target, v.name, v.module};
  }

  Result<Val> primary() {
    skip();
    if (eat("(")) {
      LR_ASSIGN(Val v, additive());
      if (!eat(")")) return bad("expected ')'");
      return v;
    }
    if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      LR_ASSIGN(uint64_t a, number());
      return Val{a, nullptr, "", nullptr};
    }
    return symbol();
  }

  // NAME, NAME@module; a GCC local static's ".N" suffix is part of it. Then
  // ":CPU" for a per-CPU variable.
  Result<Val> symbol() {
    size_t j = i_;
    auto ident = [&](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
    };
    while (j < s_.size() && (ident(s_[j]) || (s_[j] == '.' && j + 1 < s_.size() &&
                                              std::isdigit(static_cast<unsigned char>(s_[j + 1])))))
      ++j;
    if (j < s_.size() && s_[j] == '@') {
      ++j;
      while (j < s_.size() &&
             (ident(s_[j]) || s_[j] == '.' || (s_[j] == '-' && s_.compare(j, 2, "->") != 0) ||
              (s_[j] == '+' && s_.compare(j, 2, "++") == 0 && (j += 1))))
        ++j;
    }
    if (j == i_) return bad("expected a symbol, an address, '*', '&' or '('");
    std::string name = s_.substr(i_, j - i_);
    i_ = j;
    LR_ASSIGN(int64_t cpu, cpu_suffix());
    auto found = types_.find_variable(name);
    uint64_t host_addr = 0;
    Val v;
    if (!found.ok() && found.error().code == Errc::kNotFound && fb_.fn &&
        fb_.fn(fb_.ctx, name.c_str(), &host_addr))
      v = Val{host_addr, nullptr, name, nullptr};  // known to the host only: no type
    else if (!found.ok())
      return std::move(found).error();
    else
      v = Val{found->addr, found->type, found->name.empty() ? name : found->name, found->module};
    if (!pc_.fn && cpu >= 0)
      return bad(fmt::format("{} takes no CPU: this program has no per-CPU variables", name));
    if (!pc_.fn) return v;
    bool is_per_cpu = false;
    auto at = pc_.fn(pc_.ctx, v.addr, cpu, &is_per_cpu);
    if (!at.ok()) return bad(fmt::format("{}: {}", name, at.error().message));
    v.addr = at.value();
    per_cpu_seen_ = per_cpu_seen_ || (cpu < 0 && is_per_cpu);
    return v;
  }

  // ":N" right after a symbol (not "::"): the CPU; -1 when none is written.
  Result<int64_t> cpu_suffix() {
    if (i_ + 1 >= s_.size() || s_[i_] != ':' ||
        !std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))
      return int64_t{-1};
    ++i_;
    LR_ASSIGN(uint64_t cpu, number());
    if (cpu > (1u << 20)) return bad(fmt::format("CPU {} is past any machine's", cpu));
    return static_cast<int64_t>(cpu);
  }
};

}  // namespace

Result<Variable> Program::resolve(const std::string& raw) const {
  HeadParser p(*types_, *mem_, raw, {fallback_, fallback_ctx_}, {per_cpu_, per_cpu_ctx_});
  LR_ASSIGN(Val v, p.parse());
  Variable out;
  out.name = v.name;
  out.addr = v.addr;
  out.type = v.type;
  out.module = v.module;
  out.per_cpu = p.per_cpu_seen();
  return out;
}

}  // namespace lr
