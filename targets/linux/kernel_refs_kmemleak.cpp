// What kmemleak's own metadata says of the objects, on a kernel built with
// it (CONFIG_DEBUG_KMEMLEAK: debug kernels, such as RHEL's kernel-debug).
// Code tells kmemleak that an object is no leak (kmemleak_not_leak: its
// min_count becomes 0, "grey"), to forget it (kmemleak_ignore: "black",
// neither scanned nor reported) or not to scan it (kmemleak_no_scan). The
// reference index honours these marks as kmemleak does, so that its leaks
// are kmemleak's on such a kernel; a kernel without kmemleak has no marks.
#include <fmt/format.h>

#include "targets/linux/kernel_internal.hpp"
#include "targets/linux/kernel_refs.hpp"

namespace lr {

Result<std::vector<KmemleakNote>> kmemleak_notes(KernelTarget& k, const KernelLimits& lim,
                                                 std::vector<std::string>* warnings) {
  std::vector<KmemleakNote> out;
  auto head = kint::ksymbol(k, "kmemleak_objects");
  auto L = kint::Layout::of(k, "kmemleak_object");
  if (!head.ok() || !L.ok()) return out;  // no kmemleak in this kernel
  LR_ASSIGN(uint64_t o_list, L.value().off("object_list"));
  LR_ASSIGN(IntField f_ptr, L.value().field("pointer"));
  LR_ASSIGN(IntField f_min, L.value().field("min_count"));
  LR_ASSIGN(auto no_scan, L.value().expr(k, "no_scan"));
  LR_ASSIGN(auto phys, L.value().expr(k, "phys"));
  const auto objs =
      kint::list_objects(k.mem(), head.value(), o_list, lim, "kmemleak objects", warnings, nullptr);
  std::vector<uint8_t> b(L.value().size);
  uint64_t unreadable = 0, first_unreadable = 0;  // one warning, however many
  for (uint64_t o : objs) {
    if (!k.mem().read(o, b.data(), b.size()).ok()) {
      if (!unreadable++) first_unreadable = o;
      continue;
    }
    // OBJECT_PHYS objects are memblock's, by physical address: no object here.
    if (phys->eval(k.mem(), b.data(), o).truthy()) continue;
    const int64_t min_count = f_min.load(b.data());  // -1: black; 0: grey
    uint8_t mark = 0;
    if (min_count <= 0) mark |= KmemleakNote::kNotLeak;
    if (min_count < 0 || no_scan->eval(k.mem(), b.data(), o).truthy())
      mark |= KmemleakNote::kNoScan;
    if (mark) out.push_back({static_cast<uint64_t>(f_ptr.load(b.data())), mark});
  }
  if (unreadable && warnings)
    warnings->push_back(
        fmt::format("{} kmemleak_objects are not readable (the first at {:#x}); "
                    "their marks were not read",
                    unreadable, first_unreadable));
  return out;
}

}  // namespace lr
