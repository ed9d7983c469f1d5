// What the C++ container kinds share (element_walks.hpp).
#include "corelib/walks/element_walks.hpp"

#include <fmt/format.h>

#include "corelib/debuginfo/cxx_names.hpp"

namespace lr {

Result<ElementReach> element_reach(const std::string& container, const Type* elem,
                                   const std::string& member) {
  ElementReach r;
  if (member.empty() || member == ".") return r;
  const Type* pt = elem->strip();
  std::string what = "the element";
  if (member != "*") {
    auto f = resolve_path(elem, member);
    if (!f.ok())
      return make_error(Errc::kNotFound, fmt::format("{}: its element {} has no member '{}'",
                                                     container, cxx_type_name(elem), member));
    r.offset = f.value().offset;
    pt = f.value().type ? f.value().type->strip() : nullptr;
    what = "'" + member + "'";
  }
  if (!pt || pt->kind != TypeKind::kPointer || !pt->target)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{}: {} is {}, not a typed pointer: name a pointer member of "
                                  "the element (a smart pointer's own, as 'second.px' of a "
                                  "boost::intrusive_ptr or '_M_ptr' of a shared_ptr)",
                                  container, what, pt ? cxx_type_name(pt) : "of no known type"));
  r.deref = true, r.target = pt->target;
  return r;
}

namespace {

// The objects the elements' pointers reach, null ones skipped.
WalkResult follow(const Memory& mem, WalkResult elems, const ElementReach& r,
                  const WalkLimits& lim) {
  WalkResult out = std::move(elems);
  size_t n = 0;
  for (uint64_t e : out.objects) {
    auto p = mem.read_u64(e + r.offset);
    if (!p.ok()) {
      if (out.issues.size() < 100)
        out.issues.push_back({e, fmt::format("element {:#x}: its pointer is unreadable", e)});
      ++out.issue_count;
      continue;
    }
    if (p.value()) out.objects[n++] = p.value();
  }
  out.objects.resize(n);
  lim.sink(out.objects.data(), out.objects.size());
  return out;
}

}  // namespace

Result<WalkResult> walk_reached(const Memory& mem, const std::string& container, const Type* elem,
                                const ElementReach& reach, uint64_t obj_size, const WalkLimits& lim,
                                const ElementWalk& walk_elements) {
  const Type* obj = reach.objects(elem);
  if (!elem->strip()->size || obj->strip()->size != obj_size)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{} {} {} of {} bytes, not objects of {} bytes", container,
                                  reach.deref ? "points at" : "holds", cxx_type_name(obj),
                                  obj->strip()->size, obj_size));
  if (!reach.deref) return walk_elements(lim);
  WalkLimits nl = lim;
  nl.sink = {};
  LR_ASSIGN(WalkResult r, walk_elements(nl));
  return follow(mem, std::move(r), reach, lim);
}

WalkResult node_elements(WalkResult r, uint64_t off, uint64_t recorded, uint64_t addr,
                         const std::string& container) {
  for (auto& o : r.objects) o += off;
  for (auto& is : r.issues) is.addr += off;
  if (r.stop_addr) r.stop_addr += off;
  if (r.ok() && recorded != UINT64_MAX && recorded != r.objects.size()) {
    ++r.issue_count;
    r.issues.push_back({addr, fmt::format("{} records {} elements, but {} nodes were walked",
                                          container, recorded, r.objects.size())});
  }
  return r;
}

void add_node_blocks(OwnBlocks* out, const WalkResult& nodes, const Type* elem, uint64_t off,
                     uint64_t recorded, uint64_t addr, const std::string& container) {
  out->blocks.reserve(out->blocks.size() + nodes.objects.size() + 1);
  for (uint64_t node : nodes.objects) out->blocks.push_back({node, "node", elem, off, 1});
  if (!nodes.ok())
    out->warning = fmt::format("{} at {:#x}: its nodes were read in part ({})", container, addr,
                               nodes.stop_detail);
  else if (recorded != UINT64_MAX && recorded != nodes.objects.size())
    out->warning = fmt::format("{} at {:#x} records {} elements, but {} nodes were walked",
                               container, addr, recorded, nodes.objects.size());
}

bool over_limit(uint64_t count, const WalkLimits& lim, const std::string& container,
                WalkResult* r) {
  if (count <= lim.max_nodes) return false;
  r->stop = WalkStop::kLimit;
  r->stop_detail =
      fmt::format("{} holds {} elements, more than {}", container, count, lim.max_nodes_name);
  return true;
}

void add_shared_blocks(OwnBlocks* out, uint64_t cb, uint64_t obj, const Type* elem, bool live) {
  const bool in_place = obj > cb && obj - cb <= 64;
  if (in_place && elem && live) {
    out->blocks.push_back({cb, "control block", elem, obj - cb, 1});
    return;
  }
  out->blocks.push_back({cb, "control block", nullptr, 0, 0});
  if (!in_place && obj && elem && live) {
    OwnBlock o{obj, "object", elem, 0, 1};
    o.maybe_inside = true;
    out->blocks.push_back(o);
  }
}

}  // namespace lr
