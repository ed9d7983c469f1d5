// Python values from a core (py_values.hpp).
#include "targets/cpython/py_values.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstring>

#include "corelib/dump/memory.hpp"

namespace lr {

namespace {

void utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

}  // namespace

std::optional<uint64_t> PyValues::flags_of(uint64_t o) const {
  auto t = mem_.read_u64(o + L_.ob_type);
  if (!t.ok() || t.value() < 4096) return std::nullopt;
  auto f = mem_.read_u64(t.value() + L_.tp_flags);
  if (!f.ok() || !(f.value() & kTpReady)) return std::nullopt;
  return f.value();
}

std::optional<std::string> PyValues::str(uint64_t o, size_t max) const {
  auto f = flags_of(o);
  if (!f || !(*f & kTpUnicodeSubclass)) return std::nullopt;
  auto state = mem_.read_as<uint32_t>(o + L_.str_state);
  auto len = mem_.read_as<int64_t>(o + L_.str_length);
  if (!state.ok() || !len.ok() || len.value() < 0 || !L_.st_compact.of(state.value()))
    return std::nullopt;
  const bool ascii = L_.st_ascii.of(state.value());
  const uint32_t kind = L_.st_kind.of(state.value());
  if (kind != 1 && kind != 2 && kind != 4) return std::nullopt;
  const uint64_t n = std::min<uint64_t>(uint64_t(len.value()), max);
  const uint8_t* p = mem_.span(o + (ascii ? L_.ascii_size : L_.compact_size), n * kind);
  if (!p && n) return std::nullopt;
  std::string out;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, p + i * kind, kind);
    if (c > 0x10ffff) return std::nullopt;
    utf8(out, c);
  }
  if (n < uint64_t(len.value())) out += "...";
  return out;
}

std::optional<int64_t> PyValues::small_int(uint64_t o) const {
  auto f = flags_of(o);
  if (!f || !(*f & kTpLongSubclass)) return std::nullopt;
  auto size = digits(o);
  if (!size || *size < -2 || *size > 2) return std::nullopt;
  const int64_t n = *size < 0 ? -*size : *size;
  int64_t v = 0;
  for (int64_t i = n - 1; i >= 0; --i) {
    auto d = mem_.read_as<uint32_t>(o + L_.long_digit + uint64_t(i) * 4);
    if (!d.ok() || d.value() >= (1u << 30)) return std::nullopt;
    v = (v << 30) | d.value();
  }
  return *size < 0 ? -v : v;
}

// An int's digits, negative for a negative int: 3.11's ob_size; 3.12's tag
// holds the count above 3 bits and the sign in the low 2 (0: positive, 1:
// zero, 2: negative; Include/cpython/longintrepr.h).
std::optional<int64_t> PyValues::digits(uint64_t o) const {
  if (!L_.long_tag) {
    auto size = mem_.read_as<int64_t>(o + L_.ob_size);
    return size.ok() ? std::optional<int64_t>(size.value()) : std::nullopt;
  }
  auto tag = mem_.read_u64(o + L_.long_tag);
  if (!tag.ok() || (tag.value() & 3) == 3 || (tag.value() >> 3) > (uint64_t{1} << 40))
    return std::nullopt;
  const int64_t n = int64_t(tag.value() >> 3);
  return (tag.value() & 3) == 2 ? -n : n;
}

std::optional<std::string> PyValues::bytes(uint64_t o, size_t max) const {
  auto f = flags_of(o);
  if (!f || !(*f & kTpBytesSubclass)) return std::nullopt;
  auto size = mem_.read_as<int64_t>(o + L_.ob_size);
  if (!size.ok() || size.value() < 0 || uint64_t(size.value()) > max) return std::nullopt;
  std::string out(size_t(size.value()), '\0');
  if (!out.empty() && !mem_.read(o + L_.bytes_sval, out.data(), out.size()).ok())
    return std::nullopt;
  return out;
}

std::optional<uint64_t> PyValues::tuple_item(uint64_t o, uint64_t i) const {
  auto f = flags_of(o);
  if (!f || !(*f & kTpTupleSubclass)) return std::nullopt;
  auto size = mem_.read_as<int64_t>(o + L_.ob_size);
  if (!size.ok() || size.value() < 0 || i >= uint64_t(size.value())) return std::nullopt;
  auto v = mem_.read_u64(o + L_.tuple_item + i * 8);
  return v.ok() ? std::optional<uint64_t>(v.value()) : std::nullopt;
}

std::string PyValues::repr(uint64_t o) const {
  if (auto s = str(o, 60)) {
    std::string q = "'";
    for (char c : *s) {
      if (c == '\'' || c == '\\') q += '\\';
      if (static_cast<unsigned char>(c) < 0x20)
        q += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      else
        q += c;
    }
    return q + "'";
  }
  if (auto v = small_int(o)) return std::to_string(*v);
  auto t = mem_.read_u64(o + L_.ob_type);
  bool whole = false;
  auto name = t.ok() ? mem_.read_u64(t.value() + L_.tp_name) : Result<uint64_t>(t.error());
  auto text =
      name.ok() ? mem_.read_cstring(name.value(), 64, &whole) : Result<std::string>(name.error());
  return fmt::format("<{} at {:#x}>", text.ok() && whole ? text.value() : "object", o);
}

bool PyValues::identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' &&
        static_cast<unsigned char>(c) < 0x80)
      return false;
  return true;
}

}  // namespace lr
