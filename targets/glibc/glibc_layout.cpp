// glibc's malloc layouts: from libc's DWARF, or from the table of releases
// leakref was checked on (glibc_layout.hpp says which wins when).
#include "targets/glibc/glibc_layout.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "corelib/base/fileio.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/types.hpp"
#include "corelib/debuginfo/types_build.hpp"
#include "corelib/dump/memory.hpp"

namespace lr {

uint64_t GlibcLayout::first_chunk_with_state() const {
  const uint64_t p = heap_info_size + state_size;
  return p + (16 - (p + 16) % 16) % 16;  // chunk2mem(p) = p + 16 is 16-aligned
}

uint64_t GlibcLayout::tcache_chunk() const {
  return std::max<uint64_t>((tcache_size + 8 + 15) & ~uint64_t{15}, 32);  // request2size
}

void GlibcLayout::tcache_bin_sizes(uint64_t i, uint64_t* lo, uint64_t* hi) {
  if (i < kSmallTcacheBins) {
    *lo = *hi = 32 + 16 * i;
    return;
  }
  // large_csize2tidx: 64 + clz(1040) - clz(size), 1040 the last small size.
  const uint64_t k = i - kSmallTcacheBins;
  *lo = std::max<uint64_t>(uint64_t{1} << (10 + k), 32 + 16 * kSmallTcacheBins);
  *hi = (uint64_t{1} << (11 + k)) - 16;
}

namespace {

// "2.36" out of "... release version 2.36." (glibc's banner, csu/version.c).
std::string version_after(std::string_view text) {
  size_t i = 0, dots = 0;
  while (i < text.size() && i < 16 &&
         (std::isdigit(static_cast<unsigned char>(text[i])) || (text[i] == '.' && dots++ < 1)))
    ++i;
  std::string v(text.substr(0, i));
  if (!v.empty() && v.back() == '.') v.pop_back();
  return v.find('.') != std::string::npos ? v : "";
}

}  // namespace

std::string glibc_version(const Memory& mem, uint64_t base, uint64_t end) {
  static constexpr std::string_view kKey = "release version ";
  // libc's banner is in its read-only data, within its first few MiB; read
  // in windows that overlap by more than a banner, unreadable ones skipped.
  constexpr uint64_t kWindow = 1 << 16, kOverlap = 256, kMaxScan = 64ull << 20;
  std::vector<char> buf(kWindow + kOverlap);
  end = std::min(end, base + kMaxScan);
  for (uint64_t a = base; a < end && a >= base; a += kWindow) {
    const uint64_t n = std::min<uint64_t>(end - a, kWindow + kOverlap);
    if (!mem.read(a, buf.data(), n).ok()) continue;
    std::string_view w(buf.data(), n);
    for (size_t at = w.find(kKey); at != std::string_view::npos; at = w.find(kKey, at + 1)) {
      // The banner's own words, not a "GNU C Library" anywhere before.
      const size_t g = w.substr(0, at).rfind("GNU C Library");
      if (g == std::string_view::npos || at - g > 160) continue;
      std::string v = version_after(w.substr(at + kKey.size()));
      if (!v.empty()) return v;
    }
  }
  return "";
}

namespace {

// malloc.c's compile unit defines them all (arena.c is included into it).
constexpr std::string_view kUnit = "malloc.c";

// A member's offset in `t`, or an error naming it.
Result<const Member*> member(const Type* t, const char* type_name, const char* name,
                             uint64_t* off) {
  *off = 0;
  const Member* m = find_member(t, name, off);
  if (!m || !m->type)
    return make_error(Errc::kNotFound,
                      fmt::format("libc's DWARF: {} has no member {}", type_name, name));
  return m;
}

Result<void> state_from_dwarf(const Type* st, GlibcLayout& L) {
  if (!st || !(st = st->strip()) || !st->is_aggregate())
    return make_error(Errc::kNotFound, "libc's DWARF has no struct malloc_state");
  L.state_size = st->size;
  // 2.43's malloc has no fastbins: no fastbinsY, nothing to read.
  if (const Member* fb = find_member(st, "fastbinsY", &L.fastbins); fb && fb->type) {
    const Type* fa = fb->type->strip();
    L.nfastbins = fa && fa->kind == TypeKind::kArray ? fa->count : 0;
    if (L.nfastbins == 0)
      return make_error(Errc::kNotFound,
                        "libc's DWARF: malloc_state.fastbinsY is not an array of bins");
  } else {
    L.fastbins = L.nfastbins = 0;
  }
  LR_TRY(member(st, "struct malloc_state", "top", &L.top));
  LR_TRY(member(st, "struct malloc_state", "next", &L.next));
  LR_TRY(member(st, "struct malloc_state", "system_mem", &L.system_mem));
  return {};
}

Result<void> heap_info_from_dwarf(const Type* hi, GlibcLayout& L) {
  if (!hi || !(hi = hi->strip()) || !hi->is_aggregate())
    return make_error(Errc::kNotFound, "libc's DWARF has no heap_info");
  L.heap_info_size = hi->size;
  LR_TRY(member(hi, "heap_info", "ar_ptr", &L.heap_ar_ptr));
  LR_TRY(member(hi, "heap_info", "size", &L.heap_size));
  return {};
}

Result<void> tcache_from_dwarf(const Type* tc, GlibcLayout& L) {
  if (!tc || !(tc = tc->strip()) || !tc->is_aggregate())
    return make_error(Errc::kNotFound, "libc's DWARF has no struct tcache_perthread_struct");
  L.tcache_size = tc->size;
  // 2.42 counts each bin's free slots (num_slots) where earlier releases
  // counted its entries (counts).
  uint64_t counts = 0;
  const Member* c = find_member(tc, "num_slots", &counts);
  L.tcache_slots = c != nullptr;
  if (!c) {
    LR_ASSIGN(c, member(tc, "struct tcache_perthread_struct", "counts", &counts));
  }
  LR_TRY(member(tc, "struct tcache_perthread_struct", "entries", &L.tcache_entries));
  const Type* ca = c->type ? c->type->strip() : nullptr;
  const Type* ce = ca && ca->kind == TypeKind::kArray && ca->target ? ca->target->strip() : nullptr;
  if (!ce || counts != 0)
    return make_error(Errc::kNotFound, fmt::format("libc's DWARF: tcache_perthread_struct.{} is "
                                                   "not an array at offset 0",
                                                   L.tcache_slots ? "num_slots" : "counts"));
  L.tcache_bins = ca->count;
  L.tcache_count_width = ce->size;
  // The walk knows the bins' chunk sizes: 64 small ones, and 2.42's 12
  // large ones, which came with num_slots. Any other tcache is not one it
  // reads.
  const uint64_t most = L.tcache_slots ? kMaxTcacheBins : kSmallTcacheBins;
  if (L.tcache_bins > most)
    return make_error(Errc::kUnsupported,
                      fmt::format("libc's DWARF: the tcache has {} bins, more than the {} whose "
                                  "sizes the heap walk knows",
                                  L.tcache_bins, most));
  return {};
}

// The fields the walk reads must lie inside their structs: a hostile or
// unexpected DWARF is refused rather than read past.
Result<void> check_bounds(const GlibcLayout& L) {
  const bool ok = L.nfastbins <= 16 && L.fastbins + 8 * L.nfastbins <= L.state_size &&
                  L.top + 8 <= L.state_size && L.next + 8 <= L.state_size &&
                  L.system_mem + 8 <= L.state_size && L.state_size <= 16384 &&
                  L.heap_ar_ptr + 8 <= L.heap_info_size && L.heap_size + 8 <= L.heap_info_size &&
                  L.heap_info_size <= 4096 && L.tcache_bins > 0 &&
                  L.tcache_bins <= (L.tcache_slots ? kMaxTcacheBins : kSmallTcacheBins) &&
                  (L.tcache_count_width == 1 || L.tcache_count_width == 2) &&
                  L.tcache_entries >= L.tcache_bins * L.tcache_count_width &&
                  L.tcache_entries + 8 * L.tcache_bins <= L.tcache_size;
  if (!ok)
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: the malloc structures it describes are not ones the heap "
                                  "walk can read",
                                  L.from));
  return {};
}

// Safe-linking is a macro (PROTECT_PTR), in no DWARF: from the release.
bool release_at_least(const std::string& v, int major, int minor) {
  int a = 0, b = 0;
  if (std::sscanf(v.c_str(), "%d.%d", &a, &b) != 2) return false;
  return a > major || (a == major && b >= minor);
}

}  // namespace

Result<GlibcLayout> glibc_layout_from_dwarf(TypeRegistry& types, Module& libc,
                                            const std::string& version) {
  GlibcLayout L;
  L.version = version;
  L.from = fmt::format("libc's DWARF ({})", libc.debug_path);
  const std::vector<const Type*> t =
      types.find_in_unit(&libc, kUnit,
                         {"struct malloc_state", "heap_info", "struct _heap_info",
                          "struct tcache_perthread_struct", "struct malloc_par"});
  LR_TRY(state_from_dwarf(t[0], L));
  LR_TRY(heap_info_from_dwarf(t[1] ? t[1] : t[2], L));
  LR_TRY(tcache_from_dwarf(t[3], L));
  if (t[4] && t[4]->strip()) find_member(t[4]->strip(), "sbrk_base", &L.par_sbrk_base);
  L.safe_linking = release_at_least(version, 2, 32);
  LR_TRY(check_bounds(L));
  return L;
}

namespace {

// The cache file's fields, by name, in the order they are written.
struct CachedField {
  const char* name;
  uint64_t GlibcLayout::*member;
};
constexpr CachedField kCachedFields[] = {
    {"state_size", &GlibcLayout::state_size},
    {"fastbins", &GlibcLayout::fastbins},
    {"nfastbins", &GlibcLayout::nfastbins},
    {"top", &GlibcLayout::top},
    {"next", &GlibcLayout::next},
    {"system_mem", &GlibcLayout::system_mem},
    {"heap_info_size", &GlibcLayout::heap_info_size},
    {"heap_ar_ptr", &GlibcLayout::heap_ar_ptr},
    {"heap_size", &GlibcLayout::heap_size},
    {"tcache_bins", &GlibcLayout::tcache_bins},
    {"tcache_count_width", &GlibcLayout::tcache_count_width},
    {"tcache_entries", &GlibcLayout::tcache_entries},
    {"tcache_size", &GlibcLayout::tcache_size},
    {"par_sbrk_base", &GlibcLayout::par_sbrk_base},
};
constexpr const char* kCacheMagic = "leakref.glibc-layout/3";

// cache_dir()/glibc-layout-<build-id>; "" when there is no cache directory
// or the build-id is not hex (it comes from the core).
std::string layout_cache_path(const std::string& build_id) {
  const std::string dir = cache_dir();
  const bool hex = !build_id.empty() && build_id.size() <= 128 &&
                   std::all_of(build_id.begin(), build_id.end(),
                               [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  return dir.empty() || !hex ? "" : dir + "/glibc-layout-" + build_id;
}

}  // namespace

std::optional<GlibcLayout> cached_glibc_layout(const std::string& build_id) {
  // A few hundred bytes when leakref wrote it; read as an input all the
  // same: never a FIFO that blocks, never more than a page.
  const std::string path = layout_cache_path(build_id);
  if (path.empty() || !is_regular_file(path)) return std::nullopt;
  auto fd = open_input(path, "cached layout");
  if (!fd.ok()) return std::nullopt;
  char buf[4096];
  const ssize_t n = ::read(fd.value(), buf, sizeof buf);
  ::close(fd.value());
  if (n <= 0 || static_cast<size_t>(n) == sizeof buf) return std::nullopt;
  std::istringstream in(std::string(buf, static_cast<size_t>(n)));
  std::string magic;
  if (!std::getline(in, magic) || magic != kCacheMagic) return std::nullopt;
  GlibcLayout L;
  int safe = -1, slots = -1;
  if (!std::getline(in, L.version) || !std::getline(in, L.from) || !(in >> safe >> slots) ||
      safe < 0 || safe > 1 || slots < 0 || slots > 1)
    return std::nullopt;
  L.safe_linking = safe == 1;
  L.tcache_slots = slots == 1;
  for (const auto& f : kCachedFields) {
    std::string name;
    if (!(in >> name >> L.*f.member) || name != f.name) return std::nullopt;
  }
  if (!check_bounds(L).ok() || version_after(L.version) != L.version) return std::nullopt;
  return L;
}

void cache_glibc_layout(const std::string& build_id, const GlibcLayout& L) {
  const std::string path = layout_cache_path(build_id);
  if (path.empty()) return;
  std::ostringstream o;
  o << kCacheMagic << '\n'
    << L.version << '\n'
    << L.from << '\n'
    << (L.safe_linking ? 1 : 0) << ' ' << (L.tcache_slots ? 1 : 0) << '\n';
  for (const auto& f : kCachedFields) o << f.name << ' ' << L.*f.member << '\n';
  // Written whole under a name of its own, then renamed: a reader never
  // sees half a file. A cache that cannot be written is no error.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = fmt::format("{}.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << o.str();
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

GlibcLayout glibc_default_layout() {
  GlibcLayout L;
  L.version = "2.36";
  L.from = "leakref's table for glibc 2.36";
  L.state_size = 2200, L.fastbins = 16, L.nfastbins = 10, L.top = 96, L.next = 2160,
  L.system_mem = 2184;
  L.heap_info_size = 48, L.heap_ar_ptr = 0, L.heap_size = 16;
  L.tcache_bins = 64, L.tcache_count_width = 2, L.tcache_entries = 128, L.tcache_size = 640;
  L.safe_linking = true;
  return L;
}

Result<GlibcLayout> glibc_layout_for_release(const std::string& version) {
  // Each release here was read from its own libc6-dbg (Debian's) and walked
  // exactly against fx_heap's manifest (tests/test_heap.cpp): 2.36 (Debian
  // 12), 2.41 (13) share one layout; 2.31 (11) has a 32-byte heap_info (no
  // pagesize) and links free lists unmangled; 2.43 (unstable) is below.
  if (version == "2.36" || version == "2.41" || version == "2.31" || version == "2.43") {
    GlibcLayout L = glibc_default_layout();
    L.version = version;
    L.from = "leakref's table for glibc " + version;
    if (version == "2.31") L.heap_info_size = 32, L.safe_linking = false;
    // 2.43 (Debian unstable): no fastbins; 76 tcache bins counted by slots.
    if (version == "2.43") {
      L.state_size = 2112, L.fastbins = 0, L.nfastbins = 0, L.top = 8, L.next = 2072,
      L.system_mem = 2096;
      L.tcache_bins = 76, L.tcache_entries = 152, L.tcache_size = 760, L.tcache_slots = true;
    }
    return L;
  }
  return make_error(
      Errc::kUnsupported,
      fmt::format("glibc {}'s malloc layout is not in leakref's table and libc's debuginfo is not "
                  "here (that release's libc6-dbg, in a debug directory leakref searches, gives "
                  "it); it is not guessed",
                  version));
}

}  // namespace lr
