// What refs, leaks and account share: a process core opened with its heap
// and reference index, and each heap block's state (live, leaked, free in a
// GlusterFS mem-pool).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cmd_heap.hpp"
#include "common.hpp"
#include "corelib/analyses/account.hpp"
#include "refs_names.hpp"

namespace lrcli {

struct Opened {
  std::unique_ptr<lr::Program> prog;
  GlusterNames gf;  // GlusterFS: the report whose heap walk the index numbers
  CoreIndex ci;
  std::vector<std::string> warnings;  // the index's, and why blocks are not named
};

// The core, its heap and the index (a progress line on a terminal). In a
// GlusterFS process the objects put back in mem-pools are not scanned: what
// they still point to is not kept alive by them. `before` (may be empty)
// runs on the opened program before the index is built: arguments that
// need the core fail fast.
// `gluster_itables`: GlusterFS's inode tables are read as well.
lr::Result<Opened> open_indexed(const Common& c,
                                const std::function<lr::Result<void>(lr::Program&)>& before = {},
                                bool gluster_itables = false);

// The objects of `profile`'s sets (all, or `sets`), when a profile is
// named: the profile found, checked against the program and its types
// bound first.
lr::Result<void> load_known_objects(lr::Program& prog, const std::string& profile,
                                    const std::vector<std::string>& sets, KnownObjects* known);

// Per block: leaked (bit 0), referenced by something (bit 1), or free in a
// GlusterFS mem-pool (4: neither live nor leaked); 0 for a live block. And
// each leaked block's type: by its vtable or GlusterFS's pool/header first,
// then through typed pointers between leaked blocks. One byte per block.
constexpr uint8_t kLeaked = 1, kRefd = 2, kPoolFree = 4;
struct LeakSet {
  std::vector<uint8_t> state;
  uint64_t pool_free = 0;
};
LeakSet find_leaked(const lr::RefIndex& ix, const GlusterNames& gf, RefNamer& names);

// Each in-use block's class for the account (pooled, leaked, live).
std::vector<lr::ChunkClass> chunk_classes(const Opened& o, const LeakSet& ls);

// The core's account without a breakdown (the categories' sums), for the
// snapshots diff, trend and batch compare: the program's heap `heap`
// indexed (leaks' reachability), a GlusterFS process's own walk instead.
lr::Result<lr::Account> plain_account(lr::Program& prog, const lr::HeapWalk& heap);

}  // namespace lrcli
