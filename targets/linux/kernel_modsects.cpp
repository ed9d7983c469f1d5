// A loaded module's sections from its sysfs attributes (struct module's
// sect_attrs): where the kernel put each allocated section of the .ko.
#include <fmt/format.h>

#include "kernel_internal.hpp"

namespace lr {
namespace kint {

namespace {

// More sections than any module has: a corrupt count reads no further.
constexpr uint64_t kMaxSections = 4096;

// Up to 6.x: `nsections` module_sect_attrs of {battr, address}.
Result<std::vector<ModSection>> counted_sections(KernelTarget& k, const Layout& S, uint64_t sa) {
  LR_ASSIGN(IntField f_n, S.field("nsections"));
  LR_ASSIGN(uint64_t o_attrs, S.off("attrs"));
  LR_ASSIGN(Layout A, Layout::of(k, "module_sect_attr"));
  LR_ASSIGN(uint64_t o_name, A.off("battr.attr.name"));
  LR_ASSIGN(uint64_t o_addr, A.off("address"));
  std::vector<uint8_t> sb(S.size);
  LR_TRY(k.mem().read(sa, sb.data(), sb.size()));
  const uint64_t n = static_cast<uint64_t>(f_n.load(sb.data()));
  if (n > kMaxSections)
    return make_error(Errc::kBadFormat,
                      fmt::format("module sections at {:#x}: {} of them (corrupt?)", sa, n));
  std::vector<uint8_t> ab(n * A.size);
  if (n) LR_TRY(k.mem().read(sa + o_attrs, ab.data(), ab.size()));
  std::vector<ModSection> out;
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t* a = ab.data() + i * A.size;
    auto name = k.mem().read_cstring(ptr_at(a, o_name), 256);
    if (name.ok()) out.push_back({name.value(), ptr_at(a, o_addr)});
  }
  return out;
}

// Since 6.17: bin_attributes (private: the address), as many as the group's
// NULL-ended bin_attrs lists.
Result<std::vector<ModSection>> listed_sections(KernelTarget& k, const Layout& S, uint64_t sa) {
  LR_ASSIGN(uint64_t o_grp, S.off("grp"));
  LR_ASSIGN(Layout G, Layout::of(k, "attribute_group"));
  LR_ASSIGN(uint64_t o_list, G.off("bin_attrs"));
  LR_ASSIGN(Layout B, Layout::of(k, "bin_attribute"));
  LR_ASSIGN(uint64_t o_name, B.off("attr.name"));
  LR_ASSIGN(uint64_t o_priv, B.off("private"));
  uint64_t list = 0;
  LR_TRY(k.mem().read(sa + o_grp + o_list, &list, 8));
  std::vector<ModSection> out;
  std::vector<uint8_t> bb(B.size);
  for (uint64_t i = 0; i < kMaxSections; ++i) {
    uint64_t attr = 0;
    LR_TRY(k.mem().read(list + 8 * i, &attr, 8));
    if (!attr) return out;
    LR_TRY(k.mem().read(attr, bb.data(), bb.size()));
    auto name = k.mem().read_cstring(ptr_at(bb.data(), o_name), 256);
    if (name.ok()) out.push_back({name.value(), ptr_at(bb.data(), o_priv)});
  }
  return make_error(Errc::kBadFormat,
                    fmt::format("module sections at {:#x}: no end to their list (corrupt?)", sa));
}

}  // namespace

Result<std::vector<ModSection>> module_sections(KernelTarget& k, uint64_t module) {
  LR_ASSIGN(Layout M, Layout::of(k, "module"));
  LR_ASSIGN(uint64_t o_sect, M.off("sect_attrs"));
  uint64_t sa = 0;
  LR_TRY(k.mem().read(module + o_sect, &sa, 8));
  if (!sa)
    return make_error(Errc::kNotFound,
                      fmt::format("module at {:#x} has no section attributes", module));
  LR_ASSIGN(Layout S, Layout::of(k, "module_sect_attrs"));
  if (S.off("nsections").ok()) return counted_sections(k, S, sa);
  return listed_sections(k, S, sa);
}

}  // namespace kint
}  // namespace lr
