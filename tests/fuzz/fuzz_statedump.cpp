// libFuzzer target: GlusterFS statedump text as `leakref diff`/`trend` read
// it, then the diff of what it read against itself.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corelib/analyses/diff.hpp"
#include "targets/glusterfs/statedump.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  auto snap = lr::snapshot_from_statedump(s, "fuzz.dump");
  if (snap.ok()) {
    (void)lr::diff_snapshots(snap.value(), snap.value());
    (void)lr::trend_of({snap.value(), snap.value(), snap.value()});
  }
  return 0;
}
