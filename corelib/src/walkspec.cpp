#include "leakref/walkspec.hpp"

#include "walkspec_internal.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>

namespace lr {

namespace {

uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

Result<void> check_link_member(const Type* t, WalkSpec::Link link, const std::string& member,
                               const Type* member_type) {
  const bool ring = link == WalkSpec::Link::kList;
  if (link == WalkSpec::Link::kList || link == WalkSpec::Link::kHlist) {
    // Shapes, not names: link structs are called differently between programs.
    if (!(ring ? is_list_head_shape(member_type) : is_hlist_node_shape(member_type)))
      return make_error(
          Errc::kInvalidArgument,
          fmt::format("--{}-member {} is {}, not a struct {}", ring ? "list" : "hlist", member,
                      member_type ? member_type->display() : "unknown",
                      ring ? "list_head" : "hlist_node"));
  }
  if (link == WalkSpec::Link::kNext) {
    const Type* mt = member_type ? member_type->strip() : nullptr;
    if (!mt || mt->kind != TypeKind::kPointer || !mt->target || mt->target->strip() != t->strip())
      return make_error(
          Errc::kInvalidArgument,
          fmt::format("--next {} is {}, not a pointer to {}", member,
                      member_type ? member_type->display() : "unknown", t->display()));
  }
  return {};
}

namespace {

// A list or hlist walk reads a list_head/hlist_head (or an array of them) at
// the head. A pointer variable there holds an address, not a head: reading
// its bytes as a bucket walked garbage. Through '*' it is one head, which
// may be the first of a table: said, as only a count makes it a table.
Result<void> check_list_head(const WalkSpec& spec, const Type* head_type,
                             std::vector<std::string>* warnings) {
  if (spec.link != WalkSpec::Link::kList && spec.link != WalkSpec::Link::kHlist) return {};
  const Type* ht = head_type ? head_type->strip() : nullptr;
  const char* want = spec.link == WalkSpec::Link::kList ? "list_head" : "hlist_head";
  if (ht && ht->kind == TypeKind::kPointer)
    return make_error(Errc::kInvalidArgument,
                      fmt::format("head '{}' is a pointer ({}), not a {}: write '*{}' for what it "
                                  "points to (with a bucket count if that is a table of them)",
                                  spec.head, head_type->display(), want, spec.head));
  if (ht && ht->kind == TypeKind::kStruct && ht->name == want && !spec.buckets &&
      !spec.head.empty() && spec.head[0] == '*')
    warnings->push_back(fmt::format(
        "head '{}' is one {} reached through a pointer; if it points to a table of them, give "
        "the bucket count",
        spec.head, want));
  return {};
}

}  // namespace

Result<WalkReport> run_walk(Program& prog, const WalkSpec& spec) {
  WalkReport rep;
  const Memory& mem = prog.mem();
  LR_ASSIGN(const Type* t, prog.types().find(spec.type));
  const Type* ts = t->strip();
  if (!ts->size)
    return make_error(
        Errc::kNotFound,
        fmt::format("type '{}' has no size (only declared, never defined?)", spec.type));
  // A corrupt or hostile DWARF size must not drive allocations.
  if (ts->size > kMaxObjectSize)
    return make_error(Errc::kBadFormat, fmt::format("type '{}' claims {} bytes; refusing objects "
                                                    "larger than {} bytes",
                                                    spec.type, ts->size, kMaxObjectSize));
  rep.type_name = t->display();
  rep.type_size = ts->size;

  // Head: the symbol's DWARF type decides how it is read when it can.
  Variable hv;
  if (spec.head_var) {
    hv = *spec.head_var;
  } else {
    LR_ASSIGN(hv, prog.resolve(spec.head));
  }
  const Type* head_type = hv.type;
  const uint64_t head = hv.addr;
  rep.head_addr = head;
  // A symbol whose type nobody knows: a pointer to the first object, the
  // object itself, one list head or an array of them are all plausible, and
  // a guess walks the wrong thing with no error. Only a plain address (the
  // caller's own statement of what is there) or a given count is read.
  uint64_t as_number = 0;
  bool symbol_head =
      !spec.head_var ? !parse_u64(spec.head, &as_number) && spec.head.find('+') == std::string::npos
                     : !hv.name.empty();
  bool counted = spec.buckets || spec.count || !spec.count_from.empty();
  if (symbol_head && !head_type && !counted &&
      (spec.link == WalkSpec::Link::kNext || spec.link == WalkSpec::Link::kList ||
       spec.link == WalkSpec::Link::kHlist))
    return make_error(Errc::kNotFound,
                      fmt::format("head '{}' has no type (no DWARF declares it): it may be a "
                                  "pointer, an object, one head or an array of heads; give the "
                                  "bucket count, or types that declare the variable",
                                  hv.name.empty() ? spec.head : hv.name));
  LR_TRY(check_list_head(spec, head_type, &rep.warnings));

  FieldSpec rc;
  bool have_rc = false;
  if (!spec.refcount.empty()) {
    LR_ASSIGN(rc, make_field_spec(t, spec.refcount, true));
    have_rc = true;
  }
  std::vector<FieldSpec> shows;
  for (size_t i = 0; i < spec.show.size(); ++i) {
    const std::string& f = spec.show[i];
    LR_ASSIGN(auto fs, make_field_spec(t, f, false));
    const Type* ft = fs.type ? fs.type->strip() : nullptr;
    if (i >= spec.scalar_from && ft &&
        (ft->kind == TypeKind::kStruct || ft->kind == TypeKind::kUnion)) {
      auto inner = make_field_spec(t, f, true);  // atomic_t, refcount_t, kref, ...
      if (!inner.ok())
        return make_error(Errc::kInvalidArgument,
                          fmt::format("field '{}' is {}, not a value to group or sort by; name "
                                      "one of its members ({}.MEMBER)",
                                      f, ft->display(), f));
      fs = std::move(inner.value());
    }
    shows.push_back(std::move(fs));
  }
  std::unique_ptr<Filter> filter;
  if (!spec.where.empty()) {
    LR_ASSIGN(filter, Filter::parse(spec.where, t, have_rc ? &rc : nullptr));
  }

  uint64_t member_off = 0;
  FieldLoc member_loc;
  if (spec.link == WalkSpec::Link::kNext || spec.link == WalkSpec::Link::kList ||
      spec.link == WalkSpec::Link::kHlist || spec.link == WalkSpec::Link::kTree) {
    LR_ASSIGN(FieldLoc loc, resolve_path(t, spec.member));
    LR_TRY(check_link_member(t, spec.link, spec.member, loc.type));
    member_loc = loc;
    member_off = loc.offset;
  }

  // Objects are evaluated as the walkers find them (per bucket, per list),
  // while their memory is still in cache: refcount, filter, shown fields.
  static constexpr int64_t kDense = 4096;
  struct Eval {
    const std::atomic<bool>* intr = nullptr;
    const Memory* mem;
    uint64_t size;
    const FieldSpec* rc;
    const IntField* rc_int;  // set when the refcount is in the object itself
    const Filter* filter;
    const std::vector<FieldSpec>* shows;
    bool keep;
    WalkReport* rep;
    std::vector<uint64_t> dense;  // refcounts -1 .. kDense-2
    std::vector<uint8_t> scratch;
    Memory::Window w;
    void (*on_object)(void*, const WalkedObject&) = nullptr;
    void* on_object_ctx = nullptr;
    WalkedObject cur;  // reused: its fields keep their capacity

    void one(uint64_t addr) {
      const uint8_t* obj = w.at(addr, size);
      if (!obj && mem->window(addr, &w)) obj = w.at(addr, size);
      if (!obj) obj = object_bytes(*mem, addr, size, scratch);
      if (!obj) {
        if (rep->unreadable_objects++ < 20)
          rep->warnings.push_back(
              fmt::format("object {:#x} not readable: {}", addr, mem->why_unreadable(addr)));
        return;
      }
      if (filter && !filter->matches(*mem, obj, addr)) return;
      ++rep->matched;
      int64_t rcv = 0;
      bool has = false;
      if (rc) {
        if (rc_int) {
          rcv = rc_int->load(obj);
          has = true;
        } else {
          has = eval_field(*mem, obj, *rc).as_int(&rcv);
        }
        if (has) {
          if (rcv >= -1 && rcv < kDense - 1)
            ++dense[rcv + 1];
          else
            ++rep->histogram[rcv];
        }
      }
      if (keep) {
        cur.addr = addr;
        cur.has_refcount = has;
        cur.refcount = rcv;
        cur.fields.clear();
        for (const auto& s : *shows) cur.fields.push_back(eval_field(*mem, obj, s));
        if (on_object)
          on_object(on_object_ctx, cur);
        else
          rep->objects.push_back(cur);
      }
    }
    // Counting only (no filter, nothing kept, refcount in the object): the
    // common summary case, a tight loop; anything unusual goes through one().
    void count(const uint64_t* objs, size_t n) {
      uint64_t matched = 0;
      for (size_t i = 0; i < n; ++i) {
        const uint8_t* obj = w.at(objs[i], size);
        if (!obj) {
          one(objs[i]);
          continue;
        }
        ++matched;
        int64_t rcv = rc_int->load(obj);
        if (rcv >= -1 && rcv < kDense - 1)
          ++dense[rcv + 1];
        else
          ++rep->histogram[rcv];
      }
      rep->matched += matched;
    }
    std::atomic<uint64_t>* progress = nullptr;
    static void sink(void* ctx, const uint64_t* objs, size_t n) {
      auto* e = static_cast<Eval*>(ctx);
      if (e->progress) e->progress->fetch_add(n, std::memory_order_relaxed);
      if (!e->filter && !e->keep && e->rc_int) {
        // A single list hands over all its objects at once: poll between chunks.
        for (size_t i = 0; i < n; i += 0x10000) {
          if (i && e->intr && e->intr->load(std::memory_order_relaxed)) return;
          e->count(objs + i, std::min<size_t>(n - i, 0x10000));
        }
        return;
      }
      for (size_t i = 0; i < n; ++i) {
        // A single list hands over all its objects at once: poll here too.
        if ((i & 0xffff) == 0xffff && e->intr && e->intr->load(std::memory_order_relaxed)) return;
        e->one(objs[i]);
      }
    }
  };
  Eval ev;
  ev.intr = spec.limits.interrupted;
  ev.mem = &mem;
  ev.size = ts->size;
  ev.rc = have_rc ? &rc : nullptr;
  IntField rc_int;
  if (have_rc && rc.hops.size() == 1) rc_int = IntField::of(rc.hops[0]);
  ev.rc_int = have_rc && rc.hops.size() == 1 ? &rc_int : nullptr;
  ev.filter = filter.get();
  ev.shows = &shows;
  ev.keep = spec.keep_values;
  ev.progress = spec.limits.progress;
  ev.on_object = spec.on_object;
  ev.on_object_ctx = spec.on_object_ctx;
  ev.rep = &rep;
  ev.dense.assign(kDense, 0);
  WalkLimits lim = spec.limits;
  if (spec.evaluate) lim.sink = ObjectSink{&Eval::sink, &ev};

  uint64_t t0 = now_ns();
  uint64_t arr_count = 0;
  const Type* elem = array_of(head_type, &arr_count);
  switch (spec.link) {
    case WalkSpec::Link::kList:
    case WalkSpec::Link::kHlist: {
      // Intrusive links: a ring of list_head, or an hlist. An array of heads
      // (from the symbol's type, or --buckets) makes it a hash table.
      const bool ring = spec.link == WalkSpec::Link::kList;
      const char* head_t = ring ? "list_head" : "hlist_head";
      uint64_t nb = spec.buckets ? spec.buckets : (elem && named(elem, head_t) ? arr_count : 0);
      if (nb) {
        rep.mode = ring ? "hash:list_head" : "hash:hlist";
        rep.walk = walk_buckets(mem, head, nb, ring ? 16 : 8,
                                ring ? BucketKind::kListHead : BucketKind::kHlist, member_off, lim);
      } else {
        rep.mode = ring ? "list" : "hlist";
        rep.walk =
            ring ? walk_list(mem, head, member_off, lim) : walk_hlist(mem, head, member_off, lim);
      }
      break;
    }
    case WalkSpec::Link::kNext: {
      uint64_t nb = spec.buckets;
      if (!nb && elem && elem->kind == TypeKind::kPointer) nb = arr_count;
      if (nb) {
        rep.mode = "hash:chain";
        rep.walk = walk_buckets(mem, head, nb, 8, BucketKind::kChain, member_off, lim);
        break;
      }
      uint64_t first = head;
      const Type* hs = head_type ? head_type->strip() : nullptr;
      if (hs && hs->kind == TypeKind::kPointer) {
        LR_ASSIGN(first, mem.read_u64(head));
      }
      rep.mode = "chain";
      rep.walk = walk_chain(mem, first, member_off, lim);
      break;
    }
    case WalkSpec::Link::kArray:
    case WalkSpec::Link::kPointerArray: {
      const bool ptrs = spec.link == WalkSpec::Link::kPointerArray;
      uint64_t n = spec.count ? spec.count : arr_count;
      if (!spec.count_from.empty()) {
        LR_ASSIGN(n, count_from_target(prog, spec.count_from));
      }
      if (!n && spec.count_from.empty())
        return make_error(
            Errc::kInvalidArgument,
            fmt::format("--{} needs --count N (the head symbol's type gives no length)",
                        ptrs ? "pointer-array" : "array"));
      rep.mode = ptrs ? "pointer-array" : "array";
      rep.walk =
          ptrs ? walk_pointer_array(mem, head, n, lim) : walk_array(mem, head, n, ts->size, lim);
      break;
    }
    case WalkSpec::Link::kTree: {
      LR_ASSIGN(rep.walk, walk_tree_head(prog, hv, member_loc, lim, &rep.mode));
      break;
    }
    case WalkSpec::Link::kXarray: {
      rep.mode = "xarray";
      LR_ASSIGN(rep.walk, walk_xarray_head(prog, hv, lim));
      break;
    }
    case WalkSpec::Link::kHashTable: {
      rep.mode = "hash:ganesha";
      LR_ASSIGN(rep.walk, walk_hashtable_head(prog, hv, spec.member.empty() ? "val" : spec.member,
                                              ts->size, lim));
      break;
    }
    case WalkSpec::Link::kNone:
      return make_error(Errc::kInvalidArgument,
                        "say how objects are linked: --next, --list-member, --hlist-member, "
                        "--tree-member, --xarray, --hashtable, --array or --pointer-array");
  }
  rep.walk_ns = now_ns() - t0;
  // Nothing at all was readable where the walk starts: that is a lookup that
  // failed (exit 4), not an empty structure.
  if (rep.walk.stop == WalkStop::kFault && rep.walk.objects.empty())
    return make_error(Errc::kNotFound, "the walk cannot start: " + rep.walk.stop_detail);
  if (spec.evaluate && !rep.walk.objects.empty() &&
      rep.unreadable_objects == rep.walk.objects.size())
    return make_error(Errc::kNotFound,
                      fmt::format("the walk cannot start: none of its {} objects is readable "
                                  "(the first, {:#x}: {})",
                                  rep.walk.objects.size(), rep.walk.objects.front(),
                                  mem.why_unreadable(rep.walk.objects.front())));
  rep.visited = rep.walk.objects.size();
  if (!spec.evaluate) rep.matched = rep.visited;
  for (int64_t i = 0; i < kDense; ++i)
    if (ev.dense[i]) rep.histogram[i - 1] += ev.dense[i];
  if (filter && filter->errors())
    rep.warnings.push_back(fmt::format(
        "--where could not be evaluated on {} object(s), which count as not matched; first at "
        "{:#x}: {}",
        filter->errors(), filter->first_error_addr(), filter->first_error()));
  if (rep.unreadable_objects > 20)
    rep.warnings.push_back(
        fmt::format("{} objects in all were not readable", rep.unreadable_objects));
  return rep;
}

}  // namespace lr
