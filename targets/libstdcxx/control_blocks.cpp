// libstdc++'s control blocks (control_blocks.hpp).
#include "targets/libstdcxx/control_blocks.hpp"

#include <fmt/format.h>

namespace lr {

namespace {

bool block_class(std::string_view cls) {
  return cls.rfind("std::_Sp_counted_", 0) == 0;
}

// The counts, from the DWARF of the block's base class (its lock policy as
// the block's class names it: "(__gnu_cxx::_Lock_policy)2").
Result<SharedCounts> counts(Program& prog, const std::string& cls) {
  std::string policy = "2";
  const std::string_view tag = "(__gnu_cxx::_Lock_policy)";
  if (auto at = cls.rfind(tag); at != std::string::npos) policy = cls.substr(at + tag.size(), 1);
  const std::string base = "std::_Sp_counted_base<(__gnu_cxx::_Lock_policy)" + policy + ">";
  auto t = prog.types().find(base);
  if (!t.ok())
    return make_error(Errc::kNotFound,
                      fmt::format("{} is not in the program's DWARF: the counts of its "
                                  "shared_ptr control blocks cannot be read",
                                  base));
  LR_ASSIGN(FieldLoc u, resolve_path(t.value(), "_M_use_count"));
  LR_ASSIGN(FieldLoc w, resolve_path(t.value(), "_M_weak_count"));
  return SharedCounts{u.offset, w.offset, 4, 0};
}

// make_shared's object is the block's _M_impl._M_storage; the others hold
// a pointer to theirs.
SharedObjectAt object(Program& prog, const std::string& cls) {
  auto t = prog.types().find(cls);
  if (!t.ok()) return {};
  if (auto s = resolve_path(t.value(), "_M_impl._M_storage"); s.ok())
    return {true, true, s->offset};
  for (const char* p : {"_M_ptr", "_M_impl._M_ptr"})
    if (auto f = resolve_path(t.value(), p); f.ok()) return {true, false, f->offset};
  return {};
}

}  // namespace

SharedLayout libstdcxx_shared_layout() {
  SharedLayout l;
  l.name = "libstdc++";
  l.block_class = &block_class;
  l.counts = &counts;
  l.object = &object;
  l.owner_member = "_M_pi";
  return l;
}

}  // namespace lr
