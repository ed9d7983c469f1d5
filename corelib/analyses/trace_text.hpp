// Small text helpers shared by the trace parsers (internal to corelib).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lr::tt {

// Iterates the lines of a text; a last line without '\n' is still returned
// and marked `unterminated`.
class Lines {
 public:
  explicit Lines(std::string_view t) : t_(t) {}
  bool next(std::string_view* line) {
    if (pos_ >= t_.size()) return false;
    size_t e = t_.find('\n', pos_);
    if (e == std::string_view::npos) {
      *line = t_.substr(pos_);
      pos_ = t_.size();
      unterminated_ = true;
    } else {
      *line = t_.substr(pos_, e - pos_);
      pos_ = e + 1;
    }
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    ++lineno_;
    return true;
  }
  bool unterminated() const { return unterminated_; }
  uint64_t lineno() const { return lineno_; }

 private:
  std::string_view t_;
  size_t pos_ = 0;
  uint64_t lineno_ = 0;
  bool unterminated_ = false;
};

inline bool is_space(char c) {
  return c == ' ' || c == '\t';
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_space(s.front()) || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (is_space(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Splits on runs of spaces/tabs; at most `max` tokens, the last one keeps the
// rest of the line (for paths with spaces) when `max` is nonzero.
inline std::vector<std::string_view> split(std::string_view s, size_t max = 0) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    if (i >= s.size()) break;
    if (max && out.size() + 1 == max) {
      out.push_back(trim(s.substr(i)));
      break;
    }
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

inline bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

// Hex with or without 0x; the whole token must be consumed.
inline bool parse_hex(std::string_view s, uint64_t* v) {
  if (starts_with(s, "0x") || starts_with(s, "0X")) s.remove_prefix(2);
  if (s.empty() || s.size() > 16) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v, 16);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
// "0x..." as hex, anything else as decimal.
inline bool parse_num(std::string_view s, uint64_t* v) {
  if (starts_with(s, "0x") || starts_with(s, "0X")) return parse_hex(s, v);
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v, 10);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
inline bool parse_int(std::string_view s, int64_t* v) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v, 10);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
// A pointer token: "0x..." / bare hex / "(nil)" (= 0).
inline bool parse_ptr(std::string_view s, uint64_t* v) {
  if (s == "(nil)") {
    *v = 0;
    return true;
  }
  return parse_hex(s, v);
}

}  // namespace lr::tt
