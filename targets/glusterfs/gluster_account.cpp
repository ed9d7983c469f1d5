// What an account (corelib/analyses/account.hpp) needs from a GlusterFS
// report beyond its heap blocks' names: the iobuf arenas' bytes, outside
// the heap, and what the inode tables' LRUs keep alive.
#include <fmt/format.h>

#include "targets/glusterfs/gluster.hpp"

namespace lr {

namespace {

std::string buffer_size(uint64_t n) {
  return n % 1024 == 0 ? fmt::format("{} KiB", n / 1024) : fmt::format("{} bytes", n);
}

}  // namespace

std::vector<AccountRange> gluster_iobuf_ranges(const GlusterReport& r) {
  using C = AccountRange::Class;
  std::vector<AccountRange> out;
  for (const auto& a : r.iobuf_arenas) {
    if (!a.region) continue;  // where its bytes are is not known: left to the mappings
    if (a.active.empty()) {
      out.push_back({a.mem_base, a.mem_base + a.arena_size, C::kUnknown,
                     "iobuf arena whose buffers could not be read", 1});
      continue;
    }
    const std::string key = "iobufs of " + buffer_size(a.page_size);
    // Runs of buffers in the same state: one range each.
    for (uint64_t i = 0; i < a.active.size();) {
      uint64_t j = i;
      while (j < a.active.size() && a.active[j] == a.active[i]) ++j;
      out.push_back({a.mem_base + i * a.page_size, a.mem_base + j * a.page_size,
                     a.active[i] ? C::kLive : C::kPooled, key, j - i});
      i = j;
    }
  }
  return out;
}

GfLruHeld gluster_lru_held(const GlusterReport& r) {
  GfLruHeld h;
  for (const auto& t : r.itables) {
    const auto& lru = t.lists[GfItable::kLru];
    if (lru.empty()) continue;
    const auto k = static_cast<uint32_t>(h.keys.size());
    h.keys.push_back(
        fmt::format("inode LRU of {} ({} inodes, lru_limit {})", t.name, lru.size(), t.lru_limit));
    for (const auto& in : lru) {
      h.objects.emplace_back(in.addr, k);
      if (in.ctx_array) h.objects.emplace_back(in.ctx_array, k);
      for (const auto& d : in.dentries) {
        h.objects.emplace_back(d.addr, k);
        if (d.name_addr) h.objects.emplace_back(d.name_addr, k);
      }
    }
  }
  return h;
}

}  // namespace lr
