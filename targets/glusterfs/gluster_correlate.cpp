// GlusterFS's refcount rules for correlate: which references of an inode
// libglusterfs itself explains, and which objects' references the pointers
// in live memory must explain.
#include <fmt/format.h>

#include <set>

#include "targets/glusterfs/gluster.hpp"

namespace lr {

namespace {

const Gfid kRootGfid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

std::string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// Every fd, every child dentry and every operation in flight that points
// at the inode holds one reference (never flagged).
CoreObject inode_object(const GlusterReport& r, const GfItable& t, int list, const GfInode& in) {
  CoreObject o;
  o.addr = in.addr;
  o.kind = "inode";
  o.refcount = in.ref;
  o.explained = static_cast<int64_t>(in.fds.size() + in.child_dentries + in.in_flight.size());
  o.explained_by = fmt::format("{} and {}", plural(in.fds.size(), "fd", "fds"),
                               plural(in.child_dentries, "child dentry", "child dentries"));
  if (!in.in_flight.empty()) {
    o.explained_by += fmt::format(" and {} in flight (", in.in_flight.size());
    for (size_t i = 0; i < in.in_flight.size(); ++i) {
      const GfStack& st = r.stacks[in.in_flight[i].stack];
      o.explained_by += fmt::format("{}{} unique {}", i ? ", " : "", st.op_name, st.unique);
    }
    o.explained_by += ")";
  }
  o.label = fmt::format("{} {} gfid {}", t.name, itable_list_name(list), format_gfid(in.gfid));
  for (auto [x, n] : in.ref_by_xl)
    o.holders += fmt::format("{}{}={}", o.holders.empty() ? "" : ", ",
                             x == SIZE_MAX ? std::string("?") : r.xlators[x].name, n);
  o.ignore = in.gfid == kRootGfid;  // the root inode's ref is pinned
  return o;
}

}  // namespace

GlusterCorrelateObjects gluster_correlate_objects(const GlusterReport& r) {
  GlusterCorrelateObjects g;
  std::set<uint64_t> seen_fd;
  auto add_fd = [&](const GfFd& fd, const std::string& where) {
    if (!seen_fd.insert(fd.addr).second) return;
    CoreObject o;
    o.addr = fd.addr;
    o.kind = "fd";
    o.refcount = fd.refcount;
    o.label = fmt::format("{} inode {:#x}", where, fd.inode);
    g.objects.push_back(o);
    g.scan.emplace_back(fd.addr, r.fd_size);
  };
  for (const auto& t : r.itables)
    for (int l = 0; l < GfItable::kNumLists; ++l)
      for (const auto& in : t.lists[l]) {
        g.objects.push_back(inode_object(r, t, l, in));
        for (const auto& fd : in.fds) add_fd(fd, "inode fd");
      }
  for (const auto& [slot, fd] : r.fuse_fds) add_fd(fd, fmt::format("fuse fdtable[{}]", slot));
  for (const auto& cl : r.clients)
    for (const auto& [slot, fd] : cl.fds)
      add_fd(fd, fmt::format("client {} fdtable[{}]", cl.index, slot));
  for (const auto& d : r.dicts) {
    CoreObject o;
    o.addr = d.addr;
    o.kind = "dict";
    o.refcount = d.refcount;
    o.label =
        fmt::format("{} key(s){}", d.count, d.pairs.empty() ? "" : ", first " + d.pairs[0].key);
    g.objects.push_back(o);
    g.scan.emplace_back(d.addr, r.dict_size);
  }
  return g;
}

}  // namespace lr
