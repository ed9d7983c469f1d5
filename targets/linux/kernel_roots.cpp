// The kernel's root model: the same RootModel a process core has
// (corelib/blocks/roots.hpp), made from the reference index's root ranges.
// Kernel data, modules and per-CPU areas are globals; task stacks are
// stacks (by pid); other kernel pages are mappings; CPU registers are
// registers. What the scan needed and the dump does not hold (a page
// makedumpfile filtered out, a dump cut off) makes every answer about
// reachability partial, said with how much and where.
#include <fmt/format.h>

#include <map>

#include "targets/linux/kernel_refs.hpp"

namespace lr {

RefFrom kernel_root_kind(const KRoot& r) {
  switch (r.kind) {
    case KRoot::Kind::kStack:
      return RefFrom::kStack;
    case KRoot::Kind::kPage:
      return RefFrom::kMapping;
    case KRoot::Kind::kRegisters:
      return RefFrom::kRegister;
    case KRoot::Kind::kKernelData:
    case KRoot::Kind::kModule:
    case KRoot::Kind::kPerCpu:
      break;
  }
  return RefFrom::kGlobal;
}

std::string kernel_root_what(const KRoot& r) {
  switch (r.kind) {
    case KRoot::Kind::kKernelData:
      return "kernel " + r.section;
    case KRoot::Kind::kModule:
      return "module " + r.module;
    case KRoot::Kind::kPerCpu:
      return fmt::format("per-CPU area of CPU {}", r.cpu);
    case KRoot::Kind::kStack:
      return fmt::format("task {} ({}) kernel stack", r.pid, r.comm);
    case KRoot::Kind::kRegisters:
      return fmt::format("CPU {}'s registers", r.cpu);
    case KRoot::Kind::kPage:
      return "kernel pages";
  }
  return "?";
}

namespace {

std::string kib(uint64_t bytes) {
  return bytes % 1024 ? fmt::format("{} bytes", bytes) : fmt::format("{} KiB", bytes / 1024);
}

// "kernel .data (4 KiB), task 93 (cat) kernel stack (8 KiB), and 3 more".
std::string unread_places(const std::map<std::string, uint64_t>& by) {
  std::string s;
  size_t n = 0;
  for (const auto& [what, bytes] : by) {
    if (n == 4) return s + fmt::format(", and {} more", by.size() - n);
    s += fmt::format("{}{} ({})", n ? ", " : "", what, kib(bytes));
    ++n;
  }
  return s;
}

}  // namespace

RootModel kernel_root_model(const ObjectGraph& g, const std::vector<KRoot>& kinds,
                            std::vector<std::string> reasons) {
  RootModel m;
  m.partial = std::move(reasons);
  auto range = [&](uint64_t a, uint64_t b, uint32_t tag) {
    const KRoot& k = kinds[tag];
    return RootRange{a, b, kernel_root_kind(k), k.pid, kernel_root_what(k)};
  };
  for (const GraphRoot& r : g.roots()) m.roots.push_back(range(r.start, r.end, r.tag));
  std::map<std::string, uint64_t> roots_by;
  for (const GraphUnread& u : g.unread()) {
    if (u.root == GraphUnread::kNone) continue;
    m.unread.push_back(range(u.start, u.end, g.roots()[u.root].tag));
    roots_by[m.unread.back().what] += u.end - u.start;
  }
  const ObjectGraphStats& st = g.stats();
  if (st.unreadable_root_bytes)
    m.partial.push_back(fmt::format(
        "{} of memory scanned as roots is not in the dump (filtered out, or cut off): {}; what "
        "it points at may be listed as leaked",
        kib(st.unreadable_root_bytes), unread_places(roots_by)));
  if (st.unreadable_objects) {
    const bool one = st.unreadable_objects == 1;
    m.partial.push_back(fmt::format(
        "{} object{} not wholly in the dump ({} of {} missing: filtered out, or cut off): "
        "whether {} allocated is not known, so {} not listed, and what {} point{} at may be "
        "listed as leaked",
        st.unreadable_objects, one ? " is" : "s are", kib(st.unreadable_object_bytes),
        one ? "it" : "them", one ? "it is" : "they are", one ? "it is" : "they are",
        one ? "it" : "they", one ? "s" : ""));
  }
  return m;
}

}  // namespace lr
