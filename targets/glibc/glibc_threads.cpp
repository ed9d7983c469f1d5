// What glibc's own thread lists say that a core does not: thread pointers
// for aarch64 cores that do not hold TPIDR_EL0 (QEMU's user-mode cores), and
// each thread's memory for the root model (its static TLS, and the stacks
// of threads that no longer exist). Every thread's descriptor
// (struct pthread) is on one of the dynamic linker's two lists,
// _rtld_global._dl_stack_user (the main thread, and threads on stacks the
// program gave) and _dl_stack_used (glibc 2.34 and later keep both in
// ld.so). On aarch64 (TLS variant I) the descriptor lies just below the
// thread pointer: THREAD_SELF is tp - sizeof(struct pthread).
#include <elf.h>
#include <fmt/format.h>

#include <set>

#include "corelib/debuginfo/program.hpp"
#include "targets/glibc/glibc_heap.hpp"

namespace lr {

namespace {

constexpr size_t kMaxThreads = 1 << 16;

struct ThreadLayout {
  uint64_t list = 0, tid = 0, size = 0;  // struct pthread: list_t member, tid, sizeof
  uint64_t used = 0, user = 0;           // the two list heads' addresses
  // struct pthread: the stack glibc mapped for the thread (0 unknown), and
  // the stack cache's list head (threads that exited; 0 unknown).
  uint64_t stackblock = 0, stackblock_size = 0, cache = 0;
  uint64_t static_tls = 0;  // the address of _dl_tls_static_size (0 unknown)
};

Module* module_named(ModuleSet& mods, std::string_view prefix) {
  for (const auto& m : mods.modules())
    if (m->basename().rfind(prefix, 0) == 0) return m.get();
  return nullptr;
}

// The layout from libc's and ld.so's DWARF; an error says what is missing.
Result<ThreadLayout> thread_layout(const Program& prog) {
  Module* libc = module_named(prog.modules(), "libc.so");
  Module* ld = module_named(prog.modules(), "ld-linux");
  if (!libc || !ld || !libc->has_dwarf() || !ld->has_dwarf())
    return make_error(Errc::kNotFound, "glibc's thread list needs libc's and ld.so's debuginfo");
  const Type* pd = prog.types().find_in_unit(libc, "pthread_create.c", {"struct pthread"})[0];
  const Type* rg = prog.types().find_in_unit(ld, "rtld.c", {"struct rtld_global"})[0];
  const Symbol* g = ld->find_one_symbol("_rtld_global");
  ThreadLayout L;
  uint64_t used = 0, user = 0;
  if (!pd || !rg || !g || !find_member(pd, "list", &L.list) || !find_member(pd, "tid", &L.tid) ||
      !find_member(rg, "_dl_stack_used", &used) || !find_member(rg, "_dl_stack_user", &user))
    return make_error(Errc::kNotFound,
                      "glibc's DWARF has no struct pthread list and tid, or no _rtld_global "
                      "with _dl_stack_used and _dl_stack_user (glibc before 2.34)");
  L.size = pd->strip()->size;
  uint64_t cache = 0, off = 0;
  if (find_member(pd, "stackblock", &L.stackblock) &&
      find_member(pd, "stackblock_size", &L.stackblock_size) &&
      find_member(rg, "_dl_stack_cache", &cache))
    L.cache = g->addr + cache;
  else
    L.stackblock = L.stackblock_size = 0;
  // The static TLS size: in _rtld_global_ro or _rtld_global by release.
  if (find_member(rg, "_dl_tls_static_size", &off)) {
    L.static_tls = g->addr + off;
  } else if (const Symbol* ro = ld->find_one_symbol("_rtld_global_ro")) {
    auto t = prog.types().find_in_unit(ld, "rtld.c", {"struct rtld_global_ro"});
    if (!t.empty() && t[0] && find_member(t[0], "_dl_tls_static_size", &off))
      L.static_tls = ro->addr + off;
  }
  // A descriptor that does not hold its own tid is no layout to place a
  // thread pointer by.
  if (L.size < L.tid + 4 || L.size < L.list + 16)
    return make_error(Errc::kNotFound, "glibc's DWARF gives struct pthread an implausible size");
  L.used = g->addr + used;
  L.user = g->addr + user;
  return L;
}

// Each descriptor on the list at `head`: (its tid, its thread pointer).
void walk_list(const Memory& mem, const ThreadLayout& L, uint64_t head,
               std::vector<std::pair<int, uint64_t>>& out) {
  std::set<uint64_t> seen;
  uint64_t at = head;
  for (size_t n = 0; n < kMaxThreads; ++n) {
    auto next = mem.read_u64(at);
    if (!next.ok() || next.value() == head || !seen.insert(next.value()).second) return;
    at = next.value();
    const uint64_t pd = at - L.list;
    int32_t tid = 0;
    if (!mem.read(pd + L.tid, &tid, 4).ok()) return;
    out.emplace_back(tid, pd + L.size);
  }
}

std::vector<std::pair<int, uint64_t>> glibc_thread_pointers(Program& prog, std::string* why) {
  if (!prog.core() || prog.core()->machine() != EM_AARCH64) return {};
  auto L = thread_layout(prog);
  if (!L.ok()) {
    *why = L.error().message;
    return {};
  }
  std::vector<std::pair<int, uint64_t>> out;
  walk_list(prog.mem(), L.value(), L.value().user, out);
  walk_list(prog.mem(), L.value(), L.value().used, out);
  // Only descriptors of threads the core has: a stale or forged entry
  // names no thread.
  std::set<int> tids;
  for (const auto& t : prog.core()->threads()) tids.insert(t.tid);
  std::erase_if(out, [&](const auto& p) { return !tids.count(p.first); });
  if (out.empty()) *why = "glibc's thread list names none of the core's threads";
  return out;
}

// Each descriptor on the list at `head`, visited once (a list made a ring
// or forged elsewhere stops); false when it could not be read whole.
template <class F>
bool each_descriptor(const Memory& mem, const ThreadLayout& L, uint64_t head, F f) {
  std::set<uint64_t> seen;
  uint64_t at = head;
  for (size_t n = 0; n < kMaxThreads; ++n) {
    auto next = mem.read_u64(at);
    if (!next.ok()) return false;
    if (next.value() == head || !seen.insert(next.value()).second) return next.value() == head;
    at = next.value();
    f(at - L.list);
  }
  return false;
}

// A descriptor's stack mapping [stackblock, stackblock + stackblock_size);
// false when it has none glibc made (a stack the program gave) or it is
// implausible (larger than 1 GiB, or wrapping).
bool stack_of(const Memory& mem, const ThreadLayout& L, uint64_t pd, uint64_t* a, uint64_t* b) {
  uint64_t block = 0, size = 0;
  if (!mem.read(pd + L.stackblock, &block, 8).ok() ||
      !mem.read(pd + L.stackblock_size, &size, 8).ok())
    return false;
  if (!block || !size || size > (uint64_t{1} << 30) || block + size < block) return false;
  *a = block, *b = block + size;
  return true;
}

// The stacks of threads that no longer exist: every stack in glibc's cache
// (threads that exited and were joined or detached; in a fork child, the
// parent's other threads, which the child's glibc reclaims there), and any
// on the list in use whose thread the core does not have (exited, not yet
// joined: the kernel cleared its tid).
void dead_stacks(Program& prog, const ThreadLayout& L, ThreadMemory* out) {
  const Memory& mem = prog.mem();
  std::set<int> live;
  for (const auto& t : prog.core()->threads()) live.insert(t.tid);
  // The descriptor itself stays live: glibc keeps it on its list, and its
  // DTV (a heap block) is reused with the stack.
  auto add = [&](uint64_t pd, const char* why) {
    uint64_t a = 0, b = 0;
    if (!stack_of(mem, L, pd, &a, &b)) return;
    if (pd < a || pd + L.size > b) {
      out->dead_stacks.push_back({a, b, 0, why});
      return;
    }
    if (a < pd) out->dead_stacks.push_back({a, pd, 0, why});
    if (pd + L.size < b) out->dead_stacks.push_back({pd + L.size, b, 0, why});
  };
  if (!each_descriptor(mem, L, L.cache, [&](uint64_t pd) {
        add(pd, "stack of an exited thread (glibc's stack cache)");
      })) {
    out->warnings.push_back(
        "glibc's stack cache could not be read whole: the stacks of exited threads on it past "
        "the break are taken for live memory");
    out->complete = false;
  }
  each_descriptor(mem, L, L.used, [&](uint64_t pd) {
    int32_t tid = 0;
    if (mem.read(pd + L.tid, &tid, 4).ok() && !live.count(tid))
      add(pd, "stack of a thread that no longer exists (glibc's list in use)");
  });
}

// Each live thread's static TLS and control block, from its thread pointer
// and glibc's static TLS size: x86-64 (TLS variant II) keeps the blocks
// below the thread pointer and the descriptor (struct pthread) at it;
// aarch64 (variant I) the descriptor below and the blocks above.
void static_tls(Program& prog, const ThreadLayout& L, ThreadMemory* out) {
  uint64_t size = 0;
  if (!L.static_tls || !prog.mem().read(L.static_tls, &size, 8).ok() || !size ||
      size > (uint64_t{1} << 26)) {
    out->warnings.push_back(
        "glibc's static TLS size is not known: each thread's TLS is taken as the pages around its "
        "thread pointer");
    return;
  }
  for (const auto& t : prog.core()->threads()) {
    if (!t.tp) continue;
    const bool v1 = t.machine == EM_AARCH64;
    const uint64_t a = v1 ? t.tp - L.size : t.tp + L.size - size;
    const uint64_t b = v1 ? t.tp + size : t.tp + L.size;
    out->tls.push_back({a & ~uint64_t{7}, b, t.tid, "static TLS and thread control block"});
  }
}

bool glibc_thread_memory(Program& prog, ThreadMemory* out) {
  if (!module_named(prog.modules(), "libc.so")) return false;
  auto L = thread_layout(prog);
  if (!L.ok()) {
    out->source = "glibc";
    out->warnings.push_back(
        "the stacks of exited threads and each thread's TLS bounds are not known: " +
        L.error().message);
    out->complete = false;
    return true;
  }
  out->source = "glibc's DWARF";
  if (L->stackblock && L->cache) {
    dead_stacks(prog, L.value(), out);
  } else {
    out->warnings.push_back(
        "glibc's DWARF has no stack cache: the stacks of exited threads are taken for live memory");
    out->complete = false;
  }
  static_tls(prog, L.value(), out);
  return true;
}

// libc's l_tls_offset: its link_map on the dynamic linker's list of the
// base namespace (_rtld_global._dl_ns[0]._ns_loaded), told by its load
// bias. ld.so's DWARF gives struct link_map whole (link.h's public one
// ends before the TLS members).
Result<uint64_t> libc_tls_offset(const Program& prog, const Module& libc, const Module& ld) {
  auto t = prog.types().find_in_unit(
      const_cast<Module*>(&ld), "rtld.c",
      {"struct rtld_global", "struct link_namespaces", "struct link_map"});
  const Symbol* g = const_cast<Module&>(ld).find_one_symbol("_rtld_global");
  uint64_t ns = 0, loaded = 0, next = 0, addr = 0, tls = 0;
  if (!g || !t[0] || !t[1] || !t[2] || !find_member(t[0], "_dl_ns", &ns) ||
      !find_member(t[1], "_ns_loaded", &loaded) || !find_member(t[2], "l_next", &next) ||
      !find_member(t[2], "l_addr", &addr) || !find_member(t[2], "l_tls_offset", &tls))
    return make_error(Errc::kNotFound,
                      "ld.so's DWARF has no struct link_map with l_tls_offset, or no _dl_ns");
  const Memory& mem = prog.mem();
  auto lm = mem.read_u64(g->addr + ns + loaded);
  std::set<uint64_t> seen;
  for (uint64_t at = lm.ok() ? lm.value() : 0;
       at && seen.insert(at).second && seen.size() < 4096;) {
    auto bias = mem.read_u64(at + addr);
    if (!bias.ok()) break;
    if (bias.value() == libc.bias) {
      auto off = mem.read_u64(at + tls);
      if (off.ok()) return off.value();
      break;
    }
    auto n = mem.read_u64(at + next);
    at = n.ok() ? n.value() : 0;
  }
  return make_error(Errc::kNotFound, "libc is on no readable link_map of the dynamic linker");
}

// Each descriptor on the list at `head`, appended to `out` (visited once).
void descriptors(const Memory& mem, const ThreadLayout& L, uint64_t head,
                 std::vector<uint64_t>& out) {
  each_descriptor(mem, L, head, [&](uint64_t pd) { out.push_back(pd); });
}

}  // namespace

Result<std::vector<uint64_t>> glibc_thread_tcaches(const Program& prog) {
  if (!prog.core()) return make_error(Errc::kNotFound, "not a process core");
  Module* libc = module_named(prog.modules(), "libc.so");
  Module* ld = module_named(prog.modules(), "ld-linux");
  LR_ASSIGN(ThreadLayout L, thread_layout(prog));
  uint64_t var = 0;
  if (!libc->find_tls_symbol("tcache", &var))
    return make_error(Errc::kNotFound, "libc's symbols name no thread-local tcache");
  LR_ASSIGN(uint64_t off, libc_tls_offset(prog, *libc, *ld));
  std::vector<uint64_t> pds, out;
  descriptors(prog.mem(), L, L.user, pds);
  descriptors(prog.mem(), L, L.used, pds);
  if (L.cache) descriptors(prog.mem(), L, L.cache, pds);
  const bool v1 = prog.core()->machine() == EM_AARCH64;
  for (uint64_t pd : pds) {
    // x86-64 (variant II): the thread pointer is the descriptor and the
    // static TLS blocks lie below it; aarch64 (variant I): the thread
    // pointer follows the descriptor and the blocks lie above it.
    const uint64_t tp = v1 ? pd + L.size : pd;
    const uint64_t at = (v1 ? tp + off : tp - off) + var;
    auto p = prog.mem().read_u64(at);
    if (p.ok() && p.value()) out.push_back(p.value());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

TargetSpec glibc_target() {
  TargetSpec t;
  t.name = "glibc";
  t.allocators.push_back(glibc_allocator());
  t.thread_pointer_finders.emplace_back("glibc", &glibc_thread_pointers);
  t.thread_memory_readers.emplace_back("glibc", &glibc_thread_memory);
  return t;
}

}  // namespace lr
