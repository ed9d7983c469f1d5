// Shared by the GlusterFS profile's translation units: field offsets
// resolved once from DWARF, whole-struct reads, bounded list_head rings.
#pragma once

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "leakref/gluster.hpp"
#include "leakref/types.hpp"

namespace lr::gf {

// A struct copied (or mapped) whole: one read per object, fields by offset.
struct View {
  const uint8_t* p = nullptr;
  std::vector<uint8_t> own;
  explicit operator bool() const { return p != nullptr; }
  template <class T>
  T get(uint64_t off) const {
    T v;
    std::memcpy(&v, p + off, sizeof v);
    return v;
  }
  uint64_t u64(uint64_t off) const { return get<uint64_t>(off); }
  int64_t i64(uint64_t off) const { return get<int64_t>(off); }
  uint32_t u32(uint64_t off) const { return get<uint32_t>(off); }
  int32_t i32(uint64_t off) const { return get<int32_t>(off); }
  uint8_t u8(uint64_t off) const { return p[off]; }
};
View view(const Memory& m, uint64_t addr, uint64_t size);

// Offsets and sizes of everything the profile reads, resolved once.
struct Layout {
  uint64_t ctx_size, ctx_graphs, ctx_active, ctx_root, ctx_mempool_list, ctx_clienttable;
  uint64_t graph_list, graph_first, graph_top, graph_xl_count, graph_id;
  uint64_t xl_size, xl_name, xl_type, xl_next, xl_children, xl_ctx, xl_graph, xl_itable, xl_private,
      xl_mem_acct, xl_xl_id;
  uint64_t xll_xlator, xll_next;
  uint64_t pool_size, pool_sizeof_type, pool_name, pool_xl_name, pool_active, pool_owner, pool_ctx,
      pool_pool;
  uint64_t shared_p2;
  uint64_t acct_num_types, acct_refcnt, acct_rec, rec_size, rec_typestr, rec_num_allocs;
  uint64_t hdr_size;  // sizeof(struct mem_header): user data follows it
  uint64_t it_size, it_dentry_hashsize, it_inode_hashsize, it_name, it_lru_limit, it_ctxcount;
  uint64_t it_list[4], it_list_size[4];
  uint64_t in_size, in_gfid, in_nlookup, in_fd_count, in_active_fd_count, in_ref, in_ia_type,
      in_fd_list, in_dentry_list, in_list, in_ctx, in_in_invalidate, in_invalidate_sent, in_in_lru;
  uint64_t ictx_size, ictx_key, ictx_ref;
  uint64_t de_size, de_inode_list, de_name, de_parent;
  uint64_t fd_size, fd_pid, fd_flags, fd_refcount, fd_inode_list, fd_inode, fd_anonymous;
  uint64_t dict_size, dict_count, dict_refcount, dict_members_list;
  uint64_t pair_size, pair_next, pair_value, pair_key;
  uint64_t data_size, data_data, data_refcount, data_type, data_len;
  uint64_t ct_size, ct_max_clients, ct_entries, ce_size, ce_client, ce_next_free;
  uint64_t cl_size, cl_scratch_count, cl_scratch_ctx, cl_bind, cl_count, cl_bound_xl, cl_this,
      cl_client_uid;
  uint64_t cctx_size, cctx_key, cctx_value;
  uint64_t sctx_fdtable;
  uint64_t ft_size, ft_max_fds, ft_entries, fe_size, fe_fd, fe_next_free;
};
// kNotFound naming the first type or member the loaded DWARF lacks.
Result<Layout> resolve_layout(TypeRegistry& types);

// Node addresses of a list_head ring starting at `head` (head excluded), in
// order. Stops at `limit` nodes, on a revisited node or an unreadable link;
// `stop` then says why ("" when the ring closed).
std::vector<uint64_t> ring(const Memory& m, uint64_t head, uint64_t limit, std::string* stop);

std::string cstr(const Memory& m, uint64_t addr, size_t max = 256);

constexpr uint64_t kPoolMagic = 0xCAFEBABE, kHeaderMagic = 0xCAFEBABE;
constexpr uint64_t kPooledHeader = 40;               // sizeof(pooled_obj_hdr_t) in 10.x
constexpr uint32_t kMtMemPool = 30, kMtFdtable = 5;  // gf_common_mem_types_ in 10.3

// The model built so far, shared by the passes.
struct Ctx {
  const Memory& mem;
  Program& prog;
  const Layout& L;
  GlusterReport& r;
  std::unordered_map<uint64_t, size_t> xl_index;  // xlator address -> index
};

void read_itables(Ctx& c);
void read_dicts(Ctx& c);
void read_clients(Ctx& c, uint64_t root_private);
void check_invariants(Ctx& c);

}  // namespace lr::gf
