// The trace x core join: each object's lifetimes in the traces, the balance
// of its last one, a verdict against the core's refcount, the call sites
// blamed for what is never dropped; then allocation traces against the heap.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "corelib/analyses/correlate.hpp"
#include "corelib/base/saturate.hpp"
#include "corelib/blocks/heap.hpp"

namespace lr {

namespace {

struct Ev {
  TraceRef ref;
  const TraceEvent* e;
  const TraceFunction* fn;
  int64_t before;  // e->before, or the inner static's read (taken under the lock)
  uint64_t ts;     // e->ts, or the inner static's: when the count really changed
  bool dead;       // replaced by its merge with the inner call
};

struct Lifetime {
  int64_t start = -1;  // count before the first event; -1 unknown
  int64_t count = 0;   // running count relative to start (absolute when start known)
  int64_t refs = 0, unrefs = 0;
  uint32_t breaks = 0;
  bool closed = false;
  uint64_t first_seq = 0;
  uint32_t trace = 0;
  std::vector<TraceRef> stack;  // LIFO of unmatched refs
};

bool counted_op(TraceOp op) {
  return op == TraceOp::kRef || op == TraceOp::kUnref || op == TraceOp::kNew ||
         op == TraceOp::kFree;
}

bool kind_matches(const std::string& obj_kind, const std::string& ev_kind) {
  return obj_kind == "any" || ev_kind == "?" || ev_kind == obj_kind;
}

// One correlate() call. Phases in the order run() calls them; each reads
// what the earlier ones left in the members below.
class Join {
 public:
  Join(const std::vector<Trace>& traces, const std::vector<CoreObject>& objects,
       const FrameResolver& fr, const CorrelateOptions& opts, const HeapWalk* heap)
      : traces_(traces), objects_(objects), fr_(fr), opts_(opts), heap_(heap) {}

  CorrelateReport run() {
    select_objects();
    for (uint32_t ti = 0; ti < traces_.size(); ++ti) order_events(ti);
    rep_.pointers = ptrs_.size();
    index_aggregates_and_losses();
    for (size_t oi = 0; oi < objects_.size(); ++oi)
      if (auto it = obj_at_.find(objects_[oi].addr); it != obj_at_.end() && it->second == oi)
        judge(objects_[oi]);
    rank_sites_and_objects();
    outstanding_allocations();
    allocation_sites();
    add_bcc_stack_sums();
    link_objects_to_allocations();
    finish();
    return std::move(rep_);
  }

 private:
  struct PerTrace {
    std::unordered_map<uint64_t, int64_t> last_aggregate;
    std::vector<std::pair<uint64_t, uint64_t>> loss_cum;  // (seq, records lost up to it)
  };

  void select_objects() {
    for (size_t i = 0; i < objects_.size(); ++i)
      if (opts_.kind == "any" || objects_[i].kind == opts_.kind || objects_[i].kind == "any")
        obj_at_.emplace(objects_[i].addr, i);
  }

  ResolvedFrame top_frame(const Trace& t, const TraceEvent& e, const char* none) const {
    return e.stack && !t.stacks[e.stack].empty() ? fr_.resolve(t, t.stacks[e.stack][0])
                                                 : ResolvedFrame{"?", none, ""};
  }

  // Step 1: one trace's events in (ts, seq) order, the inner half of probed
  // wrappers dropped: inode_ref() calls the static __inode_ref(); with both
  // probed, the inner event (same thread, object and op, called from inside
  // the outer function) is the same reference.
  void order_events(uint32_t ti) {
    const Trace& t = traces_[ti];
    rep_.lost += t.lost();
    std::vector<uint32_t> order(t.events.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      // (ts, seq): a total order even when some records have no timestamp.
      const auto &x = t.events[a], &y = t.events[b];
      return std::tie(x.ts, x.seq) < std::tie(y.ts, y.seq);
    });
    std::unordered_map<uint32_t, uint32_t> last_on_tid;
    std::unordered_map<uint32_t, size_t> last_pos;  // tid -> its last Ev in by_ptr_[ptr]
    for (uint32_t idx : order) {
      const TraceEvent& e = t.events[idx];
      const TraceFunction& fn = t.functions[e.fn];
      ++rep_.events;
      if (!counted_op(fn.op)) continue;
      bool nested = e.ts && is_nested(t, e, last_on_tid);
      if (e.ts) last_on_tid[e.tid] = idx;
      ptrs_.insert(e.ptr);
      if (nested) ++rep_.nested;
      if (!obj_at_.count(e.ptr) && e.ptr != opts_.history_ptr) continue;
      Ev ev{{ti, idx}, &e, &fn, e.before, e.ts, false};
      auto& v = by_ptr_[e.ptr];
      if (nested) {
        merge_nested(e, v, last_pos);
        if (e.ptr == opts_.history_ptr) rep_.history.push_back({ev.ref, 0, -1, true, e.ts});
        continue;
      }
      last_pos[e.tid] = v.size();
      v.push_back(ev);
    }
  }

  bool is_nested(const Trace& t, const TraceEvent& e,
                 const std::unordered_map<uint32_t, uint32_t>& last_on_tid) const {
    auto it = last_on_tid.find(e.tid);
    if (it == last_on_tid.end()) return false;
    const TraceEvent& a = t.events[it->second];
    const TraceFunction& afn = t.functions[a.fn];
    return a.ptr == e.ptr && afn.op == t.functions[e.fn].op && a.fn != e.fn && e.stack &&
           !t.stacks[e.stack].empty() && fr_.resolve(t, t.stacks[e.stack][0]).func == afn.name;
  }

  // The wrapper read the count before taking the lock; the static it calls
  // runs under the lock: its time and its read are when and what the count
  // really was. One event: the wrapper's caller, the static's timing.
  static void merge_nested(const TraceEvent& e, std::vector<Ev>& v,
                           std::unordered_map<uint32_t, size_t>& last_pos) {
    auto lp = last_pos.find(e.tid);
    if (lp == last_pos.end() || lp->second >= v.size() || v[lp->second].dead) return;
    Ev merged = v[lp->second];
    v[lp->second].dead = true;
    if (e.before >= 0) merged.before = e.before;
    merged.ts = e.ts;
    last_pos[e.tid] = v.size();
    v.push_back(merged);
  }

  // Per trace, once: the last aggregate per pointer, and losses as running
  // totals by input position, so each object costs a lookup, not a scan.
  void index_aggregates_and_losses() {
    per_trace_.resize(traces_.size());
    for (size_t ti = 0; ti < traces_.size(); ++ti) {
      for (const auto& a : traces_[ti].aggregates) per_trace_[ti].last_aggregate[a.ptr] = a.value;
      uint64_t cum = 0;
      for (const auto& l : traces_[ti].losses) {
        cum += l.count;
        per_trace_[ti].loss_cum.emplace_back(l.seq, cum);
      }
    }
  }

  // Step 2: the object's lifetimes, the last one's balance, the verdict.
  void judge(const CoreObject& o) {
    ObjectResult res;
    res.obj = o;
    std::vector<Lifetime> lts;
    if (auto pit = by_ptr_.find(o.addr); pit != by_ptr_.end()) lts = lifetimes(o, pit->second, res);
    res.lifetimes = static_cast<uint32_t>(lts.size());
    if (lts.empty()) {
      res.verdict = Verdict::kNotInTrace;
      res.reason = "no event for this address";
    } else {
      take_last_lifetime(o, lts.back(), res);
      decide(o, lts.back(), res);
      if (res.verdict == Verdict::kFlagged) blame(o, res);
    }
    ++rep_.counts[res.verdict];
    if (res.verdict != Verdict::kNotInTrace) ++rep_.pointers_in_core;
    rep_.objects.push_back(std::move(res));
  }

  std::vector<Lifetime> lifetimes(const CoreObject& o, std::vector<Ev>& evs, ObjectResult& res) {
    std::vector<Lifetime> lts;
    uint32_t last_round = UINT32_MAX;
    // Merges moved events to the static's time: restore the order.
    std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
      return std::tie(a.ref.trace, a.ts, a.e->seq) < std::tie(b.ref.trace, b.ts, b.e->seq);
    });
    for (const Ev& ev : evs) {
      if (ev.dead || !kind_matches(o.kind, ev.fn->kind)) continue;
      ++rep_.counted;
      ++res.events;
      const TraceEvent& e = *ev.e;
      const int64_t before = ev.before;
      TraceOp op = ev.fn->op;
      // A ref that reads 0 while a lifetime with a known start still holds
      // more than one: missed unrefs, or the address was reused unseen.
      bool restart = !lts.empty() && op == TraceOp::kRef && before == 0 && lts.back().start >= 0 &&
                     lts.back().count > 1;
      bool need_new = lts.empty() || lts.back().closed || op == TraceOp::kNew ||
                      (e.round != last_round && last_round != UINT32_MAX && before < 0 && !e.ts) ||
                      restart || lts.back().trace != ev.ref.trace;
      last_round = e.round;
      if (need_new) {
        if (restart && !lts.back().closed) ++lts.back().breaks;
        Lifetime lt;
        lt.trace = ev.ref.trace;
        lt.first_seq = e.seq;
        lt.start = op == TraceOp::kNew ? 0 : before;
        lt.count = lt.start >= 0 ? lt.start : 0;
        lts.push_back(std::move(lt));
      }
      Lifetime& lt = lts.back();
      if (before >= 0 && lt.start >= 0 && !need_new && op != TraceOp::kFree) {
        int64_t d = before - lt.count;
        if (d > 1 || d < -1) ++lt.breaks;  // +-1: the entry-time read races
      }
      apply(lt, op, before, ev.ref);
      int64_t after = lt.start >= 0 ? (lt.closed ? 0 : lt.count) : -1;
      if (o.addr == opts_.history_ptr)
        rep_.history.push_back(
            {ev.ref, static_cast<uint32_t>(lts.size() - 1), after, false, ev.ts});
    }
    return lts;
  }

  static void apply(Lifetime& lt, TraceOp op, int64_t before, const TraceRef& ref) {
    switch (op) {
      case TraceOp::kNew:
      case TraceOp::kRef:
        ++lt.refs;
        ++lt.count;
        lt.stack.push_back(ref);
        break;
      case TraceOp::kUnref:
        ++lt.unrefs;
        --lt.count;
        if (!lt.stack.empty()) lt.stack.pop_back();
        // The entry-time read races with other threads (an unref can read
        // 1 while a concurrent ref makes it 2): with a known start the
        // running count decides; the read only when nothing else does.
        if (lt.start >= 0 ? lt.count <= 0 : before == 1) lt.closed = true;
        break;
      case TraceOp::kFree:
        lt.closed = true;
        break;
      case TraceOp::kAlloc:
        break;
    }
  }

  void take_last_lifetime(const CoreObject& o, const Lifetime& lt, ObjectResult& res) const {
    res.start_count = lt.start;
    res.refs = lt.refs;
    res.unrefs = lt.unrefs;
    res.breaks = lt.breaks;
    res.closed = lt.closed;
    res.unmatched = lt.stack;
    if (lt.closed) {
      res.predicted = 0;
    } else if (lt.start >= 0) {
      res.predicted = lt.count;
    } else {
      // SystemTap rounds carry the absolute count after the last event.
      const auto& agg = per_trace_[lt.trace].last_aggregate;
      if (auto it = agg.find(o.addr); it != agg.end()) res.predicted = it->second;
      if (res.predicted >= 0) res.start_count = res.predicted - (lt.refs - lt.unrefs);
    }
  }

  // Records lost after the lifetime began (losses are in input order).
  uint64_t lost_after(const Lifetime& lt) const {
    const auto& lc = per_trace_[lt.trace].loss_cum;
    if (lc.empty()) return 0;
    auto lit = std::upper_bound(lc.begin(), lc.end(), std::make_pair(lt.first_seq, UINT64_MAX));
    return lc.back().second - (lit == lc.begin() ? 0 : (lit - 1)->second);
  }

  void decide(const CoreObject& o, const Lifetime& lt, ObjectResult& res) const {
    int64_t unexplained = o.explained < 0 ? -1 : std::max<int64_t>(0, o.refcount - o.explained);
    uint64_t lost_n = lost_after(lt);
    bool agrees = res.predicted >= 0 && res.predicted == o.refcount;
    if (o.ignore) {
      res.verdict = Verdict::kExplained;
      res.reason = "pinned (never freed by refcount)";
    } else if (lost_n > 0) {
      // Which objects the lost records were about is unknowable: none of
      // the objects whose last lifetime spans the loss is judged.
      res.verdict = Verdict::kUnreliable;
      res.reason = fmt::format("{} record(s) were lost after this lifetime began{}", lost_n,
                               agrees ? " (the count still agrees with the core)" : "");
    } else if (lt.closed && o.refcount != 0) {
      res.verdict = Verdict::kDisagree;
      res.reason = fmt::format(
          "the trace saw the count reach 0 but the core has {}: taken after "
          "the capture ended, or the address was reused",
          o.refcount);
    } else if (lt.breaks) {
      res.verdict = Verdict::kUnreliable;
      res.reason = fmt::format("{} continuity break(s): events were missed", lt.breaks);
    } else if (res.predicted >= 0 && !agrees) {
      res.verdict = Verdict::kDisagree;
      res.reason = fmt::format(
          "the trace predicts {} but the core has {}: events missed, or taken after the "
          "capture ended",
          res.predicted, o.refcount);
    } else if (res.unmatched.empty()) {
      res.verdict = (unexplained > 0) ? Verdict::kBeforeWindow : Verdict::kBalanced;
      res.reason = unexplained > 0 ? fmt::format(
                                         "{} ref(s) the core cannot account for were taken "
                                         "before the trace began",
                                         unexplained)
                                   : "every reference taken in the trace was dropped";
    } else if (unexplained == 0) {
      res.verdict = Verdict::kExplained;
      res.reason = fmt::format("{} ref(s) still held, all accounted for by {}",
                               res.unmatched.size(), o.explained_by);
    } else {
      flag(o, unexplained, res);
    }
  }

  static void flag(const CoreObject& o, int64_t unexplained, ObjectResult& res) {
    res.verdict = Verdict::kFlagged;
    int64_t n = static_cast<int64_t>(res.unmatched.size());
    res.excess = unexplained < 0 ? n : std::min(n, unexplained);
    res.blamed.assign(res.unmatched.end() - res.excess, res.unmatched.end());
    res.reason =
        unexplained < 0
            ? fmt::format("{} ref(s) taken and never dropped (no holder information)", n)
            : fmt::format(
                  "refcount {} but {} account for {}; the trace shows {} ref(s) never dropped",
                  o.refcount, o.explained_by.empty() ? "holders" : o.explained_by, o.explained, n);
  }

  // The call sites of a flagged object's blamed refs, with a deeper stack
  // of the first event seen at each site.
  void blame(const CoreObject& o, const ObjectResult& res) {
    for (const TraceRef& b : res.blamed) {
      const Trace& bt = traces_[b.trace];
      const TraceEvent& be = bt.events[b.event];
      ResolvedFrame f = top_frame(bt, be, "(no caller recorded)");
      auto [it, fresh] = site_at_.emplace(f.key, rep_.sites.size());
      if (fresh) {
        rep_.sites.push_back({f.key, f.text, 0, 0, {}, {}});
        site_objs_.emplace_back();
        if (be.stack)
          for (size_t k = 1; k < bt.stacks[be.stack].size() && k < 8; ++k)
            rep_.sites.back().example.push_back(fr_.resolve(bt, bt.stacks[be.stack][k]).text);
      }
      CallSite& s = rep_.sites[it->second];
      ++s.refs;
      ++s.by_kind[o.kind];
      site_objs_[it->second].insert(o.addr);
      s.objects = static_cast<uint32_t>(site_objs_[it->second].size());
    }
  }

  void rank_sites_and_objects() {
    std::stable_sort(rep_.sites.begin(), rep_.sites.end(),
                     [](const CallSite& a, const CallSite& b) { return a.refs > b.refs; });
    if (rep_.sites.size() > opts_.top) rep_.sites.resize(opts_.top);
    std::stable_sort(rep_.objects.begin(), rep_.objects.end(),
                     [](const ObjectResult& a, const ObjectResult& b) {
                       if (a.verdict != b.verdict) return a.verdict < b.verdict;
                       if (a.excess != b.excess) return a.excess > b.excess;
                       return a.obj.addr < b.obj.addr;
                     });
  }

  // Step 3: allocation traces: blocks allocated and never freed.
  void outstanding_allocations() {
    for (uint32_t ti = 0; ti < traces_.size(); ++ti) {
      const Trace& t = traces_[ti];
      for (uint32_t i = 0; i < t.events.size(); ++i) {
        const TraceEvent& e = t.events[i];
        TraceOp op = t.functions[e.fn].op;
        if (t.functions[e.fn].kind != "alloc") continue;
        if (opts_.history_ptr && e.ptr == opts_.history_ptr) allocation_history(ti, i, op);
        if (op == TraceOp::kAlloc) {
          auto [it, fresh] = alloc_at_.emplace(e.ptr, rep_.allocs.size());
          if (fresh)
            rep_.allocs.push_back({e.ptr, e.size, {ti, i}, false});
          else
            rep_.allocs[it->second] = {e.ptr, e.size, {ti, i}, false};
        } else if (op == TraceOp::kFree) {
          auto it = alloc_at_.find(e.ptr);
          if (it != alloc_at_.end()) rep_.allocs[it->second].ptr = 0;  // freed
        }
      }
    }
    std::erase_if(rep_.allocs, [](const OutstandingAlloc& a) { return a.ptr == 0; });
    alloc_at_.clear();
  }

  // --ptr on an allocation trace: every allocation of that address, one
  // lifetime each, and its frees (step 2 has them when it is an object).
  void allocation_history(uint32_t ti, uint32_t i, TraceOp op) {
    const TraceEvent& e = traces_[ti].events[i];
    // An allocation of a block not freed since its last one is the outer
    // call of an allocator that called another (the C library's realloc(NULL, n)
    // calls malloc): one lifetime, the inner call nested.
    HistoryEntry* prev = rep_.history.empty() ? nullptr : &rep_.history.back();
    bool inner =
        prev && prev->ev.trace == ti &&
        traces_[ti].functions[traces_[ti].events[prev->ev.event].fn].op == TraceOp::kAlloc &&
        traces_[ti].events[prev->ev.event].tid == e.tid;
    if (op == TraceOp::kAlloc && inner) {
      prev->nested = true;
      rep_.history.push_back({{ti, i}, prev->lifetime, -1, false, e.ts});
    } else if (op == TraceOp::kAlloc) {
      rep_.history.push_back({{ti, i}, history_allocs_++, -1, false, e.ts});
    } else if (op == TraceOp::kFree && !obj_at_.count(e.ptr)) {
      rep_.history.push_back({{ti, i}, history_allocs_ ? history_allocs_ - 1 : 0, 0, false, e.ts});
    }
  }

  // Outstanding blocks checked against the core's in-use chunks, and summed
  // per allocation site.
  void allocation_sites() {
    for (size_t i = 0; i < rep_.allocs.size(); ++i) {
      OutstandingAlloc& a = rep_.allocs[i];
      alloc_at_[a.ptr] = i;
      if (heap_) {
        // Live: an in-use chunk starts at the pointer and its usable size
        // fits the request (the allocator's rounding), so a chunk that took
        // the address over after a free is not this block.
        const std::optional<HeapChunk> c = heap_->chunk_containing(a.ptr);
        a.live = c && c->user == a.ptr && heap_->fits_request(*c, a.size);
      }
      const Trace& t = traces_[a.ev.trace];
      // bcc memleak's addr lines carry no caller; the same allocations are
      // counted by its stack summaries (add_bcc_stack_sums), not again here.
      if (!t.events[a.ev.event].stack && !t.alloc_stacks.empty()) continue;
      ResolvedFrame f = top_frame(t, t.events[a.ev.event], "(no caller)");
      AllocSite& s = alloc_site(f);
      ++s.count;
      s.bytes = sat_add(s.bytes, a.size);
      if (a.live) {
        ++s.live_count;
        s.live_bytes = sat_add(s.live_bytes, a.size);
      }
    }
  }

  AllocSite& alloc_site(const ResolvedFrame& f) {
    auto [it, fresh] = asite_at_.emplace(f.key, rep_.alloc_sites.size());
    if (fresh) rep_.alloc_sites.push_back({f.key, f.text, 0, 0, 0, 0, true});
    return rep_.alloc_sites[it->second];
  }

  // bcc: per-stack totals. Several stacks share a site (their first frame):
  // a site's total is the sum over them. Another trace may already have
  // counted the same allocations one by one: the larger total wins. A total
  // from the summaries has no addresses: its live count is unknown.
  void add_bcc_stack_sums() {
    std::map<size_t, std::pair<uint64_t, uint64_t>> sums;  // site -> (count, bytes)
    for (const Trace& t : traces_)
      for (const auto& st : t.alloc_stacks) {
        ResolvedFrame f = st.stack && !t.stacks[st.stack].empty()
                              ? fr_.resolve(t, t.stacks[st.stack][0])
                              : ResolvedFrame{"?", "(stack information lost)", ""};
        alloc_site(f);
        auto& sum = sums[asite_at_[f.key]];
        sum.first = sat_add(sum.first, st.count);
        sum.second = sat_add(sum.second, st.bytes);
      }
    for (const auto& [site, sum] : sums) {
      AllocSite& s = rep_.alloc_sites[site];
      if (s.count < sum.first) {
        s.count = sum.first;
        s.bytes = sum.second;
        s.live_known = false;
      }
    }
    std::stable_sort(rep_.alloc_sites.begin(), rep_.alloc_sites.end(),
                     [](const AllocSite& a, const AllocSite& b) {
                       if (a.live_bytes != b.live_bytes) return a.live_bytes > b.live_bytes;
                       return a.bytes > b.bytes;
                     });
  }

  // Which outstanding allocation made each object's chunk.
  void link_objects_to_allocations() {
    if (!heap_ || alloc_at_.empty()) return;
    for (auto& r : rep_.objects) {
      const std::optional<HeapChunk> c = heap_->chunk_containing(r.obj.addr);
      auto it = c ? alloc_at_.find(c->user) : alloc_at_.end();
      if (it == alloc_at_.end()) continue;
      const OutstandingAlloc& a = rep_.allocs[it->second];
      const Trace& t = traces_[a.ev.trace];
      const TraceEvent& e = t.events[a.ev.event];
      if (e.stack && !t.stacks[e.stack].empty())
        r.alloc_site = fr_.resolve(t, t.stacks[e.stack][0]).text;
    }
  }

  void finish() {
    if (rep_.history.size() > 1)
      std::stable_sort(rep_.history.begin(), rep_.history.end(),
                       [&](const HistoryEntry& a, const HistoryEntry& b) {
                         if (a.ev.trace != b.ev.trace) return a.ev.trace < b.ev.trace;
                         const auto &x = traces_[a.ev.trace].events[a.ev.event],
                                    &y = traces_[b.ev.trace].events[b.ev.event];
                         return std::tie(a.ts, x.seq) < std::tie(b.ts, y.seq);
                       });
    for (const auto& t : traces_)
      rep_.warnings.insert(rep_.warnings.end(), t.warnings.begin(), t.warnings.end());
  }

  const std::vector<Trace>& traces_;
  const std::vector<CoreObject>& objects_;
  const FrameResolver& fr_;
  const CorrelateOptions& opts_;
  const HeapWalk* heap_;
  CorrelateReport rep_;
  std::unordered_map<uint64_t, size_t> obj_at_;
  std::unordered_map<uint64_t, std::vector<Ev>> by_ptr_;
  std::unordered_set<uint64_t> ptrs_;
  std::vector<PerTrace> per_trace_;
  std::unordered_map<std::string, size_t> site_at_;
  std::vector<std::unordered_set<uint64_t>> site_objs_;
  std::unordered_map<uint64_t, size_t> alloc_at_;
  std::unordered_map<std::string, size_t> asite_at_;
  uint32_t history_allocs_ = 0;
};

}  // namespace

CorrelateReport correlate(const std::vector<Trace>& traces, const std::vector<CoreObject>& objects,
                          const FrameResolver& fr, const CorrelateOptions& opts,
                          const HeapWalk* heap) {
  return Join(traces, objects, fr, opts, heap).run();
}

}  // namespace lr
