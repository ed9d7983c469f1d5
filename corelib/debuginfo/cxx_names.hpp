// C++ types named as a C++ user writes them: "Node*", "std::map<int,
// Node*>", "std::string", "unsigned long". The DWARF names a class
// template instance bare ("map<int, Node*, std::less<int>, ...>") and a
// base type as GCC spells it ("long unsigned int"); the standard
// library's templates get "std::" back, and the parameters a user leaves
// out (comparator, hash, equality, allocator, character traits) are left
// out.
#pragma once

#include <string>

#include "corelib/debuginfo/types.hpp"

namespace lr {

std::string cxx_type_name(const Type* t);
// The same, kept with the type (valid while its registry lives): no string
// made for each of a million containers of one type.
const std::string& cxx_type_name_kept(const Type* t);

// A class template's first type parameter, or its first base's
// (std::allocator<T> names none of its own in GCC's library's DWARF: its base
// __new_allocator<T> does); null when neither names one.
const Type* first_template_parameter(const Type* t);

}  // namespace lr
