// C++ type names as a user writes them (cxx_names.hpp).
#include "corelib/debuginfo/cxx_names.hpp"

#include "corelib/debuginfo/type_memo.hpp"

#include <string_view>
#include <utility>

namespace lr {

namespace {

// DWARF's base type names as C++ source spells them.
std::string_view source_spelling(std::string_view n) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"long int", "long"},           {"long unsigned int", "unsigned long"},
      {"long long int", "long long"}, {"long long unsigned int", "unsigned long long"},
      {"short int", "short"},         {"short unsigned int", "unsigned short"},
  };
  for (const auto& [dwarf, src] : kNames)
    if (n == dwarf) return src;
  return n;
}

// A library default a user leaves out when writing the type: the
// comparator, hash, equality, allocator and character traits.
bool is_default_parameter(const Type* a) {
  const Type* t = a ? a->strip() : nullptr;
  if (!t) return false;
  for (std::string_view p : {"less<", "hash<", "equal_to<", "allocator<", "char_traits<"})
    if (t->name.rfind(p, 0) == 0) return true;
  return false;
}

// The standard library's class templates a name is written with "std::".
bool std_template(const std::string& n) {
  static constexpr std::string_view kStd[] = {"vector<",        "deque<",
                                              "list<",          "forward_list<",
                                              "map<",           "multimap<",
                                              "set<",           "multiset<",
                                              "unordered_map<", "unordered_multimap<",
                                              "unordered_set<", "unordered_multiset<",
                                              "array<",         "unique_ptr<",
                                              "optional<",      "pair<",
                                              "basic_string<"};
  for (std::string_view p : kStd)
    if (n.rfind(p, 0) == 0) return true;
  return false;
}

std::string cxx_name(const Type* t, int depth) {
  if (!t || depth > 8) return "?";
  if (t->kind == TypeKind::kTypedef && !t->name.empty()) return t->name;
  t = t->strip();
  if (!t) return "?";
  if (t->kind == TypeKind::kPointer)
    return (t->target ? cxx_name(t->target, depth + 1) : "void") + "*";
  if (!t->is_aggregate()) return std::string(source_spelling(t->display()));
  const std::string& n = t->name;
  if (n.empty()) return t->display();
  // std::string as GCC's and LLVM's (std::__1::) libraries spell it.
  if (n == "basic_string<char, std::char_traits<char>, std::allocator<char> >" ||
      n == "basic_string<char, std::__1::char_traits<char>, std::__1::allocator<char> >")
    return "std::string";
  if (!std_template(n) || t->template_args.empty()) return n;
  std::string out = "std::" + n.substr(0, n.find('<')) + "<";
  for (size_t i = 0; i < t->template_args.size(); ++i) {
    if (is_default_parameter(t->template_args[i])) break;
    out += (i ? ", " : "") + cxx_name(t->template_args[i], depth + 1);
  }
  return out + ">";
}

const Type* first_parameter(const Type* t, int depth) {
  t = t ? t->strip() : nullptr;
  if (!t || depth > 8) return nullptr;
  if (!t->template_args.empty()) return t->template_args[0];
  for (const auto& m : t->members)
    if (m.is_base)
      if (const Type* p = first_parameter(m.type, depth + 1)) return p;
  return nullptr;
}

}  // namespace

std::string cxx_type_name(const Type* t) {
  return t ? cxx_type_name_kept(t) : cxx_name(t, 0);
}

const std::string& cxx_type_name_kept(const Type* t) {
  static const std::string none;
  if (!t) return none;
  TypeMemo& m = memo_of(t);
  if (!m.cxx_name) m.cxx_name = cxx_name(t, 0);
  return *m.cxx_name;
}

const Type* first_template_parameter(const Type* t) {
  return first_parameter(t, 0);
}

}  // namespace lr
