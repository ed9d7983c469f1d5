// Shared by the GlusterFS profile's translation units: field offsets
// resolved once from DWARF, whole-struct reads, bounded list_head rings.
#pragma once

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "corelib/debuginfo/types.hpp"
#include "corelib/objects/objects.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/profiles/profile.hpp"
#include "corelib/profiles/profile_bind.hpp"
#include "targets/glusterfs/gluster.hpp"

namespace lr::gf {

// A struct copied (or mapped) whole: one read per object, fields by offset.
// Reads outside the struct yield 0: offsets come from DWARF, which may be a
// hostile types file declaring a field narrower than we read it.
struct View {
  const uint8_t* p = nullptr;
  uint64_t size = 0;
  std::vector<uint8_t> own;
  explicit operator bool() const { return p != nullptr; }
  template <class T>
  T get(uint64_t off) const {
    T v{};
    if (off <= size && size - off >= sizeof v) std::memcpy(&v, p + off, sizeof v);
    return v;
  }
  // `n` bytes at `off`, or nullptr when they do not lie inside the struct.
  const uint8_t* bytes(uint64_t off, uint64_t n) const {
    return off <= size && size - off >= n ? p + off : nullptr;
  }
  uint64_t u64(uint64_t off) const { return get<uint64_t>(off); }
  int64_t i64(uint64_t off) const { return get<int64_t>(off); }
  uint32_t u32(uint64_t off) const { return get<uint32_t>(off); }
  int32_t i32(uint64_t off) const { return get<int32_t>(off); }
  uint8_t u8(uint64_t off) const { return get<uint8_t>(off); }
};
// The object's bytes through object_bytes (mapped, or copied when it spans
// segments); an empty View when unreadable or larger than kMaxObjectSize.
View view(const Memory& m, uint64_t addr, uint64_t size);

// Offsets and sizes of everything the profile reads, resolved once.
struct Layout {
  uint64_t ctx_size, ctx_graphs, ctx_active, ctx_root, ctx_mempool_list, ctx_clienttable;
  uint64_t graph_size, graph_list, graph_first, graph_top, graph_xl_count, graph_id;
  uint64_t xl_size, xl_name, xl_type, xl_next, xl_children, xl_ctx, xl_graph, xl_itable, xl_private,
      xl_mem_acct, xl_xl_id;
  uint64_t xll_size, xll_xlator, xll_next;
  uint64_t pool_size, pool_sizeof_type, pool_name, pool_xl_name, pool_active, pool_owner, pool_ctx,
      pool_pool;
  uint64_t shared_p2;
  uint64_t acct_num_types, acct_refcnt, acct_rec, rec_size, rec_typestr, rec_num_allocs;
  GfHeaderLayout hdr;  // struct mem_header (user data follows it), pooled_obj_hdr_t
  // mem_header.type of a mem-pool and of an fdtable (gf_common_mem_types_).
  uint32_t mt_mem_pool, mt_fdtable;
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
  uint64_t ctx_pool, cp_all_frames, cs_size, cs_all_frames, cs_state, cs_myframes, cs_unique, cs_op,
      cs_pid, cf_size, cf_frames, cf_local, cf_this;
};
// The built-in glusterfs profile (glusterfs.toml beside this file), parsed
// once; an error only if the built-in text is broken (the tests parse it).
Result<const Profile*> builtin_profile();
// Offsets through `bind` (the built-in profile bound to a program's types):
// kNotFound naming the first type or member the types lack.
Result<Layout> resolve_layout(ProfileBinder& bind);

std::string cstr(const Memory& m, uint64_t addr, size_t max = 256);

// Macros in mem-pool.h, so not in any DWARF: constants here.
constexpr uint64_t kPoolMagic = 0xCAFEBABE, kHeaderMagic = 0xCAFEBABE;
constexpr uint64_t kPoolInvalidMagic = 0xDEADC0DE;  // GF_MEM_INVALID_MAGIC, set by mem_put()

// A GF_MALLOC block: struct mem_header (laid out as `L` says) at `chunk`, the
// payload after it, then the trailer bytes BA AD F0 0D. True only when the
// magic matches, the recorded size fits in the chunk's `room` bytes together
// with header and trailer, and the trailer is there; `w` caches the mapping
// between calls.
struct GfHeader {
  uint64_t acct = 0, size = 0;
  uint32_t type = 0;
};
bool gf_header(const Memory& m, Memory::Window& w, uint64_t chunk, uint64_t room,
               const GfHeaderLayout& L, GfHeader* out);

// The model built so far, shared by the passes.
struct Ctx {
  const Memory& mem;
  Program& prog;
  const Layout& L;
  GlusterReport& r;
  std::unordered_map<uint64_t, size_t> xl_index;  // xlator address -> index
  // Nodes all list walks of one analysis may visit together: a hostile core
  // can point every inode's fd_list into one long chain.
  uint64_t budget = uint64_t{1} << 26;
  ProfileBinder* bind = nullptr;  // the built-in profile on this program (invariants)

  // Containers on the list_head ring at `head` / on the NULL-terminated
  // chain from `first`, through the engine's walkers (cycle cut, prev links
  // checked), at most `limit` and what is left of the budget. `stop` is ""
  // when the walk ended normally, else why it stopped or what was broken.
  std::vector<uint64_t> list(uint64_t head, uint64_t member_off, uint64_t limit, std::string* stop);
  std::vector<uint64_t> chain(uint64_t first, uint64_t next_off, uint64_t limit, std::string* stop);
};

void read_itables(Ctx& c);
void read_dicts(Ctx& c);
void read_clients(Ctx& c, uint64_t root_private);
void check_invariants(Ctx& c);
// The call pool's stacks (every ctx), then, for inodes whose references
// fds and child dentries do not explain, the blocks of those operations
// that point at them (through a reference index of the core, built only
// then).
void read_stacks(Ctx& c);
void attribute_in_flight(Ctx& c);

}  // namespace lr::gf
