// libFuzzer target: the C++ container readers, libstdc++'s and libc++'s
// (walk --std and the blocks a container owns, which account and the
// retained tree use) over adversarial memory. The types are real: the
// DWARF of fx_cxx's globals (LR_FUZZ_STD_EXE, a -g build of
// fixtures/fx_cxx.cpp) and of fx_libcxx's (LR_FUZZ_LIBCXX_EXE, built with
// clang++ -stdlib=libc++), which the Makefile makes; one container a run,
// chosen by the input's first byte and placed at kBase; the rest of the
// input is sparse_memory.hpp's records. Sizes that disagree with the nodes,
// trees, lists and hash chains that loop, bucket counts past the space,
// deque maps that point anywhere must neither crash nor hang the readers,
// and a walk never returns more objects than its limit.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "corelib/debuginfo/program.hpp"
#include "targets/libcxx/libcxx.hpp"
#include "targets/libstdcxx/libstdcxx.hpp"
#include "tests/fuzz/sparse_memory.hpp"

#if !defined(LR_FUZZ_STD_EXE) || !defined(LR_FUZZ_LIBCXX_EXE)
#error "LR_FUZZ_STD_EXE, LR_FUZZ_LIBCXX_EXE: the fixture builds whose DWARF types the containers"
#endif

namespace {

using lrfuzz::kBase;

// fx_cxx's and fx_libcxx's globals, one of each container kind and shape.
const std::vector<const char*> kStdHeads = {
    "g_vec",  "g_points", "g_list",  "g_flist",   "g_map", "g_mmap", "g_set", "g_umap", "g_uset",
    "g_wide", "g_nodes",  "g_deque", "g_dpoints", "g_arr", "g_parr", "g_up",  "g_opt",  "g_names"};
const std::vector<const char*> kLibcxxHeads = {
    "g_vec",   "g_points", "g_list", "g_flist", "g_map",     "g_mmap", "g_set", "g_umap", "g_uset",
    "g_nodes", "g_arr",    "g_up",   "g_deque", "g_dpoints", "g_opt",  "g_str", "g_bits"};

struct Library {
  std::unique_ptr<lr::Program> prog;
  lr::ContainerKind kind;
  std::vector<lr::Variable> heads;
  std::vector<uint64_t> sizes;  // each head's element size: the walk's object size
};

struct Fixture {
  std::unique_ptr<lrfuzz::SparseMemory> mem = std::make_unique<lrfuzz::SparseMemory>();
  Library std, libcxx;
};

void load(Fixture* x, Library* l, const char* exe, const lr::TargetSpec& t,
          const std::vector<const char*>& heads) {
  auto mods = lr::ModuleSet::empty({});
  mods->add(exe, exe, 0, 0, 0, "", true);
  l->prog = std::make_unique<lr::Program>(x->mem.get(), std::move(mods));
  l->kind = t.containers.at(0);
  for (const char* h : heads) {
    auto v = l->prog->resolve(h);
    if (!v.ok() || !v->type) __builtin_trap();  // the fixture's DWARF is the premise
    v->addr = kBase;
    auto e = l->kind.element(*l->prog, v.value(), ".");
    l->sizes.push_back(e.ok() ? e.value()->strip()->size : 0);
    l->heads.push_back(v.value());
  }
}

// The programs' types, read once: the memory is reset for each input.
Fixture& fixture() {
  static Fixture* f = [] {
    auto* x = new Fixture;
    load(x, &x->std, LR_FUZZ_STD_EXE, lr::libstdcxx_target(), kStdHeads);
    load(x, &x->libcxx, LR_FUZZ_LIBCXX_EXE, lr::libcxx_target(), kLibcxxHeads);
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
  Library& l = data[0] & 0x80 ? f.libcxx : f.std;
  const size_t i = (data[0] & 0x7f) % l.heads.size();
  const lr::Variable& head = l.heads[i];
  lr::WalkLimits lim;
  lim.max_nodes = 1u << 12;
  auto w = l.kind.walk(*l.prog, head, ".", l.sizes[i], lim);
  if (w.ok() && w->objects.size() > lim.max_nodes) __builtin_trap();
  auto own = l.kind.own_blocks(*l.prog, head.type, head.addr, lim);
  if (own.ok() && own->blocks.size() > lim.max_nodes + 2) __builtin_trap();
  return 0;
}
