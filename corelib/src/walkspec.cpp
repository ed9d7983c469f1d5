#include "leakref/walkspec.hpp"

#include <fmt/format.h>

#include <chrono>

namespace lr {

namespace {

uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool is_number_spec(const std::string& s) {
  uint64_t v;
  return parse_u64(s, &v);
}

// The element type and count if `t` is an array.
const Type* array_of(const Type* t, uint64_t* count) {
  const Type* s = t ? t->strip() : nullptr;
  if (!s || s->kind != TypeKind::kArray) return nullptr;
  *count = s->count;
  return s->target ? s->target->strip() : nullptr;
}

bool named(const Type* t, const char* n) {
  const Type* s = t ? t->strip() : nullptr;
  return s && s->name == n;
}

}  // namespace

Result<WalkReport> run_walk(Program& prog, const WalkSpec& spec) {
  WalkReport rep;
  const Memory& mem = prog.mem();
  LR_ASSIGN(const Type* t, prog.types().find(spec.type));
  const Type* ts = t->strip();
  if (!ts->size)
    return make_error(Errc::kNotFound,
                      fmt::format("type '{}' has no size (only declared, never defined?)",
                                  spec.type));
  rep.type_name = t->display();
  rep.type_size = ts->size;

  // Head: the symbol's DWARF type decides how it is read when it can.
  const Type* head_type = nullptr;
  if (!spec.head.empty() && spec.head[0] != '*' && !is_number_spec(spec.head) &&
      spec.head.find('+') == std::string::npos) {
    auto v = prog.types().find_variable(spec.head);
    if (v.ok()) head_type = v.value().type;
  }
  LR_ASSIGN(uint64_t head, prog.resolve_address(spec.head));
  rep.head_addr = head;

  FieldSpec rc;
  bool have_rc = false;
  if (!spec.refcount.empty()) {
    LR_ASSIGN(rc, make_field_spec(t, spec.refcount, true));
    have_rc = true;
  }
  std::vector<FieldSpec> shows;
  for (const auto& f : spec.show) {
    LR_ASSIGN(auto fs, make_field_spec(t, f, false));
    shows.push_back(std::move(fs));
  }
  std::unique_ptr<Filter> filter;
  if (!spec.where.empty()) {
    LR_ASSIGN(filter, Filter::parse(spec.where, t, have_rc ? &rc : nullptr));
  }

  uint64_t member_off = 0;
  const Type* member_type = nullptr;
  if (spec.link == WalkSpec::Link::kNext || spec.link == WalkSpec::Link::kList ||
      spec.link == WalkSpec::Link::kHlist) {
    LR_ASSIGN(FieldLoc loc, resolve_path(t, spec.member));
    member_off = loc.offset;
    member_type = loc.type;
  }

  uint64_t t0 = now_ns();
  uint64_t arr_count = 0;
  const Type* elem = array_of(head_type, &arr_count);
  switch (spec.link) {
    case WalkSpec::Link::kList: {
      if (!named(member_type, "list_head") && !(member_type && member_type->strip()->size == 16))
        return make_error(Errc::kInvalidArgument,
                          fmt::format("--list-member {} is {}, not a struct list_head", spec.member,
                                      member_type ? member_type->display() : "unknown"));
      uint64_t nb = spec.buckets ? spec.buckets : (elem && named(elem, "list_head") ? arr_count : 0);
      if (nb) {
        rep.mode = "hash:list_head";
        rep.walk = walk_buckets(mem, head, nb, 16, BucketKind::kListHead, member_off, spec.limits);
      } else {
        rep.mode = "list";
        rep.walk = walk_list(mem, head, member_off, spec.limits);
      }
      break;
    }
    case WalkSpec::Link::kHlist: {
      if (!named(member_type, "hlist_node") && !(member_type && member_type->strip()->size == 16))
        return make_error(Errc::kInvalidArgument,
                          fmt::format("--hlist-member {} is {}, not a struct hlist_node",
                                      spec.member, member_type ? member_type->display() : "unknown"));
      uint64_t nb = spec.buckets ? spec.buckets : (elem && named(elem, "hlist_head") ? arr_count : 0);
      if (nb) {
        rep.mode = "hash:hlist";
        rep.walk = walk_buckets(mem, head, nb, 8, BucketKind::kHlist, member_off, spec.limits);
      } else {
        rep.mode = "hlist";
        rep.walk = walk_hlist(mem, head, member_off, spec.limits);
      }
      break;
    }
    case WalkSpec::Link::kNext: {
      const Type* mt = member_type ? member_type->strip() : nullptr;
      if (!mt || mt->kind != TypeKind::kPointer)
        return make_error(Errc::kInvalidArgument,
                          fmt::format("--next {} is {}, not a pointer", spec.member,
                                      member_type ? member_type->display() : "unknown"));
      uint64_t nb = spec.buckets;
      if (!nb && elem && elem->kind == TypeKind::kPointer) nb = arr_count;
      if (nb) {
        rep.mode = "hash:chain";
        rep.walk = walk_buckets(mem, head, nb, 8, BucketKind::kChain, member_off, spec.limits);
        break;
      }
      uint64_t first = head;
      const Type* hs = head_type ? head_type->strip() : nullptr;
      if (hs && hs->kind == TypeKind::kPointer) {
        LR_ASSIGN(first, mem.read_u64(head));
      }
      rep.mode = "chain";
      rep.walk = walk_chain(mem, first, member_off, spec.limits);
      break;
    }
    case WalkSpec::Link::kArray: {
      uint64_t n = spec.count ? spec.count : arr_count;
      if (!n)
        return make_error(Errc::kInvalidArgument,
                          "--array needs --count N (the head symbol's type gives no length)");
      rep.mode = "array";
      rep.walk = walk_array(mem, head, n, ts->size, spec.limits);
      break;
    }
    case WalkSpec::Link::kPointerArray: {
      uint64_t n = spec.count ? spec.count : arr_count;
      if (!n)
        return make_error(Errc::kInvalidArgument,
                          "--pointer-array needs --count N (the head symbol's type gives no length)");
      rep.mode = "pointer-array";
      rep.walk = walk_pointer_array(mem, head, n, spec.limits);
      break;
    }
    case WalkSpec::Link::kNone:
      return make_error(Errc::kInvalidArgument,
                        "say how objects are linked: --next, --list-member, --hlist-member, "
                        "--array or --pointer-array");
  }
  uint64_t t1 = now_ns();
  rep.walk_ns = t1 - t0;

  // Evaluate every object: one span per object, offsets precomputed.
  const bool rc_fast = have_rc && rc.hops.size() == 1;
  const FieldLoc rc_loc = rc_fast ? rc.hops[0] : FieldLoc{};
  const Type* rct = rc_fast && rc_loc.type ? rc_loc.type->strip() : nullptr;
  const bool rc_signed = rct && rct->is_signed;
  constexpr int64_t kDense = 4096;
  std::vector<uint64_t> dense(kDense + 1, 0);  // refcounts -1 .. 4095
  std::vector<uint8_t> scratch;
  rep.visited = rep.walk.objects.size();
  if (spec.keep_values) rep.objects.reserve(filter ? 0 : rep.visited);
  for (uint64_t addr : rep.walk.objects) {
    const uint8_t* obj = object_bytes(mem, addr, ts->size, scratch);
    if (!obj) {
      if (rep.unreadable_objects++ < 20)
        rep.warnings.push_back(fmt::format("object {:#x} not readable: {}", addr,
                                           mem.why_unreadable(addr)));
      continue;
    }
    if (filter && !filter->matches(mem, addr, obj)) continue;
    ++rep.matched;
    WalkedObject wo;
    wo.addr = addr;
    if (have_rc) {
      if (rc_fast) {
        wo.refcount = rc_signed ? load_field_s(obj, rc_loc) : static_cast<int64_t>(load_field_u(obj, rc_loc));
        wo.has_refcount = true;
      } else {
        wo.has_refcount = eval_field(mem, addr, obj, rc).as_int(&wo.refcount);
      }
      if (wo.has_refcount) {
        if (wo.refcount >= -1 && wo.refcount < kDense)
          ++dense[wo.refcount + 1];
        else
          ++rep.histogram[wo.refcount];
      }
    }
    if (spec.keep_values) {
      for (const auto& s : shows) wo.fields.push_back(eval_field(mem, addr, obj, s));
      rep.objects.push_back(std::move(wo));
    }
  }
  for (int64_t i = 0; i <= kDense; ++i)
    if (dense[i]) rep.histogram[i - 1] += dense[i];
  if (rep.unreadable_objects > 20)
    rep.warnings.push_back(fmt::format("{} objects in all were not readable", rep.unreadable_objects));
  rep.eval_ns = now_ns() - t1;
  return rep;
}

}  // namespace lr
