// Residency (residency.hpp): smaps gives the mappings in order, pagemap one
// entry per page of each; the present pages become sorted runs.
#include "corelib/dump/residency.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <string_view>

#include "corelib/base/fileio.hpp"

namespace lr {

namespace {

constexpr uint64_t kPage = 4096, kUserTop = uint64_t{1} << 47;
constexpr uint64_t kPresent = uint64_t{1} << 63;
constexpr uint64_t kMaxSmaps = uint64_t{1} << 30;
// 512 GiB of partly resident mappings: a bound on what is read into memory.
constexpr uint64_t kMaxPagemap = uint64_t{1} << 30;

struct Mapping {
  uint64_t start = 0, end = 0;
  bool writable = false;
  bool has_rss = false;
  uint64_t rss = 0;  // bytes
  // Whether the pagemap file holds this mapping's entries.
  bool sliced() const { return start < kUserTop && rss != 0 && rss != end - start; }
};

bool hex(std::string_view s, uint64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v, 16);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

// "7f01c000-7f01d000 rw-p 00000000 00:00 0   [heap]"
bool mapping_line(std::string_view line, Mapping* m) {
  const size_t dash = line.find('-'), sp = line.find(' ');
  if (dash == std::string_view::npos || sp == std::string_view::npos || dash > sp ||
      line.size() < sp + 5)
    return false;
  if (!hex(line.substr(0, dash), &m->start) || !hex(line.substr(dash + 1, sp - dash - 1), &m->end))
    return false;
  m->writable = line[sp + 2] == 'w';
  return m->start < m->end && m->start % kPage == 0 && m->end % kPage == 0;
}

// "Rss:                 132 kB"
bool rss_line(std::string_view line, uint64_t* kb) {
  if (line.substr(0, 4) != "Rss:") return false;
  line.remove_prefix(4);
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), *kb);
  return ec == std::errc() && std::string_view(p, line.data() + line.size() - p) == " kB";
}

Result<std::vector<Mapping>> parse_smaps(const std::string& text, const std::string& path) {
  std::vector<Mapping> maps;
  size_t pos = 0, lineno = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    Mapping m;
    uint64_t kb = 0;
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        !std::isupper(static_cast<unsigned char>(line[0]))) {
      if (!mapping_line(line, &m))
        return make_error(Errc::kBadFormat,
                          fmt::format("{}: line {} is not an smaps mapping line", path, lineno));
      if (!maps.empty() && m.start < maps.back().end)
        return make_error(Errc::kBadFormat,
                          fmt::format("{}: line {}: mappings out of order", path, lineno));
      maps.push_back(m);
    } else if (rss_line(line, &kb) && !maps.empty()) {
      Mapping& b = maps.back();
      if (b.has_rss || kb > (b.end - b.start) / 1024)
        return make_error(Errc::kBadFormat,
                          fmt::format("{}: line {}: a second Rss, or one larger than its "
                                      "mapping",
                                      path, lineno));
      b.has_rss = true;
      b.rss = kb * 1024;
    }
  }
  if (maps.empty())
    return make_error(Errc::kBadFormat, path + ": no mappings; not a /proc/PID/smaps file");
  // Without its Rss a mapping's residency is not known (a maps file given as smaps).
  for (const auto& m : maps)
    if (!m.has_rss)
      return make_error(Errc::kBadFormat,
                        fmt::format("{}: the mapping at {:#x} has no Rss line; not a "
                                    "/proc/PID/smaps file",
                                    path, m.start));
  return maps;
}

}  // namespace

struct ResidencyBuilder {
  // [a, b) resident, merged with the run before it when they touch.
  static void add_run(Residency& r, uint64_t a, uint64_t b) {
    if (!r.runs_.empty() && r.runs_.back().second == a)
      r.runs_.back().second = b;
    else
      r.runs_.emplace_back(a, b);
  }

  // The pagemap bytes the partly resident mappings need.
  static uint64_t need(const std::vector<Mapping>& maps) {
    uint64_t n = 0;
    for (const auto& m : maps)
      if (m.sliced()) n += (std::min(m.end, kUserTop) - m.start) / kPage * 8;
    return n;
  }

  static Result<Residency> build(const std::vector<Mapping>& maps, const std::string& pagemap,
                                 const std::string& path) {
    Residency r;
    for (const auto& m : maps) {
      r.maps_.emplace_back(m.start, m.end);
      r.rss_ += m.rss;
      if (m.writable) r.writable_rss_ += m.rss;
    }
    if (need(maps) != pagemap.size())
      return make_error(Errc::kBadFormat,
                        fmt::format("{}: {} bytes, but the smaps mappings need {}; not their "
                                    "pagemap",
                                    path, pagemap.size(), need(maps)));
    size_t off = 0;
    for (const auto& m : maps) {
      if (m.start >= kUserTop) continue;
      if (!m.sliced()) {
        if (m.rss) add_run(r, m.start, m.end);  // wholly resident
        continue;
      }
      for (uint64_t p = m.start; p < std::min(m.end, kUserTop); p += kPage, off += 8) {
        uint64_t e;
        std::memcpy(&e, pagemap.data() + off, 8);
        if (e & kPresent) add_run(r, p, p + kPage);
      }
    }
    return r;
  }
};

Result<Residency> Residency::load(const std::string& smaps_path, const std::string& pagemap_path) {
  LR_ASSIGN(std::string text, read_input(smaps_path, "smaps file", kMaxSmaps));
  LR_ASSIGN(std::vector<Mapping> maps, parse_smaps(text, smaps_path));
  // The size the mappings need bounds what is read, and so does kMaxPagemap.
  const uint64_t need = ResidencyBuilder::need(maps);
  if (need > kMaxPagemap)
    return make_error(Errc::kUnsupported,
                      fmt::format("{}: its partly resident mappings need {} bytes of pagemap, "
                                  "more than leakref reads ({})",
                                  smaps_path, need, kMaxPagemap));
  LR_ASSIGN(std::string pm, read_input(pagemap_path, "pagemap file", need));
  return ResidencyBuilder::build(maps, pm, pagemap_path);
}

uint64_t Residency::mapped(uint64_t a, uint64_t b) const {
  uint64_t n = 0;
  auto it = std::upper_bound(maps_.begin(), maps_.end(), a,
                             [](uint64_t x, const auto& m) { return x < m.first; });
  if (it != maps_.begin()) --it;
  for (; it != maps_.end() && it->first < b; ++it)
    if (it->second > a) n += std::min(b, it->second) - std::max(a, it->first);
  return n;
}

uint64_t Residency::bytes(uint64_t a, uint64_t b) const {
  if (a >= b || runs_.empty()) return 0;
  // The hint, when the run before it does not already pass `a`.
  size_t i = hint_ < runs_.size() && runs_[hint_].first <= a ? hint_ : 0;
  if (i == 0 || runs_[i].second <= a) {
    auto it = std::upper_bound(runs_.begin() + static_cast<ptrdiff_t>(i), runs_.end(), a,
                               [](uint64_t x, const auto& r) { return x < r.first; });
    i = it == runs_.begin() ? 0 : static_cast<size_t>(it - runs_.begin()) - 1;
  }
  hint_ = i;
  uint64_t n = 0;
  for (; i < runs_.size() && runs_[i].first < b; ++i)
    if (runs_[i].second > a) n += std::min(b, runs_[i].second) - std::max(a, runs_[i].first);
  return n;
}

}  // namespace lr
