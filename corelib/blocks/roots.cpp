// The root model (roots.hpp). A conservative scan needs every place a live
// reference can lie and none where a dead one does: the stack of a thread
// that exited still holds the pointers it had, and taking it for a root
// hides exactly the leaks such threads made.
#include "corelib/blocks/roots.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <unordered_map>

#include "corelib/base/fileio.hpp"

namespace lr {

const char* ref_from_name(RefFrom k) {
  switch (k) {
    case RefFrom::kChunk:
      return "chunk";
    case RefFrom::kGlobal:
      return "global";
    case RefFrom::kStack:
      return "stack";
    case RefFrom::kTls:
      return "tls";
    case RefFrom::kRegister:
      return "register";
    case RefFrom::kMapping:
      return "mapping";
    case RefFrom::kReadOnly:
      return "readonly";
  }
  return "?";
}

namespace {

// Without the C library's word on a thread's static TLS: the bytes around
// its thread pointer, clipped to its mapping. x86_64 (TLS variant II) keeps
// the TLS blocks below it and struct pthread at and above it; aarch64
// (variant I) the other way round.
constexpr uint64_t kTlsSide = 8192, kTcbSide = 2304;
// Data files a core left out that are read to see whether they hold heap
// pointers; past this many, each is an unread root (the answer is partial).
constexpr size_t kMaxFilesLooked = 64;

using Spans = std::vector<std::pair<uint64_t, uint64_t>>;

// `ranges` less the parts inside any of `cut`.
std::vector<RootRange> subtract_ranges(std::vector<RootRange> ranges, Spans cut) {
  std::sort(cut.begin(), cut.end());
  std::vector<RootRange> out;
  for (auto& r : ranges) {
    uint64_t at = r.start;
    auto it = std::upper_bound(cut.begin(), cut.end(), std::make_pair(r.start, UINT64_MAX));
    if (it != cut.begin()) --it;
    for (; it != cut.end() && it->first < r.end; ++it) {
      if (it->second <= at) continue;
      if (it->first > at) out.push_back({at, it->first, r.kind, r.tid, r.what});
      at = std::max(at, it->second);
    }
    if (at < r.end) out.push_back({at, r.end, r.kind, r.tid, r.what});
  }
  return out;
}

int64_t ns_of(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// A file's modification time in ns since the epoch; INT64_MAX when it
// cannot be told (nothing is older).
int64_t mtime_ns(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? ns_of(st) : INT64_MAX;
}

// The words of `len` bytes of `path` at `off` (mapped at `at`) that point
// into an in-use block of `heap` (all in [lo, hi)), added to `words` as
// (address, value); false when they cannot be read whole, or are too many
// (nobody can say what they hold), with `why`. The blocks themselves are
// asked: a heap whose blocks lie both low (brk) and high (mmapped chunks,
// a layer's arenas) spans most of the address space.
// `mtime`: the file's modification time (ns since the epoch).
bool file_words(const std::string& path, uint64_t off, uint64_t len, uint64_t at_addr,
                const HeapWalk& heap, uint64_t lo, uint64_t hi,
                std::vector<std::pair<uint64_t, uint64_t>>* words, int64_t* mtime,
                std::string* why) {
  constexpr size_t kMaxWords = 1 << 16;  // a file of heap-like words is no locale table
  constexpr uint64_t kMaxScan = 256ull << 20;
  auto fd = open_input(path, "mapped file");
  if (!fd.ok()) {
    *why = fd.error().message;
    return false;
  }
  Fd f(fd.value());
  *mtime = mtime_ns(f.fd);
  if (len > kMaxScan) {
    *why = fmt::format("{} bytes, more than the {} MiB looked at", len, kMaxScan >> 20);
    return false;
  }
  std::vector<uint64_t> buf(1 << 17);
  for (uint64_t at = 0; at < len;) {
    const uint64_t want = std::min<uint64_t>(len - at, buf.size() * 8);
    const ssize_t n = ::pread(f.fd, buf.data(), want, static_cast<off_t>(off + at));
    if (n < 0) {
      *why = fmt::format("{} cannot be read: {}", path, std::strerror(errno));
      return false;
    }
    // Past the file's end a mapping holds nothing: a mapping is whole pages,
    // and the rest of the file's last page reads as zeros (a C library's
    // locale file: 353,616 bytes in 356,352), whole pages past it as SIGBUS.
    if (n == 0) break;
    for (size_t i = 0; i < static_cast<size_t>(n) / 8; ++i)
      if (buf[i] - lo < hi - lo && heap.chunk_containing(buf[i])) {
        if (words->size() >= kMaxWords) {
          *why =
              fmt::format("{} holds more than {} words that point into the heap", path, kMaxWords);
          return false;
        }
        words->emplace_back(at_addr + at + 8 * i, buf[i]);
      }
    at += static_cast<uint64_t>(n);
  }
  return true;
}

bool overlaps(const Spans& spans, uint64_t a, uint64_t b) {
  return std::any_of(spans.begin(), spans.end(),
                     [&](const auto& s) { return s.first < b && a < s.second; });
}

class Planner {
 public:
  Planner(const CoreFile& core, const ModuleSet& mods, const HeapWalk& heap, const ThreadMemory* tm)
      : core_(core), mods_(mods), heap_(heap), tm_(tm) {
    for (auto& s : core.segments()) {
      if (s.kind == SegmentInfo::Kind::kCore) {
        segs_.push_back(std::move(s));
      } else if (s.kind == SegmentInfo::Kind::kMissing) {
        if (s.writable) m_.unread.push_back({s.start, s.end, RefFrom::kMapping, 0, s.why});
        missing_.push_back(std::move(s));
      }
    }
  }

  RootModel run() {
    unread_files();
    std::sort(m_.file_words.begin(), m_.file_words.end());
    dead_stacks();
    for (const auto& t : core_.threads()) thread_stack(t);
    modules();
    other_mappings();
    cut_and_merge();
    return std::move(m_);
  }

 private:
  const SegmentInfo* seg_at(uint64_t a) const {
    for (const auto& s : segs_)
      if (a >= s.start && a < s.end) return &s;
    return nullptr;
  }

  const ThreadMemory::Range* tls_of(int tid) const {
    if (!tm_) return nullptr;
    for (const auto& r : tm_->tls)
      if (r.tid == tid && r.start < r.end) return &r;
    return nullptr;
  }

  // A file mapping the core leaves out: gcore and the kernel skip shared
  // file mappings and private ones never written. Either holds what the
  // file on disk holds (a MAP_SHARED mapping the program wrote pointers to
  // keeps them in the file itself), so the file is read: its words that
  // point into the heap are roots (file_words), as any read-only mapping's
  // are. A file that cannot be read whole is memory that may hold roots
  // and that nobody read.
  void unread_files() {
    const auto& ch = heap_.in_use;
    if (ch.size() == 0) return;
    const uint64_t lo = ch[0].user, hi = ch[ch.size() - 1].user + ch[ch.size() - 1].usable();
    // One lookup table each: a hostile core lists 100,000 mappings.
    std::vector<const MappedRange*> ranges;
    for (const auto& mr : core_.mapped_ranges()) ranges.push_back(&mr);
    std::sort(ranges.begin(), ranges.end(),
              [](const MappedRange* a, const MappedRange* b) { return a->start < b->start; });
    std::unordered_map<std::string, const MappedFileInfo*> files;
    for (const auto& mf : core_.mapped_files()) files[mf.path] = &mf;
    size_t looked = 0;  // files opened: bounded, the rest are said unread
    // When the core was written (a core in memory: never, so no file is
    // taken as unchanged since).
    // stat, not open: the core was opened already, and nothing is read.
    int64_t core_mtime = INT64_MIN;
    struct stat cs {};
    if (!core_.path().empty() && ::stat(core_.path().c_str(), &cs) == 0) core_mtime = ns_of(cs);
    for (const auto& s : missing_) {
      if (s.writable) continue;
      auto it = std::upper_bound(ranges.begin(), ranges.end(), s.start,
                                 [](uint64_t a, const MappedRange* r) { return a < r->start; });
      if (it == ranges.begin() || s.start >= (*--it)->end) continue;
      const MappedRange& r = **it;
      auto f = files.find(r.path);
      if (f == files.end() || !may_be_data(*f->second)) continue;
      std::string why = "more data files than are looked at";
      const std::string& host = f->second->host_path.empty() ? r.path : f->second->host_path;
      std::vector<std::pair<uint64_t, uint64_t>> words;
      int64_t mtime = INT64_MAX;
      if (looked++ < kMaxFilesLooked &&
          file_words(host, r.file_offset + (s.start - r.start), s.end - s.start, s.start, heap_, lo,
                     hi, &words, &mtime, &why)) {
        if (words.empty()) continue;
        // Its words are the mapping's only while the file is as it was
        // when the core was written (a process gcore left running goes on
        // writing a shared mapping).
        if (mtime > core_mtime) {
          m_.unread.push_back(
              {s.start, s.end, RefFrom::kMapping, 0,
               fmt::format("a mapping of {} the core leaves out ({} holds words that point "
                           "into the heap, and changed after the core was written)",
                           r.path, host)});
          continue;
        }
        out_.push_back({s.start, s.end, RefFrom::kMapping, 0,
                        fmt::format("mapping of {} (read from the file)", r.path)});
        m_.file_words.insert(m_.file_words.end(), words.begin(), words.end());
        continue;
      }
      m_.unread.push_back({s.start, s.end, RefFrom::kMapping, 0,
                           fmt::format("a mapping of {} the core leaves out ({})", r.path, why)});
    }
  }

  // Whether a file the core leaves out may be data: not an ELF object
  // (whose writable parts a core always holds; its code and read-only data
  // hold no heap pointer), by its bytes on disk or, with no file here, by
  // the first page the core kept of it.
  bool may_be_data(const MappedFileInfo& f) const {
    using S = MappedFileInfo::Status;
    if (f.status == S::kNotElf) return true;
    if (f.status != S::kNoFile) return false;
    char magic[4] = {};
    return !core_.read(f.base, magic, 4).ok() || std::memcmp(magic,
                                                             "\x7f"
                                                             "ELF",
                                                             4) != 0;
  }

  // The C library's dead stacks, less any a live thread runs on (a list
  // that lies is believed only where the core agrees).
  void dead_stacks() {
    if (!tm_) return;
    for (const auto& d : tm_->dead_stacks) {
      const ThreadInfo* on = nullptr;
      for (const auto& t : core_.threads())
        if (t.sp() >= d.start && t.sp() < d.end) on = &t;
      if (on) {
        m_.warnings.push_back(fmt::format(
            "{} lists {:#x}-{:#x} as the stack of a thread that no longer exists, but thread {} "
            "runs on it: scanned as live",
            tm_->source, d.start, d.end, on->tid));
        continue;
      }
      m_.stale.push_back({d.start, d.end, RefFrom::kStack, 0, d.what});
      cut_.emplace_back(d.start, d.end);
    }
  }

  // A live thread's stack from its stack pointer up (below it is dead, never
  // a root), its static TLS and control block apart.
  void thread_stack(const ThreadInfo& t) {
    const uint64_t sp = t.sp() & ~uint64_t{7};
    const SegmentInfo* s = seg_at(sp);
    if (!s) {
      m_.warnings.push_back(
          fmt::format("thread {}: stack pointer {:#x} is not in the core", t.tid, t.sp()));
    } else {
      taken_.emplace_back(s->start, s->end);
    }
    uint64_t ta = 0, tb = 0;
    const SegmentInfo* ts = tls_range(t, s, sp, &ta, &tb);
    if (ta < tb) {
      out_.push_back(
          {ta & ~uint64_t{7}, tb, RefFrom::kTls, t.tid, fmt::format("thread {} TLS", t.tid)});
      // Without the library's bounds, a mapping of its own (the main
      // thread's, made by the dynamic linker) is all TLS, control block and DTV.
      if (ts != s && !tls_of(t.tid)) taken_.emplace_back(ts->start, ts->end);
    }
    if (s)
      for (auto& r : subtract_ranges(
               {{sp, s->end, RefFrom::kStack, t.tid, fmt::format("thread {} stack", t.tid)}},
               {{ta, tb}}))
        out_.push_back(std::move(r));
  }

  // The thread's TLS range [*a, *b) and the segment it lies in (null: none).
  const SegmentInfo* tls_range(const ThreadInfo& t, const SegmentInfo* stack, uint64_t sp,
                               uint64_t* a, uint64_t* b) const {
    const ThreadMemory::Range* known = tls_of(t.tid);
    const uint64_t tp = known ? known->start : t.tp;
    const SegmentInfo* s = tp ? seg_at(tp) : nullptr;
    if (!s) return nullptr;
    if (known) {
      *a = known->start, *b = std::min(known->end, s->end);
    } else if (s != stack) {
      *a = s->start, *b = s->end;
    } else {
      const bool v1 = t.machine == EM_AARCH64;
      const uint64_t below = v1 ? kTcbSide : kTlsSide, above = v1 ? kTlsSide : kTcbSide;
      *a = tp > below ? tp - below : 0, *b = std::min(s->end, tp + above);
    }
    // Inside the thread's own stack mapping, only the part above its stack
    // pointer is live.
    if (s == stack) *a = std::max(*a, sp);
    return s;
  }

  // Each module's writable data and .bss.
  void modules() {
    for (const auto& m : mods_.modules()) {
      if (!m->end) continue;
      for (const auto& s : segs_) {
        if (!s.writable) continue;
        uint64_t a = std::max(s.start, m->base), b = std::min(s.end, m->end);
        // .bss beyond the file-backed data is its own anonymous mapping,
        // starting where the module's last mapping ends.
        if (s.start == m->end) a = s.start, b = s.end;
        if (a >= b) continue;
        out_.push_back({a, b, RefFrom::kGlobal, 0, m->basename()});
        taken_.emplace_back(a, b);
      }
    }
  }

  const Module* module_at(uint64_t a) const {
    for (const auto& m : mods_.modules())
      if (m->end && a >= m->base && a < m->end) return m.get();
    return nullptr;
  }

  // Memory the program mapped itself. Writable: conservatively a root, so
  // nothing it holds is called leaked. Read-only but not code: a table the
  // program filled and then protected holds live pointers too.
  void other_mappings() {
    for (const auto& r : heap_.regions) taken_.emplace_back(r.start, r.end);
    Spans placed;
    for (const auto& r : out_) placed.emplace_back(r.start, r.end);
    std::vector<RootRange> more;
    for (const auto& s : segs_) {
      if (s.executable && !s.writable) continue;
      if (s.writable) {
        if (!overlaps(taken_, s.start, s.end))
          more.push_back({s.start, s.end, RefFrom::kMapping, 0, "writable mapping"});
        continue;
      }
      const Module* m = module_at(s.start);
      more.push_back({s.start, s.end, RefFrom::kReadOnly, 0,
                      m ? m->basename() : std::string("read-only mapping")});
    }
    for (auto& r : subtract_ranges(std::move(more), std::move(placed)))
      out_.push_back(std::move(r));
  }

  // Cut out of the roots: the stacks of dead threads; the allocator's own
  // state outside its heaps (a main arena in libc's data points at chunk
  // headers lying in the last word of the chunk before — bookkeeping, never
  // a program's reference); and the heap itself: the kernel merges
  // neighbouring anonymous mappings, so a mmapped chunk can share one
  // mapping with the main thread's TLS, and must not become a root.
  void cut_and_merge() {
    for (const auto& b : heap_.bookkeeping) cut_.push_back(b);
    for (const auto& d : heap_.dead) {
      m_.stale.push_back({d.start, d.end, RefFrom::kMapping, 0, d.what});
      cut_.emplace_back(d.start, d.end);
    }
    for (const auto& r : heap_.regions) cut_.emplace_back(r.start, r.end);
    // An allocator that lists its mmapped chunks as regions (HeapRegion
    // kMmapped) has them above; the chunk index (millions of entries,
    // decoded one by one) is only read when none is listed.
    const bool listed =
        std::any_of(heap_.regions.begin(), heap_.regions.end(),
                    [](const HeapRegion& r) { return r.kind == HeapRegion::Kind::kMmapped; });
    if (!listed)
      for (const auto& c : heap_.in_use)
        if (c.mmapped()) cut_.emplace_back(c.user - 16, c.user + c.usable());
    auto out = subtract_ranges(std::move(out_), std::move(cut_));
    // Ranges that overlap are scanned once, as the first to start.
    std::sort(out.begin(), out.end(),
              [](const RootRange& x, const RootRange& y) { return x.start < y.start; });
    for (auto& r : out) {
      auto& merged = m_.roots;
      if (!merged.empty() && r.start < merged.back().end) {
        if (r.end <= merged.back().end) continue;
        r.start = merged.back().end;
      }
      if (r.start < r.end) merged.push_back(std::move(r));
    }
  }

  const CoreFile& core_;
  const ModuleSet& mods_;
  const HeapWalk& heap_;
  const ThreadMemory* tm_;
  std::vector<SegmentInfo> segs_, missing_;  // the core's bytes; what it lacks
  RootModel m_;
  std::vector<RootRange> out_;
  Spans taken_;  // mappings that are not "other": stacks, modules, heaps
  Spans cut_;
};

}  // namespace

namespace {

// What keeps the model from being whole (RootModel::partial).
std::vector<std::string> partial_reasons(const RootModel& m, const HeapWalk& heap,
                                         const ThreadMemory* threads) {
  std::vector<std::string> why;
  if (!m.unread.empty()) {
    uint64_t bytes = 0;
    for (const auto& r : m.unread) bytes += r.end - r.start;
    why.push_back(fmt::format(
        "{} bytes of memory that may hold roots, in {} range{}, are not in the core (the first "
        "at {:#x}: {}): a block only they point to is called leaked",
        bytes, m.unread.size(), m.unread.size() == 1 ? "" : "s", m.unread[0].start,
        m.unread[0].what));
  }
  size_t broken = 0;
  uint64_t first = 0;
  for (const auto& r : heap.regions)
    if (!r.complete && broken++ == 0) first = r.start;
  if (broken)
    why.push_back(fmt::format(
        "the heap's chunk chain breaks in {} region{} (the first at {:#x}): the blocks past a "
        "break are not scanned, so a block only they point to is called leaked",
        broken, broken == 1 ? "" : "s", first));
  if (threads && !threads->complete)
    why.push_back("the stacks of threads that no longer exist are not told from live ones (" +
                  (threads->warnings.empty() ? threads->source : threads->warnings[0]) +
                  "): a block only such a stack points to is not called leaked");
  why.insert(why.end(), heap.partial.begin(), heap.partial.end());
  return why;
}

}  // namespace

RootModel find_roots(const CoreFile& core, const ModuleSet& mods, const HeapWalk& heap,
                     const ThreadMemory* threads) {
  RootModel m = Planner(core, mods, heap, threads).run();
  m.partial = partial_reasons(m, heap, threads);
  if (threads)
    for (const auto& w : threads->warnings) m.warnings.push_back(w);
  return m;
}

}  // namespace lr
