// The reference index (refindex.hpp): one pass over a process core's live
// memory. Chunk lookup is a table per heap span (the first chunk ending in
// each 256 heap bytes), so a word costs a range check, and a pointer a table
// load and a short step. References from chunks are a graph in compressed
// rows: per chunk where its run of targets starts (4 bytes a chunk), then
// each reference's target (4 bytes); the referring word's address is not
// kept but found again, when a question needs it, by rescanning the one
// chunk it lies in with the same rule. The reverse rows (who points at a
// chunk) are made on first use. Roots, which are few, are kept whole.
#include "corelib/blocks/refindex.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "corelib/base/huge_pages.hpp"
#include "corelib/base/podarray.hpp"
#include "corelib/blocks/reach.hpp"

namespace lr {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kSpanGap = 16ull << 20;  // chunks further apart start a new span
constexpr size_t kNone = SIZE_MAX;

struct Span {
  uint64_t start = 0, end = 0;  // line-aligned
  std::vector<uint32_t> first;  // per line: the first chunk ending past its start
};

// A reference from a root, 16 bytes: where (a register's index for
// kRegister), the target, and the kind and thread (index into the core's
// threads) packed.
struct RootRef {
  uint64_t from;
  uint32_t target;
  uint32_t meta;  // kind | thread index << 3
};

}  // namespace

namespace {

// A thread's vector registers hold no live value while it is stopped in a
// system call on x86-64 (orig_rax, the call's number, is not -1): the SysV
// ABI keeps none of them across a call, so a pointer there is a dead copy
// (a string routine's, a struct move's), never a reference; as a root it
// would hide a leak. A thread stopped in its own code keeps them all.
// aarch64 keeps d8-d15 across calls and its registers say nothing of a
// system call: every lane stays a root there.
bool vector_regs_live(const ThreadInfo& th) {
  constexpr int kOrigRax = 15;  // struct user_regs_struct's order
  return th.machine != EM_X86_64 || static_cast<int64_t>(th.regs[kOrigRax]) == -1;
}

}  // namespace

// Where each chunk's row of references starts in `target`, in about 2
// bytes a chunk: a 32-bit start per group of 256 chunks and each chunk's
// 16-bit offset from it; a group whose rows hold 64 Ki references or more
// (a block full of pointers) keeps 32-bit starts for its chunks instead.
// Filled in chunk order (set_begin with c = 0, 1, ..., n), read at will.
class RowIndex {
 public:
  void reset(size_t n) {
    n_ = n;
    base_.assign((n >> kShift) + 1, 0);
    wide_of_.assign(base_.size(), kNarrow);
    rel_.resize_uninitialized(n + 1);
    wide_.clear();
  }
  void set_begin(size_t c, uint32_t pos) {
    const size_t g = c >> kShift;
    if ((c & kMask) == 0) base_[g] = pos;
    if (wide_of_[g] == kNarrow && pos - base_[g] > 0xffff) {
      // Widen the group: the starts set so far, then 32-bit ones.
      wide_of_[g] = static_cast<uint32_t>(wide_.size() >> kShift);
      wide_.resize(wide_.size() + kMask + 1, 0);
      for (size_t k = g << kShift; k < c; ++k)
        wide_[(wide_of_[g] << kShift) + (k & kMask)] = base_[g] + rel_[k];
    }
    if (wide_of_[g] != kNarrow)
      wide_[(size_t{wide_of_[g]} << kShift) + (c & kMask)] = pos;
    else
      rel_[c] = static_cast<uint16_t>(pos - base_[g]);
  }
  uint32_t begin(size_t c) const {
    const size_t g = c >> kShift;
    return wide_of_[g] == kNarrow ? base_[g] + rel_[c]
                                  : wide_[(size_t{wide_of_[g]} << kShift) + (c & kMask)];
  }
  size_t rows() const { return n_; }
  uint64_t bytes() const {
    return base_.capacity() * 4 + wide_of_.capacity() * 4 + rel_.capacity() * 2 +
           wide_.capacity() * 4;
  }

 private:
  static constexpr unsigned kShift = 8;
  static constexpr size_t kMask = (size_t{1} << kShift) - 1;
  static constexpr uint32_t kNarrow = UINT32_MAX;
  size_t n_ = 0;
  std::vector<uint32_t> base_, wide_of_, wide_;
  PodArray<uint16_t> rel_;
};

struct RefIndex::Impl {
  const ChunkIndex& ch;
  const std::vector<uint64_t>& links;  // HeapWalk::links: never scanned
  const CoreFile* core = nullptr;
  const std::vector<std::pair<uint64_t, uint64_t>>* file_words = nullptr;  // RootModel's
  std::vector<Span> spans;
  uint64_t lo = 0, hi = 0;  // [lo, hi): every chunk's user range lies inside
  // References from chunks, in scan order: chunk c's targets are
  // target[rows.begin(c) .. rows.begin(c + 1)), one per referring word.
  RowIndex rows;
  PodArray<uint32_t> target;
  // Bit r of `at_start`: target[r]'s word points at its chunk's very start.
  PodArray<uint64_t> at_start;
  // What the roots reach among `n` chunks (reach.hpp's marks); `edge(e,
  // t)` sees each reference of every reached chunk once.
  template <class Edge = NoEdgeSeen>
  std::vector<uint8_t> mark_from_roots(size_t n, Edge edge = {}) const {
    return mark_reachable(
        n, root_targets(), [&](size_t c) { return rows.begin(c); }, target, edge);
  }
  // The chunk each root reference points into.
  std::vector<uint32_t> root_targets() const {
    std::vector<uint32_t> out;
    out.reserve(roots.size());
    for (const auto& r : roots) out.push_back(r.target);
    return out;
  }
  PodArray<RootRef> roots;  // references from roots, by target then address
  // The reverse rows, made on first use (a random write per reference): the
  // chunks pointing at c are in_src[in_off[c] .. in_off[c + 1]), one entry
  // per referring word, in source order.
  mutable std::vector<uint32_t> in_off_;
  mutable PodArray<uint32_t> in_src_;
  mutable std::once_flag counts_once, in_once, reach_once;
  mutable std::vector<uint8_t> reach_;  // reachable(), for from_unreachable

  const std::vector<uint32_t>& in_off() const {
    std::call_once(counts_once, [this] {
      in_off_.assign(ch.size() + 1, 0);
      for (uint32_t t : target) ++in_off_[t + 1];
      for (size_t i = 1; i < in_off_.size(); ++i) in_off_[i] += in_off_[i - 1];
    });
    return in_off_;
  }
  const PodArray<uint32_t>& in_src() const {
    std::call_once(in_once, [this] {
      const auto& io = in_off();
      in_src_.resize_uninitialized(target.size());
      std::vector<uint32_t> next(io.begin(), io.end() - 1);
      for (size_t c = 0; c < rows.rows(); ++c)
        for (uint32_t r = rows.begin(c), e = rows.begin(c + 1); r < e; ++r)
          in_src_[next[target[r]]++] = static_cast<uint32_t>(c);
    });
    return in_src_;
  }
  // The words of chunk `src` pointing into chunk `dst` (the scan's rule).
  std::vector<uint64_t> words_into(const Memory& mem, size_t src, size_t dst) const;
  // range(a, b) for each part of chunk c's words the scans read: all of
  // them but a pair of link words inside it (HeapWalk::links).
  // A scan of every chunk in order passes `cursor` (a place in `links`,
  // 0 at first): links are then found by stepping on, not by a search each.
  template <class R>
  void chunk_parts(size_t c, R&& range, size_t* cursor = nullptr) const {
    const HeapChunk hc = ch[c];
    const uint64_t a = hc.user, b = a + hc.usable();
    if (links.empty()) return range(a, b);
    size_t k;
    if (cursor) {
      while (*cursor < links.size() && links[*cursor] < a) ++*cursor;
      k = *cursor;
    } else {
      k = static_cast<size_t>(std::lower_bound(links.begin(), links.end(), a) - links.begin());
    }
    if (k == links.size() || links[k] + HeapWalk::kLinkBytes > b) return range(a, b);
    range(a, links[k]);
    range(links[k] + HeapWalk::kLinkBytes, b);
  }

  Impl(const ChunkIndex& c, const std::vector<uint64_t>& l) : ch(c), links(l) {}

  // Chunk lookup granularity: a table entry (4 bytes) per line of heap, a
  // line being about eight mean chunks (a power of two, 64 bytes to 16 KiB),
  // so a lookup steps over a few chunks (consecutive 8-byte words) and the
  // table costs about half a byte per chunk whatever the heap's shape.
  uint64_t line = 256;
  unsigned line_shift = 8;

  void build_spans() {
    if (ch.empty()) return;
    uint64_t bytes = 0;
    for (const auto& c : ch)
      if (!c.mmapped()) bytes += c.usable() + 8;
    const uint64_t mean = bytes / ch.size();
    for (line_shift = 6; line_shift < 14 && (uint64_t{2} << line_shift) <= 8 * mean; ++line_shift) {
    }
    line = uint64_t{1} << line_shift;
    lo = ch.front().user;
    for (size_t i = 0; i < ch.size(); ++i) {
      const HeapChunk c = ch[i];
      const uint64_t s = c.user & ~(line - 1), e = c.user + c.usable();
      hi = std::max(hi, e);
      if (spans.empty() || s > spans.back().end + kSpanGap) spans.push_back({s, s, {}});
      Span& sp = spans.back();
      const uint64_t le = (e + line - 1) & ~(line - 1);
      while (sp.end < le) {
        sp.first.push_back(static_cast<uint32_t>(i));
        sp.end += line;
      }
    }
    for (auto& sp : spans) sp.first.shrink_to_fit();
  }

  // The chunk whose user range holds `v`; kNone when none. The hot path of
  // the scan: spans are few, and a line holds few chunks.
  size_t lookup(uint64_t v) const {
    if (v - lo >= hi - lo) return kNone;
    for (const Span& sp : spans) {
      if (v < sp.start) return kNone;
      if (v >= sp.end) continue;
      size_t i = sp.first[(v - sp.start) >> line_shift];
      const size_t n = ch.size();
      HeapChunk c;
      while (i < n && (c = ch[i]).user + c.usable() <= v) ++i;
      return i < n && c.user <= v ? i : kNone;
    }
    return kNone;
  }

  Ref root(const RootRef& r) const {
    Ref out;
    out.from = r.from;
    out.target = r.target;
    out.kind = static_cast<RefFrom>(r.meta & 7);
    const size_t ti = r.meta >> 3;
    const auto& th = core->threads();
    if (out.kind == RefFrom::kRegister || out.kind == RefFrom::kStack || out.kind == RefFrom::kTls)
      out.tid = ti < th.size() ? th[ti].tid : 0;
    if (out.kind == RefFrom::kRegister) {
      // A general register, else a vector lane (numbered on after them).
      const uint64_t n = ti < th.size() ? static_cast<uint64_t>(th[ti].nregs()) : 0;
      if (r.from < n)
        out.value = th[ti].regs[r.from];
      else if (ti < th.size() && r.from - n < th[ti].vregs.size())
        out.value = th[ti].vregs[r.from - n].value;
    } else if (!core->read(r.from, &out.value, 8).ok()) {
      out.value = 0;
      // A word of a mapping the core leaves out, read from its file.
      if (file_words) {
        auto w = std::lower_bound(file_words->begin(), file_words->end(),
                                  std::make_pair(r.from, uint64_t{0}));
        if (w != file_words->end() && w->first == r.from) out.value = w->second;
      }
    }
    return out;
  }

  // The roots of chunk `c` (sorted by target).
  std::pair<const RootRef*, const RootRef*> roots_of(size_t c) const {
    auto cmp = [](const RootRef& r, uint64_t t) { return r.target < t; };
    auto a = std::lower_bound(roots.begin(), roots.end(), uint64_t{c}, cmp);
    auto b = a;
    while (b != roots.end() && b->target == c) ++b;
    return {roots.data() + (a - roots.begin()), roots.data() + (b - roots.begin())};
  }
};

RefIndex::RefIndex(const HeapWalk& heap, const Memory& mem)
    : heap_(heap), mem_(mem), impl_(std::make_unique<Impl>(heap.in_use, heap.links)) {}
RefIndex::~RefIndex() = default;

size_t RefIndex::chunk_at(uint64_t addr) const {
  return impl_->lookup(addr);
}

namespace {

// Calls fn(address, word) for each aligned word of [a, b) that the core
// holds, through window `w` (kept by the caller across calls); unreadable
// pages are skipped. Returns the words read.
template <class F>
uint64_t each_word(const Memory& mem, Memory::Window& w, uint64_t a, uint64_t b, const F& fn) {
  a = (a + 7) & ~uint64_t{7};
  uint64_t words = 0;
  while (a + 8 <= b) {
    const uint8_t* p = w.at(a, 8);
    if (!p) p = mem.direct(w, a, 8);
    if (!p) {
      a = (a | (kPage - 1)) + 1;
      continue;
    }
    const uint64_t n = std::min<uint64_t>((b - a) / 8, (w.end - a) / 8);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t v;
      std::memcpy(&v, p + i * 8, 8);
      fn(a + i * 8, v);
    }
    words += n;
    a += std::max<uint64_t>(n, 1) * 8;
  }
  return words;
}

// The scan's hot loop. Ranges are fed in address order; `fn(address,
// value, chunk, source)` is called for each word that points into a chunk,
// in address order (`source` is what the range was fed with). Unreadable
// pages are skipped. Candidates (words inside the heap's range) are resolved
// in batches that run across ranges: the table entries a batch needs are
// prefetched, then its chunks, so the cache misses of a pointer-dense heap
// overlap instead of queueing; the core window is kept across ranges too
// (a heap of small chunks is millions of short ranges in a few mappings).
template <class F>
class Scanner {
 public:
  Scanner(const Memory& mem, const RefIndex::Impl& ix, F&& fn)
      : mem_(mem), ix_(ix), fn_(std::move(fn)) {}
  ~Scanner() { flush(); }

  // Scans [a, b); returns the words read.
  uint64_t range(uint64_t a, uint64_t b, uint32_t source) {
    return each_word(mem_, w_, a, b, [&](uint64_t at, uint64_t v) {
      if (v - ix_.lo >= ix_.hi - ix_.lo) return;  // most words: not a heap address
      candidate(at, v, source);
    });
  }

  void flush() {
    const ChunkIndex& ch = ix_.ch;
    const uint64_t* words = ch.word_data();
    const size_t nch = ch.size();
    for (size_t k = 0; k < nb_; ++k) {
      idx_[k] = *slot_[k];
      __builtin_prefetch(words + idx_[k]);
    }
    for (size_t k = 0; k < nb_; ++k) {
      const uint64_t v = val_[k] & ~uint64_t{7};
      size_t i = idx_[k];
      HeapChunk c;
      while (i < nch && (c = ch[i]).user + c.usable() <= v) ++i;
      if (i < nch && c.user <= v) fn_(at_[k], val_[k], i, src_[k]);
    }
    nb_ = 0;
  }

 private:
  void candidate(uint64_t at, uint64_t v, uint32_t source) {
    const uint64_t u = v & ~uint64_t{7};
    for (const Span& sp : ix_.spans) {
      if (u < sp.start) return;
      if (u >= sp.end) continue;
      slot_[nb_] = &sp.first[(u - sp.start) >> ix_.line_shift];
      __builtin_prefetch(slot_[nb_]);
      at_[nb_] = at;
      val_[nb_] = v;
      src_[nb_] = source;
      if (++nb_ == kBatch) flush();
      return;
    }
  }

  static constexpr size_t kBatch = 32;
  const Memory& mem_;
  const RefIndex::Impl& ix_;
  F fn_;
  Memory::Window w_;
  uint64_t at_[kBatch], val_[kBatch];
  const uint32_t* slot_[kBatch];
  size_t idx_[kBatch];
  uint32_t src_[kBatch];
  size_t nb_ = 0;
};

}  // namespace

Result<std::unique_ptr<RefIndex>> RefIndex::build(const CoreFile& core, const ModuleSet& mods,
                                                  const HeapWalk& heap, const RefIndexOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<RefIndex> x(new RefIndex(heap, core));
  Impl& ix = *x->impl_;
  ix.core = &core;
  const auto& ch = heap.in_use;
  if (ch.size() >= UINT32_MAX)
    return make_error(Errc::kUnsupported,
                      fmt::format("{} heap chunks: more than the index numbers", ch.size()));
  ix.build_spans();
  x->model_ = find_roots(core, mods, heap, o.threads);
  ix.file_words = &x->model_.file_words;
  x->warnings_ = x->model_.warnings;
  std::unordered_set<uint64_t> skip(o.skip_chunks.begin(), o.skip_chunks.end());
  uint64_t unpublished = 0;
  auto publish = [&](uint64_t bytes) {
    unpublished += bytes;
    if (o.progress && unpublished >= (1u << 20)) {
      o.progress->fetch_add(unpublished, std::memory_order_relaxed);
      unpublished = 0;
    }
  };
  auto stop = [&] { return o.interrupted && o.interrupted->load(std::memory_order_relaxed); };
  // Heap chunks, in address order. References arrive in the order of their
  // source chunk (a batch resolves after the chunk that filled it was left),
  // so each row's start is set when the first reference past it arrives.
  {
    uint64_t self = 0;
    size_t next_row = 0;  // the first chunk whose row start is not set yet
    size_t link = 0;      // chunk_parts' place in the heap's links
    ix.rows.reset(ch.size());
    Scanner sc(core, ix, [&](uint64_t, uint64_t v, size_t t, uint32_t src) {
      if (t == src) {
        ++self;
        return;
      }
      while (next_row <= src)
        ix.rows.set_begin(next_row++, static_cast<uint32_t>(ix.target.size()));
      const size_t r = ix.target.size();
      if ((r & 63) == 0) ix.at_start.push_back(0);
      ix.at_start[r >> 6] |= uint64_t{v == ch[t].user} << (r & 63);
      ix.target.push_back(static_cast<uint32_t>(t));
    });
    size_t c = 0;
    auto part = [&](uint64_t a, uint64_t b) {
      x->stats_.words += sc.range(a, b, static_cast<uint32_t>(c));
      x->stats_.bytes_scanned += b - a;
      publish(b - a);
    };
    for (; c < ch.size(); ++c) {
      if ((c & 0xffff) == 0 && stop()) return make_error(Errc::kInterrupted, "interrupted");
      if (!skip.empty() && skip.count(ch[c].user)) continue;
      ix.chunk_parts(c, part, &link);
    }
    sc.flush();
    while (next_row <= ch.size())
      ix.rows.set_begin(next_row++, static_cast<uint32_t>(ix.target.size()));
    x->stats_.self_refs = self;
  }
  // Roots: ranges, then every thread's registers.
  const auto& threads = core.threads();
  auto thread_index = [&](int tid) -> uint32_t {
    for (size_t i = 0; i < threads.size(); ++i)
      if (threads[i].tid == tid) return static_cast<uint32_t>(i);
    return 0;
  };
  for (const auto& r : x->model_.roots) {
    if (stop()) return make_error(Errc::kInterrupted, "interrupted");
    const uint32_t meta = static_cast<uint32_t>(r.kind) | thread_index(r.tid) << 3;
    Scanner sc(core, ix, [&](uint64_t at, uint64_t, size_t t, uint32_t m) {
      ix.roots.push_back({at, static_cast<uint32_t>(t), m});
    });
    x->stats_.words += sc.range(r.start, r.end, meta);
    sc.flush();
    x->stats_.bytes_scanned += r.end - r.start;
    publish(r.end - r.start);
  }
  // Words of mappings the core leaves out, read from their files.
  for (const auto& [at, v] : x->model_.file_words) {
    const size_t t = ix.lookup(v & ~uint64_t{7});
    if (t != kNone)
      ix.roots.push_back({at, static_cast<uint32_t>(t), static_cast<uint32_t>(RefFrom::kMapping)});
  }
  // Each thread's general registers, then its vector registers' lanes
  // (numbered on from the general ones: register_name names them).
  for (size_t ti = 0; ti < threads.size(); ++ti) {
    const ThreadInfo& th = threads[ti];
    const uint64_t nregs = static_cast<uint64_t>(th.nregs());
    auto add = [&](uint64_t index, uint64_t v) {
      const size_t t = ix.lookup(v & ~uint64_t{7});
      if (t != kNone)
        ix.roots.push_back(
            {index, static_cast<uint32_t>(t),
             static_cast<uint32_t>(RefFrom::kRegister) | static_cast<uint32_t>(ti) << 3});
    };
    for (uint64_t i = 0; i < nregs; ++i) add(i, th.regs[i]);
    if (vector_regs_live(th))
      for (uint64_t i = 0; i < th.vregs.size(); ++i) add(nregs + i, th.vregs[i].value);
  }
  if (o.progress) o.progress->fetch_add(unpublished, std::memory_order_relaxed);
  // Roots by target.
  std::stable_sort(ix.roots.begin(), ix.roots.end(),
                   [](const RootRef& a, const RootRef& b) { return a.target < b.target; });
  // The growth slack of the scan's vectors is given back.
  ix.target.shrink_to_fit();
  ix.at_start.shrink_to_fit();
  ix.roots.shrink_to_fit();
  x->stats_.refs = ix.target.size() + ix.roots.size();
  x->stats_.roots = ix.roots.size();
  for (const auto& r : ix.roots) ++x->stats_.roots_by_kind[r.meta & 7];
  uint64_t span_bytes = 0;
  for (const auto& s : ix.spans) span_bytes += s.first.capacity() * 4;
  x->stats_.index_bytes = ix.target.capacity() * 4 + ix.roots.capacity() * sizeof(RootRef);
  x->stats_.table_bytes = ix.rows.bytes() + span_bytes;
  x->stats_.build_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return x;
}

std::vector<uint64_t> RefIndex::Impl::words_into(const Memory& mem, size_t src, size_t dst) const {
  // The scan's rule for one target: an aligned word whose value, low three
  // bits cleared, lies in dst's user range. Compared directly, with no
  // chunk lookup per word (a path's step through an 8 MB table reads it).
  std::vector<uint64_t> out;
  const uint64_t lo = ch[dst].user, size = ch[dst].usable();
  Memory::Window w;
  chunk_parts(src, [&](uint64_t a, uint64_t b) {
    each_word(mem, w, a, b, [&](uint64_t at, uint64_t v) {
      if ((v & ~uint64_t{7}) - lo < size) out.push_back(at);
    });
  });
  return out;
}

std::vector<Ref> RefIndex::refs_to(size_t c) const {
  std::vector<Ref> out;
  if (c >= chunks()) return out;
  const Impl& ix = *impl_;
  out = root_refs_to(c);
  const auto& io = ix.in_off();
  const auto& src = ix.in_src();
  for (uint32_t i = io[c]; i < io[c + 1]; ++i) {
    if (i > io[c] && src[i] == src[i - 1]) continue;  // one rescan per source chunk
    for (uint64_t from : ix.words_into(mem_, src[i], c)) {
      Ref ref;
      ref.from = from;
      ref.target = static_cast<uint32_t>(c);
      ref.kind = RefFrom::kChunk;
      out.push_back(ref);
    }
  }
  return out;
}

namespace {

// The row holding reference `r` (< rows.begin(n)), at or after row
// `from`'s: the last row starting at or before `r` (an empty row starts
// where the next does).
size_t row_of(const RowIndex& rows, size_t n, uint32_t r, size_t from) {
  size_t lo = from, step = 1;
  while (lo + step < n && rows.begin(lo + step) <= r) lo += step, step *= 2;
  size_t hi = std::min(lo + step, n);  // rows.begin(hi) > r, or hi == n
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (rows.begin(mid) <= r ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

void RefIndex::each_chunk_ref_into(std::span<const uint32_t> targets,
                                   const std::function<void(const Ref&, uint32_t)>& fn) const {
  const Impl& ix = *impl_;
  // Targets and their sources as bitmaps: millions of targets often share
  // a few sources (one vector of owners), which a sorted list would repeat.
  // The sources come from one pass over the forward rows, not the reverse
  // ones (a random write per reference of the whole heap to make).
  std::vector<uint64_t> is_target((chunks() + 63) / 64), is_source(is_target.size());
  for (uint32_t t : targets)
    if (t < chunks()) is_target[t >> 6] |= uint64_t{1} << (t & 63);
  // One run down every reference; a hit's row is found by galloping on
  // from the last one's (hits are few, rows millions).
  const size_t n = ix.rows.rows();
  const uint32_t refs = ix.rows.begin(n);
  size_t c = 0;
  for (uint32_t r = 0; r < refs; ++r) {
    if (!((is_target[ix.target[r] >> 6] >> (ix.target[r] & 63)) & 1)) continue;
    c = row_of(ix.rows, n, r, c);
    is_source[c >> 6] |= uint64_t{1} << (c & 63);
    r = ix.rows.begin(c + 1) - 1;  // the rest of its row adds nothing
  }
  // The scan's own rule, source by source in address order.
  Scanner sc(mem_, ix, [&](uint64_t at, uint64_t v, size_t t, uint32_t s) {
    if (t == s || !((is_target[t >> 6] >> (t & 63)) & 1)) return;
    Ref r;
    r.from = at;
    r.value = v;
    r.target = static_cast<uint32_t>(t);
    fn(r, s);
  });
  size_t link = 0;  // sources come in address order
  for (size_t w = 0; w < is_source.size(); ++w)
    for (uint64_t bits = is_source[w]; bits; bits &= bits - 1) {
      const auto s = static_cast<uint32_t>(w * 64 + static_cast<unsigned>(__builtin_ctzll(bits)));
      ix.chunk_parts(
          s, [&](uint64_t a, uint64_t b) { sc.range(a, b, s); }, &link);
    }
  sc.flush();
}

namespace {

// A set of chunks as a bitmap with each word's rank before it: a chunk's
// place among the distinct ones, with no chunk-sized table.
struct ChunkRanks {
  std::vector<uint64_t> bits;
  std::vector<uint32_t> rank;
  ChunkRanks(std::span<const uint32_t> chunks, size_t n)
      : bits((n + 63) / 64), rank(bits.size() + 1) {
    for (uint32_t t : chunks)
      if (t < n) bits[t >> 6] |= uint64_t{1} << (t & 63);
    for (size_t w = 0; w < bits.size(); ++w)
      rank[w + 1] = rank[w] + static_cast<uint32_t>(__builtin_popcountll(bits[w]));
  }
  bool has(uint32_t t) const { return (bits[t >> 6] >> (t & 63)) & 1; }
  uint32_t place(uint32_t t) const {
    const uint64_t below = bits[t >> 6] & ((uint64_t{1} << (t & 63)) - 1);
    return rank[t >> 6] + static_cast<uint32_t>(__builtin_popcountll(below));
  }
  size_t size() const { return rank.back(); }
};

}  // namespace

std::vector<uint8_t> RefIndex::reachable_counting_starts(std::span<const uint32_t> targets,
                                                         std::vector<uint32_t>* start_refs) const {
  const Impl& ix = *impl_;
  const ChunkRanks set(targets, chunks());
  std::vector<uint32_t> count;  // millions of counts: on huge pages
  reserve_huge(count, set.size());
  count.resize(set.size(), 0);
  std::vector<uint8_t> reach = ix.mark_from_roots(heap_.in_use.size(), [&](uint32_t e, uint32_t t) {
    if (((ix.at_start[e >> 6] >> (e & 63)) & 1) && set.has(t)) ++count[set.place(t)];
  });
  // Targets ascending and distinct (as a census finds them) are their own
  // ranks: the counts are the answer, with no second array.
  if (std::adjacent_find(targets.begin(), targets.end(), std::greater_equal<uint32_t>()) ==
          targets.end() &&
      (targets.empty() || targets.back() < chunks())) {
    *start_refs = std::move(count);
    return reach;
  }
  start_refs->assign(targets.size(), 0);
  for (size_t k = 0; k < targets.size(); ++k)
    if (targets[k] < chunks()) (*start_refs)[k] = count[set.place(targets[k])];
  return reach;
}

RefIndex::LiveRows RefIndex::live_rows(const std::vector<LiveExtent>& live) const {
  const Impl& ix = *impl_;
  LiveRows out;
  out.has_.assign((chunks() + 63) / 64, 0);
  // A chunk's row lists its references in address order: a rescan by the
  // scan's rule counts the entries before its extent and inside it.
  for (const LiveExtent& e : live) {
    if (e.chunk >= chunks() || out.cut_.count(e.chunk)) continue;
    const HeapChunk c = ix.ch[e.chunk];
    LiveRows::Cut p;
    uint32_t all = 0;
    Scanner sc(mem_, ix, [&](uint64_t at, uint64_t, size_t t, uint32_t s) {
      if (t == s) return;
      ++all;
      if (at < c.user + e.begin)
        ++p.skip;
      else if (at < c.user + e.end)
        ++p.keep;
    });
    ix.chunk_parts(e.chunk, [&](uint64_t a, uint64_t b) { sc.range(a, b, e.chunk); });
    sc.flush();
    // A row that is not this scan's (a chunk the index did not scan) is
    // left whole.
    if (all != ix.rows.begin(e.chunk + 1) - ix.rows.begin(e.chunk)) continue;
    out.cut_.emplace(e.chunk, p);
    out.has_[e.chunk >> 6] |= uint64_t{1} << (e.chunk & 63);
  }
  return out;
}

std::span<const uint32_t> RefIndex::LiveRows::row(const RefIndex& ix, size_t c) const {
  const std::span<const uint32_t> whole = ix.row(c);
  if (cut_.empty() || c >= ix.chunks() || !(has_[c >> 6] >> (c & 63) & 1)) return whole;
  const Cut& p = cut_.at(static_cast<uint32_t>(c));
  return whole.subspan(p.skip, p.keep);
}

std::vector<uint8_t> RefIndex::reachable(const std::vector<LiveExtent>& live) const {
  const Impl& ix = *impl_;
  const LiveRows rows = live_rows(live);
  return mark_reachable_rows(
      chunks(), ix.root_targets(),
      [&](size_t c) {
        const std::span<const uint32_t> r = rows.row(*this, c);
        const auto b = static_cast<uint32_t>(r.data() - ix.target.data());
        return std::pair<uint32_t, uint32_t>(b, b + static_cast<uint32_t>(r.size()));
      },
      ix.target);
}

std::vector<Ref> RefIndex::root_refs_to(size_t c) const {
  std::vector<Ref> out;
  if (c >= chunks()) return out;
  auto [ra, rb] = impl_->roots_of(c);
  for (const RootRef* r = ra; r != rb; ++r) out.push_back(impl_->root(*r));
  return out;
}

std::vector<Ref> RefIndex::stale_refs_to(size_t c) const {
  std::vector<Ref> out;
  if (c >= chunks()) return out;
  for (const auto& r : model_.stale) {
    Scanner sc(mem_, *impl_, [&](uint64_t at, uint64_t v, size_t t, uint32_t) {
      if (t != c) return;
      Ref ref;
      ref.from = at;
      ref.value = v;
      ref.target = static_cast<uint32_t>(c);
      ref.kind = r.kind;
      ref.stale = true;
      out.push_back(ref);
    });
    sc.range(r.start, r.end, 0);
    sc.flush();
  }
  return out;
}

namespace {

// Calls fn(address) for each word of [start, end) whose value lies in
// [a, b); unreadable pages are skipped.
template <class F>
void each_word_into(const Memory& mem, uint64_t start, uint64_t end, uint64_t a, uint64_t b, F fn) {
  start = (start + 7) & ~uint64_t{7};
  uint64_t buf[512];
  while (start + 8 <= end) {
    const uint64_t n = std::min<uint64_t>((end - start) / 8, 512);
    if (!mem.read(start, buf, n * 8).ok()) {
      start = (start | (kPage - 1)) + 1;
      continue;
    }
    for (uint64_t i = 0; i < n; ++i)
      if ((buf[i] & ~uint64_t{7}) - a < b - a) fn(start + i * 8, buf[i]);
    start += n * 8;
  }
}

}  // namespace

std::vector<Ref> RefIndex::words_into(uint64_t a, uint64_t b) const {
  std::vector<Ref> out;
  if (a >= b) return out;
  for (const auto& r : model_.roots)
    each_word_into(mem_, r.start, r.end, a, b, [&](uint64_t at, uint64_t v) {
      Ref ref;
      ref.from = at, ref.value = v, ref.kind = r.kind, ref.tid = r.tid;
      out.push_back(ref);
    });
  const auto& ch = heap_.in_use;
  for (size_t c = 0; c < ch.size(); ++c)
    impl_->chunk_parts(c, [&](uint64_t s, uint64_t e) {
      each_word_into(mem_, s, e, a, b, [&](uint64_t at, uint64_t v) {
        Ref ref;
        ref.from = at, ref.value = v, ref.kind = RefFrom::kChunk;
        out.push_back(ref);
      });
    });
  for (const auto& th : impl_->core->threads()) {
    const uint64_t n = static_cast<uint64_t>(th.nregs());
    auto reg = [&](uint64_t index, uint64_t v) {
      if ((v & ~uint64_t{7}) - a >= b - a) return;
      Ref ref;
      ref.from = index, ref.value = v, ref.kind = RefFrom::kRegister, ref.tid = th.tid;
      out.push_back(ref);
    };
    for (uint64_t i = 0; i < n; ++i) reg(i, th.regs[i]);
    if (vector_regs_live(th))
      for (uint64_t i = 0; i < th.vregs.size(); ++i) reg(n + i, th.vregs[i].value);
  }
  return out;
}

Result<std::vector<Ref>> RefIndex::refs_into(uint64_t addr, uint64_t size) const {
  const size_t c = chunk_at(addr);
  if (c == kNone)
    return make_error(Errc::kNotFound,
                      fmt::format("{:#x} is not inside an in-use heap block (the reference index "
                                  "holds references to heap blocks)",
                                  addr));
  std::vector<Ref> out;
  for (Ref r : refs_to(c)) {
    if (r.kind != RefFrom::kRegister && r.from >= addr && r.from - addr < size) continue;
    if (r.kind != RefFrom::kRegister && !mem_.read(r.from, &r.value, 8).ok()) continue;
    const uint64_t v = r.value & ~uint64_t{7};
    if (v >= addr && v - addr < size) out.push_back(r);
  }
  return out;
}

bool RefIndex::from_unreachable(const Ref& r) const {
  if (r.kind != RefFrom::kChunk) return false;
  const size_t c = chunk_at(r.from);
  if (c == kNone) return false;
  std::call_once(impl_->reach_once, [this] { impl_->reach_ = reachable(); });
  return !(impl_->reach_[c] & kReached);
}

uint32_t RefIndex::ref_count(size_t c) const {
  const Impl& ix = *impl_;
  if (c >= chunks()) return 0;
  auto [ra, rb] = ix.roots_of(c);
  const auto& io = ix.in_off();
  return (io[c + 1] - io[c]) + static_cast<uint32_t>(rb - ra);
}

std::vector<uint32_t> RefIndex::points_to(size_t c) const {
  std::vector<uint32_t> out;
  if (c >= chunks()) return out;
  const Impl& ix = *impl_;
  out.assign(ix.target.begin() + ix.rows.begin(c), ix.target.begin() + ix.rows.begin(c + 1));
  return out;
}

std::span<const uint32_t> RefIndex::row(size_t c) const {
  if (c >= chunks()) return {};
  const Impl& ix = *impl_;
  return {ix.target.data() + ix.rows.begin(c), ix.target.data() + ix.rows.begin(c + 1)};
}

std::span<const uint32_t> RefIndex::referrers(size_t c) const {
  if (c >= chunks()) return {};
  const auto& io = impl_->in_off();
  return {impl_->in_src().data() + io[c], impl_->in_src().data() + io[c + 1]};
}

std::vector<uint64_t> RefIndex::words_from(size_t src, size_t dst) const {
  if (src >= chunks() || dst >= chunks()) return {};
  return impl_->words_into(mem_, src, dst);
}

size_t RefIndex::root_count() const {
  return impl_->roots.size();
}

Ref RefIndex::root_ref(size_t i) const {
  return impl_->root(impl_->roots[i]);
}

std::vector<uint8_t> RefIndex::reachable() const {
  return impl_->mark_from_roots(heap_.in_use.size());
}

namespace {

// The root range holding address `a`; null when none does.
const RootRange* root_range_at(const std::vector<RootRange>& rs, uint64_t a) {
  auto it = std::upper_bound(rs.begin(), rs.end(), a,
                             [](uint64_t v, const RootRange& r) { return v < r.start; });
  if (it == rs.begin()) return nullptr;
  --it;
  return a < it->end ? &*it : nullptr;
}

}  // namespace

std::vector<Ref> RefIndex::anchor_chain(size_t c, size_t max_depth,
                                        const std::function<uint64_t(size_t)>& holder) const {
  if (c >= chunks()) return {};
  const Impl& ix = *impl_;
  // Backwards from `c`, breadth first: each chunk's parent is the chunk
  // (and the referring word) it was reached from.
  struct Step {
    uint32_t chunk;
    uint64_t from;  // the word in `chunk` pointing at the child
    uint32_t child;
    bool whole = false;  // `from` is a container holding the child whole
  };
  std::unordered_map<uint32_t, Step> parent;
  std::vector<uint32_t> level = {static_cast<uint32_t>(c)};
  parent.emplace(static_cast<uint32_t>(c), Step{UINT32_MAX, 0, UINT32_MAX});
  // The root's reference, then each hop from `cur` towards `c`.
  auto chain_from = [&](Ref root, uint32_t cur) {
    std::vector<Ref> chain = {root};
    for (uint32_t at = cur; at != c;) {
      const Step& s = parent.at(at);
      Ref r;
      r.from = s.from;
      r.target = s.child;
      r.kind = RefFrom::kChunk;
      r.whole = s.whole;
      chain.push_back(r);
      at = s.child;
    }
    return chain;
  };
  for (size_t depth = 0; depth <= max_depth && !level.empty(); ++depth) {
    std::vector<uint32_t> next;
    for (uint32_t cur : level) {
      if (auto [ra, rb] = ix.roots_of(cur); ra != rb) return chain_from(ix.root(*ra), cur);
      // Held as a whole by a container: in a root (a global map), or in
      // another block, one step up.
      if (const uint64_t h = holder ? holder(cur) : 0) {
        if (const RootRange* rr = root_range_at(model_.roots, h)) {
          Ref r;
          r.from = h, r.target = cur, r.kind = rr->kind, r.tid = rr->tid, r.whole = true;
          return chain_from(r, cur);
        }
        const size_t p = chunk_at(h);
        if (p != SIZE_MAX && !parent.count(static_cast<uint32_t>(p))) {
          parent.emplace(static_cast<uint32_t>(p), Step{static_cast<uint32_t>(p), h, cur, true});
          next.push_back(static_cast<uint32_t>(p));
        }
      }
      const auto& io = ix.in_off();
      const auto& srcs = ix.in_src();
      for (uint32_t i = io[cur]; i < io[cur + 1]; ++i) {
        const uint32_t s32 = srcs[i];
        if (parent.count(s32)) continue;
        auto words = ix.words_into(mem_, s32, cur);
        if (words.empty()) continue;
        parent.emplace(s32, Step{s32, words.front(), cur});
        next.push_back(s32);
      }
    }
    level = std::move(next);
  }
  return {};
}

}  // namespace lr
