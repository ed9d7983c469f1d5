// Python values read from a core as a Python user writes them (a str's
// text, an int's value, a bytes' bytes, a tuple's items), each bounded and
// checked against its type: a damaged object reads as nothing, never as
// another value. Shared by the stacks (py_frames) and the names of
// references (py_names).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "targets/cpython/cpython_layout.hpp"

namespace lr {

class Memory;

class PyValues {
 public:
  PyValues(const Memory& mem, const PyLayout& L) : mem_(mem), L_(L) {}
  // The type of the object at `o` and its tp_flags; nullopt unreadable.
  std::optional<uint64_t> flags_of(uint64_t o) const;
  // A str's text in UTF-8, its first `max` characters ("..." past them);
  // nullopt when `o` is no compact str.
  std::optional<std::string> str(uint64_t o, size_t max = 120) const;
  // An int's value when it fits in 60 bits; nullopt otherwise.
  std::optional<int64_t> small_int(uint64_t o) const;
  // A bytes object's bytes, at most `max` (nullopt: none, or longer).
  std::optional<std::string> bytes(uint64_t o, size_t max) const;
  // Item `i` of a tuple; nullopt past its size or unreadable.
  std::optional<uint64_t> tuple_item(uint64_t o, uint64_t i) const;
  // How a key or a value is written: 'text', 42, or <type at 0x...>.
  std::string repr(uint64_t o) const;
  // Whether `s` is an identifier (an attribute or global name as written).
  static bool identifier(const std::string& s);
  const PyLayout& layout() const { return L_; }
  const Memory& mem() const { return mem_; }

 private:
  std::optional<int64_t> digits(uint64_t o) const;
  const Memory& mem_;
  const PyLayout& L_;
};

}  // namespace lr
