// libc++'s control blocks (control_blocks.hpp).
#include "targets/libcxx/control_blocks.hpp"

#include <fmt/format.h>

namespace lr {

namespace {

// "std::__1::__shared_ptr_emplace<Node, std::__1::allocator<Node> >": the
// class after std and libc++'s inline namespace (__1 in Debian's build).
std::string_view bare_class(std::string_view cls) {
  if (cls.rfind("std::", 0) != 0) return {};
  cls.remove_prefix(5);
  if (cls.rfind("__", 0) == 0)
    if (size_t ns = cls.find("::"); ns != std::string_view::npos && ns < cls.find('<'))
      cls.remove_prefix(ns + 2);
  return cls;
}

bool block_class(std::string_view cls) {
  const std::string_view b = bare_class(cls);
  return b.rfind("__shared_ptr_emplace<", 0) == 0 || b.rfind("__shared_ptr_pointer<", 0) == 0;
}

Result<SharedCounts> counts(Program& prog, const std::string& cls) {
  auto t = prog.types().find(cls);
  if (!t.ok())
    return make_error(Errc::kNotFound,
                      fmt::format("{} is not in the program's DWARF: the counts of its "
                                  "shared_ptr control blocks cannot be read",
                                  cls));
  LR_ASSIGN(FieldLoc u, resolve_path(t.value(), "__shared_owners_"));
  LR_ASSIGN(FieldLoc w, resolve_path(t.value(), "__shared_weak_owners_"));
  const uint64_t width = u.type ? u.type->strip()->size : 0;
  if (width != 8 || !w.type || w.type->strip()->size != 8)
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: its counts are not longs: not libc++'s layout", cls));
  return SharedCounts{u.offset, w.offset, 8, 1};
}

// make_shared's object lies at the start of the block's __storage_ when
// its allocator is std::allocator (an empty base before it); a stateful
// allocator's comes first, its size unknown here, so the object is not
// placed. A pointer block's pointer is the first of its __data_ pairs.
SharedObjectAt object(Program& prog, const std::string& cls) {
  auto t = prog.types().find(cls);
  if (!t.ok()) return {};
  const Type* s = t.value()->strip();
  if (bare_class(cls).rfind("__shared_ptr_emplace<", 0) == 0) {
    auto st = resolve_path(s, "__storage_");
    const Type* alloc = s->template_args.size() > 1 ? s->template_args[1] : nullptr;
    if (st.ok() && alloc && alloc->strip()->name.rfind("allocator<", 0) == 0)
      return {true, true, st->offset};
    return {};
  }
  auto p = resolve_path(s, "__data_.__value_.__value_");
  if (p.ok() && p->type && p->type->strip()->kind == TypeKind::kPointer)
    return {true, false, p->offset};
  return {};
}

}  // namespace

SharedLayout libcxx_shared_layout() {
  SharedLayout l;
  l.name = "libc++";
  l.block_class = &block_class;
  l.counts = &counts;
  l.object = &object;
  l.owner_member = "__cntrl_";
  return l;
}

}  // namespace lr
