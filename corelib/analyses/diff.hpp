// Two moments of one program, compared: what grew. A snapshot is a set of
// counted classes (a program's pool, an accounted allocation type, a list of
// a table, heap chunks of one size) and of objects with an identity that
// survives between dumps (a file id; an address plus a kind otherwise), each
// with its refcount and holders. Snapshots come from the targets (a
// program's own dump text, a kernel dump) and from a core's heap;
// diff_snapshots compares two.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "corelib/analyses/account.hpp"
#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"

namespace lr {

struct SnapClass {
  std::string kind;    // "mempool", "memusage", "itable", "heap"
  std::string name;    // "inode_t@fuse", "fuse gf_common_mt_char", "fuse active", "48"
  int64_t count = 0;   // objects (active-count, num_allocs, list size, chunks)
  int64_t bytes = -1;  // -1 when the source does not say (non-DEBUG memusage)
};

struct SnapObject {
  std::string key;  // identity: "gfid:8-4-4-4-12" or "inode@0x..." / "dict@0x..."
  std::string cls;  // where it is: "itable fuse active"
  int64_t refcount = 0;
  std::string held;  // holders as the source names them ("fuse=2, gv0-client-0=-1")
  // The walk that found it ("dentry", "file", "module"); "" for objects
  // whose source is read whole or not at all (a statedump's).
  std::string kind;
};

struct Snapshot {
  std::string source;     // the file it was read from
  std::string kind;       // "statedump" or "core"
  std::string build_id;   // a core's executable's ("" for statedumps, or none)
  double time = 0;        // when it was taken (seconds since 1970, UTC); 0 unknown
  std::string time_from;  // where `time` came from: "DUMP-START-TIME", "file mtime", ...
  std::vector<SnapClass> classes;
  std::vector<SnapObject> objects;
  std::vector<std::string> warnings;
  // Kinds of classes and objects this snapshot could not count whole (a heap
  // or a kernel list that could not be walked, or only in part): unknown
  // there, never zero or a part taken for the whole.
  std::vector<std::string> unknown_kinds;
  // Kinds whose classes are listed only from a count up (the largest of
  // many: a program's containers by what names them): a class of one absent
  // from a snapshot was below the floor there, not gone.
  std::map<std::string, int64_t> floors;
  bool knows(const std::string& kind) const;
};

// No count or byte total in one dump passes 2^48 (256 TiB, an address
// space): a number past it in a dump's text or a saved snapshot is damage.
constexpr int64_t kMaxSnapCount = int64_t{1} << 48;

// Refuses a snapshot read from text whose classes' counts or bytes (each,
// and summed over a class named twice, as diff_snapshots and trend_of sum
// them) are negative or past kMaxSnapCount. The readers call it, so the
// sums below stay far from int64's end.
Result<void> check_snapshot_counts(const Snapshot& s);

// Adds the in-use chunks of `heap` as "heap" classes: one per usable size up
// to 1024 bytes, then one per power-of-two range ("1025-2048"), and mmapped
// chunks as "mmapped".
void add_heap_classes(Snapshot& s, const HeapWalk& heap);

// The account's categories (account.hpp) as "account" classes, one per
// category with its blocks and bytes.
void add_account_classes(Snapshot& s, const Account& a);

// What the account's classes say of the heap's growth from `older` to
// `newer`, by the category that grew most: "leak" (leaked bytes: blocks
// nothing reaches), "held" (live bytes: still reached), "fragmentation"
// (free bytes inside the allocator grew while in-use bytes stayed within a
// quarter of that), "mixed"; "" with no text when either side has no
// account or the heap did not grow by 1 MiB and 1 % of what it was.
struct GrowthVerdict {
  std::string kind, text;
};
GrowthVerdict growth_verdict(const Snapshot& older, const Snapshot& newer);

// Identities are unique within a snapshot: an object whose key is already
// there is told apart by its class (" in CLASS").
void unique_keys(Snapshot& s);

struct ClassDelta {
  std::string kind, name;
  int64_t before = 0, after = 0;                // counts; 0 when absent on that side
  int64_t before_bytes = -1, after_bytes = -1;  // -1 unknown
  bool in_old = false, in_new = false;
  int64_t delta() const { return after - before; }
};

struct ObjectDelta {
  enum class Change { kNew, kGone, kClimbed, kDropped };
  Change change = Change::kNew;
  std::string key, cls;
  int64_t before = 0, after = 0;  // refcounts (0 on the side it is absent from)
  std::string held;               // holders in the newer snapshot (older when gone)
};
const char* change_name(ObjectDelta::Change c);  // "new", "gone", "climbed", "dropped"

struct SnapDiff {
  // Every class of either side, most grown first (by count delta, then
  // ratio), unchanged ones last.
  std::vector<ClassDelta> classes;
  // Objects that appeared, went or changed refcount; objects whose refcount
  // is the same on both sides are not listed.
  std::vector<ObjectDelta> objects;
  uint64_t objects_same = 0;
  // Objects of a kind one side could not list whole: neither new nor gone.
  uint64_t objects_unknown = 0;
  // Classes of a kind one side could not count whole: no delta is made up.
  std::vector<ClassDelta> unknown;
};

SnapDiff diff_snapshots(const Snapshot& older, const Snapshot& newer);

// One class over a series of snapshots.
struct ClassSeries {
  std::string kind, name;
  std::vector<int64_t> counts;  // per snapshot; 0 where the class is absent
  double slope = 0;             // least-squares growth per hour (per snapshot without times)
  bool only_grows = false;      // never fell, rose overall, over at least 3 snapshots
};

struct TrendReport {
  bool per_hour = false;      // slopes per hour (every snapshot has a distinct time)
  std::vector<double> times;  // as given, 0 unknown
  // Every class of any snapshot, steepest growth first; those of a kind some
  // snapshot could not count whole are left out (no slope or verdict from a
  // part), by kind with how many snapshots lacked it.
  std::vector<ClassSeries> classes;
  std::map<std::string, size_t> unknown_kinds;
};

// `snaps` in the order they were taken (the caller sorts them by time).
TrendReport trend_of(const std::vector<Snapshot>& snaps);

}  // namespace lr
