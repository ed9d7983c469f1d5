// A profile set's root found by content (profile_bind.hpp, find_object):
// for statics a stripped build names nowhere, like a server's static LRU lanes
// and its state-id hash table.
#include <fmt/format.h>

#include <memory>
#include <vector>

#include "corelib/dump/elfcore.hpp"
#include "corelib/objects/objects.hpp"
#include "profile_bind.hpp"

namespace lr {

namespace {

constexpr uint64_t kMaxScan = uint64_t{256} << 20;  // bytes of module data scanned
constexpr size_t kMaxMatches = 8;                   // kept to name in an ambiguity error

// The module's writable data in the core: its own writable mappings, and
// the anonymous one that starts where its last mapping ends (.bss).
std::vector<std::pair<uint64_t, uint64_t>> data_ranges(const CoreFile& core, const Module& m) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& s : core.segments()) {
    if (s.kind != SegmentInfo::Kind::kCore || !s.writable) continue;
    uint64_t a = std::max(s.start, m.base), b = std::min(s.end, m.end);
    if (s.start == m.end) a = s.start, b = s.end;
    if (a < b) out.emplace_back(a, b);
  }
  return out;
}

// Whether `n` objects of `size` bytes at `a` all satisfy `all` and, when
// given, at least one satisfies `any` ($index: the object's place in the run).
bool holds(const Memory& mem, const Expr& all, const Expr* any, uint64_t a, uint64_t size,
           uint64_t n, std::vector<uint8_t>& scratch) {
  bool some = !any;
  for (uint64_t k = 0; k < n; ++k) {
    const uint8_t* b = object_bytes(mem, a + k * size, size, scratch);
    if (!b) return false;
    const int64_t index = static_cast<int64_t>(k);
    ExprValue v = all.eval(mem, b, a + k * size, &index);
    if (v.kind == ExprValue::Kind::kError || !v.truthy()) return false;
    if (!some) {
      ExprValue w = any->eval(mem, b, a + k * size, &index);
      some = w.kind != ExprValue::Kind::kError && w.truthy();
    }
  }
  return some;
}

// The rule as the errors quote it.
std::string rule(const ProfileSet& s) {
  return s.find_any.empty() ? fmt::format("'{}'", s.find_where)
                            : fmt::format("'{}' with '{}' for one", s.find_where, s.find_any);
}

}  // namespace

Result<Variable> find_object(Program& prog, const ProfileBinder& bind, const BoundType* bt,
                             const ProfileSet& s) {
  auto where = [&](const std::string& what) {
    return fmt::format("find in {}: {}", s.find_module, what);
  };
  if (!prog.core())
    return make_error(Errc::kUnsupported, where("'find' reads a process core's module data"));
  // The module by its name or a prefix of it ("libfoo.so" for
  // libfoo.so.4.3); a prefix two modules share picks neither.
  const Module* mod = nullptr;
  for (const auto& m : prog.modules().modules()) {
    if (!m->end || m->basename().rfind(s.find_module, 0) != 0) continue;
    if (mod)
      return make_error(Errc::kBadFormat, where(fmt::format("both {} and {} match: name one",
                                                            mod->basename(), m->basename())));
    mod = m.get();
  }
  if (!mod) return make_error(Errc::kNotFound, where("no such module is mapped"));
  ExprScope scope = bind.scope(bt, "find.where");
  scope.vars = {"index"};
  LR_ASSIGN(auto e, Expr::compile(s.find_where, scope));
  std::unique_ptr<Expr> any;  // null: no whole-run condition
  if (!s.find_any.empty()) {
    scope.what = "find.any";  // its errors name it
    LR_ASSIGN(any, Expr::compile(s.find_any, scope));
  }
  const uint64_t size = bt->type->strip()->size;
  if (size == 0 || size > kMaxObjectSize)
    return make_error(Errc::kBadFormat, where(fmt::format("{} is {} bytes", bt->c, size)));
  const Memory& mem = prog.mem();
  std::vector<uint8_t> scratch;
  std::vector<uint64_t> found;  // object addresses
  uint64_t scanned = 0;
  bool cut = false;  // the scan stopped at kMaxScan: a single match proves nothing
  for (const auto& [a0, b] : data_ranges(*prog.core(), *mod)) {
    for (uint64_t a = (a0 + 7) & ~uint64_t{7}; a + 8 <= b && found.size() < kMaxMatches; a += 8) {
      if (++scanned > kMaxScan / 8) {
        cut = true;
        break;
      }
      uint64_t obj = a;
      if (s.find_pointer) {
        auto p = mem.read_u64(a);
        if (!p.ok() || !p.value()) continue;
        obj = p.value();
      } else if (b - a < size * s.find_count) {
        break;
      }
      if (!holds(mem, *e, any.get(), obj, size, s.find_count, scratch)) continue;
      if (std::find(found.begin(), found.end(), obj) == found.end()) found.push_back(obj);
    }
  }
  if (cut && found.size() < 2)
    return make_error(Errc::kUnsupported,
                      where(fmt::format("its writable data exceeds the {} MiB a find scans, so "
                                        "{} cannot be shown to hold in one place only",
                                        kMaxScan >> 20, rule(s))));
  if (found.empty())
    return make_error(
        Errc::kNotFound,
        where(fmt::format(
            "nothing in its writable data ({} words) satisfies {} as "
            "{}{}",
            scanned, rule(s), bt->c,
            s.find_count > 1 ? fmt::format(" ({} in a row)", s.find_count) : std::string())));
  if (found.size() > 1) {
    std::string at;
    for (uint64_t f : found) at += fmt::format("{}{:#x}", at.empty() ? "" : ", ", f);
    return make_error(Errc::kBadFormat,
                      where(fmt::format("{}{} places satisfy {} ({}): the rule must pick one",
                                        found.size() >= kMaxMatches ? "at least " : "",
                                        found.size(), rule(s), at)));
  }
  Variable v;
  v.name = fmt::format("{} found at {:#x} ({})", bt->c, found[0], mod->basename());
  v.addr = found[0];
  v.type = bt->type;
  v.module = const_cast<Module*>(mod);
  return v;
}

}  // namespace lr
