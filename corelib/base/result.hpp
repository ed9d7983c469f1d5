// One error type for all of corelib. Functions that can fail return Result<T>;
// nothing in corelib prints, exits, or lets an exception escape its C boundary.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace lr {

// Few codes on purpose: callers branch on the kind of failure, the message
// carries the detail (file, address, name) for the user.
enum class Errc {
  kInvalidArgument = 1,  // a bad request from the caller (syntax, unknown option value)
  kIo,                   // a file could not be opened or mapped
  kBadFormat,            // an input is not what it claims to be, or is corrupt/truncated
  kFault,                // target memory is not readable (not in core, unmapped)
  kNotFound,             // a symbol, type, member or module does not exist
  kUnsupported,          // valid input this build cannot handle (e.g. big-endian core)
  kInterrupted,          // the host asked us to stop
};

// A stable identifier ("bad-format", "not-found", ...), as JSON errors carry it.
const char* errc_name(Errc c);

struct Error {
  Errc code;
  std::string message;
};

inline Error make_error(Errc c, std::string msg) {
  return Error{c, std::move(msg)};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}      // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

 private:
  Error err_{Errc::kInvalidArgument, {}};
  bool ok_ = true;
};

}  // namespace lr

// Propagate an error from an expression returning Result<...>.
#define LR_TRY(expr)                                          \
  do {                                                        \
    auto lr_try_r_ = (expr);                                  \
    if (!lr_try_r_.ok()) return std::move(lr_try_r_).error(); \
  } while (0)

#define LR_CONCAT_(a, b) a##b
#define LR_CONCAT(a, b) LR_CONCAT_(a, b)
// Bind the value of a Result expression or propagate its error.
#define LR_ASSIGN(lhs, expr) LR_ASSIGN_IMPL(LR_CONCAT(lr_r_, __LINE__), lhs, expr)
#define LR_ASSIGN_IMPL(tmp, lhs, expr)          \
  auto tmp = (expr);                            \
  if (!tmp.ok()) return std::move(tmp).error(); \
  lhs = std::move(tmp).value()
