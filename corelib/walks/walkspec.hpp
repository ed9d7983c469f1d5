// A complete walk request as a user states it (type, head, link kind,
// refcount field, shown fields, filter) and its result: the objects with
// their values, refcount histogram, and how the walk ended. Shared by the
// CLI and the crash extension so both run the same code path.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "corelib/blocks/refindex.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/filter.hpp"
#include "corelib/objects/objects.hpp"
#include "corelib/objects/walkers.hpp"

namespace lr {

struct WalkedObject;

struct WalkSpec {
  std::string type;                    // "struct node"
  std::string head;                    // SYMBOL | SYMBOL@mod | *SYMBOL | ADDR
  const Variable* head_var = nullptr;  // instead of `head`: an address and its type (borrowed)
  enum class Link {
    kNone,
    kNext,
    kList,
    kHlist,
    kArray,
    kPointerArray,
    kTree,
    kXarray,
    kContainer,  // a registered container kind (`container`); member: one of its members
    kAddresses   // `addresses`: objects another enumeration found (slab objects)
  } link = Link::kNone;
  // kAddresses: the objects (borrowed, in order), what found them (the
  // walk's mode: "slab") and where (`head` names it, `addresses_at` is its
  // address: the kmem_cache).
  const std::vector<uint64_t>* addresses = nullptr;
  std::string addresses_mode;
  uint64_t addresses_at = 0;
  std::string container;   // kContainer: the registered kind's name (container_kinds.hpp)
  std::string member;      // next field / list_head / hlist_node / tree node member
  uint64_t count = 0;      // arrays: elements (0 = from the head symbol's type)
  std::string count_from;  // arrays: an integer variable holding the count ("tbl.nr")
  uint64_t buckets = 0;    // hash tables: buckets (0 = from type, or not a table)
  // count and buckets were read from the dump (a profile's count = "x.n"):
  // one past the head's array is damage (a warning for a nested walk), not
  // a usage error.
  bool amounts_from_memory = false;
  std::string refcount;  // "" = none
  std::vector<std::string> show;
  // show[i] for i >= scalar_from are keys (grouping, sorting): refcount
  // wrappers (atomic_t, kref, ...) are descended to their integer, and any
  // other struct or union is refused (kInvalidArgument) instead of giving
  // one "{...}" value for every object.
  size_t scalar_from = SIZE_MAX;
  std::string where;
  std::string where_name = "where";  // how messages name it ("--where" for the CLI)
  WalkLimits limits;
  bool keep_values = true;  // false: only counts and histogram (bench, summaries)
  // false: only walk (addresses in WalkReport::walk; no per-object reads,
  // refcount, where or shown fields), for callers that judge the objects
  // themselves (profiles).
  bool evaluate = true;
  // With keep_values: each matching object is handed to `on_object` as the
  // walk finds it (valid only during the call; the walk's interrupt flag
  // stops it) instead of being kept in WalkReport::objects, so output streams
  // and memory stays flat however many objects there are.
  void (*on_object)(void* ctx, const WalkedObject& o) = nullptr;
  void* on_object_ctx = nullptr;
  // Reconcile each object's refcount with the references found in memory
  // (borrowed; null: not reconciled).
  const RefSource* reconcile = nullptr;
};

struct WalkedObject {
  uint64_t addr = 0;
  bool has_refcount = false;
  int64_t refcount = 0;
  std::vector<FieldValue> fields;  // in WalkSpec::show order
  // With WalkSpec::reconcile: the references found into the object as a
  // refcount counts them (holders.hpp: a list, hlist or tree membership is
  // one; -1: not indexed, not a heap object), the words behind them, and the
  // first few words.
  int64_t inbound = -1;
  int64_t inbound_words = -1;
  // Of `inbound`'s words, those in blocks nothing live reaches (leaked):
  // they hold the object only as long as the leak does.
  int64_t from_leaked = 0;
  std::vector<Ref> referrers;  // at most kMaxReferrers
  static constexpr size_t kMaxReferrers = 8;
};

struct WalkReport {
  std::string type_name;
  uint64_t type_size = 0;
  uint64_t head_addr = 0;
  std::string mode;  // "list", "hlist", "chain", "array", "pointer-array", "hash:<kind>",
                     // "rbtree", "avltree", "tree", "xarray", or a container kind's
  WalkResult walk;   // addresses and how the walk stopped
  std::vector<WalkedObject> objects;  // those matching `where` (empty if !keep_values or
                                      // streamed to WalkSpec::on_object)
  uint64_t visited = 0, matched = 0;
  uint64_t unreadable_objects = 0;        // objects whose bytes could not be read
  std::map<int64_t, uint64_t> histogram;  // refcount -> matched objects
  uint64_t walk_ns = 0;                   // walking and evaluating every object (one fused pass)
  // With WalkSpec::reconcile: matched objects whose refcount exceeds the
  // references found in memory (counted references nobody holds), and
  // objects the index does not cover (not in a heap block).
  uint64_t over_referenced = 0, not_indexed = 0;
  // With WalkSpec::reconcile: objects whose refcount is 0 (or below) though
  // references to them were found (freed, or about to be, while still
  // held: a use after free in waiting), and objects referenced from leaked
  // blocks.
  uint64_t zero_referenced = 0, leaked_held = 0;
  std::vector<std::string> warnings;
};

// Whether `member` (of type `member_type`, inside `t`) can link a walk of
// kind `link`: a list_head shape for lists, an hlist_node shape for hlists,
// a pointer to `t` for chains. kInvalidArgument naming both types otherwise.
Result<void> check_link_member(const Type* t, WalkSpec::Link link, const std::string& member,
                               const Type* member_type);

// What run_walk checks before its first read of the structure: the type,
// the head and the mode's contract for it (a typed head with address 0 is
// checked without reading), the link member, the amounts. For callers that
// check every walk before printing anything (profiles).
Result<void> check_walk(Program& prog, const WalkSpec& spec);

// Validates the spec against the program's types and runs it.
Result<WalkReport> run_walk(Program& prog, const WalkSpec& spec);

}  // namespace lr
