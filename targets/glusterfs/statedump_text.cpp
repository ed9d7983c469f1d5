// A core's GlusterFS state in GlusterFS 10.3's own statedump text
// (statedump.c, inode.c inode_table_dump/inode_dump) for the sections
// leakref reads, so existing statedump scripts work on cores; snapshots read
// it back like GlusterFS's own (statedump.hpp).
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iterator>

#include <map>

#include "targets/glusterfs/gluster.hpp"
#include "targets/glusterfs/statedump.hpp"

namespace lr {

namespace {

void section(fmt::memory_buffer& b, const std::string& name) {
  fmt::format_to(std::back_inserter(b), "\n[{}]\n", name);
}

void memusage(fmt::memory_buffer& b, const GlusterReport& r, const GfMemAcct& ma) {
  const auto& x = r.xlators[ma.xlator];
  std::string key = x.is_global ? "global.glusterfs" : x.type + "." + x.name;
  section(b, key + " - Memory usage");
  fmt::format_to(std::back_inserter(b), "num_types={}\n", ma.num_types);
  for (const auto& t : ma.types) {
    if (t.num_allocs == 0) continue;
    section(b, fmt::format("{} - usage-type {} memusage", key,
                           t.typestr.empty() ? std::to_string(t.type) : t.typestr));
    fmt::format_to(std::back_inserter(b), "num_allocs={}\n", t.num_allocs);
  }
}

const GfMemAcct* acct_of(const GlusterReport& r, size_t xl) {
  for (const auto& ma : r.memacct)
    if (ma.xlator == xl) return &ma;
  return nullptr;
}

void itable(fmt::memory_buffer& b, const GlusterReport& r, const GfItable& t,
            const std::string& prefix) {
  section(b, prefix);
  fmt::format_to(
      std::back_inserter(b),
      "{0}.dentry_hashsize={1}\n{0}.inode_hashsize={2}\n{0}.name={3}\n{0}.lru_limit={4}\n", prefix,
      t.dentry_hashsize, t.inode_hashsize, t.name, t.lru_limit);
  fmt::format_to(
      std::back_inserter(b),
      "{0}.active_size={1}\n{0}.lru_size={2}\n{0}.purge_size={3}\n{0}.invalidate_size={4}\n",
      prefix, t.sizes[0], t.sizes[1], t.sizes[2], t.sizes[3]);
  for (int l = 0; l < GfItable::kNumLists; ++l) {
    int n = 0;
    for (const auto& in : t.lists[l]) {
      section(b, fmt::format("{}.{}.{}", prefix, itable_list_name(l), ++n));
      fmt::format_to(
          std::back_inserter(b),
          "gfid={}\nnlookup={}\nfd-count={}\nactive-fd-count={}\nref={}\ninvalidate-sent={}\nia_"
          "type={}\n",
          format_gfid(in.gfid), in.nlookup, in.fd_count, in.active_fd_count, in.ref,
          in.invalidate_sent ? 1 : 0, in.ia_type);
      for (auto [x, v] : in.ref_by_xl)
        fmt::format_to(std::back_inserter(b), "ref_by_xl:.{}={}\n",
                       x == SIZE_MAX ? std::string("?") : r.xlators[x].name, v);
    }
  }
}

}  // namespace

std::string gluster_statedump_text(const GlusterReport& r, const GlusterSections& sec,
                                   const std::string& core) {
  fmt::memory_buffer b;
  // A core has no dump time; the core file's mtime is when it was written.
  struct stat st {};
  ::stat(core.c_str(), &st);
  std::tm tm{};
  gmtime_r(&st.st_mtim.tv_sec, &tm);
  fmt::format_to(std::back_inserter(b), "DUMP-START-TIME: {:%Y-%m-%d %H:%M:%S}.{:06d} +0000\n", tm,
                 st.st_mtim.tv_nsec / 1000);
  size_t global = SIZE_MAX, root = SIZE_MAX;
  for (size_t i = 0; i < r.xlators.size(); ++i) {
    if (r.xlators[i].is_global) global = i;
    if (r.xlators[i].is_root) root = i;
  }
  if (sec.memusage && global != SIZE_MAX)
    if (const auto* ma = acct_of(r, global)) memusage(b, r, *ma);
  if (sec.mempool) {
    section(b, "mempool");
    for (const auto& p : r.pools)
      fmt::format_to(std::back_inserter(b),
                     "-----=-----\npool-name={}\nxlator-name={}\nactive-count={}\nsizeof-type={}\n"
                     "padded-sizeof={}\nsize={}\nshared-pool={:#x}\n",
                     p.name, p.xl_name, p.active, p.sizeof_type, p.padded, p.padded * p.active,
                     p.shared);
  }
  if (sec.memusage && root != SIZE_MAX)
    if (const auto* ma = acct_of(r, root)) memusage(b, r, *ma);
  // Which prefix each table gets: the FUSE client's active table is
  // xlator.mount.fuse.itable; a brick's is conn.N.bound_xl.<name>.
  std::map<uint64_t, std::string> prefix;
  bool fuse = root != SIZE_MAX && r.xlators[root].type == "mount/fuse";
  int conn = 0;
  for (const auto& c : r.clients) {
    auto it = std::find_if(r.itables.begin(), r.itables.end(), [&](const GfItable& t) {
      return r.xlators[t.xlator].addr == c.bound_xl_addr;
    });
    if (it != r.itables.end() && !prefix.count(it->addr))
      prefix[it->addr] = fmt::format("conn.{}.bound_xl.{}", conn++, c.bound_xl);
  }
  for (const auto& g : r.graphs) {
    section(b,
            g.active ? fmt::format("active graph - {}", g.id) : fmt::format("oldgraph[{}]", g.id));
    for (size_t xi : g.xlators) {
      if (sec.memusage)
        if (const auto* ma = acct_of(r, xi)) memusage(b, r, *ma);
      if (g.active && fuse && xi == g.xlators.front() && r.xlators[xi].itable)
        prefix.emplace(r.xlators[xi].itable, "xlator.mount.fuse.itable");
    }
  }
  if (sec.itable)
    for (const auto& t : r.itables) {
      auto it = prefix.find(t.addr);
      const auto& x = r.xlators[t.xlator];
      itable(b, r, t,
             it != prefix.end() ? it->second : fmt::format("xlator.{}.{}.itable", x.type, x.name));
    }
  fmt::format_to(std::back_inserter(b), "\nDUMP-END-TIME: {:%Y-%m-%d %H:%M:%S}.{:06d} +0000", tm,
                 st.st_mtim.tv_nsec / 1000);
  return fmt::to_string(b);
}

}  // namespace lr
