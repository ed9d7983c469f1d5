#include "corelib/objects/filter.hpp"

namespace lr {

Filter::~Filter() = default;

Result<std::unique_ptr<Filter>> Filter::parse(std::string_view expr, const Type* t,
                                              const FieldSpec* refcount, const ExprScope* scope,
                                              const std::string& what) {
  ExprScope sc = scope ? *scope : ExprScope{};
  sc.type = t;
  sc.refcount = refcount;
  sc.what = what;
  LR_ASSIGN(auto e, Expr::compile(expr, sc));
  auto f = std::make_unique<Filter>();
  f->expr_ = std::move(e);
  return f;
}

Result<void> Filter::check_syntax(std::string_view expr, const std::string& what) {
  return Expr::check_syntax(expr, what);
}

bool Filter::matches(const Memory& mem, const uint8_t* obj, uint64_t addr) const {
  ExprValue v = expr_->eval(mem, obj, addr);
  if (v.kind == ExprValue::Kind::kError) {
    if (!errors_++) {
      first_error_ = v.s;
      first_error_addr_ = addr;
    }
    return false;
  }
  return v.truthy();
}

}  // namespace lr
