// CPython as a program target (cpython.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "corelib/blocks/heap.hpp"
#include "targets/cpython/cpython.hpp"
#include "targets/cpython/py_containers.hpp"
#include "targets/cpython/py_frames.hpp"
#include "targets/cpython/py_objects.hpp"
#include "targets/cpython/py_values.hpp"

namespace lr {

namespace {

// The census's objects by block, for the engine's questions.
class PythonTagger final : public BlockTagger, public CensusHolder {
 public:
  const PyCensus& census() const override { return c_; }
  PythonTagger(const Program& prog, HeapWalk heap, PyCensus c)
      : heap_(std::move(heap)), c_(std::move(c)) {
    warnings = c_.warnings;
    owned_ = python_owned_blocks(heap_, prog.mem(), c_);
  }
  const HeapWalk* heap() const override { return &heap_; }
  std::string name(const HeapChunk& c) const override {
    if (const PyObj* o = object_in(c))
      return fmt::format("Python {}{}", c_.type(*o).name, o->live() ? "" : " (free list)");
    auto it = std::lower_bound(owned_.begin(), owned_.end(), c.user,
                               [](const PyOwnedBlock& b, uint64_t a) { return b.user < a; });
    return it != owned_.end() && it->user == c.user ? python_owned_name(c_, *it) : "";
  }
  // A list's items past its length, a keys table past its entries.
  std::vector<LiveSpan> live_spans() const override {
    std::vector<LiveSpan> out;
    for (const PyOwnedBlock& b : owned_)
      if (b.live_end != UINT64_MAX) out.push_back({b.user, 0, b.live_end - b.user});
    return out;
  }
  std::string owner(const HeapChunk&) const override { return ""; }

 private:
  const PyObj* object_in(const HeapChunk& c) const {
    const auto& v = c_.objects;
    auto it = std::lower_bound(v.begin(), v.end(), c.user,
                               [](const PyObj& o, uint64_t a) { return o.addr < a; });
    return it != v.end() && it->addr < c.user + c.usable() ? &*it : nullptr;
  }
  HeapWalk heap_;
  PyCensus c_;
  std::vector<PyOwnedBlock> owned_;  // by address
};

Result<PyCensus> census_of(Program& prog, HeapWalk* keep) {
  LR_ASSIGN(HeapWalk h, walk_heap(prog));
  LR_ASSIGN(PyCensus c, python_census(prog, h));
  if (keep) *keep = std::move(h);
  return c;
}

class Cpython final : public ProcessTarget {
 public:
  std::string name() const override { return "CPython"; }
  std::string key() const override { return "python"; }
  bool owns_module(std::string_view basename) const override { return is_python_file(basename); }
  std::string module_hint() const override { return "python3.X or libpython3.X"; }
  std::string pools() const override { return "pymalloc arenas"; }
  // The interpreter's own DWARF, or nothing: what it lacks is said where
  // the objects are read.
  Result<TypesSource> ensure_types(Program& prog, const std::string&) override {
    auto L = python_layout(prog);
    return TypesSource{L.ok() ? L->from : "none (" + L.error().message + ")", ""};
  }
  Result<std::unique_ptr<BlockTagger>> tagger(Program& prog, bool) override {
    HeapWalk h;
    LR_ASSIGN(PyCensus c, census_of(prog, &h));
    return std::unique_ptr<BlockTagger>(
        std::make_unique<PythonTagger>(prog, std::move(h), std::move(c)));
  }
  Result<std::optional<LanguageStacks>> stacks(Program& prog) override {
    LR_ASSIGN(PyLayout L, python_layout(prog));
    const PyValues v(prog.mem(), L);
    LanguageStacks out;
    out.language = "Python " + L.version;
    for (const PyThreadStack& t : python_stacks(v)) {
      LanguageStack s{t.tid, {}, t.cut};
      for (const PyFrame& f : t.frames) s.frames.push_back({f.function, f.file, f.line});
      out.threads.push_back(std::move(s));
    }
    return std::optional<LanguageStacks>(std::move(out));
  }
  // The live objects by type ("python" classes: count and bytes), and the
  // containers of 1000 items or more by their path ("python container"
  // classes, listed from that floor).
  Result<ProgramSnapshot> snapshot(Program& prog, const std::string& source, Snapshot& s) override {
    auto c = census_of(prog, nullptr);
    if (!c.ok()) {
      s.warnings.push_back(fmt::format("{}: no Python classes: {}", source, c.error().message));
      s.unknown_kinds.push_back("python");
      s.unknown_kinds.push_back("python container");
      return ProgramSnapshot{};
    }
    std::map<std::string, std::pair<int64_t, int64_t>> by;
    for (const PyObj& o : c->objects)
      if (o.live()) {
        auto& [n, b] = by[c->type(o).name];
        ++n, b += o.bytes;
      }
    for (const auto& [name, nb] : by) s.classes.push_back({"python", name, nb.first, nb.second});
    for (const auto& w : c->warnings) s.warnings.push_back(source + ": python: " + w);
    if (!c->warnings.empty()) s.unknown_kinds.push_back("python");
    add_containers(prog, c.value(), source, s);
    return ProgramSnapshot{};
  }

 private:
  static constexpr int64_t kContainerFloor = 1000;

  // Naming needs the references: the core is indexed (its census made
  // again by the tagger) only when `c` has a container that large.
  static void add_containers(Program& prog, const PyCensus& c, const std::string& source,
                             Snapshot& s) {
    s.floors["python container"] = kContainerFloor;
    if (large_containers(prog.mem(), c, kContainerFloor).empty()) return;
    auto core = index_program(prog, false);
    auto big = core.ok() ? python_containers(core.value(), kContainerFloor)
                         : Result<std::vector<PyContainer>>(core.error());
    if (!big.ok()) {
      s.warnings.push_back(
          fmt::format("{}: no Python containers: {}", source, big.error().message));
      s.unknown_kinds.push_back("python container");
      return;
    }
    for (const PyContainer& x : big.value())
      s.classes.push_back({"python container", x.name + " (" + x.type + ")", x.items, -1});
  }
};

}  // namespace

TargetSpec cpython_target() {
  TargetSpec t;
  t.name = "cpython";
  t.heap_layers.push_back(pymalloc_layer());
  t.heap_layers.push_back(data_stack_layer());
  t.process = std::make_shared<Cpython>();
  return t;
}

}  // namespace lr
