// Trace x core join: lifetimes, balance, agreement with the core, blame.
#include "leakref/correlate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "leakref/elfcore.hpp"
#include "leakref/modules.hpp"

namespace lr {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kFlagged:
      return "flagged";
    case Verdict::kExplained:
      return "explained";
    case Verdict::kBalanced:
      return "balanced";
    case Verdict::kBeforeWindow:
      return "before-window";
    case Verdict::kUnreliable:
      return "unreliable";
    case Verdict::kDisagree:
      return "disagree";
    case Verdict::kNotInTrace:
      return "not-in-trace";
  }
  return "?";
}

// ---- frames ---------------------------------------------------------------

FrameResolver::FrameResolver(const ModuleSet* mods, const CoreFile* core)
    : mods_(mods), core_(core) {
  if (core_) entry_ = core_->auxv_value(9 /* AT_ENTRY */);
}

static const Module* core_module_for(const ModuleSet& mods, const TraceMapping& m) {
  if (!m.build_id.empty())
    for (const auto& mod : mods.modules())
      if (mod->build_id == m.build_id) return mod.get();
  std::string key = module_key(m.path);
  for (const auto& mod : mods.modules())
    if (mod->path == m.path) return mod.get();
  for (const auto& mod : mods.modules())
    if (module_key(mod->path) == key) return mod.get();
  return nullptr;
}

uint64_t FrameResolver::core_address(const Trace& t, const TraceFrame& f) const {
  if (!mods_) return 0;
  if (f.addr) {
    if (t.mappings.empty()) return f.addr;  // same process instance as the core
    for (const auto& m : t.mappings) {
      if (f.addr < m.start || f.addr >= m.end) continue;
      const Module* mod = core_module_for(*mods_, m);
      if (!mod) return 0;
      uint64_t file_off = f.addr - m.start + m.offset;
      // The core's VMA of the same file at the same file offset.
      if (core_)
        for (const auto& r : core_->mapped_ranges())
          if (r.path == mod->path && file_off >= r.file_offset &&
              file_off < r.file_offset + (r.end - r.start))
            return r.start + (file_off - r.file_offset);
      return mod->base + file_off;  // offset-linear layout
    }
    return 0;
  }
  if (f.module.empty()) return 0;
  const Module* mod = mods_->by_name(f.module);
  if (!mod) {
    std::string key = module_key(f.module);
    for (const auto& m : mods_->modules())
      if (module_key(m->path) == key) {
        mod = m.get();
        break;
      }
  }
  if (!mod) return 0;
  if (f.has_modoff) return mod->base + f.modoff;
  if (!f.sym.empty()) {
    auto hit = mods_->lookup(f.sym + "@" + mod->path);
    if (hit.ok()) return hit->second->addr + f.symoff;
  }
  return 0;
}

ResolvedFrame FrameResolver::resolve(const Trace& t, const TraceFrame& f) const {
  // Symbolic frames carry their own text; only bare addresses are cached.
  if (!f.addr || !f.sym.empty() || !f.module.empty()) return resolve_uncached(t, f);
  auto key = std::make_pair(&t, f.addr);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (cache_.size() > (1u << 20)) cache_.clear();  // bounded on hostile traces
  return cache_.emplace(key, resolve_uncached(t, f)).first->second;
}

ResolvedFrame FrameResolver::resolve_uncached(const Trace& t, const TraceFrame& f) const {
  ResolvedFrame r;
  uint64_t a = core_address(t, f);
  if (a && mods_ && entry_ && a == entry_) {
    // gdb's `call` (and lr_inject) return to the entry point: no call
    // instruction precedes it, so a-1 would name the function before _start.
    const Module* m = mods_->module_at(a);
    std::string base = m ? m->basename() : std::string("?");
    r.key = m ? fmt::format("{}+{:#x}", module_key(base), a - m->bias) : fmt::format("{:#x}", a);
    r.func = "_start";
    r.text = fmt::format("_start [{}] (entry point: a debugger-injected call)", base);
    return r;
  }
  if (a && mods_) {
    // Return addresses: look the function up at a-1 (a call can be the last
    // instruction of a function) but show the offset of `a` itself.
    SymbolHit h = mods_->symbolize(a - 1);
    if (h.module) {
      std::string base = h.module->basename();
      r.key = fmt::format("{}+{:#x}", module_key(base), a - h.module->bias);
      if (h.sym) {
        r.func = h.sym->name;
        r.text = fmt::format("{}+{:#x} [{}]", h.sym->name, a - h.sym->addr, base);
      } else {
        r.text = fmt::format("{}+{:#x}", base, a - h.module->bias);
      }
      return r;
    }
  }
  // Nothing in the core: keep what the tool printed, normalised.
  std::string mk = f.module.empty() ? std::string() : module_key(f.module);
  if (!f.sym.empty()) {
    r.func = f.sym;
    r.key = fmt::format("{}:{}+{:#x}", mk, f.sym, f.symoff);
    r.text = mk.empty() ? fmt::format("{}+{:#x}", f.sym, f.symoff)
                        : fmt::format("{}+{:#x} [{}]", f.sym, f.symoff, f.module);
  } else if (f.has_modoff) {
    r.key = fmt::format("{}+{:#x}", mk, f.modoff);
    r.text = fmt::format("{}+{:#x}", f.module, f.modoff);
  } else if (f.addr) {
    // An absolute address the core cannot place: module+offset from the
    // trace's own mappings at least.
    for (const auto& m : t.mappings)
      if (f.addr >= m.start && f.addr < m.end) {
        std::string base = m.path.substr(m.path.rfind('/') + 1);
        r.key = fmt::format("{}+file{:#x}", module_key(base), f.addr - m.start + m.offset);
        r.text = fmt::format("{:#x} [{}+file {:#x}]", f.addr, base, f.addr - m.start + m.offset);
        return r;
      }
    r.key = r.text = fmt::format("{:#x}", f.addr);
  } else {
    r.key = r.text = "?";
  }
  return r;
}

// ---- the join ---------------------------------------------------------------

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

}  // namespace

CorrelateReport correlate(const std::vector<Trace>& traces, const std::vector<CoreObject>& objects,
                          const FrameResolver& fr, const CorrelateOptions& opts,
                          const HeapWalk* heap) {
  CorrelateReport rep;
  std::unordered_map<uint64_t, size_t> obj_at;
  for (size_t i = 0; i < objects.size(); ++i)
    if (opts.kind == "any" || objects[i].kind == opts.kind || objects[i].kind == "any")
      obj_at.emplace(objects[i].addr, i);

  // 1. Order each trace's events and drop the inner half of probed wrappers:
  //    inode_ref() calls the static __inode_ref(); with both probed, the
  //    inner event (same thread, same object, same op, called from inside
  //    the outer function) is the same reference.
  std::unordered_map<uint64_t, std::vector<Ev>> by_ptr;
  std::unordered_set<uint64_t> ptrs;
  std::vector<const Ev*> unused;
  for (uint32_t ti = 0; ti < traces.size(); ++ti) {
    const Trace& t = traces[ti];
    rep.lost += t.lost();
    std::vector<uint32_t> order(t.events.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      // (ts, seq): a total order even when some records have no timestamp.
      const auto &x = t.events[a], &y = t.events[b];
      return std::tie(x.ts, x.seq) < std::tie(y.ts, y.seq);
    });
    std::unordered_map<uint32_t, uint32_t> last_on_tid;
    std::unordered_map<uint32_t, size_t> last_pos;  // tid -> its last Ev in by_ptr[ptr]
    for (uint32_t idx : order) {
      const TraceEvent& e = t.events[idx];
      const TraceFunction& fn = t.functions[e.fn];
      ++rep.events;
      if (!counted_op(fn.op)) continue;
      bool nested = false;
      if (e.ts) {
        auto it = last_on_tid.find(e.tid);
        if (it != last_on_tid.end()) {
          const TraceEvent& a = t.events[it->second];
          const TraceFunction& afn = t.functions[a.fn];
          if (a.ptr == e.ptr && afn.op == fn.op && a.fn != e.fn && e.stack &&
              !t.stacks[e.stack].empty() && fr.resolve(t, t.stacks[e.stack][0]).func == afn.name)
            nested = true;
        }
        last_on_tid[e.tid] = idx;
      }
      ptrs.insert(e.ptr);
      if (nested) ++rep.nested;
      if (obj_at.count(e.ptr) || e.ptr == opts.history_ptr) {
        Ev ev{{ti, idx}, &e, &fn, e.before, e.ts, false};
        if (nested) {
          // The wrapper read the count before taking the lock; the static it
          // calls runs under the lock: its time and its read are when and
          // what the count really was. One event: the wrapper's caller, the
          // static's timing.
          auto lp = last_pos.find(e.tid);
          auto& v = by_ptr[e.ptr];
          if (lp != last_pos.end() && lp->second < v.size() && !v[lp->second].dead) {
            Ev merged = v[lp->second];
            v[lp->second].dead = true;
            if (e.before >= 0) merged.before = e.before;
            merged.ts = e.ts;
            last_pos[e.tid] = v.size();
            v.push_back(merged);
          }
          if (e.ptr == opts.history_ptr) rep.history.push_back({ev.ref, 0, -1, true, e.ts});
          continue;
        }
        auto& v = by_ptr[e.ptr];
        last_pos[e.tid] = v.size();
        v.push_back(ev);
      }
    }
  }
  rep.pointers = ptrs.size();

  // Per trace, once: the last aggregate per pointer, and losses as running
  // totals by input position, so each object costs a lookup, not a scan.
  struct PerTrace {
    std::unordered_map<uint64_t, int64_t> last_aggregate;
    std::vector<std::pair<uint64_t, uint64_t>> loss_cum;  // (seq, records lost up to it)
  };
  std::vector<PerTrace> per_trace(traces.size());
  for (size_t ti = 0; ti < traces.size(); ++ti) {
    for (const auto& a : traces[ti].aggregates) per_trace[ti].last_aggregate[a.ptr] = a.value;
    uint64_t cum = 0;
    for (const auto& l : traces[ti].losses) {
      cum += l.count;
      per_trace[ti].loss_cum.emplace_back(l.seq, cum);
    }
  }

  // 2. Per object: lifetimes, the last one's balance, the verdict.
  std::unordered_map<std::string, size_t> site_at;
  std::vector<std::unordered_set<uint64_t>> site_objs;
  for (size_t oi = 0; oi < objects.size(); ++oi) {
    const CoreObject& o = objects[oi];
    if (!obj_at.count(o.addr) || obj_at[o.addr] != oi) continue;
    ObjectResult res;
    res.obj = o;
    auto pit = by_ptr.find(o.addr);
    std::vector<Lifetime> lts;
    if (pit != by_ptr.end()) {
      uint32_t last_round = UINT32_MAX;
      // Merges moved events to the static's time: restore the order.
      std::stable_sort(pit->second.begin(), pit->second.end(), [](const Ev& a, const Ev& b) {
        return std::tie(a.ref.trace, a.ts, a.e->seq) < std::tie(b.ref.trace, b.ts, b.e->seq);
      });
      for (const Ev& ev : pit->second) {
        if (ev.dead || !kind_matches(o.kind, ev.fn->kind)) continue;
        ++rep.counted;
        ++res.events;
        const TraceEvent& e = *ev.e;
        const int64_t before = ev.before;
        TraceOp op = ev.fn->op;
        bool need_new =
            lts.empty() || lts.back().closed || op == TraceOp::kNew ||
            (ev.e->round != last_round && last_round != UINT32_MAX && before < 0 && !e.ts) ||
            (op == TraceOp::kRef && before == 0 && lts.back().start >= 0 && lts.back().count > 1) ||
            (lts.back().trace != ev.ref.trace);
        last_round = e.round;
        if (need_new) {
          if (!lts.empty() && !lts.back().closed && op == TraceOp::kRef && before == 0 &&
              lts.back().start >= 0 && lts.back().count > 1)
            ++lts.back().breaks;  // missed unrefs, or the address was reused unseen
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
        int64_t after = -1;
        switch (op) {
          case TraceOp::kNew:
          case TraceOp::kRef:
            ++lt.refs;
            ++lt.count;
            lt.stack.push_back(ev.ref);
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
        if (lt.start >= 0) after = lt.closed ? 0 : lt.count;
        if (o.addr == opts.history_ptr)
          rep.history.push_back(
              {ev.ref, static_cast<uint32_t>(lts.size() - 1), after, false, ev.ts});
      }
    }
    res.lifetimes = static_cast<uint32_t>(lts.size());
    int64_t unexplained = o.explained < 0 ? -1 : std::max<int64_t>(0, o.refcount - o.explained);
    if (lts.empty()) {
      res.verdict = Verdict::kNotInTrace;
      res.reason = "no event for this address";
    } else {
      Lifetime& lt = lts.back();
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
        const auto& agg = per_trace[lt.trace].last_aggregate;
        if (auto it = agg.find(o.addr); it != agg.end()) res.predicted = it->second;
        if (res.predicted >= 0) res.start_count = res.predicted - (lt.refs - lt.unrefs);
      }
      // Records lost after the lifetime began (losses are in input order).
      const auto& lc = per_trace[lt.trace].loss_cum;
      auto lit = std::upper_bound(lc.begin(), lc.end(), std::make_pair(lt.first_seq, UINT64_MAX));
      uint64_t lost_n =
          lc.empty() ? 0 : lc.back().second - (lit == lc.begin() ? 0 : (lit - 1)->second);
      bool lost_after = lost_n > 0;
      bool agrees = res.predicted >= 0 && res.predicted == o.refcount;
      if (o.ignore) {
        res.verdict = Verdict::kExplained;
        res.reason = "pinned (never freed by refcount)";
      } else if (lost_after) {
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
        res.reason = unexplained > 0
                         ? fmt::format(
                               "{} ref(s) the core cannot account for were taken before "
                               "the trace began",
                               unexplained)
                         : "every reference taken in the trace was dropped";
      } else if (unexplained == 0) {
        res.verdict = Verdict::kExplained;
        res.reason = fmt::format("{} ref(s) still held, all accounted for by {}",
                                 res.unmatched.size(), o.explained_by);
      } else {
        res.verdict = Verdict::kFlagged;
        int64_t n = static_cast<int64_t>(res.unmatched.size());
        res.excess = unexplained < 0 ? n : std::min(n, unexplained);
        res.blamed.assign(res.unmatched.end() - res.excess, res.unmatched.end());
        res.reason =
            unexplained < 0
                ? fmt::format("{} ref(s) taken and never dropped (no holder information)", n)
                : fmt::format(
                      "refcount {} but {} account for {}; the trace shows {} ref(s) "
                      "never dropped",
                      o.refcount, o.explained_by.empty() ? "holders" : o.explained_by, o.explained,
                      n);
        for (const TraceRef& b : res.blamed) {
          const Trace& bt = traces[b.trace];
          const TraceEvent& be = bt.events[b.event];
          ResolvedFrame f = be.stack && !bt.stacks[be.stack].empty()
                                ? fr.resolve(bt, bt.stacks[be.stack][0])
                                : ResolvedFrame{"?", "(no caller recorded)", ""};
          auto [it, fresh] = site_at.emplace(f.key, rep.sites.size());
          if (fresh) {
            rep.sites.push_back({f.key, f.text, 0, 0, {}, {}});
            site_objs.emplace_back();
            if (be.stack)
              for (size_t k = 1; k < bt.stacks[be.stack].size() && k < 8; ++k)
                rep.sites.back().example.push_back(fr.resolve(bt, bt.stacks[be.stack][k]).text);
          }
          CallSite& s = rep.sites[it->second];
          ++s.refs;
          ++s.by_kind[o.kind];
          site_objs[it->second].insert(o.addr);
          s.objects = static_cast<uint32_t>(site_objs[it->second].size());
        }
      }
    }
    ++rep.counts[res.verdict];
    if (res.verdict != Verdict::kNotInTrace) ++rep.pointers_in_core;
    rep.objects.push_back(std::move(res));
  }
  std::stable_sort(rep.sites.begin(), rep.sites.end(),
                   [](const CallSite& a, const CallSite& b) { return a.refs > b.refs; });
  if (rep.sites.size() > opts.top) rep.sites.resize(opts.top);
  std::stable_sort(rep.objects.begin(), rep.objects.end(),
                   [](const ObjectResult& a, const ObjectResult& b) {
                     if (a.verdict != b.verdict) return a.verdict < b.verdict;
                     if (a.excess != b.excess) return a.excess > b.excess;
                     return a.obj.addr < b.obj.addr;
                   });

  // 3. Allocation traces: blocks allocated and never freed, checked against
  //    the core's heap; and which allocation made each object's chunk.
  std::unordered_map<uint64_t, size_t> alloc_at;
  uint32_t history_allocs = 0;
  for (uint32_t ti = 0; ti < traces.size(); ++ti) {
    const Trace& t = traces[ti];
    for (uint32_t i = 0; i < t.events.size(); ++i) {
      const TraceEvent& e = t.events[i];
      TraceOp op = t.functions[e.fn].op;
      if (t.functions[e.fn].kind != "alloc") continue;
      // --ptr on an allocation trace: every allocation of that address, one
      // lifetime each, and its frees (step 2 has them when it is an object).
      if (opts.history_ptr && e.ptr == opts.history_ptr) {
        // An allocation of a block not freed since its last one is the
        // outer call of an allocator that called another (glibc's
        // realloc(NULL, n) calls malloc): one lifetime, the inner call nested.
        HistoryEntry* prev = rep.history.empty() ? nullptr : &rep.history.back();
        bool inner =
            prev && prev->ev.trace == ti &&
            traces[ti].functions[traces[ti].events[prev->ev.event].fn].op == TraceOp::kAlloc &&
            traces[ti].events[prev->ev.event].tid == e.tid;
        if (op == TraceOp::kAlloc && inner) {
          prev->nested = true;
          rep.history.push_back({{ti, i}, prev->lifetime, -1, false, e.ts});
        } else if (op == TraceOp::kAlloc)
          rep.history.push_back({{ti, i}, history_allocs++, -1, false, e.ts});
        else if (op == TraceOp::kFree && !obj_at.count(e.ptr))
          rep.history.push_back({{ti, i}, history_allocs ? history_allocs - 1 : 0, 0, false, e.ts});
      }
      if (op == TraceOp::kAlloc) {
        auto [it, fresh] = alloc_at.emplace(e.ptr, rep.allocs.size());
        if (fresh)
          rep.allocs.push_back({e.ptr, e.size, {ti, i}, false});
        else
          rep.allocs[it->second] = {e.ptr, e.size, {ti, i}, false};
      } else if (op == TraceOp::kFree) {
        auto it = alloc_at.find(e.ptr);
        if (it != alloc_at.end()) rep.allocs[it->second].ptr = 0;  // freed
      }
    }
  }
  std::erase_if(rep.allocs, [](const OutstandingAlloc& a) { return a.ptr == 0; });
  alloc_at.clear();
  std::unordered_map<std::string, size_t> asite_at;
  for (size_t i = 0; i < rep.allocs.size(); ++i) {
    OutstandingAlloc& a = rep.allocs[i];
    alloc_at[a.ptr] = i;
    if (heap) {
      const HeapChunk* c = heap->chunk_containing(a.ptr);
      a.live = c && c->user == a.ptr;
    }
    const Trace& t = traces[a.ev.trace];
    const TraceEvent& e = t.events[a.ev.event];
    ResolvedFrame f = e.stack && !t.stacks[e.stack].empty() ? fr.resolve(t, t.stacks[e.stack][0])
                                                            : ResolvedFrame{"?", "(no caller)", ""};
    auto [it, fresh] = asite_at.emplace(f.key, rep.alloc_sites.size());
    if (fresh) rep.alloc_sites.push_back({f.key, f.text, 0, 0, 0, 0});
    AllocSite& s = rep.alloc_sites[it->second];
    ++s.count;
    s.bytes += a.size;
    if (a.live) {
      ++s.live_count;
      s.live_bytes += a.size;
    }
  }
  // bcc: per-stack totals. Several stacks share a site (their first frame):
  // a site's total is the sum over them. The addr lines (-a) may already
  // have counted the same allocations one by one: the larger total wins.
  std::map<size_t, std::pair<uint64_t, uint64_t>> stack_sums;  // site -> (count, bytes)
  for (uint32_t ti = 0; ti < traces.size(); ++ti)
    for (const auto& st : traces[ti].alloc_stacks) {
      const Trace& t = traces[ti];
      ResolvedFrame f = st.stack && !t.stacks[st.stack].empty()
                            ? fr.resolve(t, t.stacks[st.stack][0])
                            : ResolvedFrame{"?", "(stack information lost)", ""};
      auto [it, fresh] = asite_at.emplace(f.key, rep.alloc_sites.size());
      if (fresh) rep.alloc_sites.push_back({f.key, f.text, 0, 0, 0, 0});
      auto& sum = stack_sums[it->second];
      sum.first += st.count;
      sum.second += st.bytes;
    }
  for (const auto& [site, sum] : stack_sums) {
    AllocSite& s = rep.alloc_sites[site];
    if (s.count < sum.first) {
      s.count = sum.first;
      s.bytes = sum.second;
    }
  }
  std::stable_sort(rep.alloc_sites.begin(), rep.alloc_sites.end(),
                   [](const AllocSite& a, const AllocSite& b) {
                     if (a.live_bytes != b.live_bytes) return a.live_bytes > b.live_bytes;
                     return a.bytes > b.bytes;
                   });
  if (heap && !alloc_at.empty())
    for (auto& r : rep.objects) {
      const HeapChunk* c = heap->chunk_containing(r.obj.addr);
      auto it = c ? alloc_at.find(c->user) : alloc_at.end();
      if (it == alloc_at.end()) continue;
      const OutstandingAlloc& a = rep.allocs[it->second];
      const Trace& t = traces[a.ev.trace];
      const TraceEvent& e = t.events[a.ev.event];
      if (e.stack && !t.stacks[e.stack].empty())
        r.alloc_site = fr.resolve(t, t.stacks[e.stack][0]).text;
    }
  if (rep.history.size() > 1)
    std::stable_sort(rep.history.begin(), rep.history.end(),
                     [&](const HistoryEntry& a, const HistoryEntry& b) {
                       if (a.ev.trace != b.ev.trace) return a.ev.trace < b.ev.trace;
                       const auto &x = traces[a.ev.trace].events[a.ev.event],
                                  &y = traces[b.ev.trace].events[b.ev.event];
                       return std::tie(a.ts, x.seq) < std::tie(b.ts, y.seq);
                     });
  for (const auto& t : traces)
    rep.warnings.insert(rep.warnings.end(), t.warnings.begin(), t.warnings.end());
  return rep;
}

// ---- holders by pointer scan -------------------------------------------------

std::map<uint64_t, uint32_t> count_pointers(
    const Memory& mem, const HeapWalk& heap, const CoreFile& core, const ModuleSet& mods,
    const std::vector<std::pair<uint64_t, uint64_t>>& targets,
    const std::vector<uint64_t>& skip_chunks) {
  std::map<uint64_t, uint32_t> out;
  if (targets.empty()) return out;
  std::unordered_map<uint64_t, uint64_t> size_of;  // target -> size
  size_of.reserve(targets.size() * 2);
  uint64_t lo = UINT64_MAX, hi = 0;  // most heap words are not near any target
  for (auto [a, s] : targets) {
    size_of[a] = s;
    out[a] = 0;
    lo = std::min(lo, a);
    hi = std::max(hi, a);
  }
  std::unordered_set<uint64_t> skip(skip_chunks.begin(), skip_chunks.end());
  auto scan = [&](uint64_t start, uint64_t end) {
    start = (start + 7) & ~uint64_t(7);
    Memory::Window w;
    for (uint64_t a = start; a + 8 <= end;) {
      const uint8_t* p = mem.direct(w, a, 8);
      if (!p) {  // unreadable: skip to the next page
        a = (a | 4095) + 1;
        continue;
      }
      uint64_t n = std::min<uint64_t>((end - a) / 8, (w.end - a) / 8);
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t v;
        std::memcpy(&v, p + i * 8, 8);
        if (v < lo || v > hi) continue;
        auto it = size_of.find(v);
        if (it == size_of.end()) continue;
        uint64_t at = a + i * 8;
        if (at >= v && at < v + it->second) continue;  // inside the object itself
        ++out[v];
      }
      a += std::max<uint64_t>(n, 1) * 8;
    }
  };
  for (const HeapChunk& c : heap.in_use)
    if (!skip.count(c.user)) scan(c.user, c.user + c.usable());
  for (const auto& s : core.segments()) {
    if (s.kind != SegmentInfo::Kind::kCore) continue;
    for (const auto& m : mods.modules()) {
      if (!m->end) continue;
      uint64_t a = std::max(s.start, m->base), b = std::min(s.end, m->end);
      if (a < b) scan(a, b);
      // .bss beyond the file-backed data is its own anonymous mapping,
      // starting where the module's last mapping ends.
      if (s.start == m->end) scan(s.start, s.end);
    }
  }
  return out;
}

}  // namespace lr
