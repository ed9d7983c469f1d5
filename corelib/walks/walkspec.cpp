#include "corelib/walks/walkspec.hpp"

#include "corelib/blocks/holders.hpp"
#include "corelib/walks/container_kinds.hpp"
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
    if (!mt || mt->kind != TypeKind::kPointer || !same_type(mt->target, t))
      return make_error(
          Errc::kInvalidArgument,
          fmt::format("next member '{}' is {}, not a pointer to {}", member,
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

namespace {

// Evaluates objects as the walkers find them (per bucket, per list), while
// their memory is still in cache: refcount, filter, shown fields; keeps the
// refcount histogram and streams or keeps what is shown.
class ObjectEvaluator {
 public:
  ObjectEvaluator(const Memory& mem, const WalkSpec& spec, uint64_t size, const FieldSpec* rc,
                  const Filter* filter, const std::vector<FieldSpec>* shows, WalkReport* rep)
      : intr_(spec.limits.interrupted),
        progress_(spec.limits.progress),
        mem_(mem),
        size_(size),
        rc_(rc),
        filter_(filter),
        shows_(shows),
        keep_(spec.keep_values),
        rep_(rep),
        on_object_(spec.on_object),
        on_object_ctx_(spec.on_object_ctx),
        reconcile_(spec.reconcile),
        dense_(kDense, 0) {
    // A refcount in the object itself is read with no path to follow.
    if (rc && rc->hops.size() == 1) {
      rc_field_ = IntField::of(rc->hops[0]);
      rc_int_ = &rc_field_;
    }
  }
  ObjectEvaluator(const ObjectEvaluator&) = delete;
  ObjectEvaluator& operator=(const ObjectEvaluator&) = delete;

  ObjectSink sink() { return ObjectSink{&ObjectEvaluator::on_objects, this}; }

  // Folds the dense part of the histogram into the report's.
  void finish() {
    for (int64_t i = 0; i < kDense; ++i)
      if (dense_[i]) rep_->histogram[i - 1] += dense_[i];
  }

 private:
  static constexpr int64_t kDense = 4096;  // refcounts -1 .. kDense-2 counted in an array

  static void on_objects(void* ctx, const uint64_t* objs, size_t n) {
    auto* e = static_cast<ObjectEvaluator*>(ctx);
    if (e->progress_) e->progress_->fetch_add(n, std::memory_order_relaxed);
    if (!e->filter_ && !e->keep_ && e->rc_int_ && !e->reconcile_) {
      // A single list hands over all its objects at once: poll between chunks.
      for (size_t i = 0; i < n; i += 0x10000) {
        if (i && e->interrupted()) return;
        e->count(objs + i, std::min<size_t>(n - i, 0x10000));
      }
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      // A single list hands over all its objects at once: poll here too.
      if ((i & 0xffff) == 0xffff && e->interrupted()) return;
      e->one(objs[i]);
    }
  }

  bool interrupted() const { return intr_ && intr_->load(std::memory_order_relaxed); }

  void tally(int64_t rcv) {
    if (rcv >= -1 && rcv < kDense - 1)
      ++dense_[rcv + 1];
    else
      ++rep_->histogram[rcv];
  }

  const uint8_t* bytes_of(uint64_t addr) {
    const uint8_t* obj = w_.at(addr, size_);
    if (!obj && mem_.window(addr, &w_)) obj = w_.at(addr, size_);
    if (!obj) obj = object_bytes(mem_, addr, size_, scratch_);
    return obj;
  }

  void one(uint64_t addr) {
    const uint8_t* obj = bytes_of(addr);
    if (!obj) {
      if (rep_->unreadable_objects++ < 20)
        rep_->warnings.push_back(
            fmt::format("object {:#x} not readable: {}", addr, mem_.why_unreadable(addr)));
      return;
    }
    if (filter_ && !filter_->matches(mem_, obj, addr)) return;
    ++rep_->matched;
    int64_t rcv = 0;
    bool has = false;
    if (rc_) {
      if (rc_int_) {
        rcv = rc_int_->load(obj);
        has = true;
      } else {
        has = eval_field(mem_, obj, *rc_).as_int(&rcv);
      }
      if (has) tally(rcv);
    }
    if (reconcile_) reconcile(addr, has, rcv);
    if (!keep_) return;
    cur_.addr = addr;
    cur_.has_refcount = has;
    cur_.refcount = rcv;
    cur_.fields.clear();
    for (const auto& s : *shows_) cur_.fields.push_back(eval_field(mem_, obj, s));
    if (on_object_)
      on_object_(on_object_ctx_, cur_);
    else
      rep_->objects.push_back(cur_);
  }

  // The references found in memory against the refcount: more counted than
  // found means counted references nobody holds.
  void reconcile(uint64_t addr, bool has, int64_t rcv) {
    cur_.referrers.clear();
    cur_.inbound = -1;
    cur_.inbound_words = -1;
    auto refs = reconcile_->refs_into(addr, size_);
    if (!refs.ok()) {
      ++rep_->not_indexed;
      return;
    }
    HolderCount hc = count_holders(mem_, refs.value());
    cur_.inbound = static_cast<int64_t>(hc.holders);
    cur_.inbound_words = static_cast<int64_t>(hc.words);
    for (size_t i = 0; i < refs.value().size() && i < WalkedObject::kMaxReferrers; ++i)
      cur_.referrers.push_back(refs.value()[i]);
    cur_.from_leaked = 0;
    for (const Ref& r : refs.value()) cur_.from_leaked += reconcile_->from_unreachable(r);
    if (has && rcv > cur_.inbound) ++rep_->over_referenced;
    if (has && rcv <= 0 && cur_.inbound > 0) ++rep_->zero_referenced;
    if (cur_.from_leaked) ++rep_->leaked_held;
  }

  // Counting only (no filter, nothing kept, refcount in the object): the
  // common summary case, a tight loop; anything unusual goes through one().
  void count(const uint64_t* objs, size_t n) {
    uint64_t matched = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* obj = w_.at(objs[i], size_);
      if (!obj) {
        one(objs[i]);
        continue;
      }
      ++matched;
      tally(rc_int_->load(obj));
    }
    rep_->matched += matched;
  }

  const std::atomic<bool>* intr_;
  std::atomic<uint64_t>* progress_;
  const Memory& mem_;
  uint64_t size_;
  const FieldSpec* rc_;
  IntField rc_field_;
  const IntField* rc_int_ = nullptr;
  const Filter* filter_;
  const std::vector<FieldSpec>* shows_;
  bool keep_;
  WalkReport* rep_;
  void (*on_object_)(void*, const WalkedObject&);
  void* on_object_ctx_;
  const RefSource* reconcile_;
  std::vector<uint64_t> dense_;
  std::vector<uint8_t> scratch_;
  Memory::Window w_;
  WalkedObject cur_;  // reused: its fields keep their capacity
};

// The walked type: the spec's, else the one a container kind reads from the
// head's type; checked for a size objects can be read with.
Result<const Type*> walked_type(Program& prog, const WalkSpec& spec, const Variable& hv) {
  const Type* t = nullptr;
  const ContainerKind* k = spec.link == WalkSpec::Link::kContainer
                               ? find_container_for(spec.container, hv.type)
                               : nullptr;
  if (!spec.type.empty()) {
    LR_ASSIGN(t, prog.types().find(spec.type));
  } else if (k && k->element) {
    LR_ASSIGN(t, k->element(prog, hv, spec.member));
  } else {
    return make_error(Errc::kInvalidArgument, "the walk needs the objects' type");
  }
  const std::string name = spec.type.empty() ? t->display() : spec.type;
  const Type* ts = t->strip();
  if (!ts->size)
    return make_error(Errc::kNotFound,
                      fmt::format("type '{}' has no size (only declared, never defined?)", name));
  // A corrupt or hostile DWARF size must not drive allocations.
  if (ts->size > kMaxObjectSize)
    return make_error(Errc::kBadFormat, fmt::format("type '{}' claims {} bytes; refusing objects "
                                                    "larger than {} bytes",
                                                    name, ts->size, kMaxObjectSize));
  return t;
}

// The head: the symbol's DWARF type decides how it is read when it can.
Result<Variable> walk_head(Program& prog, const WalkSpec& spec, WalkReport* rep) {
  Variable hv;
  if (spec.link == WalkSpec::Link::kAddresses) {
    if (!spec.addresses)
      return make_error(Errc::kInvalidArgument, "an addresses walk needs its addresses");
    hv.name = spec.head;  // the objects were found already; `head` only names them
    hv.addr = spec.addresses_at;
    return hv;
  }
  if (spec.head_var) {
    hv = *spec.head_var;
  } else {
    LR_ASSIGN(hv, prog.resolve_place(spec.head));
  }
  // A symbol whose type nobody knows: a pointer to the first object, the
  // object itself, one list head or an array of them are all plausible, and
  // a guess walks the wrong thing with no error. Only a plain address (the
  // caller's own statement of what is there) or a given count is read.
  uint64_t as_number = 0;
  bool symbol_head =
      !spec.head_var ? !parse_u64(spec.head, &as_number) && spec.head.find('+') == std::string::npos
                     : !hv.name.empty();
  bool counted = spec.buckets || spec.count || !spec.count_from.empty();
  if (symbol_head && !hv.type && !counted &&
      (spec.link == WalkSpec::Link::kNext || spec.link == WalkSpec::Link::kList ||
       spec.link == WalkSpec::Link::kHlist))
    return make_error(Errc::kNotFound,
                      fmt::format("head '{}' has no type (no DWARF declares it): it may be a "
                                  "pointer, an object, one head or an array of heads; give the "
                                  "bucket count, or types that declare the variable",
                                  hv.name.empty() ? spec.head : hv.name));
  LR_TRY(check_list_head(spec, hv.type, &rep->warnings));
  // Every message names the head as given when it resolved to no name (an
  // address, an expression).
  if (hv.name.empty()) hv.name = spec.head;
  return hv;
}

// The shown fields; those from spec.scalar_from on (group and sort keys)
// must be values: refcount wrappers are descended, other structs refused.
Result<std::vector<FieldSpec>> shown_fields(const Type* t, const WalkSpec& spec) {
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
  return shows;
}

// Runs the walker the spec's link kind names; sets rep->mode and rep->walk.
Result<void> walk_by_link(Program& prog, const WalkSpec& spec, const Variable& hv,
                          const FieldLoc& member, uint64_t obj_size, const WalkLimits& lim,
                          WalkReport* rep) {
  const Memory& mem = prog.mem();
  const uint64_t head = hv.addr;
  uint64_t arr_count = 0;
  const Type* elem = array_of(hv.type, &arr_count);
  switch (spec.link) {
    case WalkSpec::Link::kList:
    case WalkSpec::Link::kHlist: {
      // Intrusive links: a ring of list_head, or an hlist. An array of heads
      // (from the symbol's type, or --buckets) makes it a hash table.
      const bool ring = spec.link == WalkSpec::Link::kList;
      const char* head_t = ring ? "list_head" : "hlist_head";
      uint64_t nb = spec.buckets ? spec.buckets : (elem && named(elem, head_t) ? arr_count : 0);
      if (nb) {
        rep->mode = ring ? "hash:list_head" : "hash:hlist";
        rep->walk =
            walk_buckets(mem, head, nb, ring ? 16 : 8,
                         ring ? BucketKind::kListHead : BucketKind::kHlist, member.offset, lim);
      } else {
        rep->mode = ring ? "list" : "hlist";
        rep->walk = ring ? walk_list(mem, head, member.offset, lim)
                         : walk_hlist(mem, head, member.offset, lim);
      }
      return {};
    }
    case WalkSpec::Link::kNext: {
      uint64_t nb = spec.buckets;
      if (!nb && elem && elem->kind == TypeKind::kPointer) nb = arr_count;
      if (nb) {
        rep->mode = "hash:chain";
        rep->walk = walk_buckets(mem, head, nb, 8, BucketKind::kChain, member.offset, lim);
        return {};
      }
      uint64_t first = head;
      const Type* hs = hv.type ? hv.type->strip() : nullptr;
      if (hs && hs->kind == TypeKind::kPointer) {
        LR_ASSIGN(first, mem.read_u64(head));
      }
      rep->mode = "chain";
      rep->walk = walk_chain(mem, first, member.offset, lim);
      return {};
    }
    case WalkSpec::Link::kArray:
    case WalkSpec::Link::kPointerArray: {
      const bool ptrs = spec.link == WalkSpec::Link::kPointerArray;
      uint64_t n = spec.count ? spec.count : arr_count;
      if (!spec.count_from.empty()) {
        LR_ASSIGN(n, count_from_target(prog, spec.count_from));
        std::string what = fmt::format("'{}' =", spec.count_from);
        LR_TRY(check_amount_bound(spec, hv, n, what.c_str(), true));
      }
      if (!n && spec.count_from.empty())
        return make_error(
            Errc::kInvalidArgument,
            fmt::format("{} walk needs a count (the head symbol's type gives no length)",
                        ptrs ? "a pointer-array" : "an array"));
      rep->mode = ptrs ? "pointer-array" : "array";
      rep->walk =
          ptrs ? walk_pointer_array(mem, head, n, lim) : walk_array(mem, head, n, obj_size, lim);
      return {};
    }
    case WalkSpec::Link::kTree: {
      LR_ASSIGN(rep->walk, walk_tree_head(prog, hv, member, lim, &rep->mode));
      return {};
    }
    case WalkSpec::Link::kXarray: {
      rep->mode = "xarray";
      LR_ASSIGN(rep->walk, walk_xarray_head(prog, hv, lim));
      return {};
    }
    case WalkSpec::Link::kContainer: {
      const ContainerKind* k = find_container_for(spec.container, hv.type);
      if (!k)
        return make_error(Errc::kInvalidArgument,
                          fmt::format("no container kind '{}' is registered", spec.container));
      rep->mode = k->mode;
      std::string m = spec.member.empty() && !k->members.empty() ? k->members.front() : spec.member;
      // One check for every kind: a member it does not take is refused here.
      if (!takes_member(*k, m))
        return make_error(
            Errc::kInvalidArgument,
            fmt::format("{} takes {}, not '{}'", k->what,
                        k->members.empty() ? std::string("no member")
                                           : fmt::format("{}", fmt::join(k->members, " or ")),
                        m));
      LR_ASSIGN(rep->walk, k->walk(prog, hv, m, obj_size, lim));
      return {};
    }
    case WalkSpec::Link::kAddresses:
      rep->mode = spec.addresses_mode.empty() ? "given" : spec.addresses_mode;
      rep->walk = walk_given(*spec.addresses, lim);
      return {};
    case WalkSpec::Link::kNone:
      break;
  }
  return make_error(Errc::kInvalidArgument,
                    "no link: say how objects are linked (a next member, a list, hlist or "
                    "tree member, an xarray, a hashtable, an array or a pointer-array)");
}

// After the walk: nothing readable where it starts is a failed lookup (exit
// 4), not an empty structure; otherwise the counts and the warnings.
Result<void> conclude(const Memory& mem, const WalkSpec& spec, const Filter* filter,
                      WalkReport* rep) {
  if (rep->walk.stop == WalkStop::kFault && rep->walk.objects.empty())
    return make_error(Errc::kNotFound, "the walk cannot start: " + rep->walk.stop_detail);
  if (spec.evaluate && !rep->walk.objects.empty() &&
      rep->unreadable_objects == rep->walk.objects.size())
    return make_error(Errc::kNotFound,
                      fmt::format("the walk cannot start: none of its {} objects is readable "
                                  "(the first, {:#x}: {})",
                                  rep->walk.objects.size(), rep->walk.objects.front(),
                                  mem.why_unreadable(rep->walk.objects.front())));
  rep->visited = rep->walk.objects.size();
  if (!spec.evaluate) rep->matched = rep->visited;
  if (filter && filter->errors())
    rep->warnings.push_back(fmt::format(
        "{} could not be evaluated on {} object(s), which count as not matched; first at "
        "{:#x}: {}",
        spec.where_name, filter->errors(), filter->first_error_addr(), filter->first_error()));
  if (rep->unreadable_objects > 20)
    rep->warnings.push_back(
        fmt::format("{} objects in all were not readable", rep->unreadable_objects));
  return {};
}

// The head and the walked type: a given type first (its lookup's error
// names the debuginfo that is missing), a type the container's own type
// says once the head is known.
Result<std::pair<Variable, const Type*>> head_and_type(Program& prog, const WalkSpec& spec,
                                                       WalkReport* rep) {
  const Type* t = nullptr;
  if (!spec.type.empty()) {
    LR_ASSIGN(t, walked_type(prog, spec, Variable{}));
  }
  LR_ASSIGN(Variable hv, walk_head(prog, spec, rep));
  if (!t) {
    LR_ASSIGN(t, walked_type(prog, spec, hv));
  }
  return std::make_pair(std::move(hv), t);
}

bool links_by_member(WalkSpec::Link l) {
  return l == WalkSpec::Link::kNext || l == WalkSpec::Link::kList || l == WalkSpec::Link::kHlist ||
         l == WalkSpec::Link::kTree;
}

}  // namespace

Result<void> check_walk(Program& prog, const WalkSpec& spec) {
  WalkReport rep;
  LR_ASSIGN(auto ht, head_and_type(prog, spec, &rep));
  const auto& [hv, t] = ht;
  LR_TRY(check_walk_contract(spec, t->strip(), hv));
  if (links_by_member(spec.link)) {
    LR_ASSIGN(FieldLoc member, resolve_path(t, spec.member));
    LR_TRY(check_link_member(t, spec.link, spec.member, member.type));
  }
  return {};
}

Result<WalkReport> run_walk(Program& prog, const WalkSpec& spec) {
  WalkReport rep;
  LR_ASSIGN(auto ht, head_and_type(prog, spec, &rep));
  const auto& [hv, t] = ht;
  rep.type_name = t->display();
  rep.type_size = t->strip()->size;
  rep.head_addr = hv.addr;
  LR_TRY(check_walk_contract(spec, t->strip(), hv));

  FieldSpec rc;
  if (!spec.refcount.empty()) {
    LR_ASSIGN(rc, make_field_spec(t, spec.refcount, true));
  }
  const FieldSpec* rcp = spec.refcount.empty() ? nullptr : &rc;
  LR_ASSIGN(auto shows, shown_fields(t, spec));
  std::unique_ptr<Filter> filter;
  if (!spec.where.empty()) {
    LR_ASSIGN(filter, Filter::parse(spec.where, t, rcp, nullptr, spec.where_name));
  }
  FieldLoc member;
  if (links_by_member(spec.link)) {
    LR_ASSIGN(member, resolve_path(t, spec.member));
    LR_TRY(check_link_member(t, spec.link, spec.member, member.type));
  }

  ObjectEvaluator ev(prog.mem(), spec, rep.type_size, rcp, filter.get(), &shows, &rep);
  WalkLimits lim = spec.limits;
  if (spec.evaluate) lim.sink = ev.sink();
  uint64_t t0 = now_ns();
  LR_TRY(walk_by_link(prog, spec, hv, member, rep.type_size, lim, &rep));
  rep.walk_ns = now_ns() - t0;
  ev.finish();
  LR_TRY(conclude(prog.mem(), spec, filter.get(), &rep));
  return rep;
}

}  // namespace lr
