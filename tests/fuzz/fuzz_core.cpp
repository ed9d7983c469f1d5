// libFuzzer target: the ELF core opener and everything it parses (program
// headers, notes, NT_FILE, reads across segments, build-id notes in memory),
// the glibc heap walk over whatever the segments hold (as 2.36's malloc and
// as 2.43's) and the account of its bytes, and the physical-address view
// of an ELF kernel dump.
#include <cstddef>
#include <cstdint>

#include "corelib/analyses/account.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/dump/physdump.hpp"
#include "targets/glibc/glibc_heap.hpp"
#include "targets/glibc/glibc_layout.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The same bytes as a kernel ELF dump read by physical address (the crash
  // extension's fast path).
  if (auto pd = lr::PhysDump::open_memory(data, size); pd.ok()) {
    for (uint64_t pa : {0ull, 0x1000ull, 0xfffull, ~0ull - 8})
      if (const uint8_t* p = pd.value()->at(pa, 16)) (void)(p[0] + p[15]);
  }
  auto c = lr::CoreFile::open_memory(data, size, "fuzz");
  if (!c.ok()) return 0;
  lr::CoreFile& core = *c.value();
  uint8_t buf[64];
  for (const auto& s : core.segments()) {
    (void)core.read(s.start, buf, sizeof buf);
    (void)core.read(s.end - 1, buf, 2);
    (void)core.span(s.start, 16);
    (void)core.why_unreadable(s.end);
  }
  for (const auto& r : core.mapped_ranges()) (void)lr::build_id_from_memory(core, r.start);
  (void)core.read_cstring(core.auxv_value(31), 64);
  // The heap walk treats every anonymous segment as a possible heap and
  // every segment as possible libc data: adversarial chunk chains, arena
  // rings and tcache lists must neither crash nor hang it.
  lr::HeapInput in;
  for (const auto& s : core.segments())
    if (s.kind == lr::SegmentInfo::Kind::kCore) {
      in.anon.emplace_back(s.start, s.end);
      in.libc_data.emplace_back(s.start, s.end);
    }
  lr::HeapLimits lim;
  lim.max_chunks = 1u << 16;
  lim.max_list = 1u << 12;
  if (auto w = lr::walk_glibc_heap(core, in, lim); w.ok()) {
    // Every byte in one category, whatever the walk made of the heap.
    auto mods = lr::ModuleSet::empty({});
    lr::AccountInput ai;
    ai.core = &core;
    ai.mods = mods.get();
    ai.heap = &w.value();
    ai.chunk_class.assign(w->in_use.size(), lr::ChunkClass::kLive);
    (void)lr::build_account(ai);
  }
  // And as 2.43's: no fastbins, tcache counted by slots, large tcache bins.
  if (auto l243 = lr::glibc_layout_for_release("2.43"); l243.ok()) {
    in.layout = l243.value();
    (void)lr::walk_glibc_heap(core, in, lim);
  }
  // libc's banner, searched for in every segment (its release picks a layout).
  for (const auto& s : core.segments()) (void)lr::glibc_version(core, s.start, s.end);
  return 0;
}
