// Thread pointers from glibc's own thread list, for aarch64 cores that do
// not hold TPIDR_EL0 (QEMU's user-mode cores). Every thread's descriptor
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
};

Module* module_named(ModuleSet& mods, std::string_view prefix) {
  for (const auto& m : mods.modules())
    if (m->basename().rfind(prefix, 0) == 0) return m.get();
  return nullptr;
}

// The layout from libc's and ld.so's DWARF; an error says what is missing.
Result<ThreadLayout> thread_layout(Program& prog) {
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

}  // namespace

TargetSpec glibc_target() {
  TargetSpec t;
  t.name = "glibc";
  t.allocators.push_back(glibc_allocator());
  t.thread_pointer_finders.emplace_back("glibc", &glibc_thread_pointers);
  return t;
}

}  // namespace lr
