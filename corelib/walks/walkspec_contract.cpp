// One contract per walk mode, checked before the first read: what the
// head's DWARF type must be, which amounts (count, buckets) the mode takes,
// and how far the head's array type lets them go. A head of another type
// walked anyway reads garbage that looks like an answer; here it is refused
// naming both types.
#include <fmt/format.h>

#include "corelib/objects/objects.hpp"
#include "walkspec_internal.hpp"

namespace lr {

namespace {

using Link = WalkSpec::Link;

const char* mode_name(Link l) {
  switch (l) {
    case Link::kList:
      return "list";
    case Link::kHlist:
      return "hlist";
    case Link::kNext:
      return "chain";
    case Link::kArray:
      return "array";
    case Link::kPointerArray:
      return "pointer-array";
    case Link::kTree:
      return "tree";
    case Link::kXarray:
      return "xarray";
    case Link::kContainer:
      return "container";
    case Link::kAddresses:
      return "addresses";
    case Link::kNone:
      break;
  }
  return "unlinked";
}

// "a list walk", "an hlist walk".
std::string a_walk(Link l) {
  std::string m = mode_name(l);
  bool an = m[0] == 'a' || m[0] == 'h' || m[0] == 'x' || m[0] == 'u';
  return fmt::format("{} {} walk", an ? "an" : "a", m);
}

bool is_pointer_to(const Type* p, const Type* obj, bool or_void) {
  const Type* s = p ? p->strip() : nullptr;
  if (!s || s->kind != TypeKind::kPointer) return false;
  const Type* t = s->target ? s->target->strip() : nullptr;
  return same_type(t, obj) || (or_void && (!t || t->kind == TypeKind::kVoid));
}

// What a head of mode `l` may be, for objects of type `obj`: `one` is a
// single head (or object), `elem` an element of an array of them.
struct HeadRule {
  const char* want;  // for the message
  bool (*one)(const Type* h, const Type* obj);
  bool (*elem)(const Type* e, const Type* obj);
};

const HeadRule* head_rule(Link l) {
  static const HeadRule list{"a struct list_head or an array of them (hash buckets)",
                             [](const Type* h, const Type*) { return is_list_head_shape(h); },
                             [](const Type* e, const Type*) { return is_list_head_shape(e); }};
  static const HeadRule hlist{"a struct hlist_head or an array of them (hash buckets)",
                              [](const Type* h, const Type*) { return is_hlist_head_shape(h); },
                              [](const Type* e, const Type*) { return is_hlist_head_shape(e); }};
  static const HeadRule chain{
      "a pointer to the first object (or void *), the first object itself, or an array of "
      "pointers to it (hash buckets)",
      // void *: a program that erases the type (a graph's first node kept as void *).
      [](const Type* h, const Type* obj) {
        return is_pointer_to(h, obj, true) || same_type(h, obj);
      },
      [](const Type* e, const Type* obj) { return is_pointer_to(e, obj, false); }};
  static const HeadRule array{"an array of the objects (or the first of them)",
                              [](const Type* h, const Type* obj) { return same_type(h, obj); },
                              [](const Type* e, const Type* obj) { return same_type(e, obj); }};
  static const HeadRule parray{
      "an array of pointers to the objects (or void *), or the first such pointer",
      [](const Type* h, const Type* obj) { return is_pointer_to(h, obj, true); },
      [](const Type* e, const Type* obj) { return is_pointer_to(e, obj, true); }};
  switch (l) {
    case Link::kList:
      return &list;
    case Link::kHlist:
      return &hlist;
    case Link::kNext:
      return &chain;
    case Link::kArray:
      return &array;
    case Link::kPointerArray:
      return &parray;
    default:
      return nullptr;  // trees, xarrays and container kinds check their own heads
  }
}

std::string head_name(const WalkSpec& spec, const Variable& head) {
  return !head.name.empty() ? head.name : spec.head;
}

// The head's type against the mode's rule; a pointer whose target fits is
// pointed at with '*'.
Result<void> check_head_type(const WalkSpec& spec, const Type* obj, const Variable& head) {
  const HeadRule* rule = head_rule(spec.link);
  const Type* h = head.type ? head.type->strip() : nullptr;
  if (!rule || !h) return {};  // an untyped head: the caller's own statement
  if (rule->one(h, obj)) return {};
  if (h->kind == TypeKind::kArray && rule->elem(h->target, obj)) return {};
  std::string name = head_name(spec, head);
  std::string hint;
  if (h->kind == TypeKind::kPointer && h->target &&
      (rule->one(h->target, obj) || rule->elem(h->target, obj)))
    hint = fmt::format(": write '*{}' for what it points to", name);
  else if (spec.link == Link::kArray && h->kind == TypeKind::kArray &&
           is_pointer_to(h->target, obj, true))
    hint = ": an array of pointers is a pointer-array walk";
  return make_error(Errc::kInvalidArgument,
                    fmt::format("head '{}' is {}; {} of {} needs {}{}", name, head.type->display(),
                                a_walk(spec.link), obj->display(), rule->want, hint));
}

// Amounts the mode does not use are refused, not ignored.
Result<void> check_amounts(const WalkSpec& spec) {
  const bool arrays = spec.link == Link::kArray || spec.link == Link::kPointerArray;
  const bool tables =
      spec.link == Link::kList || spec.link == Link::kHlist || spec.link == Link::kNext;
  if ((spec.count || !spec.count_from.empty()) && !arrays)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("a count (or count-from) applies to array and pointer-array "
                                  "walks, not to {}",
                                  a_walk(spec.link)));
  if (spec.buckets && !tables)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("a bucket count applies to list, hlist and chain walks (a "
                                  "table of heads), not to {}",
                                  a_walk(spec.link)));
  if (spec.count && !spec.count_from.empty())
    return make_error(Errc::kInvalidArgument, "give a count or count-from, not both");
  return {};
}

}  // namespace

uint64_t head_bound(const Variable& head) {
  const Type* h = head.type ? head.type->strip() : nullptr;
  return h && h->kind == TypeKind::kArray && !h->flexible ? h->count : 0;
}

Result<void> check_amount_bound(const WalkSpec& spec, const Variable& head, uint64_t n,
                                const char* what, bool from_memory) {
  uint64_t bound = head_bound(head);
  if (!bound || n <= bound) return {};
  std::string msg = fmt::format("{} {} is past head '{}', {}: it has {} elements", what, n,
                                head_name(spec, head), head.type->display(), bound);
  // A count read from the dump that overruns is damage; one given is a usage error.
  return make_error(from_memory ? Errc::kBadFormat : Errc::kInvalidArgument,
                    from_memory ? msg + " (a corrupt count?)" : msg);
}

Result<void> check_walk_contract(const WalkSpec& spec, const Type* obj, const Variable& head) {
  LR_TRY(check_amounts(spec));
  LR_TRY(check_head_type(spec, obj, head));
  if (spec.buckets)
    LR_TRY(check_amount_bound(spec, head, spec.buckets, "bucket count", spec.amounts_from_memory));
  if (spec.count)
    LR_TRY(check_amount_bound(spec, head, spec.count, "count", spec.amounts_from_memory));
  return {};
}

}  // namespace lr
