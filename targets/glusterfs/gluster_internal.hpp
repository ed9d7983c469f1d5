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
#include "targets/glusterfs/glusterfs_fields.hpp"  // generated from glusterfs.toml

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

// Offsets and sizes of every type and member glusterfs.toml declares
// ([types.NAME] require and exprs), resolved once: the names come from the
// TOML (scripts/gen-fields writes them as the enums T, F and K), so no member
// name is restated here and a member the TOML drops is a compile error.
using fields::F;
using fields::K;
using fields::T;
struct Layout {
  uint64_t sizes[fields::kTCount] = {};
  uint64_t offs[fields::kFCount] = {};
  uint32_t consts[fields::kKCount] = {};
  GfHeaderLayout hdr;  // struct mem_header (user data follows it), pooled_obj_hdr_t
  uint64_t operator[](F f) const { return offs[static_cast<int>(f)]; }
  uint64_t size(T t) const { return sizes[static_cast<int>(t)]; }
  uint32_t constant(K k) const { return consts[static_cast<int>(k)]; }
};
// The inode table's four inode lists and their sizes, in GfItable's order.
inline constexpr F kItableLists[4] = {F::itable_active, F::itable_lru, F::itable_purge,
                                      F::itable_invalidate};
inline constexpr F kItableListSizes[4] = {F::itable_active_size, F::itable_lru_size,
                                          F::itable_purge_size, F::itable_invalidate_size};
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
// Every ctx's iobuf pool: each arena on its all_arenas list.
void read_iobufs(Ctx& c);
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
