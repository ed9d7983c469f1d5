#include "targets/tcmalloc/tcmalloc.hpp"

#include <fmt/format.h>

#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "targets/tcmalloc/tcmalloc_heap.hpp"
#include "targets/tcmalloc/tcmalloc_layout.hpp"

namespace lr {

namespace {

// The module tcmalloc lives in: its own library (libtcmalloc.so.4,
// libtcmalloc_minimal.so.4 and their variants), or a program that links it in.
Module* tcmalloc_module(const Program& prog) {
  for (const auto& m : prog.modules().modules())
    if (!m->types_only && m->basename().rfind("libtcmalloc", 0) == 0) return m.get();
  Module* exe = prog.modules().exe();
  if (exe && exe->find_one_symbol("_ZN8tcmalloc6Static9pageheap_E")) return exe;
  return nullptr;
}

Result<HeapWalk> walk_core(const Program& prog, const HeapLimits& limits) {
  Module* lib = prog.core() ? tcmalloc_module(prog) : nullptr;
  if (!lib)
    return make_error(Errc::kNotFound,
                      "no tcmalloc found (no libtcmalloc mapped, no program "
                      "symbol tcmalloc::Static::pageheap_)");
  LR_ASSIGN(TcmallocLayout layout, tcmalloc_layout_from_dwarf(prog.types(), *lib));
  auto walk = walk_tcmalloc_heap(prog.mem(), layout, limits);
  // Its library is mapped: a heap it cannot read is tcmalloc's all the
  // same, never left for another allocator's walk to guess at.
  if (!walk.ok() && walk.error().code == Errc::kNotFound)
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: {}", lib->basename(), walk.error().message));
  return walk;
}

}  // namespace

TargetSpec tcmalloc_target() {
  TargetSpec t;
  t.name = "tcmalloc";
  t.allocators.push_back({"tcmalloc", &walk_core});
  // libtcmalloc.so.4, libtcmalloc_minimal.so.4 and their _debug and
  // _and_profiler variants; linked in statically, its tc_ entry points.
  t.allocator_signatures.push_back({"tcmalloc", {"libtcmalloc"}, {"tc_malloc", "tc_mallopt"}});
  return t;
}

}  // namespace lr
