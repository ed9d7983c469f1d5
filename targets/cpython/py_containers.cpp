// A CPython process's large containers, named (py_containers.hpp).
#include "targets/cpython/py_containers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "targets/cpython/py_names.hpp"
#include "targets/cpython/py_reconcile.hpp"

namespace lr {

std::vector<std::pair<const PyObj*, int64_t>> large_containers(const Memory& mem, const PyCensus& c,
                                                               int64_t floor) {
  std::vector<std::pair<const PyObj*, int64_t>> big;
  for (const PyObj& o : c.objects) {
    if (!o.live()) continue;
    const uint64_t f = c.type(o).flags;
    Result<int64_t> n = make_error(Errc::kNotFound, "");
    if (f & kTpDictSubclass)
      n = mem.read_as<int64_t>(o.addr + c.layout.dict_used);
    else if (f & kTpListSubclass)
      n = mem.read_as<int64_t>(o.addr + c.layout.ob_size);
    if (n.ok() && n.value() >= floor) big.emplace_back(&o, n.value());
  }
  // The largest are named (each name is a search up the references); one
  // left out is absent, which a floored kind reads as unknown, never 0.
  constexpr size_t kMaxNamed = 256;
  std::sort(big.begin(), big.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (big.size() > kMaxNamed) big.resize(kMaxNamed);
  return big;
}

Result<std::vector<PyContainer>> python_containers(const IndexedCore& core, int64_t floor) {
  const PyCensus* c = tagged_census(core);
  if (!c) return make_error(Errc::kNotFound, "no CPython census was made of this core");
  const Memory& mem = core.prog->mem();
  std::vector<PyContainer> out;
  const auto big = large_containers(mem, *c, floor);
  if (big.empty()) return out;
  const auto stacks = python_stacks(PyValues(mem, c->layout));
  const PyNamer namer(core, *c, stacks);
  for (const auto& [o, n] : big) {
    PyContainer x{namer.path(*o), c->type(*o).name, o->addr, n};
    if (x.name.empty()) x.name = fmt::format("({} at {:#x})", x.type, x.addr);
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace lr
