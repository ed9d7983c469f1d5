// libFuzzer target: the ELF core opener and everything it parses (program
// headers, notes, NT_FILE, reads across segments, build-id notes in memory).
#include <cstddef>
#include <cstdint>

#include "leakref/elfcore.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
  return 0;
}
