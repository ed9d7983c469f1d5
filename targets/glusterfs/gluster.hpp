// GlusterFS 10.x profile: everything a statedump shows (mem-pools, memory
// accounting, inode tables, fds, dicts, clients) read from a core, plus the
// invariants libglusterfs maintains. Layouts come from DWARF: real debuginfo
// when present, else a types file synthesized from the installed headers
// (gluster_types.hpp), validated against sizes the core itself records.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "corelib/analyses/account.hpp"
#include "corelib/analyses/correlate.hpp"
#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/program.hpp"

namespace lr {

// The built-in glusterfs profile's text (targets/glusterfs/
// glusterfs.toml, also installed): the types, members and roots these
// reports read, the types' build recipe, sets and trace probes.
std::string_view glusterfs_profile_text();

using Gfid = std::array<uint8_t, 16>;
std::string format_gfid(const Gfid& g);  // 8-4-4-4-12 lower-case hex

struct GfXlator {
  uint64_t addr = 0;
  std::string name, type;  // "gv0-client-0", "protocol/client"
  uint64_t ctx = 0, graph = 0, itable = 0, mem_acct = 0, priv = 0;
  int32_t xl_id = 0;
  bool is_root = false, is_global = false;  // ctx->root (fuse), global_xlator
};

struct GfGraph {
  uint64_t addr = 0, ctx = 0;
  int32_t id = 0, xl_count = 0;
  bool active = false;
  std::vector<size_t> xlators;  // indexes into GlusterReport::xlators, top-down
};

struct GfPool {
  uint64_t addr = 0, ctx = 0, shared = 0;
  std::string name, xl_name;
  int64_t active = 0;  // the pool's own counter (statedump active-count)
  uint64_t sizeof_type = 0, padded = 0;
  std::vector<uint64_t> live;  // live objects found in the heap (header + 40)
  int64_t type_size = -1;      // sizeof the type named `name` in the loaded types, -1 unknown
};

struct GfMemType {
  uint32_t type = 0;
  std::string typestr;       // rec[type].typestr ("" if never set)
  int64_t num_allocs = 0;    // the record's counter (statedump num_allocs)
  uint64_t live_blocks = 0;  // GF_MALLOC blocks with this (mem_acct, type) in the heap
  uint64_t live_bytes = 0;
};

struct GfMemAcct {
  size_t xlator = 0;  // index into xlators
  uint64_t addr = 0;
  uint32_t num_types = 0;
  int64_t refcnt = 0;
  std::vector<GfMemType> types;  // types with a nonzero counter or live block
};

struct GfFd {
  uint64_t addr = 0, pid = 0, inode = 0;
  int32_t flags = 0;
  int64_t refcount = 0;
  bool anonymous = false;
};

struct GfDentry {
  uint64_t addr = 0, parent = 0, name_addr = 0;
  std::string name;
};

// An operation in flight: a call stack in the ctx's call pool, with its
// frames (innermost last, as myframes lists them).
struct GfStack {
  uint64_t addr = 0, unique = 0, state = 0;
  int32_t op = 0, pid = 0;
  std::string op_name;  // "OPEN" (from glusterfs_fop_t), else the number
  std::vector<uint64_t> frames;
  std::vector<std::string> frame_xlators;  // each frame's xlator ("?" unknown)
};

// A reference an operation in flight holds: a heap block that belongs to
// the stack (its request state, a frame's local, or a block that points at
// one of its frames, like a call stub) and points at the object.
struct GfInflightRef {
  size_t stack = 0;    // index into GlusterReport::stacks
  uint64_t block = 0;  // the heap block's address
  std::string what;    // "call stub (a block of lrtest-open-behind)", "frame local of ..."
};

struct GfInode {
  uint64_t addr = 0;
  Gfid gfid{};
  int64_t nlookup = 0;
  uint32_t fd_count = 0, active_fd_count = 0, ref = 0;
  int32_t ia_type = 0;
  bool invalidate_sent = false, in_lru_list = false, in_invalidate_list = false;
  std::vector<std::pair<size_t, int32_t>>
      ref_by_xl;           // (xlator index or SIZE_MAX, ref), nonzero only
  uint64_t ctx_array = 0;  // inode->_ctx, one slot per xlator (GF_CALLOC'd)
  std::vector<GfDentry> dentries;
  std::vector<GfFd> fds;
  uint32_t child_dentries = 0;  // dentries anywhere in the table whose parent is this inode
  // Blocks of operations in flight that point at this inode: each holds one
  // reference (found when its refs are not explained otherwise).
  std::vector<GfInflightRef> in_flight;
};

struct GfItable {
  enum List { kActive, kLru, kPurge, kInvalidate, kNumLists };
  uint64_t addr = 0;
  size_t xlator = 0;  // the xlator whose ->itable this is (first found)
  std::string name;
  uint32_t dentry_hashsize = 0, inode_hashsize = 0, lru_limit = 0, ctxcount = 0;
  uint32_t sizes[kNumLists] = {};         // the table's counters
  std::vector<GfInode> lists[kNumLists];  // inodes in list order
  std::string stop[kNumLists];            // "" when the ring closed normally
};
const char* itable_list_name(int list);  // "active", "lru", "purge", "invalidate"

// An iobuf arena: one mmapped region of `page_count` buffers of
// `page_size` bytes at mem_base, each in use (its iobuf's ref > 0) or
// waiting in the arena. `active` has one entry per buffer, in address
// order; it is empty when the region does not add up or the arena's iobufs
// could not be read or did not describe it (`why` says which).
struct GfIobufArena {
  uint64_t addr = 0, mem_base = 0, arena_size = 0, page_size = 0, page_count = 0;
  int32_t active_cnt = 0, passive_cnt = 0;  // the arena's counters (statedump's)
  bool region = false;  // mem_base, arena_size and the buffers agree (and are bounded)
  std::vector<bool> active;
  std::string why;
};

struct GfDictPair {
  std::string key;
  std::string value;  // short printable rendering
  int64_t data_refcount = 0;
  int32_t data_type = 0;
};
struct GfDict {
  uint64_t addr = 0;
  int64_t refcount = 0;
  int32_t count = 0;
  std::vector<GfDictPair> pairs;
};

struct GfClient {
  int32_t index = 0;
  uint64_t addr = 0;
  int64_t bind = 0, ref = 0;
  std::string client_uid, bound_xl;
  uint64_t bound_xl_addr = 0;
  std::vector<std::pair<int32_t, GfFd>> fds;  // (slot, fd) from the server fdtable
};

struct GfFinding {
  // "invariant", "unexplained-refs", "counter-mismatch", "counter-in-flux"
  // (a thread inside the allocator), "orphan-pool"
  std::string kind;
  uint64_t addr = 0;
  std::string message;
};

struct GlusterSections {
  bool mempool = true, memusage = true, itable = true, dicts = true, clients = true, fds = true;
};

// Where this build keeps the fields of the headers GlusterFS puts before its
// blocks: GF_MALLOC's struct mem_header and a mem-pool object's
// pooled_obj_hdr_t. Offsets from the types; sizes 0 until resolved.
struct GfHeaderLayout {
  uint64_t size = 0, acct = 0, bytes = 0, type = 0, magic = 0;                 // struct mem_header
  uint64_t pooled_size = 0, pooled_magic = 0, pooled_p2 = 0, pooled_pool = 0;  // pooled_obj_hdr_t
};

struct GlusterReport {
  std::vector<uint64_t> ctxs;
  std::vector<GfGraph> graphs;
  std::vector<GfXlator> xlators;
  std::vector<GfPool> pools;
  std::vector<GfMemAcct> memacct;  // global_xlator first, then graph order
  std::vector<GfItable> itables;
  std::vector<GfIobufArena> iobuf_arenas;  // every ctx's iobuf pool's arenas
  std::vector<GfDict> dicts;
  std::vector<GfClient> clients;
  std::vector<std::pair<int32_t, GfFd>> fuse_fds;  // FUSE fdtable slots
  std::vector<GfStack> stacks;                     // operations in flight (ctx->pool)
  std::vector<GfFinding> findings;
  std::vector<std::string> warnings;
  std::vector<std::string> validated;  // "dict_t 152 == 152", what self-validation checked
  HeapStats heap;
  double heap_ms = 0, total_ms = 0;
  uint64_t pooled_live = 0, gf_blocks = 0;
  std::vector<uint64_t> dead_pooled;    // in-use chunks holding put-back pooled objects
  std::vector<uint32_t> dead_pool;      // each one's pool (index into pools)
  HeapWalk heap_walk;                   // the walk the report was built from
  GfHeaderLayout headers;               // this build's block headers (from its types)
  uint64_t dict_size = 0, fd_size = 0;  // sizeof(dict_t), sizeof(fd_t) in this build
};

// GlusterFS's objects as correlate weighs them against a trace: every inode
// of every table, its references explained by its fds, child dentries and
// operations in flight, as libglusterfs itself takes them; every live dict
// and fd, whose references the caller explains by the pointers to them in
// live memory (`scan`: each one's address and size).
struct GlusterCorrelateObjects {
  std::vector<CoreObject> objects;
  std::vector<std::pair<uint64_t, uint64_t>> scan;
};
GlusterCorrelateObjects gluster_correlate_objects(const GlusterReport& r);

// The iobuf arenas as an account's ranges: each arena's runs of buffers in
// use (live) and waiting in it (pooled), keyed by buffer size; an arena
// whose buffers could not be read is one range of unknown bytes.
std::vector<AccountRange> gluster_iobuf_ranges(const GlusterReport& r);

// What each inode table's LRU holds: inodes nothing references, kept until
// the table passes lru_limit. Each object (the inode, its ctx array, its
// dentries and their names) by address, with its table's entry in `keys`
// ("inode LRU of fuse/inode (412 inodes, lru_limit 65536)").
struct GfLruHeld {
  std::vector<std::string> keys;
  std::vector<std::pair<uint64_t, uint32_t>> objects;  // (address, index into keys)
};
GfLruHeld gluster_lru_held(const GlusterReport& r);

// What GlusterFS made a heap block for, from a report of the same core:
// "dict_t (pool, fuse)" for a live pooled object, "gf_common_mt_char
// (GF_MALLOC, gv0-client-0)" for an accounted allocation; "" for a block
// GlusterFS did not make this way (or whose header is damaged). Borrows
// `r` and `mem`: keep both alive while the namer is used.
class GfBlockNamer {
 public:
  GfBlockNamer(const GlusterReport& r, const Memory& mem);
  std::string name(const HeapChunk& c) const;
  // The same in parts: the type ("dict_t", "gf_common_mt_char", "type 7"),
  // how GlusterFS made it ("pool", "GF_MALLOC") and its xlator's name; all
  // empty when name() is "".
  struct Parts {
    std::string type, how, xlator;
  };
  Parts parts(const HeapChunk& c) const;

 private:
  const GlusterReport& r_;
  const Memory& mem_;
  std::unordered_map<uint64_t, size_t> pooled_;  // object (chunk + 40) -> pool
  std::unordered_map<uint64_t, size_t> dead_;    // put-back object's chunk -> pool
  std::unordered_map<uint64_t, size_t> acct_;    // mem_acct address -> memacct index
};

// Reads the GlusterFS state of `prog`. Types must be resolvable through
// prog.types() (real debuginfo, or a types module added by the caller).
// kNotFound: no libglusterfs or no ctx in the image. kBadFormat: the types
// do not match the core (the message says which recorded size disagrees).
Result<GlusterReport> analyze_gluster(Program& prog, const GlusterSections& sections);

}  // namespace lr
