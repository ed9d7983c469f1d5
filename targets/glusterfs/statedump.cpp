#include "targets/glusterfs/statedump.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <ctime>
#include <unordered_map>

#include "targets/glusterfs/gluster.hpp"

namespace lr {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

// The statedump's inode-table lists, as inode.c names them.
constexpr std::string_view kLists[] = {"active", "lru", "purge", "invalidate"};

// "2026-11-22 00:27:55.082394 +0000" (statedump.c writes UTC): seconds
// since 1970; 0 when it does not read so.
double dump_time(std::string_view v) {
  std::string t(trim(v));
  std::tm tm{};
  int usec = 0;
  if (std::sscanf(t.c_str(), "%d-%d-%d %d:%d:%d.%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &usec) < 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  time_t secs = timegm(&tm);
  return secs < 0 ? 0 : static_cast<double>(secs) + usec / 1e6;
}

// Reads a statedump line by line. Sections are "[name]" lines, values
// "key=value" lines; [mempool] separates its pools with "-----=-----".
class StatedumpReader {
 public:
  StatedumpReader(std::string_view text, const std::string& source) : text_(text), source_(source) {
    snap_.source = source;
    snap_.kind = "statedump";
  }

  Result<Snapshot> read() {
    size_t pos = 0;
    bool started = false, ended = false;
    while (pos < text_.size()) {
      size_t nl = text_.find('\n', pos);
      std::string_view line = trim(text_.substr(pos, nl == std::string_view::npos ? nl : nl - pos));
      pos = nl == std::string_view::npos ? text_.size() : nl + 1;
      ++lineno_;
      if (line.empty()) continue;
      if (!started) {
        if (line.rfind("DUMP-START-TIME:", 0) != 0)
          return make_error(Errc::kBadFormat,
                            source_ + ": not a GlusterFS statedump (no DUMP-START-TIME line)");
        started = true;
        snap_.time = dump_time(line.substr(16));
        if (snap_.time > 0) snap_.time_from = "DUMP-START-TIME";
        continue;
      }
      if (line.rfind("DUMP-END-TIME:", 0) == 0) {
        ended = true;
        break;
      }
      if (line.front() == '[' && line.back() == ']') {
        LR_TRY(end_section());
        section_ = std::string(line.substr(1, line.size() - 2));
        continue;
      }
      size_t eq = line.find('=');
      if (eq == std::string_view::npos) continue;  // free text some xlators print
      LR_TRY(value(line.substr(0, eq), line.substr(eq + 1)));
    }
    if (!started)
      return make_error(Errc::kBadFormat, source_ + ": empty, not a GlusterFS statedump");
    LR_TRY(end_section());
    if (!ended)
      snap_.warnings.push_back(source_ +
                               ": no DUMP-END-TIME line: the statedump is cut short; the classes "
                               "after line " +
                               std::to_string(lineno_) + " are missing");
    return std::move(snap_);
  }

 private:
  Result<int64_t> number(std::string_view key, std::string_view v) const {
    int64_t n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size())
      return make_error(Errc::kBadFormat,
                        fmt::format("{}:{}: {} is '{}', not a number", source_, lineno_, key, v));
    return n;
  }

  Result<void> value(std::string_view key, std::string_view v) {
    if (section_ == "mempool") return pool_value(key, v);
    if (ends_with(section_, " memusage")) {
      if (key == "num_allocs") {
        LR_ASSIGN(memusage_.count, number(key, v));
        have_memusage_ = true;
      } else if (key == "size") {
        LR_ASSIGN(memusage_.bytes, number(key, v));
      }
      return {};
    }
    // An inode table: "<prefix>.active_size=N" in section "<prefix>".
    if (key.size() > section_.size() + 1 && key.substr(0, section_.size()) == section_ &&
        key[section_.size()] == '.' && ends_with(key, "_size")) {
      std::string_view list = key.substr(section_.size() + 1, key.size() - section_.size() - 6);
      for (auto l : kLists)
        if (list == l) {
          LR_ASSIGN(int64_t n, number(key, v));
          snap_.classes.push_back({"itable", section_ + " " + std::string(list), n, -1});
          return {};
        }
    }
    if (key == "gfid") inode_.key = "gfid:" + std::string(v), in_inode_ = true;
    if (key == "ref") {
      LR_ASSIGN(inode_.refcount, number(key, v));
    }
    if (key.rfind("ref_by_xl:.", 0) == 0)
      inode_.held +=
          (inode_.held.empty() ? "" : ", ") + std::string(key.substr(11)) + "=" + std::string(v);
    return {};
  }

  Result<void> pool_value(std::string_view key, std::string_view v) {
    if (key == "-----") return end_pool();
    if (key == "pool-name") pool_name_ = v;
    if (key == "xlator-name") pool_xl_ = v;
    if (key == "active-count") {
      LR_ASSIGN(pool_.count, number(key, v));
    }
    if (key == "size") {
      LR_ASSIGN(pool_.bytes, number(key, v));
    }
    return {};
  }

  Result<void> end_pool() {
    if (!pool_name_.empty()) {
      pool_.kind = "mempool";
      pool_.name = pool_name_ + "@" + pool_xl_;
      snap_.classes.push_back(pool_);
    }
    pool_ = {};
    pool_name_.clear();
    pool_xl_.clear();
    return {};
  }

  // "<table>.<list>.<n>": an inode of that list, as inode_table_dump names it.
  std::string inode_list_of(const std::string& sec) const {
    size_t d2 = sec.rfind('.');
    if (d2 == std::string::npos || d2 == 0 || d2 + 1 == sec.size() ||
        sec.find_first_not_of("0123456789", d2 + 1) != std::string::npos)
      return "";
    size_t d1 = sec.rfind('.', d2 - 1);
    if (d1 == std::string::npos) return "";
    std::string_view list(sec.data() + d1 + 1, d2 - d1 - 1);
    for (auto l : kLists)
      if (list == l) return sec.substr(0, d1) + " " + std::string(list);
    return "";
  }

  Result<void> end_section() {
    if (section_ == "mempool") LR_TRY(end_pool());
    if (have_memusage_) {
      // "<xlator key> - usage-type <type> memusage"
      std::string name = section_.substr(0, section_.size() - 9);
      size_t ut = name.find(" - usage-type ");
      if (ut != std::string::npos) name = name.substr(0, ut) + " " + name.substr(ut + 14);
      memusage_.kind = "memusage";
      memusage_.name = name;
      snap_.classes.push_back(memusage_);
    }
    if (in_inode_) {
      std::string cls = inode_list_of(section_);
      if (!cls.empty()) {
        inode_.cls = "itable " + cls;
        snap_.objects.push_back(std::move(inode_));
      }
    }
    memusage_ = {};
    have_memusage_ = false;
    inode_ = {};
    in_inode_ = false;
    return {};
  }

  std::string_view text_;
  std::string source_;
  Snapshot snap_;
  size_t lineno_ = 0;
  std::string section_;
  SnapClass pool_, memusage_;
  std::string pool_name_, pool_xl_;
  bool have_memusage_ = false;
  SnapObject inode_;
  bool in_inode_ = false;
};

}  // namespace

bool looks_like_statedump(std::string_view head) {
  return head.rfind("DUMP-START-TIME:", 0) == 0;
}

Result<Snapshot> snapshot_from_statedump(std::string_view text, const std::string& source) {
  LR_ASSIGN(Snapshot s, StatedumpReader(text, source).read());
  LR_TRY(check_snapshot_counts(s));
  unique_keys(s);
  return s;
}

void add_gluster_objects(Snapshot& s, const GlusterReport& r) {
  for (const auto& d : r.dicts)
    s.objects.push_back({fmt::format("dict@{:#x}", d.addr), "dict", d.refcount, "", "dict"});
  for (const auto& t : r.itables)
    for (const auto& list : t.lists)
      for (const auto& in : list)
        for (const auto& fd : in.fds)
          s.objects.push_back({fmt::format("fd@{:#x}", fd.addr),
                               "fd of gfid:" + format_gfid(in.gfid), fd.refcount,
                               fmt::format("pid={}", fd.pid), "fd"});
  unique_keys(s);
}

}  // namespace lr
