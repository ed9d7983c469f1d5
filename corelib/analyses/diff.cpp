#include "corelib/analyses/diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <unordered_map>

namespace lr {

namespace {

std::string size_class(uint64_t usable) {
  if (usable <= 1024) return fmt::format("{} B", usable);
  uint64_t lo = 1024;
  while (lo * 2 < usable && lo < (1ull << 62)) lo *= 2;
  return fmt::format("{}-{} B", lo + 1, lo * 2);
}

}  // namespace

void unique_keys(Snapshot& s) {
  std::unordered_map<std::string, int> seen;
  for (auto& o : s.objects)
    if (int n = seen[o.key]++; n > 0) o.key += " in " + o.cls;
}

void add_heap_classes(Snapshot& s, const HeapWalk& heap) {
  // Counted by chunk units (usable size and mmapped flag) first: a heap has
  // millions of chunks and few distinct sizes, so names are made per size.
  std::unordered_map<uint32_t, int64_t> by_units;
  for (const auto& c : heap.in_use) ++by_units[c.units];
  std::map<std::string, std::pair<int64_t, int64_t>> by;  // class -> (chunks, bytes)
  for (const auto& [units, n] : by_units) {
    HeapChunk c;
    c.units = units;
    auto& [count, bytes] = by[c.mmapped() ? "mmapped" : size_class(c.usable())];
    count += n;
    bytes += n * static_cast<int64_t>(c.usable());
  }
  for (const auto& [name, nb] : by) s.classes.push_back({"heap", name, nb.first, nb.second});
}

void add_account_classes(Snapshot& s, const Account& a) {
  for (const auto& c : a.total.children)
    s.classes.push_back(
        {"account", c.name, static_cast<int64_t>(c.blocks), static_cast<int64_t>(c.bytes)});
}

Result<void> check_snapshot_counts(const Snapshot& s) {
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> total;
  for (const auto& c : s.classes) {
    auto& [count, bytes] = total[{c.kind, c.name}];
    // Each part is checked before it is added, so no sum passes 2^49.
    const bool ok = c.count >= 0 && c.count <= kMaxSnapCount && c.bytes >= -1 &&
                    c.bytes <= kMaxSnapCount && (count += c.count) <= kMaxSnapCount &&
                    (bytes += std::max<int64_t>(c.bytes, 0)) <= kMaxSnapCount;
    if (!ok)
      return make_error(Errc::kBadFormat,
                        fmt::format("{}: {} '{}' counts {} ({} bytes): no dump holds a negative "
                                    "count or one past 2^48; the file is damaged",
                                    s.source, c.kind, c.name, c.count, c.bytes));
  }
  return {};
}

namespace {

// An account class's bytes; -1 when the snapshot has none.
int64_t account_bytes(const Snapshot& s, const char* name) {
  for (const auto& c : s.classes)
    if (c.kind == "account" && c.name == name) return c.bytes;
  return -1;
}

}  // namespace

GrowthVerdict growth_verdict(const Snapshot& older, const Snapshot& newer) {
  if (!older.knows("account") || !newer.knows("account")) return {};
  const char* heap[] = {"live", "leaked", "free", "overhead", "unknown"};
  int64_t before = 0, d[5];
  for (int i = 0; i < 5; ++i) {
    const int64_t a = account_bytes(older, heap[i]), b = account_bytes(newer, heap[i]);
    if (a < 0 || b < 0) return {};
    before += a;
    d[i] = b - a;
  }
  const int64_t live = d[0], leaked = d[1], free_ = d[2], grew = d[0] + d[1] + d[2] + d[3] + d[4];
  if (grew < std::max<int64_t>(int64_t{1} << 20, before / 100)) return {};
  const int64_t in_use = live + leaked;
  if (free_ > 0 && std::abs(in_use) * 4 <= free_)
    return {"fragmentation",
            fmt::format("free memory inside the allocator grew {:+} bytes while in use changed "
                        "{:+}: memory the allocator keeps (fragmentation, or freed blocks not "
                        "given back), not a leak",
                        free_, in_use)};
  // Growth the program's blocks and the free lists do not explain: the
  // allocator's own structures (its metadata, caches' arrays), named as
  // such, never called a leak of +0 bytes.
  const int64_t overhead = d[3];
  if (overhead > 0 && overhead > std::max({live, leaked, free_}))
    return {"overhead", fmt::format("the allocator's own overhead grew {:+} bytes (its metadata "
                                    "and structures) while in use changed {:+}: not the "
                                    "program's blocks",
                                    overhead, in_use)};
  if (leaked > 0 && leaked >= live && leaked >= free_)
    return {"leak",
            fmt::format("leaked grew {:+} bytes: blocks nothing reaches any more; a leak", leaked)};
  if (live >= free_)
    return {"held", fmt::format("live grew {:+} bytes: blocks the program still reaches (a "
                                "cache, a queue, references never dropped)",
                                live)};
  return {"mixed", fmt::format("the heap grew {:+} bytes: live {:+}, leaked {:+}, free {:+}", grew,
                               live, leaked, free_)};
}

const char* change_name(ObjectDelta::Change c) {
  switch (c) {
    case ObjectDelta::Change::kNew:
      return "new";
    case ObjectDelta::Change::kGone:
      return "gone";
    case ObjectDelta::Change::kClimbed:
      return "climbed";
    case ObjectDelta::Change::kDropped:
      return "dropped";
  }
  return "?";
}

bool Snapshot::knows(const std::string& k) const {
  // Blocks are counted by type only on request (--by-type): a snapshot
  // without any such class says nothing of them, never that they are gone.
  if (k == "type" && std::none_of(classes.begin(), classes.end(),
                                  [](const SnapClass& c) { return c.kind == "type"; }))
    return false;
  return std::find(unknown_kinds.begin(), unknown_kinds.end(), k) == unknown_kinds.end();
}

// Both snapshots have passed check_snapshot_counts (or were counted from a
// core), so no sum below overflows.
SnapDiff diff_snapshots(const Snapshot& older, const Snapshot& newer) {
  SnapDiff d;
  std::map<std::pair<std::string, std::string>, ClassDelta> classes;
  // A class named twice on one side (two pools of one name) adds up; bytes
  // stay unknown (-1) if any part's are.
  auto add = [](bool first, const SnapClass& c, int64_t& count, int64_t& bytes) {
    count += c.count;
    bytes = first ? c.bytes : (bytes < 0 || c.bytes < 0 ? -1 : bytes + c.bytes);
  };
  for (const auto& c : older.classes) {
    ClassDelta& x = classes[{c.kind, c.name}];
    x.kind = c.kind, x.name = c.name;
    add(!x.in_old, c, x.before, x.before_bytes);
    x.in_old = true;
  }
  for (const auto& c : newer.classes) {
    ClassDelta& x = classes[{c.kind, c.name}];
    x.kind = c.kind, x.name = c.name;
    add(!x.in_new, c, x.after, x.after_bytes);
    x.in_new = true;
  }
  // A class of a kind listed from a floor, absent from one side, was below
  // it there: its count there is unknown.
  auto below = [](const Snapshot& s, const ClassDelta& v, bool in) {
    return !in && s.floors.count(v.kind);
  };
  for (auto& [k, v] : classes) {
    const bool known = older.knows(v.kind) && newer.knows(v.kind) && !below(older, v, v.in_old) &&
                       !below(newer, v, v.in_new);
    (known ? d.classes : d.unknown).push_back(std::move(v));
  }
  std::stable_sort(d.classes.begin(), d.classes.end(), [](const auto& a, const auto& b) {
    return a.delta() > b.delta();  // most grown first, most shrunk last
  });

  std::unordered_map<std::string, const SnapObject*> old_by_key;
  for (const auto& o : older.objects) old_by_key.emplace(o.key, &o);
  using C = ObjectDelta::Change;
  auto known = [&](const SnapObject& o) { return older.knows(o.kind) && newer.knows(o.kind); };
  for (const auto& o : newer.objects) {
    if (!known(o)) {
      ++d.objects_unknown;
      continue;
    }
    auto it = old_by_key.find(o.key);
    if (it == old_by_key.end()) {
      d.objects.push_back({C::kNew, o.key, o.cls, 0, o.refcount, o.held});
      continue;
    }
    const SnapObject& was = *it->second;
    old_by_key.erase(it);
    if (was.refcount == o.refcount) {
      ++d.objects_same;
      continue;
    }
    d.objects.push_back({o.refcount > was.refcount ? C::kClimbed : C::kDropped, o.key, o.cls,
                         was.refcount, o.refcount, o.held});
  }
  for (const auto& o : older.objects)
    if (!known(o))
      ++d.objects_unknown;
    else if (old_by_key.count(o.key))
      d.objects.push_back({C::kGone, o.key, o.cls, o.refcount, 0, o.held});
  return d;
}

namespace {

// Least-squares slope of y over x.
double slope_of(const std::vector<double>& x, const std::vector<int64_t>& y) {
  const size_t n = x.size();
  if (n < 2) return 0;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += static_cast<double>(y[i]);
  mx /= n, my /= n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (static_cast<double>(y[i]) - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  return sxx > 0 ? sxy / sxx : 0;
}

}  // namespace

TrendReport trend_of(const std::vector<Snapshot>& snaps) {
  TrendReport t;
  const size_t n = snaps.size();
  std::vector<double> x(n);
  t.per_hour = n > 0;
  for (size_t i = 0; i < n; ++i) {
    t.times.push_back(snaps[i].time);
    t.per_hour = t.per_hour && snaps[i].time > 0 && (i == 0 || snaps[i].time > snaps[i - 1].time);
  }
  for (size_t i = 0; i < n; ++i) x[i] = t.per_hour ? (snaps[i].time - snaps[0].time) / 3600 : i;
  std::map<std::pair<std::string, std::string>, ClassSeries> by;
  for (size_t i = 0; i < n; ++i)
    for (const auto& k : snaps[i].unknown_kinds) ++t.unknown_kinds[k];
  // Types in some snapshots only (a saved one made without --by-type):
  // unknown in the others, so not plotted at all.
  if (std::any_of(snaps.begin(), snaps.end(), [](const Snapshot& s) { return s.knows("type"); }))
    for (const auto& s : snaps)
      if (!s.knows("type") && std::find(s.unknown_kinds.begin(), s.unknown_kinds.end(), "type") ==
                                  s.unknown_kinds.end())
        ++t.unknown_kinds["type"];
  for (size_t i = 0; i < n; ++i)
    for (const auto& c : snaps[i].classes) {
      if (t.unknown_kinds.count(c.kind)) continue;
      ClassSeries& cs = by[{c.kind, c.name}];
      if (cs.counts.empty()) {
        cs.kind = c.kind, cs.name = c.name;
        cs.counts.assign(n, 0);
      }
      cs.counts[i] += c.count;
    }
  // A class of a kind listed from a floor is plotted only where every
  // snapshot lists it (elsewhere its count is unknown, not 0).
  std::map<std::pair<std::string, std::string>, size_t> listed;
  for (const auto& s : snaps)
    for (const auto& c : s.classes)
      if (s.floors.count(c.kind)) ++listed[{c.kind, c.name}];
  std::erase_if(by, [&](const auto& kv) {
    const bool floored = std::any_of(snaps.begin(), snaps.end(), [&](const Snapshot& s) {
      return s.floors.count(kv.second.kind) != 0;
    });
    return floored && listed[kv.first] < n;
  });
  for (auto& [k, cs] : by) {
    cs.slope = slope_of(x, cs.counts);
    bool never_fell = std::is_sorted(cs.counts.begin(), cs.counts.end());
    cs.only_grows = n >= 3 && never_fell && cs.counts.back() > cs.counts.front();
    t.classes.push_back(std::move(cs));
  }
  std::stable_sort(t.classes.begin(), t.classes.end(),
                   [](const auto& a, const auto& b) { return a.slope > b.slope; });
  return t;
}

}  // namespace lr
