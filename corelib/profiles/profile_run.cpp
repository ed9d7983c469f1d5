// Running a profile: every set is compiled against the target first (so a
// profile that does not fit fails before any output), then walked in
// dependency order; each object is judged as it is found and streamed.
#include <fmt/format.h>

#include <optional>
#include <unordered_map>

#include "corelib/blocks/heap.hpp"
#include "corelib/blocks/holders.hpp"
#include "corelib/objects/filter.hpp"
#include "corelib/walks/container_kinds.hpp"
#include "corelib/walks/walkspec.hpp"
#include "corelib/walks/walkspec_internal.hpp"
#include "profile_bind.hpp"

namespace lr {

namespace {

constexpr uint64_t kMaxBuckets = 1ull << 28;
constexpr uint64_t kMaxCount = kMaxCountFrom;
constexpr size_t kMaxWarnings = 1000;  // per set; the rest are counted

// A number written in the profile, or an expression on the parent object.
struct Amount {
  bool literal = false;
  uint64_t value = 0;
  std::string symbol;          // top-level sets: a variable holding it
  std::unique_ptr<Expr> expr;  // nested sets: evaluated on the parent
};

struct Holder {
  std::string name;
  std::unique_ptr<Expr> count;
  const std::unordered_map<uint64_t, int64_t>* inbound = nullptr;  // from another set
};

struct Outbound {  // this set's pointers that hold references in another set
  FieldSpec field;
  std::unordered_map<uint64_t, int64_t>* counts;
};

struct CompiledSet {
  const ProfileSet* decl = nullptr;
  BoundType* type = nullptr;
  CompiledSet* parent = nullptr;
  std::optional<Variable> found;  // a root found by content (ProfileSet::find_*)
  FieldSpec head_field;           // nested: the head inside the parent object
  bool head_deref = false;
  Amount buckets, count;
  WalkSpec::Link link = WalkSpec::Link::kNone;
  FieldSpec rc;
  bool has_rc = false;
  IntField rc_int;  // the refcount read in place (one hop, a whole integer)
  bool rc_fast = false;
  std::unique_ptr<Expr> where;
  std::vector<FieldSpec> labels;
  FieldSpec key;
  bool has_key = false;
  std::vector<Holder> holders;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> invariants;
  std::vector<Outbound> outbound;
  std::vector<uint64_t> objects;  // kept when another set nests under this one
  bool keep_objects = false;
  bool stream = true;
  bool alloc_check = false;  // its type says allocation = "malloc"
  uint64_t alloc_checked = 0;
  ProfileSetSummary sum;
};

WalkSpec::Link link_of(const std::string& l) {
  if (l == "list") return WalkSpec::Link::kList;
  if (l == "hlist") return WalkSpec::Link::kHlist;
  if (l == "next") return WalkSpec::Link::kNext;
  if (l == "array") return WalkSpec::Link::kArray;
  if (l == "pointer-array") return WalkSpec::Link::kPointerArray;
  if (l == "tree") return WalkSpec::Link::kTree;
  if (find_container(l)) return WalkSpec::Link::kContainer;
  return WalkSpec::Link::kXarray;
}

class Runner {
 public:
  Runner(Program& prog, const Profile& p, const ProfileRunOptions& o, ProfileSink& sink)
      : prog_(prog), p_(p), opts_(o), sink_(sink), bind_(prog, p) {}

  Result<void> run() {
    sets_.resize(p_.sets.size());
    for (size_t i = 0; i < p_.sets.size(); ++i) LR_TRY(compile(i));
    mark_wanted();
    // Every walk is checked before the first set is printed.
    for (auto& s : sets_)
      if (walked(s)) LR_TRY(precheck(s));
    for (auto& s : sets_) {
      if (!walked(s)) continue;
      LR_TRY(walk_set(s));
      if (sink_.stopped()) break;
    }
    return {};
  }

 private:
  Error fail(Errc c, const ProfileSet& s, const std::string& what) {
    return make_error(
        c, fmt::format("profile {} ({}): set '{}': {}", p_.name, p_.source, s.name, what));
  }
  CompiledSet* by_name(const std::string& n) {
    for (size_t i = 0; i < p_.sets.size(); ++i)
      if (p_.sets[i].name == n) return &sets_[i];
    return nullptr;
  }
  bool feeds_other(const CompiledSet& s) const { return !s.outbound.empty(); }
  bool walked(const CompiledSet& s) const { return s.stream || s.keep_objects || feeds_other(s); }

  // The walk's own checks (head type against the link, member, literal
  // amounts) with no read of the structure: a nested set's head is typed
  // by the parent's member.
  Result<void> precheck(const CompiledSet& s) {
    const ProfileSet& d = *s.decl;
    Variable hv;
    WalkSpec ws;
    ws.type = s.type->c;
    ws.head = d.head;
    if (s.found) ws.head_var = &*s.found;
    if (s.parent) {
      hv.name = fmt::format("{}->{}", s.parent->decl->name, d.head);
      hv.type = s.head_field.type;
      if (s.head_deref && hv.type) hv.type = hv.type->strip()->target;
      ws.head_var = &hv;
    }
    ws.link = s.link;
    if (s.link == WalkSpec::Link::kContainer) ws.container = d.link;
    ws.member = d.member;
    if (s.buckets.literal) ws.buckets = s.buckets.value;
    if (s.count.literal) ws.count = s.count.value;
    auto ok = check_walk(prog_, ws);
    if (ok.ok()) return {};
    // A top-level head that does not resolve is a head error, as in walk_one.
    bool head_err = !s.parent && !s.found && !prog_.resolve_place(d.head).ok();
    return fail(ok.error().code, d, (head_err ? "head: " : "") + ok.error().message);
  }
  // Warnings come from the core (every parent may add some): bounded.
  void warn(CompiledSet& s, std::string w) {
    if (s.sum.warnings.size() < kMaxWarnings)
      s.sum.warnings.push_back(std::move(w));
    else
      ++s.sum.warnings_dropped;
  }

  // Only the sets asked for are streamed; what they depend on runs quietly.
  void mark_wanted() {
    if (opts_.only_sets.empty()) return;
    for (auto& s : sets_) {
      bool want = false;
      for (const auto& n : opts_.only_sets) want |= n == s.decl->name;
      s.stream = want;
    }
  }

  Result<std::unique_ptr<Expr>> compile_expr(const CompiledSet& s, const std::string& text,
                                             const std::string& what,
                                             const std::vector<std::string>& vars = {}) {
    ExprScope sc = bind_.scope(s.type, what);
    sc.refcount = s.has_rc ? &s.rc : nullptr;
    sc.vars = vars;
    auto e = Expr::compile(text, sc);
    if (!e.ok()) return fail(e.error().code, *s.decl, e.error().message);
    return e;
  }

  Result<void> amount(CompiledSet& s, const std::string& text, const char* what, Amount* a) {
    if (text.empty()) return {};
    if (parse_u64(text, &a->value)) {
      a->literal = true;
      return {};
    }
    if (!s.parent) {
      a->symbol = text;
      return {};
    }
    ExprScope sc = bind_.scope(s.parent->type, std::string(what));
    auto e = Expr::compile(text, sc);
    if (!e.ok()) return fail(e.error().code, *s.decl, e.error().message);
    a->expr = std::move(e).value();
    return {};
  }

  Result<void> compile_head(CompiledSet& s) {
    const ProfileSet& d = *s.decl;
    if (!d.find_module.empty()) {
      auto ft = d.find_type.empty() ? Result<BoundType*>(s.type) : bind_.bind(d.find_type);
      if (!ft.ok()) return fail(ft.error().code, d, "find: " + ft.error().message);
      auto v = find_object(prog_, bind_, ft.value(), d);
      if (!v.ok()) return fail(v.error().code, d, v.error().message);
      s.found = std::move(v).value();
    }
    if (!s.parent) return {};
    auto hf = make_field_spec(s.parent->type->type, d.head, false, &bind_.alias());
    if (!hf.ok()) return fail(hf.error().code, d, "head: " + hf.error().message);
    s.head_field = std::move(hf).value();
    const Type* ht = s.head_field.type ? s.head_field.type->strip() : nullptr;
    // A pointer to the list head or array is followed; next/tree/xarray
    // walks read a pointer head themselves.
    bool self_deref = s.link == WalkSpec::Link::kNext || s.link == WalkSpec::Link::kTree ||
                      s.link == WalkSpec::Link::kXarray || s.link == WalkSpec::Link::kContainer;
    s.head_deref = ht && ht->kind == TypeKind::kPointer && !self_deref;
    return {};
  }

  Result<void> compile(size_t i) {
    CompiledSet& s = sets_[i];
    const ProfileSet& d = p_.sets[i];
    s.decl = &d;
    s.link = link_of(d.link);
    if (!d.parent.empty()) {
      s.parent = by_name(d.parent);
      s.parent->keep_objects = true;
    }
    auto bt = bind_.bind(d.type);
    if (!bt.ok()) return std::move(bt).error();
    s.type = bt.value();
    s.sum.set = &d;
    s.sum.type_name = s.type->type->display();
    s.sum.type = s.type->type;
    s.alloc_check = s.type->decl && s.type->decl->allocation == "malloc";
    if (s.alloc_check && !prog_.core())
      return fail(Errc::kUnsupported, d,
                  fmt::format("type '{}' says allocation = \"malloc\": that needs a process core",
                              s.type->decl->name));
    LR_TRY(compile_head(s));
    if (!d.member.empty() && s.link != WalkSpec::Link::kTree &&
        s.link != WalkSpec::Link::kContainer) {
      auto ml = make_field_spec(s.type->type, d.member, false, &bind_.alias());
      if (!ml.ok()) return fail(ml.error().code, d, "member: " + ml.error().message);
      auto ok = check_link_member(s.type->type, s.link, d.member, ml->type);
      if (!ok.ok()) return fail(ok.error().code, d, ok.error().message);
    }
    LR_TRY(amount(s, d.buckets, "buckets", &s.buckets));
    LR_TRY(amount(s, d.count, "count", &s.count));
    if (!d.refcount.empty()) {
      auto rc = make_field_spec(s.type->type, d.refcount, true, &bind_.alias());
      if (!rc.ok()) return fail(rc.error().code, d, "refcount: " + rc.error().message);
      s.rc = std::move(rc).value();
      s.has_rc = true;
      const Type* rt = s.rc.type ? s.rc.type->strip() : nullptr;
      s.rc_fast = s.rc.hops.size() == 1 && rt && rt->size && rt->size <= 8;
      if (s.rc_fast) s.rc_int = IntField::of(s.rc.hops[0]);
    }
    if (!d.where.empty()) {
      LR_ASSIGN(s.where, compile_expr(s, d.where, "where"));
    }
    for (const auto& l : d.label) {
      auto f = make_field_spec(s.type->type, l, false, &bind_.alias());
      if (!f.ok()) return fail(f.error().code, d, "label: " + f.error().message);
      s.labels.push_back(std::move(f).value());
    }
    if (!d.key.empty()) {
      auto f = make_field_spec(s.type->type, d.key, false, &bind_.alias());
      if (!f.ok()) return fail(f.error().code, d, "key: " + f.error().message);
      s.key = std::move(f).value();
      s.has_key = true;
    }
    return compile_rules(s);
  }

  // Holders and invariants; those naming an optional member the target
  // lacks are skipped with a note (the rest of the set still runs).
  Result<void> compile_rules(CompiledSet& s) {
    const ProfileSet& d = *s.decl;
    for (const auto& h : d.holders) {
      std::string miss = h.count.empty() ? bind_.uses_missing(by_name(h.from)->type, h.field)
                                         : bind_.uses_missing(s.type, h.count);
      if (!miss.empty()) {
        s.sum.notes.push_back(
            fmt::format("holder '{}' skipped: the target has no {} (optional)", h.name, miss));
        continue;
      }
      Holder ch;
      ch.name = h.name;
      if (!h.count.empty()) {
        LR_ASSIGN(ch.count, compile_expr(s, h.count, "holder '" + h.name + "'"));
      } else {
        CompiledSet* src = by_name(h.from);
        auto f = make_field_spec(src->type->type, h.field, false, &bind_.alias());
        if (!f.ok())
          return fail(f.error().code, d, "holder '" + h.name + "': " + f.error().message);
        const Type* ft = f->type ? f->type->strip() : nullptr;
        if (!ft || ft->kind != TypeKind::kPointer)
          return fail(Errc::kInvalidArgument, d,
                      fmt::format("holder '{}': {}.{} is {}, not a pointer", h.name, h.from,
                                  h.field, f->type ? f->type->display() : "unknown"));
        inbound_.push_back(std::make_unique<std::unordered_map<uint64_t, int64_t>>());
        ch.inbound = inbound_.back().get();
        src->outbound.push_back({std::move(f).value(), inbound_.back().get()});
      }
      s.sum.active_holders.push_back(h.name);
      s.holders.push_back(std::move(ch));
    }
    std::vector<std::string> vars = s.sum.active_holders;
    vars.push_back("held");
    for (const auto& inv : d.invariants) {
      std::string miss = bind_.uses_missing(s.type, inv.expr);
      if (!miss.empty()) {
        s.sum.notes.push_back(
            fmt::format("invariant '{}' skipped: the target has no {} (optional)", inv.name, miss));
        continue;
      }
      LR_ASSIGN(auto e, compile_expr(s, inv.expr, "invariant '" + inv.name + "'", vars));
      s.invariants.emplace_back(inv.name, std::move(e));
    }
    return {};
  }

  Result<uint64_t> amount_value(const Amount& a, uint64_t parent, const uint8_t* pbytes) {
    if (a.literal) return a.value;
    if (!a.symbol.empty()) return count_from_target(prog_, a.symbol);
    ExprValue v = a.expr->eval(prog_.mem(), pbytes, parent);
    if (v.kind != ExprValue::Kind::kInt || v.i < 0)
      return make_error(Errc::kBadFormat, v.kind == ExprValue::Kind::kError ? v.s : "not a count");
    return static_cast<uint64_t>(v.i);
  }

  // The walk's head for one parent object (or the set's symbol).
  Result<Variable> head_for(const CompiledSet& s, uint64_t parent, const uint8_t* pbytes) {
    if (!s.parent) return s.found ? Result<Variable>(*s.found) : prog_.resolve_place(s.decl->head);
    Variable v;
    v.name = fmt::format("{:#x}->{}", parent, s.decl->head);
    LR_ASSIGN(v.addr, field_address(prog_.mem(), pbytes, parent, s.head_field));
    v.type = s.head_field.type;
    if (s.head_deref) {
      LR_ASSIGN(v.addr, prog_.mem().read_u64(v.addr));
      v.type = v.type->strip()->target;
    }
    return v;
  }

  Result<void> walk_set(CompiledSet& s) {
    if (s.stream) sink_.set_begin(s.sum);
    if (!s.parent) {
      LR_TRY(walk_one(s, 0, nullptr));
    } else {
      std::vector<uint8_t> scratch;
      const uint64_t psize = s.parent->type->type->strip()->size;
      for (uint64_t pa : s.parent->objects) {
        if (sink_.stopped()) break;
        const uint8_t* pb = object_bytes(prog_.mem(), pa, psize, scratch);
        if (!pb) {
          warn(s, fmt::format("parent {:#x} not readable", pa));
          continue;
        }
        std::vector<uint8_t> pcopy(pb, pb + psize);  // the walk may reuse `scratch`
        LR_TRY(walk_one(s, pa, pcopy.data()));
      }
    }
    if (s.stream) sink_.set_end(s.sum);
    return {};
  }

  Result<void> walk_one(CompiledSet& s, uint64_t parent, const uint8_t* pbytes) {
    if (opts_.interrupted && opts_.interrupted->load())
      return make_error(Errc::kInterrupted, "interrupted");
    auto where_of = [&](const std::string& what) {
      return parent ? fmt::format("under {:#x}: {}", parent, what) : what;
    };
    auto head = head_for(s, parent, pbytes);
    if (!head.ok()) {
      if (!parent) return fail(head.error().code, *s.decl, "head: " + head.error().message);
      warn(s, where_of(head.error().message));
      return {};
    }
    WalkSpec ws;
    ws.type = s.type->c;
    ws.head = s.decl->head;
    ws.head_var = &head.value();
    ws.link = s.link;
    if (s.link == WalkSpec::Link::kContainer) ws.container = s.decl->link;
    ws.member = s.decl->member;
    ws.keep_values = false;
    ws.evaluate = false;  // judge_all reads each object once
    ws.limits.max_nodes = s.decl->limit;
    ws.limits.interrupted = opts_.interrupted;
    for (auto [a, out, cap, what] : {std::tuple{&s.buckets, &ws.buckets, kMaxBuckets, "buckets"},
                                     std::tuple{&s.count, &ws.count, kMaxCount, "count"}}) {
      if (!a->literal && a->symbol.empty() && !a->expr) continue;
      auto v = amount_value(*a, parent, pbytes);
      if (!v.ok() || v.value() > cap || v.value() == 0) {
        std::string why = !v.ok() ? v.error().message : fmt::format("{} is implausible", v.value());
        if (!parent)
          return fail(v.ok() ? Errc::kBadFormat : v.error().code, *s.decl,
                      fmt::format("{}: {}", what, why));
        warn(s, where_of(fmt::format("{}: {}; not walked", what, why)));
        return {};
      }
      *out = v.value();
      ws.amounts_from_memory = ws.amounts_from_memory || !a->literal;
    }
    auto rep = run_walk(prog_, ws);
    if (!rep.ok()) {
      if (!parent || rep.error().code == Errc::kInvalidArgument)
        return fail(rep.error().code, *s.decl, rep.error().message);
      warn(s, where_of(rep.error().message));
      return {};
    }
    ++s.sum.walks;
    if (s.sum.mode.empty()) s.sum.mode = rep->mode;
    const WalkResult& w = rep->walk;
    if (!w.ok())
      warn(s, where_of(fmt::format("walk from {} stopped: {} — {}", s.decl->head,
                                   walk_stop_name(w.stop), w.stop_detail)));
    for (const auto& is : w.issues) warn(s, where_of(fmt::format("{:#x}: {}", is.addr, is.what)));
    return judge_all(s, w.objects, parent);
  }

  // The heap, walked once for every set whose type is checked.
  Result<const HeapWalk*> heap() {
    if (!heap_) {
      auto hw = walk_heap(prog_);
      if (!hw.ok())
        return make_error(hw.error().code,
                          "allocation = \"malloc\" self-check: " + hw.error().message);
      heap_ = std::make_unique<HeapWalk>(std::move(hw).value());
    }
    return heap_.get();
  }

  // An object of a type declared allocation = "malloc" must be a whole
  // allocation that fits the type, as the allocator rounds a request
  // (HeapWalk::fits_request; mmapped chunks are whole pages, not checked). A first object whose
  // size disagrees means the types are wrong (an error: nothing read through
  // them is shown); later ones, or objects in no chunk, are warnings.
  Result<void> check_alloc(CompiledSet& s, uint64_t a) {
    LR_ASSIGN(const HeapWalk* hw, heap());
    const uint64_t size = s.type->type->strip()->size;
    const std::optional<HeapChunk> c = hw->chunk_containing(a);
    const bool first = s.alloc_checked++ == 0;
    std::string why;
    bool size_wrong = false;
    if (!c) {
      why = "is in no allocated malloc chunk (freed, or not from malloc)";
    } else if (c->user != a) {
      why = fmt::format("is {} bytes into a malloc allocation, not at its start", a - c->user);
    } else {
      uint64_t usable = c->usable();
      size_wrong = usable < size || (!c->mmapped() && !hw->fits_request(*c, size));
      if (size_wrong) why = fmt::format("is a malloc allocation of {} usable bytes", usable);
    }
    if (why.empty()) return {};
    std::string msg = fmt::format("{:#x} {}, but {} is {} bytes", a, why, s.type->c, size);
    if (first && size_wrong)
      return fail(Errc::kBadFormat, *s.decl,
                  "self-check: the first object " + msg +
                      ": the types do not describe this build (or the type is not malloc'ed)");
    warn(s, "self-check: " + msg);
    return {};
  }

  Result<void> judge_all(CompiledSet& s, const std::vector<uint64_t>& objs, uint64_t parent) {
    const uint64_t size = s.type->type->strip()->size;
    std::vector<uint8_t> scratch;
    std::vector<int64_t> vars(s.holders.size() + 1);
    ProfileObject o;  // reused: its vectors keep their capacity
    for (uint64_t a : objs) {
      if (sink_.stopped()) return {};
      ++s.sum.objects;
      const uint8_t* b = object_bytes(prog_.mem(), a, size, scratch);
      if (!b) {
        ++s.sum.errors;
        if (s.sum.errors <= 20)
          warn(s, fmt::format("object {:#x} not readable: {}", a, prog_.mem().why_unreadable(a)));
        continue;
      }
      if (s.alloc_check) LR_TRY(check_alloc(s, a));  // before any field is read
      if (s.where) {
        ExprValue wv = s.where->eval(prog_.mem(), b, a);
        if (wv.kind == ExprValue::Kind::kError) {
          ++s.sum.errors;
          if (s.sum.errors <= 20) warn(s, fmt::format("{:#x}: where: {}", a, wv.s));
          continue;
        }
        if (!wv.truthy()) continue;
      }
      ++s.sum.matched;
      if (s.keep_objects) s.objects.push_back(a);
      for (auto& ob : s.outbound) {
        FieldValue v = eval_field(prog_.mem(), b, ob.field);
        if (v.kind == FieldValue::Kind::kPointer && v.u) ++(*ob.counts)[v.u];
      }
      judge(s, a, b, parent, vars, o);
      if (s.stream) sink_.object(o);
    }
    return {};
  }

  // A refcount read through the wrong layout, or from freed or random
  // memory, is any number: one no program reaches (below -65536, or 2^32
  // and past) is said to be no count, and judged by no verdict. The kernel's
  // refcount_t saturates at INT_MIN / 2 on overflow or underflow: named so.
  static void not_a_count(ProfileObject& o) {
    constexpr int64_t kSaturated = INT32_MIN / 2, kLow = -65536, kHigh = int64_t{1} << 32;
    o.count_plausible = false;
    if (o.refcount == kSaturated) {
      o.verdict = "error";
      o.error = fmt::format(
          "refcount {} is saturated (a refcount_t that overflowed or underflowed)", o.refcount);
    } else if (o.refcount < kLow || o.refcount >= kHigh) {
      o.verdict = "error";
      o.error = fmt::format(
          "refcount {} is not a count (the object is not what its set says, or "
          "its memory was reused)",
          o.refcount);
    } else {
      o.count_plausible = true;
    }
  }

  void judge(CompiledSet& s, uint64_t a, const uint8_t* b, uint64_t parent,
             std::vector<int64_t>& vars, ProfileObject& o) {
    o.set = s.decl;
    o.addr = a;
    o.parent = parent;
    o.has_refcount = false;
    o.refcount = o.held = 0;
    o.held_known = true;
    o.count_plausible = true;
    o.labels.clear();
    o.holders.clear();
    o.violations.clear();
    o.verdict.clear();
    o.error.clear();
    o.key = FieldValue{};
    if (s.rc_fast) {
      o.has_refcount = true;
      o.refcount = s.rc_int.load(b);
      ++s.sum.histogram[o.refcount];
    } else if (s.has_rc) {
      o.has_refcount = eval_field(prog_.mem(), b, s.rc).as_int(&o.refcount);
      if (o.has_refcount) ++s.sum.histogram[o.refcount];
    }
    if (o.has_refcount) not_a_count(o);
    for (const auto& l : s.labels) o.labels.push_back(eval_field(prog_.mem(), b, l));
    if (s.has_key) o.key = eval_field(prog_.mem(), b, s.key);
    for (size_t i = 0; i < s.holders.size(); ++i) {
      int64_t n = 0;
      if (s.holders[i].count) {
        ExprValue v = s.holders[i].count->eval(prog_.mem(), b, a);
        if (v.kind != ExprValue::Kind::kInt) {
          o.verdict = "error";
          o.error = fmt::format("holder '{}': {}", s.holders[i].name,
                                v.kind == ExprValue::Kind::kError ? v.s : "not a number");
        }
        n = v.i;
      } else {
        auto it = s.holders[i].inbound->find(a);
        n = it == s.holders[i].inbound->end() ? 0 : it->second;
      }
      o.holders.push_back(n);
      // Counts read from the dump may be anything: a sum past int64 is
      // damage to say, not a negative "held" to judge by.
      if (o.held_known && __builtin_add_overflow(o.held, n, &o.held)) {
        o.held_known = false;
        o.verdict = "error";
        o.error = fmt::format("holders add up past {} (holder '{}' is {}): not counts", INT64_MAX,
                              s.holders[i].name, n);
      }
      vars[i] = n;
    }
    vars.back() = o.held;
    if (opts_.reconcile) reconcile(s, a, o);
    if (o.verdict.empty() && o.has_refcount && !s.holders.empty())
      o.verdict = o.refcount == o.held ? "ok" : o.refcount > o.held ? "extra" : "missing";
    if (o.verdict == "extra") ++s.sum.flagged_extra;
    if (o.verdict == "missing") ++s.sum.flagged_missing;
    if (o.verdict == "error") ++s.sum.errors;
    for (const auto& [name, e] : s.invariants) {
      ExprValue v = e->eval(prog_.mem(), b, a, vars.data());
      if (v.kind == ExprValue::Kind::kError) {
        o.violations.push_back(name + " (not evaluated: " + v.s + ")");
        ++s.sum.errors;
      } else if (!v.truthy()) {
        o.violations.push_back(name);
        ++s.sum.violations[name];
      }
    }
  }

  // The references found in memory against the refcount: more counted
  // than found means counted references nobody holds (no trace needed).
  void reconcile(CompiledSet& s, uint64_t a, ProfileObject& o) {
    o.inbound = -1;
    o.inbound_words = -1;
    o.over = 0;
    o.from_leaked = 0;
    o.referrers.clear();
    auto refs = opts_.reconcile->refs_into(a, s.type->type->strip()->size);
    if (!refs.ok()) {
      ++s.sum.not_indexed;
      return;
    }
    HolderCount hc = count_holders(prog_.mem(), refs.value());
    o.inbound = static_cast<int64_t>(hc.holders);
    o.inbound_words = static_cast<int64_t>(hc.words);
    for (size_t i = 0; i < refs.value().size() && i < ProfileObject::kMaxReferrers; ++i)
      o.referrers.push_back(refs.value()[i]);
    if (o.has_refcount && o.refcount > o.inbound) {
      o.over = o.refcount - o.inbound;
      ++s.sum.over_referenced;
    }
    // A reference from a leaked block holds the object only as long as the
    // leak does (a `new intrusive_ptr` never deleted).
    for (const Ref& r : refs.value()) o.from_leaked += opts_.reconcile->from_unreachable(r);
    if (o.from_leaked) ++s.sum.leaked_held;
  }

  Program& prog_;
  const Profile& p_;
  const ProfileRunOptions& opts_;
  ProfileSink& sink_;
  ProfileBinder bind_;
  std::unique_ptr<HeapWalk> heap_;
  std::vector<CompiledSet> sets_;
  std::vector<std::unique_ptr<std::unordered_map<uint64_t, int64_t>>> inbound_;
};

}  // namespace

Result<void> run_profile(Program& prog, const Profile& p, const ProfileRunOptions& opts,
                         ProfileSink& sink) {
  for (const auto& n : opts.only_sets) {
    bool found = false;
    std::vector<std::string> names;
    for (const auto& s : p.sets) {
      found |= s.name == n;
      names.push_back(s.name);
    }
    if (!found) {
      std::string near = closest_name(n, names);
      return make_error(Errc::kNotFound,
                        fmt::format("profile {} has no set '{}'{}", p.name, n,
                                    near.empty() ? "" : "; did you mean '" + near + "'?"));
    }
  }
  Runner r(prog, p, opts, sink);
  return r.run();
}

Result<void> profile_types_bind(Program& prog, const Profile& p) {
  ProfileBinder bind(prog, p);
  for (const auto& t : p.types) LR_TRY(bind.bind(t.name));
  return {};
}

std::vector<std::string> profile_probe_functions(const Profile& p) {
  std::vector<std::string> out;
  for (const auto& pr : p.probes) out.push_back(pr.function + ":" + pr.op + ":" + pr.kind());
  return out;
}

namespace {

const ProfileSet* find_set(const Profile& p, const std::string& name) {
  for (const auto& s : p.sets)
    if (s.name == name) return &s;
  return nullptr;
}

// A plain member name through the profile's aliases (paths stay as given:
// make_field_spec applies aliases at every step where it resolves them).
std::string plain_alias(const ProfileBinder& b, const BoundType* bt, const std::string& m) {
  if (m.find_first_of(".-[") != std::string::npos) return m;
  std::string a = b.alias()(bt->type, m);
  return a.empty() ? m : a;
}

}  // namespace

Result<std::map<std::string, std::pair<int64_t, int>>> profile_probe_refoffs(Program& prog,
                                                                             const Profile& p) {
  ProfileBinder bind(prog, p);
  std::map<std::string, std::pair<int64_t, int>> out;
  for (const auto& pr : p.probes) {
    if (out.count(pr.kind())) continue;
    auto where = [&](const std::string& what) {
      return fmt::format("profile {} ({}): probe '{}': {}", p.name, p.source, pr.function, what);
    };
    const ProfileSet* s = pr.set.empty() ? nullptr : find_set(p, pr.set);
    const std::string& type = s ? s->type : pr.type;
    const std::string& refcount = s ? s->refcount : pr.refcount;
    if (refcount.empty())
      return make_error(Errc::kInvalidArgument,
                        where(fmt::format("set '{}' has no refcount to read", pr.set)));
    auto bt = bind.bind(type);
    if (!bt.ok()) return make_error(bt.error().code, where(bt.error().message));
    auto rc = make_field_spec(bt.value()->type, refcount, true, &bind.alias());
    if (!rc.ok()) return make_error(rc.error().code, where(rc.error().message));
    const FieldLoc& loc = rc->hops.back();
    const Type* t = loc.type ? loc.type->strip() : nullptr;
    if (rc->hops.size() != 1 || loc.bit_size || !t || (t->size != 4 && t->size != 8))
      return make_error(Errc::kInvalidArgument,
                        where(fmt::format("refcount {} must be a whole 4- or 8-byte integer inside "
                                          "the object to be read at entry",
                                          refcount)));
    out[pr.kind()] = {static_cast<int64_t>(loc.offset), static_cast<int>(t->size)};
  }
  return out;
}

Result<WalkSpec> profile_set_walk(Program& prog, const Profile& p, const std::string& set) {
  const ProfileSet* s = find_set(p, set);
  if (!s)
    return make_error(Errc::kNotFound, fmt::format("profile {} has no set '{}'", p.name, set));
  if (!s->parent.empty())
    return make_error(Errc::kInvalidArgument,
                      fmt::format("set '{}' is walked under each '{}': give a set walked from a "
                                  "symbol",
                                  set, s->parent));
  ProfileBinder bind(prog, p);
  LR_ASSIGN(BoundType * bt, bind.bind(s->type));
  WalkSpec w;
  w.type = bt->c;
  w.head = s->head;
  if (!s->find_module.empty()) {  // the found object, by address
    BoundType* ft = bt;
    if (!s->find_type.empty()) {
      LR_ASSIGN(ft, bind.bind(s->find_type));
    }
    LR_ASSIGN(Variable v, find_object(prog, bind, ft, *s));
    w.head = fmt::format("{:#x}", v.addr);
  }
  w.link = link_of(s->link);
  if (w.link == WalkSpec::Link::kContainer) w.container = s->link;
  w.member = plain_alias(bind, bt, s->member);
  w.refcount = plain_alias(bind, bt, s->refcount);
  w.where = s->where;
  if (!s->count.empty()) {
    if (!parse_u64(s->count, &w.count)) w.count_from = s->count;
  }
  if (!s->buckets.empty() && !parse_u64(s->buckets, &w.buckets)) {
    LR_ASSIGN(w.buckets, count_from_target(prog, s->buckets));
  }
  return w;
}

std::string profile_mismatch(const Program& prog, const Profile& p, bool is_kernel) {
  if (p.match_kernel != is_kernel &&
      (p.match_kernel || !p.match_executables.empty() || !p.match_modules.empty()))
    return fmt::format("profile {} is for {}; this is {}", p.name,
                       p.match_kernel ? "kernel dumps" : "user-space cores",
                       is_kernel ? "a kernel dump" : "a user-space core");
  if (is_kernel || (p.match_executables.empty() && p.match_modules.empty())) return "";
  std::string exe;
  for (const auto& m : prog.modules().modules()) {
    std::string base = m->basename();
    if (m->is_exe) exe = base;
    for (const auto& want : p.match_executables)
      if (m->is_exe && base == want) return "";
    for (const auto& want : p.match_modules)
      if (base.rfind(want, 0) == 0) return "";
  }
  std::string wanted;
  for (const auto& e : p.match_executables) wanted += (wanted.empty() ? "" : ", ") + e;
  for (const auto& m : p.match_modules) wanted += (wanted.empty() ? "" : ", ") + m;
  return fmt::format("profile {} is for {}; this core is of {} and maps none of them", p.name,
                     wanted, exe.empty() ? "an unknown executable" : exe);
}

}  // namespace lr
