// A core's heap, its program's block taggers and its reference index
// (core_index.hpp).
#include "corelib/answers/core_index.hpp"

#include <algorithm>

#include "corelib/registry/target.hpp"

namespace lr {

Result<HeapWalk> read_heap(const Program& prog, ProgressDisplay* show) {
  std::atomic<uint64_t> chunks{0};
  HeapLimits lim;
  lim.progress = &chunks;
  auto shown = show_progress(show, "reading the heap", &chunks, "chunks");
  return walk_heap(prog, lim);
}

Result<CoreIndex> index_core(Program& prog, const HeapWalk* heap, const std::vector<uint64_t>& skip,
                             ProgressDisplay* show) {
  if (!prog.core())
    return make_error(Errc::kUnsupported,
                      "the reference index reads process cores, not kernel dumps");
  CoreIndex ci;
  if (!heap) {
    LR_ASSIGN(HeapWalk h, read_heap(prog, show));
    ci.own_heap = std::make_unique<HeapWalk>(std::move(h));
    heap = ci.own_heap.get();
  }
  ci.heap = heap;
  std::atomic<uint64_t> bytes{0};
  auto shown = show_progress(show, "indexing references", &bytes, "MiB", 1u << 20);
  RefIndexOptions opts;
  opts.skip_chunks = skip;
  opts.progress = &bytes;
  // The C library's word on its threads' memory: which stacks are dead.
  ci.threads = thread_memory(prog);
  opts.threads = &ci.threads;
  LR_ASSIGN(ci.index, RefIndex::build(*prog.core(), prog.modules(), *heap, opts));
  return ci;
}

std::string IndexedCore::program_name(const HeapChunk& c, std::string* via) const {
  for (const auto& t : tags) {
    std::string n = t.tagger->name(c);
    if (n.empty()) continue;
    if (via) *via = t.target->name();
    return n;
  }
  return "";
}

std::string IndexedCore::program_owner(const HeapChunk& c) const {
  for (const auto& t : tags)
    if (std::string o = t.tagger->owner(c); !o.empty()) return o;
  return "";
}

std::vector<uint64_t> IndexedCore::pooled_free() const {
  std::vector<uint64_t> all;
  for (const auto& t : tags) {
    auto p = t.tagger->pooled_free();
    all.insert(all.end(), p.begin(), p.end());
  }
  std::sort(all.begin(), all.end());
  return all;
}

std::vector<ProgramTags> tag_program(Program& prog, bool caches, std::vector<std::string>* warnings,
                                     ProgressDisplay* show) {
  std::vector<ProgramTags> out;
  for (ProcessTarget* t : process_targets_of(prog.modules())) {
    auto ty = t->ensure_types(prog, "");
    if (!ty.ok()) {
      warnings->push_back(t->name() + " blocks are not named: " + ty.error().message);
      continue;
    }
    if (!ty->note.empty() && show) show->note(ty->note);
    auto tg = t->tagger(prog, caches);
    if (!tg.ok()) {
      warnings->push_back(t->name() + " blocks are not named: " + tg.error().message);
      continue;
    }
    out.push_back({t, std::move(tg).value()});
  }
  return out;
}

Result<IndexedCore> index_program(Program& prog, bool caches, ProgressDisplay* show) {
  IndexedCore o;
  o.prog = &prog;
  o.tags = tag_program(prog, caches, &o.warnings, show);
  const HeapWalk* heap = nullptr;
  for (const auto& t : o.tags)
    if (!heap) heap = t.tagger->heap();
  LR_ASSIGN(o.ci, index_core(prog, heap, o.pooled_free(), show));
  // What the answer stands on, said first: the core and its files (an
  // executable of another build), the heap walk (a chain that broke, a free
  // list dropped) and the index.
  std::vector<std::string> w = prog.warnings();
  w.insert(w.end(), o.ci.heap->warnings.begin(), o.ci.heap->warnings.end());
  w.insert(w.end(), o.ci.index->warnings().begin(), o.ci.index->warnings().end());
  o.warnings.insert(o.warnings.begin(), w.begin(), w.end());
  return o;
}

Result<IndexedCore> index_program(std::unique_ptr<Program> prog, bool caches,
                                  ProgressDisplay* show) {
  Program& p = *prog;
  LR_ASSIGN(IndexedCore o, index_program(p, caches, show));
  o.owned = std::move(prog);
  return o;
}

}  // namespace lr
