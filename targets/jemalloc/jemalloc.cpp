#include "targets/jemalloc/jemalloc.hpp"

#include <fmt/format.h>

#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "targets/jemalloc/jemalloc_heap.hpp"
#include "targets/jemalloc/jemalloc_layout.hpp"

namespace lr {

namespace {

// The module jemalloc lives in: its own library, or a program that links it
// in (its private symbols carry the je_ prefix there too).
Module* jemalloc_module(const Program& prog) {
  for (const auto& m : prog.modules().modules())
    if (!m->types_only && m->basename().rfind("libjemalloc.so", 0) == 0) return m.get();
  Module* exe = prog.modules().exe();
  if (exe && exe->find_one_symbol("je_arena_emap_global")) return exe;
  return nullptr;
}

Result<HeapWalk> walk_core(const Program& prog, const HeapLimits& limits) {
  Module* lib = prog.core() ? jemalloc_module(prog) : nullptr;
  if (!lib)
    return make_error(Errc::kNotFound,
                      "no jemalloc found (no libjemalloc.so mapped, no program "
                      "symbol je_arena_emap_global)");
  LR_ASSIGN(JemallocLayout layout, jemalloc_layout_from_dwarf(prog.types(), *lib));
  auto walk = walk_jemalloc_heap(prog.mem(), layout, limits);
  // Its library is mapped: a heap it cannot read is jemalloc's all the
  // same, never left for another allocator's walk to guess at.
  if (!walk.ok() && walk.error().code == Errc::kNotFound)
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: {}", lib->basename(), walk.error().message));
  return walk;
}

}  // namespace

TargetSpec jemalloc_target() {
  TargetSpec t;
  t.name = "jemalloc";
  t.allocators.push_back({"jemalloc", &walk_core});
  // Its own library, or, linked in statically, its public API: mallctl
  // (unprefixed builds) or je_mallctl (builds with the je_ prefix).
  t.allocator_signatures.push_back(
      {"jemalloc", {"libjemalloc.so"}, {"mallctl", "je_mallctl", "je_malloc_conf"}});
  return t;
}

}  // namespace lr
