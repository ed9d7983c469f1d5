// libFuzzer target: the libstdc++ container readers (walk --std and the
// blocks a container owns, which account and the retained tree use) over
// adversarial memory. The types are real: the DWARF of fx_cxx's globals
// (LR_FUZZ_STD_EXE, a -g build of fixtures/fx_cxx.cpp the Makefile makes),
// one container a run, chosen by the input's first byte and placed at
// kBase; the rest of the input is sparse_memory.hpp's records. Sizes that
// disagree with the nodes, trees and hash chains that loop, bucket counts
// past the space, deque maps that point anywhere must neither crash nor
// hang the readers, and a walk never returns more objects than its limit.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "corelib/debuginfo/program.hpp"
#include "targets/libstdcxx/libstdcxx.hpp"
#include "tests/fuzz/sparse_memory.hpp"

#ifndef LR_FUZZ_STD_EXE
#error "LR_FUZZ_STD_EXE: the fx_cxx build whose DWARF types the containers"
#endif

namespace {

using lrfuzz::kBase;

// fx_cxx's globals, one of each container kind and element shape.
const char* const kHeads[] = {"g_vec",     "g_points", "g_list", "g_flist", "g_map",   "g_mmap",
                              "g_set",     "g_umap",   "g_uset", "g_wide",  "g_nodes", "g_deque",
                              "g_dpoints", "g_arr",    "g_parr", "g_up",    "g_opt",   "g_names"};
constexpr size_t kNHeads = sizeof(kHeads) / sizeof(kHeads[0]);

struct Fixture {
  std::unique_ptr<lrfuzz::SparseMemory> mem = std::make_unique<lrfuzz::SparseMemory>();
  std::unique_ptr<lr::Program> prog;
  lr::ContainerKind kind;
  lr::Variable heads[kNHeads];
};

// The program's types, read once: the memory is reset for each input.
Fixture& fixture() {
  static Fixture* f = [] {
    auto* x = new Fixture;
    auto mods = lr::ModuleSet::empty({});
    mods->add(LR_FUZZ_STD_EXE, LR_FUZZ_STD_EXE, 0, 0, 0, "", true);
    x->prog = std::make_unique<lr::Program>(x->mem.get(), std::move(mods));
    x->kind = lr::libstdcxx_target().containers.at(0);
    for (size_t i = 0; i < kNHeads; ++i) {
      auto v = x->prog->resolve(kHeads[i]);
      if (!v.ok() || !v->type) __builtin_trap();  // the fixture's DWARF is the premise
      x->heads[i] = v.value();
      x->heads[i].addr = kBase;
    }
    return x;
  }();
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Fixture& f = fixture();
  f.mem->clear();
  f.mem->load(data + 1, size - 1);
  const lr::Variable& head = f.heads[data[0] % kNHeads];
  lr::WalkLimits lim;
  lim.max_nodes = 1u << 12;
  auto w = f.kind.walk(*f.prog, head, "", 0, lim);
  if (w.ok() && w->objects.size() > lim.max_nodes) __builtin_trap();
  auto own = f.kind.own_blocks(*f.prog, head.type, head.addr, lim);
  if (own.ok() && own->blocks.size() > lim.max_nodes + 2) __builtin_trap();
  return 0;
}
