// The engine's side of a heap: the chunk index every allocator's walk fills,
// and the allocators a program registers (targets/<allocator>/), tried in
// turn on a core until one recognises its heap.
#include "corelib/blocks/heap.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "corelib/base/registry.hpp"
#include "corelib/debuginfo/program.hpp"

namespace lr {

std::optional<HeapChunk> HeapWalk::chunk_containing(uint64_t addr) const {
  auto it = std::upper_bound(in_use.begin(), in_use.end(), addr,
                             [](uint64_t a, const HeapChunk& c) { return a < c.user; });
  if (it == in_use.begin()) return std::nullopt;
  const HeapChunk c = *--it;
  if (addr < c.user + c.usable()) return c;
  return std::nullopt;
}

void ChunkIndex::push_back(const HeapChunk& c) {
  const uint64_t u = c.usable();
  uint64_t code = kSizeMask;  // no code fits: the side table
  if (c.user % 16 == 0) {
    if (c.mmapped() && (u + 16) % 4096 == 0 && ((u + 16) >> 12) < kSizeMask)
      code = kMmappedBit | ((u + 16) >> 12);
    else if (!c.mmapped() && u >= bias_ && u % 16 == bias_ && ((u - bias_) >> 4) < kOtherBias)
      code = (u - bias_) >> 4;
    else if (const uint32_t other = 8 - bias_; !c.mmapped() && u >= other && u % 16 == other &&
                                               ((u - other) >> 4) < kSizeMask - kOtherBias)
      code = kOtherBias + ((u - other) >> 4);
  }
  if (code == kSizeMask) side_.push_back(c);
  words_.push_back(((c.user >> 4) << kCodeBits) | code);
}

HeapChunk ChunkIndex::side(uint64_t user) const {
  // Keyed by the pointer as the word keeps it (16-aligned).
  auto it = std::lower_bound(side_.begin(), side_.end(), user,
                             [](const HeapChunk& c, uint64_t u) { return (c.user & ~15ull) < u; });
  return it != side_.end() && (it->user & ~15ull) == user ? *it : HeapChunk{user, 0};
}

// The walk yields each arena's (and the mmapped list's) chunks in address
// order, so a few sorted runs are merged (linear per run) instead of
// sorting millions of words from scratch. A word sorts as its pointer.
void ChunkIndex::sort() {
  uint64_t* v = words_.data();
  const size_t n = words_.size();
  std::vector<size_t> starts{0};
  for (size_t i = 1; i < n && starts.size() <= 64; ++i)
    if (v[i] < v[i - 1]) starts.push_back(i);
  if (starts.size() > 64) {
    std::sort(v, v + n);
  } else {
    for (size_t r = 1; r < starts.size(); ++r)
      std::inplace_merge(v, v + starts[r], r + 1 < starts.size() ? v + starts[r + 1] : v + n);
  }
  std::sort(side_.begin(), side_.end(),
            [](const HeapChunk& a, const HeapChunk& b) { return a.user < b.user; });
}

namespace {
NamedRegistry<Allocator> g_allocators;
NamedRegistry<AllocatorSignature> g_signatures;
NamedRegistry<HeapLayer> g_layers;

// Each layer that finds its allocator adds its blocks to `h`.
void carve_layers(const Program& prog, const HeapLimits& lim, HeapWalk& h) {
  for (const auto& l : g_layers.all()) {
    auto r = l.carve(prog, lim, h);
    if (r.ok())
      h.layers.push_back(l.name);
    else if (r.error().code != Errc::kNotFound)
      h.warnings.push_back(
          fmt::format("{}: {}; its blocks are not listed, and its memory is "
                      "scanned as a writable mapping",
                      l.name, r.error().message));
  }
}

// "NAME's (libNAME.so.2 is mapped)" for the first signature the
// program matches; "" when none does.
std::string foreign_allocator(const Program& prog) {
  for (const auto& sig : g_signatures.all())
    for (const auto& m : prog.modules().modules()) {
      if (m->types_only) continue;
      for (const auto& lib : sig.libraries)
        if (m->basename().rfind(lib, 0) == 0)
          return fmt::format("{}'s ({} is mapped)", sig.name, m->basename());
      if (!m->is_exe) continue;
      for (const auto& sym : sig.symbols)
        if (m->find_one_symbol(sym))
          return fmt::format("{}'s ({} defines {})", sig.name, m->basename(), sym);
    }
  return "";
}
}  // namespace

void register_allocator(const Allocator& a) {
  g_allocators.add(a.name, a);
}

HeapPlace locate_in_heap(const Program& prog, const HeapWalk& heap, uint64_t addr) {
  for (const Allocator& a : g_allocators.all())
    if (a.name == heap.allocator && a.locate) return a.locate(prog, heap, addr);
  return {};
}

void register_heap_layer(const HeapLayer& l) {
  g_layers.add(l.name, l);
}

void register_allocator_signature(const AllocatorSignature& s) {
  g_signatures.add(s.name, s);
}

// The first allocator that recognises the heap walks it; when none does, the
// error names the allocator the program uses when a signature says which,
// and what each walk looked for.
Result<HeapWalk> walk_heap(const Program& prog, const HeapLimits& limits) {
  const std::vector<Allocator> list = g_allocators.all();
  if (list.empty())
    return make_error(Errc::kUnsupported, "no heap allocator is registered with the engine");
  // A core that lists no mapped files (QEMU's user-mode cores have no
  // NT_FILE note, and none could be rebuilt from its link map) has no
  // library an allocator lives in: say why, not what each allocator lacked.
  // A core cut short before its notes lost them: that is the answer, an
  // input error, not a lookup that failed.
  if (const CoreFile* core = prog.core(); core && core->mapped_ranges().empty()) {
    if (core->truncated())
      return make_error(Errc::kBadFormat,
                        "the core is truncated: the notes that list its mapped files are cut "
                        "off, so no allocator's library is known");
    return make_error(Errc::kNotFound,
                      core->mapped_files_why().empty()
                          ? "the core lists no mapped files, so no allocator's library is known"
                          : core->mapped_files_why());
  }
  HeapLimits lim = limits;
  if (!lim.residency) lim.residency = prog.residency();
  std::string why;
  for (const auto& a : list) {
    auto r = a.walk(prog, lim);
    if (r.ok()) carve_layers(prog, lim, r.value());
    if (r.ok() || r.error().code != Errc::kNotFound) return r;
    why += (why.empty() ? "" : "; ") + r.error().message;
  }
  if (std::string found = foreign_allocator(prog); !found.empty())
    return make_error(
        Errc::kNotFound,
        fmt::format("the heap is {}, an allocator leakref does not walk; {}", found, why));
  return make_error(Errc::kNotFound, why);
}

}  // namespace lr
