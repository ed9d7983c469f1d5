// Where a process core's memory went: every byte of its writable memory in
// exactly one category. The heap's bytes come from the allocator's walk
// (in-use chunks as the caller's leak analysis classed them, free chunks by
// list, the allocator's own structures); the rest of the address space is
// painted by what holds it: thread stacks, TLS, modules' data and .bss,
// file-backed writable mappings, other anonymous mappings. The categories
// add up to the core's writable memory; what the walk could not place is
// `unknown`, never guessed into another category.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/dump/elfcore.hpp"
#include "corelib/dump/residency.hpp"

namespace lr {

// One category and its breakdown; a node's bytes are its children's sum
// when it has children.
struct AccountNode {
  std::string name;
  uint64_t bytes = 0, blocks = 0;
  uint64_t resident = 0;  // of `bytes`, resident when captured (with a Residency)
  std::vector<AccountNode> children;
};

// What the caller's reachability decided of each in-use chunk.
enum class ChunkClass : uint8_t { kLive, kLeaked, kPooled };

// Memory a program manages itself outside the allocator's heap (its own
// buffer arenas: mmapped regions cut into buffers), as its target read it:
// in use, kept for reuse (pooled, a kind of free), or not known.
struct AccountRange {
  enum class Class : uint8_t { kLive, kPooled, kUnknown };
  uint64_t start = 0, end = 0;
  Class cls = Class::kLive;
  std::string key;  // the breakdown's entry ("buffers of 128 KiB")
  uint64_t blocks = 1;
};

struct AccountInput {
  const CoreFile* core = nullptr;
  const ModuleSet* mods = nullptr;
  const HeapWalk* heap = nullptr;  // walked with the same `residency` when one is given
  // Which pages were resident when the core was taken (leakref-snap's
  // smaps and pagemap), or null: no resident figures.
  const Residency* residency = nullptr;
  std::vector<ChunkClass> chunk_class;  // one per heap->in_use chunk
  // Each chunk's breakdown key under live, leaked and pooled (its type,
  // allocation site...); "" groups as "(unknown)". Null: no breakdown. The
  // view need only last until the next call.
  std::function<std::string_view(size_t)> key_of;
  // Placed after the heap, before stacks and mappings: bytes the heap or an
  // earlier range already holds are not counted again.
  std::vector<AccountRange> ranges;
  // What the C library knows of its threads' memory (may be null): each
  // thread's TLS bounds (a mapping the kernel merged with the main thread's
  // TLS is not all TLS), and the stacks it keeps of exited threads.
  const ThreadMemory* threads = nullptr;
  // Breakdowns keep this many largest children, the rest summed as one.
  size_t max_children = 50;
};

struct Account {
  AccountNode total;            // children: the categories, in a fixed order
  uint64_t writable_bytes = 0;  // the core's writable memory, which `total` adds up to
  std::vector<std::string> warnings;
};

// The category names, in the order `total`'s children come.
const std::vector<std::string>& account_categories();

// kUnsupported when the heap's allocator does not account its bytes.
Result<Account> build_account(const AccountInput& in);

}  // namespace lr
