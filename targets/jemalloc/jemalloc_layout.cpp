#include "targets/jemalloc/jemalloc_layout.hpp"

#include <fmt/format.h>

#include <array>
#include <string_view>
#include <vector>

#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/types.hpp"

namespace lr {

namespace {

// The structs the walk reads, each looked for first in jemalloc.c's unit
// (it includes nearly all of them), then in the unit that defines its
// functions: a unit only carries the types it uses.
constexpr std::array<std::string_view, 11> kTypes = {
    "struct edata_s",       "struct rtree_s",          "struct bin_info_s",      "struct arena_s",
    "struct tcache_slow_s", "struct tcache_s",         "struct cache_bin_s",     "struct base_s",
    "struct base_block_s",  "struct rtree_leaf_elm_s", "struct cache_bin_info_s"};
constexpr std::array<std::string_view, 6> kUnits = {"jemalloc.c", "tcache.c", "base.c",
                                                    "emap.c",     "arena.c",  "rtree.c"};

std::vector<const Type*> find_types(TypeRegistry& types, Module& lib) {
  std::vector<const Type*> out(kTypes.size(), nullptr);
  const std::vector<std::string_view> names(kTypes.begin(), kTypes.end());
  for (std::string_view unit : kUnits) {
    const std::vector<const Type*> got = types.find_in_unit(&lib, unit, names);
    for (size_t i = 0; i < out.size(); ++i) {
      const Type* t = got[i] ? got[i]->strip() : nullptr;
      if (!out[i] && t && t->is_aggregate() && t->complete) out[i] = t;
    }
  }
  return out;
}

// Reads members of one struct into the layout, naming the first missing.
class Members {
 public:
  Members(const Type* t, std::string_view name, std::string* missing)
      : t_(t), name_(name), missing_(missing) {}
  // `m`'s offset (through anonymous members), or 0 with `missing` set.
  uint64_t at(std::string_view m) {
    uint64_t off = 0;
    const Member* f = t_ ? find_member(t_, m, &off) : nullptr;
    if (!f && missing_->empty()) *missing_ = fmt::format("{} has no member {}", name_, m);
    return off;
  }
  // The element count of array member `m` (0 when it is not an array).
  uint64_t count(std::string_view m) {
    uint64_t off = 0;
    const Member* f = t_ ? find_member(t_, m, &off) : nullptr;
    const Type* a = f && f->type ? f->type->strip() : nullptr;
    if (a && a->kind == TypeKind::kArray) return a->count;
    if (missing_->empty()) *missing_ = fmt::format("{}.{} is not an array", name_, m);
    return 0;
  }
  uint64_t elem_size(std::string_view m) {
    uint64_t off = 0;
    const Member* f = t_ ? find_member(t_, m, &off) : nullptr;
    const Type* a = f && f->type ? f->type->strip() : nullptr;
    const Type* e = a && a->target ? a->target->strip() : nullptr;
    return e ? e->size : 0;
  }

 private:
  const Type* t_;
  std::string_view name_;
  std::string* missing_;
};

// The symbols: hidden in the library, so only its full symbol table (the
// debug file's) has them.
Result<void> read_symbols(Module& lib, JemallocLayout& L) {
  struct Want {
    const char* name;
    uint64_t* addr;
    uint64_t* size;
  };
  uint64_t emap_size = 0, bins_size = 0, tab_size = 0, arenas_size = 0, info_size = 0;
  const Want want[] = {{"je_arena_emap_global", &L.emap, &emap_size},
                       {"je_bin_infos", &L.bin_infos, &bins_size},
                       {"je_sz_index2size_tab", &L.index2size, &tab_size},
                       {"je_arenas", &L.arenas, &arenas_size},
                       {"b0", &L.b0, nullptr},
                       {"je_nhbins", &L.nhbins, nullptr},
                       {"je_tcache_bin_info", &L.tcache_bin_info, &info_size}};
  for (const auto& w : want) {
    const Symbol* s = lib.find_one_symbol(w.name);
    if (!s || !s->addr)
      return make_error(Errc::kUnsupported,
                        fmt::format("{} is jemalloc but has no symbol {}: its heap state is "
                                    "named only in its full symbol table (install its debug "
                                    "symbols, e.g. libjemalloc2-dbgsym, in a debug directory "
                                    "leakref searches)",
                                    lib.path, w.name));
    *w.addr = s->addr;
    if (w.size) *w.size = s->size;
  }
  if (const Symbol* s = lib.find_one_symbol("je_opt_tcache")) L.opt_tcache = s->addr;
  L.nsizes = tab_size / 8;
  L.narenas = arenas_size / 8;
  return {};
}

Result<void> read_structs(TypeRegistry& types, Module& lib, JemallocLayout& L) {
  const std::vector<const Type*> t = find_types(types, lib);
  for (size_t i = 0; i + 1 < kTypes.size(); ++i)
    if (!t[i])
      return make_error(Errc::kUnsupported,
                        fmt::format("{}: its DWARF has no {}: not a jemalloc 5.3 this walk reads",
                                    lib.path, kTypes[i]));
  std::string missing;
  Members edata(t[0], "edata_s", &missing), rtree(t[1], "rtree_s", &missing),
      bin(t[2], "bin_info_s", &missing), arena(t[3], "arena_s", &missing),
      slow(t[4], "tcache_slow_s", &missing), tcache(t[5], "tcache_s", &missing),
      cbin(t[6], "cache_bin_s", &missing), base(t[7], "base_s", &missing),
      block(t[8], "base_block_s", &missing);
  L.edata_size = t[0]->size;
  L.e_bits = edata.at("e_bits");
  L.e_addr = edata.at("e_addr");
  L.e_size = edata.at("e_size_esn");
  L.e_slab_data = edata.at("e_slab_data");
  L.root = L.emap + rtree.at("root");
  L.root_slots = rtree.count("root");
  L.bin_info_size = t[2]->size;
  L.reg_size = bin.at("reg_size");
  L.slab_size = bin.at("slab_size");
  L.nregs = bin.at("nregs");
  L.arena_tcache_ql = arena.at("tcache_ql");
  L.arena_base = arena.at("base");
  L.slow_next = slow.at("link");  // ql_elm: qre_next first
  L.slow_tcache = slow.at("tcache");
  L.slow_dyn_alloc = slow.at("dyn_alloc");
  L.tcache_bins = tcache.at("bins");
  L.tcache_nbins = tcache.count("bins");
  L.cache_bin_size = tcache.elem_size("bins");
  L.stack_head = cbin.at("stack_head");
  L.low_bits_empty = cbin.at("low_bits_empty");
  L.base_blocks = base.at("blocks");
  L.block_size = block.at("size");
  L.block_next = block.at("next");
  L.leaf_elm_size = t[9]->size;
  uint64_t off = 0;
  L.leaf_compact = find_member(t[9], "le_bits", &off) != nullptr;
  if (!L.leaf_compact)
    L.le_metadata = Members(t[9], "rtree_leaf_elm_s", &missing).at("le_metadata");
  if (t[10]) {
    L.tcache_bin_info_size = t[10]->size;
    L.ncached_max = Members(t[10], "cache_bin_info_s", &missing).at("ncached_max");
  } else {
    missing = "no struct cache_bin_info_s";
  }
  if (!missing.empty())
    return make_error(
        Errc::kUnsupported,
        fmt::format("{}: its DWARF's {}: not a jemalloc 5.3 this walk reads", lib.path, missing));
  return {};
}

// The sizes the walk relies on, within what jemalloc 5.x can have: a
// layout outside them is another jemalloc (or corrupt DWARF), refused.
Result<void> check_bounds(const Module& lib, const JemallocLayout& L) {
  const bool ok = L.root_slots >= 2 && L.root_slots <= (1u << 20) && L.nbins > 0 &&
                  L.nbins <= 256 && L.nsizes > L.nbins && L.nsizes <= 256 && L.narenas > 0 &&
                  L.narenas <= 4096 && L.edata_size >= 64 && L.edata_size <= 4096 &&
                  L.bin_info_size >= 24 && L.tcache_nbins > 0 && L.tcache_nbins <= 256 &&
                  L.cache_bin_size >= 16 && L.tcache_bin_info_size > 0 &&
                  L.e_slab_data < L.edata_size && L.leaf_elm_size == (L.leaf_compact ? 8 : 16) &&
                  L.le_metadata < L.leaf_elm_size;
  if (!ok)
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: its DWARF gives a jemalloc layout outside what 5.x has "
                                  "(rtree root {} slots, {} bins, {} sizes, {} arenas)",
                                  lib.path, L.root_slots, L.nbins, L.nsizes, L.narenas));
  return {};
}

}  // namespace

Result<JemallocLayout> jemalloc_layout_from_dwarf(TypeRegistry& types, Module& lib) {
  JemallocLayout L;
  LR_TRY(read_symbols(lib, L));
  if (!lib.dwarf())
    return make_error(Errc::kUnsupported,
                      fmt::format("{} has jemalloc's symbols but no DWARF for their types "
                                  "(install its debug symbols in a debug directory leakref "
                                  "searches)",
                                  lib.path));
  LR_TRY(read_structs(types, lib, L));
  L.from = fmt::format("{}'s DWARF ({})", lib.basename(), lib.debug_path);
  // je_bin_infos' element count: the symbol's size over the struct's.
  const Symbol* bins = lib.find_one_symbol("je_bin_infos");
  L.nbins = bins && L.bin_info_size ? bins->size / L.bin_info_size : 0;
  LR_TRY(check_bounds(lib, L));
  return L;
}

}  // namespace lr
