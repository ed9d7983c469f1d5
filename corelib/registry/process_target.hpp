// What a target knows of one user-space program (a distributed file system's
// client, say)
// beyond what DWARF says: how to tell that a process is that program, where
// its types come from when it has no debuginfo, what its heap blocks are
// (pool objects, accounted allocations, objects a cache keeps), which of its
// objects a ref/unref trace counts, and what it adds to a snapshot. The
// engine asks these questions of every registered program target
// (target.hpp); the answers (answers/) combine them, so no front end and no
// other target ever asks "is this that program?" on its own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "corelib/analyses/account.hpp"
#include "corelib/analyses/correlate.hpp"
#include "corelib/analyses/diff.hpp"
#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/program.hpp"

namespace lr {

// Where a program's types came from, and a line for the user when they were
// built just now (a compiler ran): the caller decides where it goes.
struct TypesSource {
  std::string from;  // "debuginfo /usr/lib/debug/...", or a types file's path
  std::string note;  // "" unless types were built now
};

// A finding a target makes of its program while it is read (an invariant
// broken, refs nothing explains): batch stores them per dump.
struct TargetFinding {
  std::string source;            // the target's key (ProcessTarget::key)
  std::string kind;              // "invariant", "unexplained-refs", ...
  std::optional<uint64_t> addr;  // none: about no one object
  std::string message;
};

// Objects a program keeps on purpose although nothing uses them (an inode
// table's LRU): each by address with the index of its holder's key.
struct KeptObjects {
  std::vector<std::string> keys;  // "inode LRU of fuse/inode (412 inodes, ...)"
  std::vector<std::pair<uint64_t, uint32_t>> objects;
};

// What a program target says of one core's heap blocks; read once per core
// (the target reads its program's state when it is made).
class BlockTagger {
 public:
  virtual ~BlockTagger() = default;
  // The heap walk the target's own reading made, which the reference index
  // must then number; null when the engine walks the heap itself.
  virtual const HeapWalk* heap() const { return nullptr; }
  // In-use blocks the program keeps free for reuse (objects put back in its
  // pools), by user pointer: neither live nor leaked, and not scanned (what
  // they still point at is not kept alive by them).
  virtual std::vector<uint64_t> pooled_free() const { return {}; }
  // What the program made block `c` as ("dict_t (pool, fuse)"); "" unknown.
  virtual std::string name(const HeapChunk& c) const = 0;
  // The part of the program that owns block `c` (a translator's name); ""
  // unknown.
  virtual std::string owner(const HeapChunk& c) const = 0;
  // Memory the program manages itself outside the heap, for the account,
  // with what could not be read of it in `warnings`.
  virtual std::vector<AccountRange> account_ranges(std::vector<std::string>* warnings) const {
    (void)warnings;
    return {};
  }
  // Objects its caches keep (read only when the maker asked for caches).
  virtual KeptObjects kept() const { return {}; }
  // Blocks whose words are live only in [begin, end) (bytes from the block's
  // start, `user`): the rest keeps what the program dropped (a list's
  // items past its length). Reachability takes no reference from there.
  struct LiveSpan {
    uint64_t user = 0, begin = 0, end = 0;
  };
  virtual std::vector<LiveSpan> live_spans() const { return {}; }
  // What could not be read of the program's state (its blocks are then
  // named in part).
  std::vector<std::string> warnings;
};

// The objects of a program whose references a ref/unref trace counts: those
// the target explains itself (explained >= 0), and those it leaves to the
// pointers found in live memory (`scan`: address and size of each).
struct ProgramObjects {
  std::vector<CoreObject> objects;
  std::vector<std::pair<uint64_t, uint64_t>> scan;
  const HeapWalk* heap = nullptr;  // the walk `objects` came from (owned by `keep`)
  std::vector<uint64_t> pooled_free;
  std::vector<std::string> warnings;
  std::shared_ptr<void> keep;  // the target's reading, alive as long as this
};

// What reading a program tells a snapshot beyond its heap: classes, objects
// and warnings added to `s`, and the findings made on the way.
struct ProgramSnapshot {
  std::vector<TargetFinding> findings;
};

// A thread's stack in the program's own language (a Python thread's
// frames), innermost first, for info.
struct LanguageFrame {
  std::string function, file;
  int line = -1;  // -1: none
};
struct LanguageStack {
  uint64_t tid = 0;  // the thread's LWP (0: unknown)
  std::vector<LanguageFrame> frames;
  std::string cut;  // why the frames were not read to their end ("" whole)
};
struct LanguageStacks {
  std::string language;  // "Python 3.11.2"
  std::vector<LanguageStack> threads;
};

class ProcessTarget {
 public:
  virtual ~ProcessTarget() = default;
  // The program's name in messages, as its users write it.
  virtual std::string name() const = 0;
  // Its word in JSON (correlate's source, batch's findings): short, lower case.
  virtual std::string key() const = 0;
  // Whether a file a process maps (its base name) is the program's own: the
  // one test, for cores and live processes alike, of whether a process is
  // this program.
  virtual bool owns_module(std::string_view basename) const = 0;
  // The module that test names in messages ("libfoo").
  virtual std::string module_hint() const = 0;
  // What its pools are called in messages ("Foo's mem-pools").
  virtual std::string pools() const { return name() + " pools"; }
  // Makes the program's types resolvable through prog.types(): its
  // debuginfo, `types_file` when given, else types built from headers and
  // cached.
  virtual Result<TypesSource> ensure_types(Program& prog, const std::string& types_file) = 0;
  // The profile built into the target, whose probes a trace plan takes when
  // it is given nothing else ("" when it has none), and its source's name in
  // messages ("foo (built in)").
  virtual std::string_view builtin_profile() const { return {}; }
  virtual std::string builtin_profile_source() const { return ""; }
  // Block knowledge of this core; `caches`: the objects its caches keep are
  // wanted too (more reading).
  virtual Result<std::unique_ptr<BlockTagger>> tagger(Program& prog, bool caches) = 0;
  // The object kinds objects() gives (correlate's --kind), in order.
  virtual std::vector<std::string> object_kinds() const { return {}; }
  virtual Result<ProgramObjects> objects(Program& prog, const std::string& types_file) {
    (void)prog, (void)types_file;
    return make_error(Errc::kUnsupported, name() + " has no objects a trace counts");
  }
  // Each thread's stack in the program's own language; nullopt when it has
  // none to give (a target of C programs), an error when it cannot be read.
  virtual Result<std::optional<LanguageStacks>> stacks(Program& prog) {
    (void)prog;
    return std::optional<LanguageStacks>{};
  }
  // Adds the program's classes and objects to `s` (a core's snapshot).
  virtual Result<ProgramSnapshot> snapshot(Program& prog, const std::string& source,
                                           Snapshot& s) = 0;

  // Whether `mods` holds a module of the program; the first such module.
  bool recognizes(const ModuleSet& mods) const { return module(mods) != nullptr; }
  Module* module(const ModuleSet& mods) const;
};

}  // namespace lr
