#include "targets/tcmalloc/tcmalloc_layout.hpp"

#include <fmt/format.h>

#include <string_view>

#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/types.hpp"

namespace lr {

namespace {

// The statics the walk reads (mangled: they are C++ class members).
constexpr const char* kPageHeap = "_ZN8tcmalloc6Static9pageheap_E";
constexpr const char* kSizeMap = "_ZN8tcmalloc6Static8sizemap_E";
constexpr const char* kCentral = "_ZN8tcmalloc6Static14central_cache_E";
constexpr const char* kThreadHeaps = "_ZN8tcmalloc11ThreadCache13thread_heaps_E";

// Member offsets of one type, naming the first one missing.
class Members {
 public:
  Members(const Type* t, std::string_view name, std::string* missing)
      : t_(t), name_(name), missing_(missing) {}
  const Member* get(std::string_view m, uint64_t* off) {
    *off = 0;
    const Member* f = t_ ? find_member(t_, m, off) : nullptr;
    if (!f && missing_->empty()) *missing_ = fmt::format("{} has no member {}", name_, m);
    return f;
  }
  uint64_t at(std::string_view m) {
    uint64_t off = 0;
    get(m, &off);
    return off;
  }
  // Array member `m`: its element type and count (nullptr, 0 if not one).
  const Type* array(std::string_view m, uint64_t* count) {
    uint64_t off = 0;
    const Member* f = get(m, &off);
    const Type* a = f && f->type ? f->type->strip() : nullptr;
    *count = a && a->kind == TypeKind::kArray ? a->count : 0;
    const Type* e = *count && a->target ? a->target->strip() : nullptr;
    if (!e && missing_->empty()) *missing_ = fmt::format("{}.{} is not an array", name_, m);
    return e;
  }
  // Bitfield `m`: its first bit from the type's start, and its width.
  void bits(std::string_view m, uint64_t* bit, uint64_t* width) {
    uint64_t off = 0;
    const Member* f = get(m, &off);
    *bit = off * 8 + (f ? f->bit_offset : 0);
    *width = f ? f->bit_size : 0;
    if (f && (f->bit_size == 0 || f->bit_size > 16) && missing_->empty())
      *missing_ = fmt::format("{}.{} is not a bitfield of at most 16 bits", name_, m);
  }

 private:
  const Type* t_;
  std::string_view name_;
  std::string* missing_;
};

const Type* find_type(TypeRegistry& types, const char* name) {
  auto r = types.find(name);
  const Type* t = r.ok() ? r.value()->strip() : nullptr;
  return t && t->is_aggregate() ? t : nullptr;
}

Result<void> read_symbols(Module& lib, TcmallocLayout& L, uint64_t* central_bytes) {
  const std::pair<const char*, uint64_t*> want[] = {
      {kPageHeap, &L.pageheap}, {kSizeMap, &L.sizemap}, {kCentral, &L.central}};
  for (const auto& [name, addr] : want) {
    const Symbol* s = lib.find_one_symbol(name);
    if (!s || !s->addr)
      return make_error(Errc::kUnsupported,
                        fmt::format("{} is tcmalloc but has no symbol {}: its heap state is "
                                    "named only in its full symbol table (install its debug "
                                    "symbols, e.g. libgoogle-perftools4-dbgsym, in a debug "
                                    "directory leakref searches)",
                                    lib.path, name));
    *addr = s->addr;
    if (name == kCentral) *central_bytes = s->size;
  }
  const Symbol* th = lib.find_one_symbol(kThreadHeaps);
  L.thread_heaps = th ? th->addr : 0;
  return {};
}

Result<void> read_page_map(TypeRegistry& types, TcmallocLayout& L, std::string& missing) {
  const Type* ph = find_type(types, "tcmalloc::PageHeap");
  uint64_t pm = 0, root = 0;
  const Member* m = ph ? Members(ph, "PageHeap", &missing).get("pagemap_", &pm) : nullptr;
  const Type* map = m && m->type ? m->type->strip() : nullptr;
  // TCMalloc_PageMap2 (48-bit builds): root_ of leaves, each values[].
  Members pmap(map, map ? map->name : "the page map", &missing);
  const Type* leaf_ptr = pmap.array("root_", &L.root_slots);
  root = pmap.at("root_");
  const Type* leaf = leaf_ptr && leaf_ptr->target ? leaf_ptr->target->strip() : nullptr;
  uint64_t values = 0;
  Members(leaf, "the page map's Leaf", &missing).array("values", &values);
  L.leaf_slots = values;
  L.root = L.pageheap + pm + root;
  if (!ph) missing = "no tcmalloc::PageHeap";
  return {};
}

void read_classes(TypeRegistry& types, TcmallocLayout& L, std::string& missing) {
  const Type* sm = find_type(types, "tcmalloc::SizeMap");
  Members s(sm, "SizeMap", &missing);
  const Type* e = s.array("class_to_size_", &L.nclasses_max);
  L.class_size_width = e ? e->size : 0;
  L.class_to_size = L.sizemap + s.at("class_to_size_");
  L.num_objects_to_move = s.at("num_objects_to_move_");
  uint64_t npages = 0;
  const Type* pe = s.array("class_to_pages_", &npages);
  L.class_to_pages = s.at("class_to_pages_");
  if (pe && (pe->size != 8 || npages != L.nclasses_max) && missing.empty())
    missing = "SizeMap.class_to_pages_ is not a size_t per class";
  L.num_size_classes = s.at("num_size_classes");
  if (!sm) missing = "no tcmalloc::SizeMap";
}

void read_caches(TypeRegistry& types, TcmallocLayout& L, std::string& missing) {
  const Type* cf = find_type(types, "tcmalloc::CentralFreeList");
  Members c(cf, "CentralFreeList", &missing);
  const Type* entry = c.array("tc_slots_", &L.tc_nslots);
  L.tc_slots = c.at("tc_slots_");
  L.tc_entry_size = entry ? entry->size : 0;
  L.used_slots = c.at("used_slots_");
  const Type* tc = find_type(types, "tcmalloc::ThreadCache");
  Members t(tc, "ThreadCache", &missing);
  const Type* fl = t.array("list_", &L.tc_nlists);
  L.tc_list = t.at("list_");
  L.tc_next = t.at("next_");
  L.freelist_size = fl ? fl->size : 0;
  Members f(fl, "ThreadCache::FreeList", &missing);
  uint64_t len_off = 0;
  const Member* len = f.get("length_", &len_off);
  L.fl_list = f.at("list_");
  L.fl_length = len_off;
  L.fl_length_width = len && len->type && len->type->strip() ? len->type->strip()->size : 0;
  const Type* sp = find_type(types, "tcmalloc::Span");
  Members s(sp, "Span", &missing);
  L.span_size = sp ? sp->size : 0;
  L.span_start = s.at("start");
  L.span_length = s.at("length");
  L.span_objects = s.at("objects");
  s.bits("sizeclass", &L.sizeclass_bit, &L.sizeclass_bits);
  s.bits("location", &L.location_bit, &L.location_bits);
  if (!cf || !tc || !sp) missing = "no tcmalloc::CentralFreeList, ThreadCache or Span";
}

}  // namespace

Result<TcmallocLayout> tcmalloc_layout_from_dwarf(TypeRegistry& types, Module& lib) {
  TcmallocLayout L;
  uint64_t central_bytes = 0;
  LR_TRY(read_symbols(lib, L, &central_bytes));
  if (!lib.dwarf())
    return make_error(Errc::kUnsupported,
                      fmt::format("{} has tcmalloc's symbols but no DWARF for their types "
                                  "(install its debug symbols in a debug directory leakref "
                                  "searches)",
                                  lib.path));
  std::string missing;
  LR_TRY(read_page_map(types, L, missing));
  read_classes(types, L, missing);
  read_caches(types, L, missing);
  L.central_size = L.nclasses_max ? central_bytes / L.nclasses_max : 0;
  const bool ok = missing.empty() && L.root_slots >= 2 && L.root_slots <= (1u << 24) &&
                  L.leaf_slots >= 2 && L.leaf_slots <= (1u << 24) && L.nclasses_max > 0 &&
                  L.nclasses_max <= 1024 && L.class_size_width >= 4 && L.class_size_width <= 8 &&
                  L.central_size >= L.used_slots + 4 && L.tc_entry_size == 16 &&
                  L.freelist_size > 0 && L.span_size >= 32 &&
                  L.sizeclass_bit / 8 + 4 <= L.span_size && L.location_bit / 8 + 4 <= L.span_size &&
                  (L.fl_length_width == 2 || L.fl_length_width == 4);
  if (!ok)
    return make_error(
        Errc::kUnsupported,
        fmt::format("{}: {}: not a tcmalloc layout this walk reads", lib.path,
                    missing.empty() ? "its DWARF's sizes are outside gperftools 2.x's" : missing));
  L.from = fmt::format("{}'s DWARF ({})", lib.basename(), lib.debug_path);
  return L;
}

}  // namespace lr
