// leakref.snapshot/1 and registered text dumps (snapshot_io.hpp).
#include "corelib/analyses/snapshot_io.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "corelib/base/fileio.hpp"
#include "corelib/base/registry.hpp"
#include "corelib/dump/dump_kind.hpp"

namespace lr {

namespace {

// A statedump or a saved snapshot is text; 1 GiB is far beyond either.
constexpr size_t kMaxText = 1ull << 30;

Result<std::string> read_text(const std::string& path, int fd) {
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return make_error(Errc::kIo, path + ": read failed");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxText) return make_error(Errc::kBadFormat, path + ": over 1 GiB of text");
  }
  return text;
}

NamedRegistry<TextSnapshotReader> g_readers;

}  // namespace

bool looks_like_saved_snapshot(std::string_view h) {
  size_t first = h.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && (h[first] == '{' || h[first] == '[');
}

void register_snapshot_reader(const std::string& text_kind, TextSnapshotReader read) {
  g_readers.add(text_kind, read);
}

Result<Snapshot> read_text_snapshot(const std::string& path) {
  LR_ASSIGN(int fd, open_input(path, "input"));
  auto text = read_text(path, fd);
  ::close(fd);
  if (!text.ok()) return text.error();
  std::string_view head = std::string_view(text.value()).substr(0, 64);
  DumpId id = identify_dump_head(head, -1, 0);
  if (id.kind == DumpKind::kText) {
    if (const TextSnapshotReader* read = g_readers.find(id.text_kind))
      return (*read)(text.value(), path);
    return make_error(Errc::kUnsupported, path + ": a " + id.text_kind + " no target reads");
  }
  if (!looks_like_saved_snapshot(head))
    return make_error(Errc::kBadFormat, path + ": neither a saved snapshot nor a text dump");
  nlohmann::json j = nlohmann::json::parse(text.value(), nullptr, false);
  if (j.is_discarded())
    return make_error(Errc::kBadFormat, path + ": a leakref.snapshot/1 that is not JSON");
  return snapshot_from_json(j, path);
}

nlohmann::json snapshot_json(const lr::Snapshot& s) {
  nlohmann::json classes = nlohmann::json::array(), objects = nlohmann::json::array();
  for (const auto& c : s.classes)
    classes.push_back({{"kind", c.kind},
                       {"name", c.name},
                       {"count", c.count},
                       {"bytes", c.bytes < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.bytes)}});
  for (const auto& o : s.objects) {
    objects.push_back(
        {{"key", o.key}, {"class", o.cls}, {"refcount", o.refcount}, {"held", o.held}});
    if (!o.kind.empty()) objects.back()["kind"] = o.kind;
  }
  nlohmann::json j;
  j["schema"] = "leakref.snapshot/1";
  j["source"] = s.source;
  j["kind"] = s.kind;
  j["build_id"] = s.build_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.build_id);
  j["time"] = s.time > 0 ? nlohmann::json(s.time) : nlohmann::json(nullptr);
  j["time_from"] = s.time > 0 ? nlohmann::json(s.time_from) : nlohmann::json(nullptr);
  j["classes"] = classes;
  j["unknown_kinds"] = s.unknown_kinds;
  if (!s.floors.empty()) j["floors"] = s.floors;
  j["objects"] = objects;
  j["warnings"] = s.warnings;
  return j;
}

namespace {

// A saved snapshot is input like any other: every member is checked for
// its type and range, so a hostile number never becomes a count (2^64-1
// read as -1, INT64_MIN growing by 2^63) and a bad time is refused, not
// quietly unknown. Messages name the member, not the JSON library.
struct SnapReader {
  const std::string& path;
  lr::Error bad(const std::string& what) const {
    return lr::make_error(lr::Errc::kBadFormat, path + ": not a leakref.snapshot/1: " + what);
  }
  lr::Result<std::string> str(const nlohmann::json& o, const char* k, bool null_ok = false) const {
    if (!o.is_object() || !o.contains(k)) return bad(fmt::format("'{}' is missing", k));
    if (null_ok && o[k].is_null()) return std::string();
    if (!o[k].is_string()) return bad(fmt::format("'{}' is not a string", k));
    return o[k].get<std::string>();
  }
  // An integer in [lo, hi]; `null_as` when null is allowed (else refused).
  lr::Result<int64_t> num(const nlohmann::json& o, const char* k, int64_t lo, int64_t hi,
                          std::optional<int64_t> null_as = std::nullopt) const {
    if (!o.is_object() || !o.contains(k)) return bad(fmt::format("'{}' is missing", k));
    const auto& v = o[k];
    if (v.is_null() && null_as) return *null_as;
    bool fits = v.is_number_integer() &&
                (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                        : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi);
    if (!fits)
      return bad(fmt::format("'{}' is {}, not an integer from {} to {}", k, v.dump(), lo, hi));
    return v.get<int64_t>();
  }
  lr::Result<double> time(const nlohmann::json& j) const {
    if (!j.contains("time") || j["time"].is_null()) return 0.0;
    const auto& t = j["time"];
    // 1970 to 2500: a snapshot's time in seconds; anything else is damage.
    if (!t.is_number() || !(t.get<double>() > 0 && t.get<double>() < 16725225600.0))
      return bad(fmt::format("'time' is {}, not seconds since 1970", t.dump()));
    return t.get<double>();
  }
};

lr::Result<void> read_classes(const SnapReader& r, const nlohmann::json& j, lr::Snapshot& s) {
  if (!j.contains("classes") || !j["classes"].is_array()) return r.bad("'classes' is not a list");
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& c : j["classes"]) {
    LR_ASSIGN(std::string kind, r.str(c, "kind"));
    LR_ASSIGN(std::string name, r.str(c, "name"));
    if (!seen.insert({kind, name}).second)
      return r.bad(fmt::format("class {} '{}' is listed twice", kind, name));
    LR_ASSIGN(int64_t count, r.num(c, "count", 0, kMaxSnapCount));
    LR_ASSIGN(int64_t bytes, r.num(c, "bytes", 0, kMaxSnapCount, -1));
    s.classes.push_back({kind, name, count, bytes});
  }
  return {};
}

lr::Result<void> read_objects(const SnapReader& r, const nlohmann::json& j, lr::Snapshot& s) {
  if (!j.contains("objects") || !j["objects"].is_array()) return r.bad("'objects' is not a list");
  for (const auto& o : j["objects"]) {
    LR_ASSIGN(std::string key, r.str(o, "key"));
    LR_ASSIGN(std::string cls, r.str(o, "class"));
    LR_ASSIGN(int64_t rc, r.num(o, "refcount", INT32_MIN, INT32_MAX));
    LR_ASSIGN(std::string held, r.str(o, "held"));
    std::string kind;
    if (o.contains("kind")) {
      LR_ASSIGN(kind, r.str(o, "kind"));
    }
    s.objects.push_back({key, cls, rc, held, kind});
  }
  return {};
}

}  // namespace

lr::Result<lr::Snapshot> snapshot_from_json(const nlohmann::json& j, const std::string& path) {
  SnapReader r{path};
  if (!j.is_object()) return r.bad("the document is not a JSON object");
  if (j.value("schema", "") != "leakref.snapshot/1")
    return r.bad("its schema is not leakref.snapshot/1");
  lr::Snapshot s;
  LR_ASSIGN(s.source, r.str(j, "source"));
  LR_ASSIGN(s.kind, r.str(j, "kind"));
  if (s.kind != "core" && s.kind != "statedump" && s.kind != "vmcore")
    return r.bad("kind '" + s.kind + "'");
  LR_ASSIGN(s.build_id, r.str(j, "build_id", true));
  LR_ASSIGN(s.time, r.time(j));
  if (s.time > 0)
    s.time_from = j.contains("time_from") && j["time_from"].is_string()
                      ? "saved snapshot (" + j["time_from"].get<std::string>() + ")"
                      : "saved snapshot";
  LR_TRY(read_classes(r, j, s));
  if (j.contains("unknown_kinds")) {
    if (!j["unknown_kinds"].is_array()) return r.bad("'unknown_kinds' is not a list");
    for (const auto& k : j["unknown_kinds"]) {
      if (!k.is_string()) return r.bad("an unknown kind is not a string");
      s.unknown_kinds.push_back(k.get<std::string>());
    }
  }
  if (j.contains("floors")) {
    if (!j["floors"].is_object()) return r.bad("'floors' is not an object");
    for (const auto& [k, v] : j["floors"].items()) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        return r.bad("floor of '" + k + "' is not a count");
      s.floors[k] = v.get<int64_t>();
    }
  }
  LR_TRY(read_objects(r, j, s));
  if (!j.contains("warnings") || !j["warnings"].is_array())
    return r.bad("'warnings' is not a list");
  for (const auto& w : j["warnings"]) {
    if (!w.is_string()) return r.bad("a warning is not a string");
    s.warnings.push_back(w.get<std::string>());
  }
  return s;
}

}  // namespace lr
