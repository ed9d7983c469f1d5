// Profiles: what a program or kernel subsystem *is*, as data a user can
// write, read and share (TOML; see README "Profiles"). A profile declares
// types (members required, optional or alternatives), object sets (walks,
// possibly nested under another set's objects), refcounts, labels, holders
// (what each holds one reference) and invariants (expressions of expr.hpp).
// Loading checks a profile without a target; running binds it to a
// program's DWARF and streams every object with its verdict to a sink.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/blocks/refindex.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/objects/objects.hpp"
#include "corelib/objects/walkers.hpp"
#include "corelib/walks/walkspec.hpp"

namespace lr {

// The profile format this leakref reads (the `format` key). A profile with a
// higher number is refused, naming both; additions that old readers could
// ignore still bump it, since unknown keys are errors (typos must not pass).
// Format 2 added [types.X] `enums` and `exprs`, and [symbols]; format 3,
// [[probe]]s on a type (`type` and `refcount` instead of a set: objects no
// set can walk to, like a program's dictionaries). A profile that says an older
// format and uses what a later one added is refused, so it stays readable
// by the readers of the format it says.
constexpr int kProfileFormat = 4;

struct ProfileType {
  std::string name;                           // the key in [types]
  std::string c;                              // "struct ldlm_resource"
  std::vector<std::string> require;           // members; "a|b" = one of them
  std::vector<std::string> optional;          // members whose absence disables what uses them
  std::map<std::string, std::string> fields;  // alias -> "a|b|c" (first present wins)
  std::map<std::string, std::string> lists;   // list member -> "TYPE.link_member"
  // "malloc": every object of the type is a whole malloc allocation,
  // so its chunk's usable size must fit the type's size (the self-check of
  // types built from headers); "slab:CACHE" (format 2): every object is one
  // of a kernel slab cache's (the kernel reports find unheld objects there);
  // "" = not said.
  std::string allocation;
  // Enum types ("enum pageflags") whose enumerators the type's expressions
  // may name bare; one the target lacks is skipped (format 2).
  std::vector<std::string> enums;
  // Named expressions on an object of the type, each a list of alternatives:
  // the first that compiles on the target is the one used, so one profile
  // spans versions whose fields or constants differ (format 2).
  std::map<std::string, std::vector<std::string>> exprs;
};

struct ProfileHolder {
  std::string name;
  std::string count;  // an expression on the object (references it holds)
  std::string from;   // or: each object of set `from` ...
  std::string field;  // ... whose pointer `field` points at the object holds one
};

struct ProfileInvariant {
  std::string name;
  std::string expr;  // must hold for every object of the set
};

struct ProfileSet {
  std::string name;
  std::string type;     // a [types] name, or a C type ("struct x")
  std::string parent;   // walked once per object of this set ("" = from a symbol)
  std::string head;     // SYMBOL/ADDR expression; with a parent: a member path of it
  std::string link;     // list, hlist, next, array, pointer-array, tree, xarray
  std::string member;   // the link member (list, hlist, next, tree)
  std::string buckets;  // hash tables: a number, or an expression on the parent
  std::string count;    // arrays: a number, or an expression on the parent / a symbol
  std::string refcount;
  std::string where;
  std::string key;  // identity across snapshots (a member path)
  // Format 3, instead of `head`: a root no symbol names (a stripped
  // static), found by content — the one place in module `find_module`'s
  // writable data where `find_where` holds for type `find_type` (the set's
  // type when empty; a hash table's for link hashtable): `find_count`
  // objects of it in a row there (an array), or with `find_pointer` the
  // object a pointer word there points at. `find_any`, when given, must
  // hold for at least one object of the run: a whole-array condition
  // ("some lane is not empty") that tells a populated array from an empty
  // one laid out the same beside it.
  std::string find_module, find_where, find_type, find_any;
  bool find_pointer = false;
  uint64_t find_count = 1;
  std::vector<std::string> label;
  std::vector<ProfileHolder> holders;
  std::vector<ProfileInvariant> invariants;
  uint64_t limit = 10'000'000;  // objects per walk
};

// A function `leakref-trace` probes: each call takes (ref), drops (unref),
// creates (new) or frees (free) a reference on an object of set `set`, whose
// type and refcount give the offset read at entry (from DWARF, never written
// in the profile).
struct ProfileProbe {
  std::string function;  // NAME or NAME@MODULE
  std::string op;        // ref, unref, new, free
  std::string set;       // the objects' set, or (format 3) ...
  std::string type;      // ... a [types] name or C type, and
  std::string refcount;  // ... its refcount path
  // What the trace calls the objects (matched against a core's objects by
  // correlate): the set's name, or the type's.
  const std::string& kind() const { return set.empty() ? type : set; }
};

struct Profile {
  int format = kProfileFormat;
  std::string name, description;
  std::string source;  // the file it came from (messages)
  std::vector<std::string> match_executables, match_modules;
  bool match_kernel = false;
  std::vector<ProfileType> types;
  std::vector<ProfileSet> sets;  // in an order where every dependency comes first
  std::vector<ProfileProbe> probes;
  // [build]: how to make types for a build without debuginfo (leakref types
  // build): headers in order, include directories (relative ones are
  // relative to the profile file's directory), defines NAME[=VALUE].
  std::vector<std::string> build_headers, build_include, build_defines;
  std::string build_note;  // what to do when the build fails (headers to fetch)
  // [symbols]: name -> "a|b" alternatives (the first the target has is the
  // one meant), for symbols renamed between versions (format 2).
  std::map<std::string, std::string> symbols;
};

// Parses and checks a profile's text (no target needed): syntax, unknown
// keys, references between sets and types, dependency cycles, expression
// syntax. kBadFormat / kInvalidArgument with "SOURCE: what" in the message.
Result<Profile> parse_profile(std::string_view text, const std::string& source);
// Reads a regular file of at most 1 MiB (never blocks on a FIFO) and parses it.
Result<Profile> load_profile(const std::string& path);
// Finds a profile by name in `dirs` (NAME.toml) when `what` is not a path.
Result<Profile> find_profile(const std::string& what, const std::vector<std::string>& dirs);

// ---- running ------------------------------------------------------------------

struct ProfileObject {
  const ProfileSet* set = nullptr;
  uint64_t addr = 0;
  uint64_t parent = 0;  // the parent set's object it was found under (0: none)
  bool has_refcount = false;
  int64_t refcount = 0;
  bool count_plausible = true;     // false: no program reaches it (verdict "error", says why)
  std::vector<FieldValue> labels;  // in set->label order
  FieldValue key;                  // when set->key is given
  std::vector<int64_t> holders;    // in set->holders order (active ones)
  int64_t held = 0;                // their sum
  bool held_known = true;          // false: the sum does not fit (damage; verdict "error")
  // "ok", "extra" (refcount above what holders explain), "missing" (below),
  // "error" (something could not be evaluated), "" (not judged: no refcount
  // or no holders)
  std::string verdict;
  std::vector<std::string> violations;  // invariant names that do not hold
  std::string error;                    // with verdict "error"
  // With ProfileRunOptions::reconcile: the references found in live memory
  // as a refcount counts them (holders.hpp: a list, hlist or tree
  // membership is one; -1: the object is in no heap block, not reconciled),
  // the words behind them and the first kMaxReferrers of those, and how many
  // counted references nobody holds (refcount above the references found).
  int64_t inbound = -1;
  int64_t inbound_words = -1;
  std::vector<Ref> referrers;
  int64_t over = 0;
  int64_t from_leaked = 0;  // of the words found, those in leaked blocks
  static constexpr size_t kMaxReferrers = 16;
};

struct ProfileSetSummary {
  const ProfileSet* set = nullptr;
  std::string type_name;       // resolved C type
  const Type* type = nullptr;  // the same, owned by the program's type registry
  std::string mode;            // the walk kind ("list", "hash:hlist", ...)
  uint64_t walks = 0, objects = 0, matched = 0;
  uint64_t flagged_extra = 0, flagged_missing = 0, errors = 0;
  // With ProfileRunOptions::reconcile: objects whose refcount is above the
  // references found, and objects in no heap block (not reconciled).
  uint64_t over_referenced = 0, not_indexed = 0;
  uint64_t leaked_held = 0;                    // objects with references from leaked blocks
  std::map<std::string, uint64_t> violations;  // invariant -> objects violating it
  std::map<int64_t, uint64_t> histogram;
  std::vector<std::string> active_holders;  // names, in ProfileObject::holders order
  std::vector<std::string> notes;           // holders/invariants skipped (optional member absent)
  std::vector<std::string> warnings;        // walks that stopped early, unreadable objects
  uint64_t warnings_dropped = 0;            // past the first 1,000
};

class ProfileSink {
 public:
  virtual ~ProfileSink() = default;
  virtual void set_begin(const ProfileSetSummary& s) { (void)s; }
  virtual void object(const ProfileObject& o) = 0;
  virtual void set_end(const ProfileSetSummary& s) = 0;
  // True when the reader went away (a closed pipe): the run stops early.
  virtual bool stopped() const { return false; }
};

struct ProfileRunOptions {
  // Empty: every set. Otherwise only these reach the sink; the sets they
  // depend on (parents, holder sources) run without reaching it.
  std::vector<std::string> only_sets;
  const std::atomic<bool>* interrupted = nullptr;
  // Reconcile each object's refcount with the references to it found in
  // memory (borrowed; null: not reconciled).
  const RefSource* reconcile = nullptr;
};

// Binds `p` to `prog` (types, members, expressions) and runs every set,
// streaming objects to `sink`. Errors that make the profile unusable on this
// target (a type or required member missing, an expression that does not
// type-check) come before any output.
Result<void> run_profile(Program& prog, const Profile& p, const ProfileRunOptions& opts,
                         ProfileSink& sink);

// Whether every type `p` declares binds on `prog` (its C type and required
// members are there); kNotFound names the first that does not.
Result<void> profile_types_bind(Program& prog, const Profile& p);

// 8 hex digits hashing the profile's [build] recipe (headers, include
// directories, defines) and `salt`: part of a cached types file's name, so
// a file another recipe built is not taken for this one's.
std::string profile_recipe_hash(const Profile& p, std::string_view salt = {});

// The probes as trace-plan function specs ("NAME[@MODULE]:OP:KIND").
std::vector<std::string> profile_probe_functions(const Profile& p);
// For each kind the probes name (ProfileProbe::kind): the refcount's offset
// and width (4 or 8) inside the object, from `prog`'s DWARF (aliases
// applied). kInvalidArgument when a probed set has no refcount or it is not
// a whole 4/8-byte integer inside the object; kNotFound when the type or
// member is missing.
Result<std::map<std::string, std::pair<int64_t, int>>> profile_probe_refoffs(Program& prog,
                                                                             const Profile& p);
// The walk of top-level set `set` as a WalkSpec (type, head, link, member,
// refcount; aliases resolved), for commands that take a walk (correlate).
// kNotFound for an unknown set; kInvalidArgument for a set with a parent.
Result<WalkSpec> profile_set_walk(Program& prog, const Profile& p, const std::string& set);

// Whether `p` is meant for `prog` (its executable, a module it maps); ""
// when it is, else why not.
std::string profile_mismatch(const Program& prog, const Profile& p, bool is_kernel);

}  // namespace lr
