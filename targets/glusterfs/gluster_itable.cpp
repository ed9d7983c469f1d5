// GlusterFS profile, part 2: inode tables (inodes, dentries, fds, per-xlator
// refs), dicts, the brick client table and fd tables, and the invariants
// libglusterfs 10.x maintains (inode.c's state machine, fd.c's ref rules).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "gluster_internal.hpp"

namespace lr::gf {
namespace {

constexpr uint64_t kMaxInodes = 1u << 24, kMaxPerInode = 1u << 16, kMaxPairs = 1u << 16;
constexpr uint32_t kMaxClients = 1u << 16, kMaxFds = 1u << 20;
constexpr int32_t kEntryAllocated = -2;  // GF_CLIENTENTRY_ALLOCATED, GF_FDENTRY_ALLOCATED

GfFd read_fd(Ctx& c, uint64_t a) {
  GfFd f;
  f.addr = a;
  View v = view(c.mem, a, c.L.size(T::fd));
  if (!v) return f;
  f.pid = v.u64(c.L[F::fd_pid]);
  f.flags = v.i32(c.L[F::fd_flags]);
  f.refcount = v.i64(c.L[F::fd_refcount]);
  f.inode = v.u64(c.L[F::fd_inode]);
  f.anonymous = v.u8(c.L[F::fd_anonymous]);
  return f;
}

GfInode read_inode(Ctx& c, uint64_t a, uint32_t ctxcount, std::string* warn) {
  GfInode in;
  in.addr = a;
  View v = view(c.mem, a, c.L.size(T::inode));
  if (!v) {
    *warn = fmt::format("inode {:#x} unreadable: {}", a, c.mem.why_unreadable(a));
    return in;
  }
  if (const uint8_t* g = v.bytes(c.L[F::inode_gfid], 16)) std::memcpy(in.gfid.data(), g, 16);
  in.nlookup = v.i64(c.L[F::inode_nlookup]);
  in.fd_count = v.u32(c.L[F::inode_fd_count]);
  in.active_fd_count = v.u32(c.L[F::inode_active_fd_count]);
  in.ref = v.u32(c.L[F::inode_ref]);
  in.ia_type = v.i32(c.L[F::inode_ia_type]);
  in.in_invalidate_list = v.u8(c.L[F::inode_in_invalidate_list]);
  in.invalidate_sent = v.u8(c.L[F::inode_invalidate_sent]);
  in.in_lru_list = v.u8(c.L[F::inode_in_lru_list]);
  in.ctx_array = v.u64(c.L[F::inode_ctx]);
  if (uint64_t ctx = in.ctx_array; ctx && ctxcount) {
    View cv = view(c.mem, ctx, ctxcount * c.L.size(T::inode_ctx));
    for (uint32_t i = 0; cv && i < ctxcount; ++i) {
      int32_t ref = cv.i32(i * c.L.size(T::inode_ctx) + c.L[F::inode_ctx_ref]);
      if (!ref) continue;
      uint64_t key = cv.u64(i * c.L.size(T::inode_ctx) + c.L[F::inode_ctx_xl_key]);
      auto it = c.xl_index.find(key);
      in.ref_by_xl.emplace_back(it == c.xl_index.end() ? SIZE_MAX : it->second, ref);
    }
  }
  std::string stop;
  for (uint64_t d :
       c.list(a + c.L[F::inode_dentry_list], c.L[F::dentry_inode_list], kMaxPerInode, &stop)) {
    View dv = view(c.mem, d, c.L.size(T::dentry));
    if (!dv) continue;
    const uint64_t name = dv.u64(c.L[F::dentry_name]);
    in.dentries.push_back({d, dv.u64(c.L[F::dentry_parent]), name, cstr(c.mem, name)});
  }
  if (!stop.empty()) *warn = fmt::format("inode {:#x} dentry_list: {}", a, stop);
  for (uint64_t f : c.list(a + c.L[F::inode_fd_list], c.L[F::fd_inode_list], kMaxPerInode, &stop))
    in.fds.push_back(read_fd(c, f));
  if (!stop.empty()) *warn = fmt::format("inode {:#x} fd_list: {}", a, stop);
  return in;
}

}  // namespace

void read_itables(Ctx& c) {
  std::unordered_set<uint64_t> seen;
  for (size_t xi = 0; xi < c.r.xlators.size(); ++xi) {
    uint64_t ta = c.r.xlators[xi].itable;
    if (!ta || !seen.insert(ta).second) continue;
    View v = view(c.mem, ta, c.L.size(T::itable));
    if (!v) {
      c.r.warnings.push_back(
          fmt::format("inode table {:#x} of {} unreadable", ta, c.r.xlators[xi].name));
      continue;
    }
    GfItable t;
    t.addr = ta;
    t.xlator = xi;
    t.name = cstr(c.mem, v.u64(c.L[F::itable_name]));
    t.dentry_hashsize = v.u32(c.L[F::itable_dentry_hashsize]);
    t.inode_hashsize = v.u32(c.L[F::itable_inode_hashsize]);
    t.lru_limit = v.u32(c.L[F::itable_lru_limit]);
    t.ctxcount = std::min<uint32_t>(v.u32(c.L[F::itable_ctxcount]), 4096);
    for (int l = 0; l < GfItable::kNumLists; ++l) {
      t.sizes[l] = v.u32(c.L[kItableListSizes[l]]);
      for (uint64_t n :
           c.list(ta + c.L[kItableLists[l]], c.L[F::inode_list], kMaxInodes, &t.stop[l])) {
        std::string warn;
        t.lists[l].push_back(read_inode(c, n, t.ctxcount, &warn));
        if (!warn.empty()) c.r.warnings.push_back(warn);
      }
    }
    // Child dentries hold one ref each on their parent inode.
    std::unordered_map<uint64_t, uint32_t> children;
    for (auto& list : t.lists)
      for (auto& in : list)
        for (auto& d : in.dentries)
          if (d.parent) children[d.parent]++;
    for (auto& list : t.lists)
      for (auto& in : list)
        if (auto it = children.find(in.addr); it != children.end()) in.child_dentries = it->second;
    c.r.itables.push_back(std::move(t));
  }
}

void read_dicts(Ctx& c) {
  for (const auto& p : c.r.pools) {
    if (p.name != "dict_t") continue;
    for (uint64_t a : p.live) {
      View v = view(c.mem, a, c.L.size(T::dict));
      if (!v) continue;
      GfDict d;
      d.addr = a;
      d.refcount = v.i64(c.L[F::dict_refcount]);
      d.count = v.i32(c.L[F::dict_count]);
      std::string stop;
      for (uint64_t pa :
           c.chain(v.u64(c.L[F::dict_members_list]), c.L[F::data_pair_next], kMaxPairs, &stop)) {
        View pv = view(c.mem, pa, c.L.size(T::data_pair));
        if (!pv) break;
        GfDictPair pr;
        pr.key = cstr(c.mem, pv.u64(c.L[F::data_pair_key]), 128);
        if (uint64_t da = pv.u64(c.L[F::data_pair_value])) {
          View dv = view(c.mem, da, c.L.size(T::data));
          if (dv) {
            pr.data_refcount = dv.i64(c.L[F::data_refcount]);
            pr.data_type = dv.i32(c.L[F::data_data_type]);
            uint32_t len = dv.u32(c.L[F::data_len]);
            uint64_t at = dv.u64(c.L[F::data_data]);
            std::string s = at && len ? cstr(c.mem, at, std::min<uint32_t>(len, 64)) : "";
            bool printable =
                std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 32 && ch < 127; });
            pr.value = printable ? s : fmt::format("<{} bytes>", len);
            if (printable && len > 64) pr.value += "...";
          }
        }
        d.pairs.push_back(std::move(pr));
      }
      if (!stop.empty())
        c.r.warnings.push_back(fmt::format("dict {:#x} members_list: {}", a, stop));
      c.r.dicts.push_back(std::move(d));
    }
  }
}

namespace {

std::vector<std::pair<int32_t, GfFd>> read_fdtable(Ctx& c, uint64_t ft) {
  std::vector<std::pair<int32_t, GfFd>> out;
  View v = view(c.mem, ft, c.L.size(T::fdtable));
  if (!v) return out;
  uint32_t n = std::min(v.u32(c.L[F::fdtable_max_fds]), kMaxFds);
  View ev = view(c.mem, v.u64(c.L[F::fdtable_fdentries]), uint64_t{n} * c.L.size(T::fdentry));
  for (uint32_t i = 0; ev && i < n; ++i)
    if (ev.i32(i * c.L.size(T::fdentry) + c.L[F::fdentry_next_free]) == kEntryAllocated)
      if (uint64_t fd = ev.u64(i * c.L.size(T::fdentry) + c.L[F::fdentry_fd]))
        out.emplace_back(i, read_fd(c, fd));
  return out;
}

}  // namespace

namespace {

// fuse_private_t is not in the installed headers, so its fdtable member has no
// declared offset (312 in 10.3). Find it by content instead: fuse's private
// block is GF_CALLOC'd, and exactly one of its words must point at a GF_MALLOC'd
// gf_common_mt_fdtable_t block big enough for an fdtable_t. 0 when none or
// several do.
uint64_t fuse_fdtable(Ctx& c, uint64_t priv) {
  Memory::Window w;
  GfHeader ph;
  if (priv <= c.L.hdr.size || !gf_header(c.mem, w, priv - c.L.hdr.size, ~uint64_t{0}, c.L.hdr, &ph))
    return 0;
  constexpr uint64_t kMaxPrivate = 64 * 1024;  // 10.3's is ~1 KiB; bound the scan
  View pv = view(c.mem, priv, std::min(ph.size, kMaxPrivate) & ~uint64_t{7});
  uint64_t found = 0;
  for (uint64_t off = 0; pv && off + 8 <= pv.size; off += 8) {
    uint64_t p = pv.u64(off);
    GfHeader gh;
    if (p <= c.L.hdr.size || p % 8 ||
        !gf_header(c.mem, w, p - c.L.hdr.size, ~uint64_t{0}, c.L.hdr, &gh) ||
        gh.type != c.L.constant(K::mem_header_mt_fdtable) || gh.size < c.L.size(T::fdtable))
      continue;
    if (found && found != p) return 0;
    found = p;
  }
  return found;
}

}  // namespace

void read_clients(Ctx& c, uint64_t root_private) {
  for (uint64_t ctx : c.r.ctxs) {
    auto ct = c.mem.read_u64(ctx + c.L[F::ctx_clienttable]);
    if (!ct.ok() || !ct.value()) continue;
    View tv = view(c.mem, ct.value(), c.L.size(T::clienttable));
    if (!tv) continue;
    uint32_t n = std::min(tv.u32(c.L[F::clienttable_max_clients]), kMaxClients);
    View ev = view(c.mem, tv.u64(c.L[F::clienttable_cliententries]),
                   uint64_t{n} * c.L.size(T::cliententry));
    for (uint32_t i = 0; ev && i < n; ++i) {
      if (ev.i32(i * c.L.size(T::cliententry) + c.L[F::cliententry_next_free]) != kEntryAllocated)
        continue;
      uint64_t ca = ev.u64(i * c.L.size(T::cliententry) + c.L[F::cliententry_client]);
      View cv = view(c.mem, ca, c.L.size(T::client));
      if (!cv) continue;
      GfClient cl;
      cl.index = static_cast<int32_t>(i);
      cl.addr = ca;
      cl.bind = cv.i64(c.L[F::client_bind]);
      cl.ref = cv.i64(c.L[F::client_count]);
      cl.bound_xl_addr = cv.u64(c.L[F::client_bound_xl]);
      if (auto it = c.xl_index.find(cl.bound_xl_addr); it != c.xl_index.end())
        cl.bound_xl = c.r.xlators[it->second].name;
      cl.client_uid = cstr(c.mem, cv.u64(c.L[F::client_client_uid]));
      // The server xlator's scratch ctx is a server_ctx_t holding the fdtable.
      uint32_t nctx = std::min<uint32_t>(cv.get<uint16_t>(c.L[F::client_scratch_ctx_count]), 1024);
      View sv = view(c.mem, cv.u64(c.L[F::client_scratch_ctx_ctx]),
                     uint64_t{nctx} * c.L.size(T::client_ctx));
      for (uint32_t k = 0; sv && k < nctx; ++k) {
        if (sv.u64(k * c.L.size(T::client_ctx) + c.L[F::client_ctx_ctx_key]) !=
            cv.u64(c.L[F::client_this]))
          continue;
        uint64_t sctx = sv.u64(k * c.L.size(T::client_ctx) + c.L[F::client_ctx_ctx_value]);
        if (auto ft = c.mem.read_u64(sctx + c.L[F::server_ctx_fdtable]);
            sctx && ft.ok() && ft.value())
          cl.fds = read_fdtable(c, ft.value());
      }
      c.r.clients.push_back(std::move(cl));
    }
  }
  if (root_private) {
    if (uint64_t ft = fuse_fdtable(c, root_private))
      c.r.fuse_fds = read_fdtable(c, ft);
    else
      c.r.warnings.push_back(
          fmt::format("fuse fdtable not found: no single GF_MALLOC'd fdtable pointer in the root "
                      "xlator's private block at {:#x} (not a FUSE client?)",
                      root_private));
  }
}

namespace {

// The rules an inode on each of the table's lists must satisfy: the
// invariants of glusterfs.toml's set of that name (active, lru, purge,
// invalidate; the root directory by those of set root), compiled once
// against the inode type.
struct ListRules {
  struct Rule {
    std::string name, text;
    std::unique_ptr<Expr> e;
  };
  std::vector<Rule> rules;
};

Result<ListRules> list_rules(Ctx& c, const std::string& set) {
  LR_ASSIGN(const Profile* p, builtin_profile());
  const ProfileSet* s = nullptr;
  for (const auto& ps : p->sets)
    if (ps.name == set) s = &ps;
  if (!s) return make_error(Errc::kNotFound, "glusterfs profile: no set " + set);
  LR_ASSIGN(BoundType * bt, c.bind->bind(s->type));
  ExprScope scope = c.bind->scope(bt, "glusterfs set " + set);
  ListRules lr;
  for (const auto& inv : s->invariants) {
    LR_ASSIGN(auto e, Expr::compile(inv.expr, scope));
    lr.rules.push_back({inv.name, inv.expr, std::move(e)});
  }
  return lr;
}

}  // namespace

void check_invariants(Ctx& c) {
  auto add = [&](const char* kind, uint64_t a, std::string msg) {
    c.r.findings.push_back({kind, a, std::move(msg)});
  };
  ListRules rules[GfItable::kNumLists + 1];  // + the root directory's
  for (int l = 0; l <= GfItable::kNumLists; ++l) {
    auto r = list_rules(c, l == GfItable::kNumLists ? "root" : itable_list_name(l));
    if (!r.ok()) {
      c.r.warnings.push_back("inode invariants not checked: " + r.error().message);
      return;
    }
    rules[l] = std::move(r).value();
  }
  // Operations in flight hold loc/fd refs from their call stacks: those
  // found are explained (attribute_in_flight); any left are named beside.
  std::string in_flight =
      c.r.stacks.empty()
          ? std::string()
          : fmt::format("; {} operation(s) in flight, none holding it", c.r.stacks.size());
  auto flight_text = [&](const GfInode& in) {
    std::string s;
    for (const auto& f : in.in_flight) {
      const GfStack& st = c.r.stacks[f.stack];
      s +=
          fmt::format("{}{} (unique {}): {}", s.empty() ? "" : "; ", st.op_name, st.unique, f.what);
    }
    return s;
  };
  static const Gfid kRoot = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  for (const auto& t : c.r.itables) {
    for (int l = 0; l < GfItable::kNumLists; ++l) {
      if (!t.stop[l].empty())
        add("invariant", t.addr,
            fmt::format("{}: {} list broken: {}", t.name, itable_list_name(l), t.stop[l]));
      if (t.lists[l].size() != t.sizes[l])
        add("invariant", t.addr,
            fmt::format("{}: {}_size={} but the list holds {}", t.name, itable_list_name(l),
                        t.sizes[l], t.lists[l].size()));
    }
    for (int l = 0; l < GfItable::kNumLists; ++l) {
      for (const auto& in : t.lists[l]) {
        std::string who = fmt::format("{} inode {} ({:#x})", t.name, format_gfid(in.gfid), in.addr);
        bool root = in.gfid == kRoot;
        View v = view(c.mem, in.addr, c.L.size(T::inode));
        const ListRules& lr =
            root && l == GfItable::kActive ? rules[GfItable::kNumLists] : rules[l];
        for (const auto& rule : lr.rules) {
          ExprValue ok = v ? rule.e->eval(c.mem, v.p, in.addr) : ExprValue{};
          if (v && ok.kind != ExprValue::Kind::kError && ok.truthy()) continue;
          add("invariant", in.addr,
              fmt::format(
                  "{}: on {}: {} ({}) does not hold: ref={} in_lru={} in_invalidate={} "
                  "fd-count={} active-fd-count={} fds listed {}{}",
                  who, itable_list_name(l), rule.name, rule.text, in.ref, in.in_lru_list,
                  in.in_invalidate_list, in.fd_count, in.active_fd_count, in.fds.size(),
                  ok.kind == ExprValue::Kind::kError ? " (not evaluated: " + ok.s + ")" : ""));
        }
        int64_t sum = 0;
        for (auto [x, r] : in.ref_by_xl) sum += r;
        if (!root && sum != in.ref)
          add("invariant", in.addr,
              fmt::format("{}: ref={} but the per-xlator refs sum to {}", who, in.ref, sum));
        // Every live fd and every child dentry holds one ref, and so does
        // each block of an operation in flight that points at the inode;
        // the rest is held by xlator caches, or leaked.
        uint64_t explained = in.fds.size() + in.child_dentries + in.in_flight.size();
        if (!root && in.ref > explained) {
          std::string holders;
          for (auto [x, r] : in.ref_by_xl)
            if (r > 0)
              holders += fmt::format("{}{}={}", holders.empty() ? "" : ", ",
                                     x == SIZE_MAX ? std::string("?") : c.r.xlators[x].name, r);
          add("unexplained-refs", in.addr,
              fmt::format("{}: ref={} but fds ({}), child dentries ({}) and operations in flight "
                          "({}) explain {}: {} extra; held by {}{}",
                          who, in.ref, in.fds.size(), in.child_dentries, in.in_flight.size(),
                          explained, in.ref - explained, holders.empty() ? "no xlator" : holders,
                          in.in_flight.empty() ? in_flight : "; in flight: " + flight_text(in)));
        } else if (!root && !in.in_flight.empty()) {
          add("in-flight", in.addr,
              fmt::format("{}: ref={} = fds ({}) + child dentries ({}) + in flight ({}): {}", who,
                          in.ref, in.fds.size(), in.child_dentries, in.in_flight.size(),
                          flight_text(in)));
        }
      }
    }
  }
}

}  // namespace lr::gf
