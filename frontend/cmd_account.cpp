// `leakref account CORE`: every byte of the core's writable memory in one
// category (corelib/analyses/account.hpp), the heap's in-use blocks as
// live or leaked by the same reachability as `leaks`, broken down by type
// or by allocation site.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "account_html.hpp"
#include "alloc_sites.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "corelib/analyses/account.hpp"
#include "corelib/base/fileio.hpp"
#include "indexed.hpp"

namespace lrcli {

namespace {

struct AccountArgs {
  std::string by = "type";
  std::string profile;
  std::vector<std::string> sets;
  std::vector<std::string> traces;
  size_t top = 10;
  size_t depth = 3;
  std::string html;
  std::string smaps, pagemap;  // default: CORE.smaps and CORE.pagemap, when both exist
};

nlohmann::json node_json(const lr::AccountNode& n, bool resident) {
  nlohmann::json j{{"name", n.name}, {"bytes", n.bytes}, {"blocks", n.blocks}};
  if (resident) j["resident_bytes"] = n.resident;
  nlohmann::json kids = nlohmann::json::array();
  for (const auto& c : n.children) kids.push_back(node_json(c, resident));
  j["children"] = std::move(kids);
  return j;
}

std::string share(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / whole) : "-";
}

// The rows' layout: the name column as wide as the widest name shown (at
// least 44, at most 120 characters: past that a name runs over).
struct Columns {
  size_t name = 44;
  const lr::Residency* res = nullptr;
};

size_t widest(const lr::AccountNode& n, size_t level, size_t depth) {
  size_t w = 2 * level + n.name.size();
  if (level + 1 < depth)
    for (const auto& c : n.children) w = std::max(w, widest(c, level + 1, depth));
  return w;
}

// One row; the RESIDENT column only when the capture said which pages were.
// The total row has no blocks or share: it ends after its bytes then.
void print_row(const Columns& col, const std::string& name, uint64_t bytes, std::string_view blocks,
               std::string_view pct, uint64_t resident) {
  if (blocks.empty() && !col.res)
    return out_stdout().print("{:<{}} {:>14}\n", name, col.name, bytes);
  out_stdout().print("{:<{}} {:>14} {:>10} {:>7}", name, col.name, bytes, blocks, pct);
  if (col.res) out_stdout().print(" {:>14}", resident);
  out_stdout().print("\n");
}

void print_node(const Columns& col, const lr::AccountNode& n, uint64_t whole, size_t level,
                size_t depth) {
  print_row(col, std::string(2 * level, ' ') + n.name, n.bytes, fmt::to_string(n.blocks),
            share(n.bytes, whole), n.resident);
  if (level + 1 < depth)
    for (const auto& c : n.children) print_node(col, c, whole, level + 1, depth);
}

void print_account_text(const lr::Account& acc, const AccountArgs& a, const std::string& core,
                        const lr::Residency* res) {
  const uint64_t whole = acc.total.bytes;
  Columns col{44, res};
  for (const auto& c : acc.total.children)
    col.name = std::max(col.name, std::min<size_t>(120, widest(c, 0, a.depth)));
  out_stdout().print("{}: {} bytes of writable memory, each in one category (blocks: by {})\n\n",
                     core, acc.writable_bytes, a.by);
  out_stdout().print("{:<{}} {:>14} {:>10} {:>7}{}\n", "CATEGORY", col.name, "BYTES", "BLOCKS",
                     "SHARE", res ? fmt::format(" {:>14}", "RESIDENT") : "");
  for (const auto& c : acc.total.children) print_node(col, c, whole, 0, a.depth);
  print_row(col, "total", whole, "", "", acc.total.resident);
  if (res)
    out_stdout().print(
        "\nsmaps at capture: {} bytes resident in writable mappings, {} in all ({} read-only)\n",
        res->smaps_writable_rss(), res->smaps_rss(), res->smaps_rss() - res->smaps_writable_rss());
}

// The capture's smaps and pagemap: the ones named, else CORE.smaps and
// CORE.pagemap when both are there. Named files that do not fit are an
// error; found ones a warning (the account is given without residency).
lr::Result<void> load_residency(lr::Program& prog, const Common& c, const AccountArgs& a,
                                std::vector<std::string>* warnings) {
  const bool named = !a.smaps.empty() || !a.pagemap.empty();
  if (named && (a.smaps.empty() || a.pagemap.empty()))
    return lr::make_error(lr::Errc::kInvalidArgument, "--smaps and --pagemap go together");
  const std::string sm = named ? a.smaps : c.core + ".smaps";
  const std::string pm = named ? a.pagemap : c.core + ".pagemap";
  if (!named && !(lr::is_regular_file(sm) && lr::is_regular_file(pm))) return {};
  auto r = lr::Residency::load(sm, pm);
  if (r.ok()) {
    uint64_t outside = 0;
    for (const auto& s : prog.core()->segments())
      if (s.writable) outside += (s.end - s.start) - r->mapped(s.start, s.end);
    if (outside == 0) {
      prog.set_residency(std::make_unique<lr::Residency>(std::move(r.value())));
      return {};
    }
    r = lr::make_error(lr::Errc::kBadFormat,
                       fmt::format("{}: {} writable bytes of the core are in no mapping it "
                                   "lists; not this core's process",
                                   sm, outside));
  }
  if (named) return r.error();
  warnings->push_back(r.error().message + "; no resident figures");
  return {};
}

// The first object of a profile's sets inside the block; null when none is.
const KnownObjects::Object* object_in(const KnownObjects& known, const lr::HeapChunk& c) {
  const auto& all = known.all();
  auto it = std::lower_bound(all.begin(), all.end(), c.user,
                             [](const KnownObjects::Object& o, uint64_t a) { return o.addr < a; });
  return it != all.end() && it->addr - c.user < c.usable() ? &*it : nullptr;
}

// A block's key for the breakdown, by what is known of it. Type: the one
// leaks' analysis gave it (the leaked ones), else the profile object's in
// it, else its vtable's class, else GlusterFS's pool or GF_MALLOC type.
// Set: the profile set of the object in it. Module: the library of its
// vtable, else its GlusterFS xlator. Nothing is stored per block; vtable
// names are kept per vtable pointer (only words into a module are looked
// up: a first word that is data is no vtable).
class BlockKeys {
 public:
  BlockKeys(const Opened& o, RefNamer& names, const KnownObjects& known, const std::string& by)
      : o_(&o),
        names_(&names),
        known_(&known),
        by_(by == "set"      ? By::kSet
            : by == "module" ? By::kModule
                             : By::kType) {
    vtable_span(o);
    if (by_ == By::kType && o.gf.report) held_by_lru(*o.gf.report, o.ci.heap->in_use);
  }
  std::string_view operator()(size_t i) {
    const lr::HeapChunk c = o_->ci.heap->in_use[i];
    // Blocks come in address order: the first word of one a few blocks on
    // is fetched while this one is named (each is a cache miss otherwise).
    if (hi_ > lo_ && i + kAhead < o_->ci.heap->in_use.size())
      if (const uint8_t* p =
              o_->prog->mem().direct(*ahead_, o_->ci.heap->in_use[i + kAhead].user, 8))
        __builtin_prefetch(p);
    if (by_ == By::kSet) {
      const KnownObjects::Object* k = object_in(*known_, c);
      return k ? std::string_view(k->set) : std::string_view("(in no set)");
    }
    if (by_ == By::kModule) {
      if (std::string_view v = vtable_key(c); !v.empty()) return v;
      return o_->gf.namer ? std::string_view(*named_ = o_->gf.namer->parts(c).xlator) : "";
    }
    std::string_view t = type_key(i, c);
    if (lru_->empty()) return t;  // no GlusterFS inode LRU: no lookup per block
    auto l = lru_->find(c.user);
    if (l == lru_->end()) return t;
    return *named_ = fmt::format("{} kept by the {}", t.empty() ? "(unknown)" : t,
                                 (*lru_keys_)[l->second]);
  }

 private:
  // By type: the leak analysis's, else the profile object's in it, else its
  // vtable's class, else GlusterFS's pool or GF_MALLOC type.
  std::string_view type_key(size_t i, const lr::HeapChunk& c) {
    if (const lr::BlockType* bt = names_->types().get(i)) return bt->name;
    if (const KnownObjects::Object* k = object_in(*known_, c); k && k->type) {
      auto it = types_->find(k->type);  // a type's name is made once
      if (it == types_->end()) it = types_->emplace(k->type, k->type->display()).first;
      return it->second;
    }
    if (std::string_view v = vtable_key(c); !v.empty()) return v;
    return o_->gf.namer ? std::string_view(*named_ = o_->gf.namer->name(c)) : "";
  }
  // The blocks holding the objects GlusterFS's inode LRUs keep (by the
  // block's address): their type's entry says so, with the LRU's size.
  void held_by_lru(const lr::GlusterReport& r, const lr::ChunkIndex& chunks) {
    lr::GfLruHeld h = lr::gluster_lru_held(r);
    *lru_keys_ = std::move(h.keys);
    for (const auto& [addr, k] : h.objects) {
      auto it = std::upper_bound(chunks.begin(), chunks.end(), addr,
                                 [](uint64_t a, const lr::HeapChunk& c) { return a < c.user; });
      if (it == chunks.begin()) continue;
      const lr::HeapChunk c = *(it - 1);
      if (addr - c.user < c.usable()) lru_->emplace(c.user, k);
    }
  }
  // Where the modules' vtables (their `_ZTV` symbols) lie: only a first
  // word inside that span is looked up, and a program with none (C) reads
  // no block's first word at all.
  void vtable_span(const Opened& o) {
    for (const auto& m : o.prog->modules().modules()) {
      if (!m->end || m->types_only) continue;
      for (const auto& sym : m->symbols())
        if (sym.name.compare(0, 4, "_ZTV") == 0 && sym.size)
          lo_ = std::min(lo_, sym.addr), hi_ = std::max(hi_, sym.addr + sym.size);
    }
  }
  // The vtable's class (by type) or library (by module); "" when the first
  // word is no vtable.
  std::string_view vtable_key(const lr::HeapChunk& c) {
    uint64_t vp = 0;
    // Most blocks' first word is data, outside every vtable: one compare.
    if (hi_ <= lo_ || !first_word(c.user, &vp) || vp < lo_ || vp >= hi_) return {};
    const lr::Module* m = o_->prog->modules().module_at(vp);
    if (!m) return {};
    auto it = vtables_->find(vp);
    if (it == vtables_->end()) it = vtables_->emplace(vp, names_->types().vtable_class(vp)).first;
    if (it->second.empty()) return {};
    return by_ == By::kModule ? std::string_view(*named_ = m->basename()) : it->second;
  }
  bool first_word(uint64_t a, uint64_t* v) {
    if (const uint8_t* p = o_->prog->mem().direct(*w_, a, 8)) return std::memcpy(v, p, 8), true;
    return o_->prog->mem().read(a, v, 8).ok();
  }
  const Opened* o_;
  RefNamer* names_;
  const KnownObjects* known_;
  enum class By { kType, kSet, kModule } by_;  // compared per block: no string compares
  static constexpr size_t kAhead = 16;
  uint64_t lo_ = UINT64_MAX, hi_ = 0;                                     // the vtables' span
  std::shared_ptr<std::string> named_ = std::make_shared<std::string>();  // the last name made
  std::shared_ptr<lr::Memory::Window> w_ = std::make_shared<lr::Memory::Window>();
  std::shared_ptr<lr::Memory::Window> ahead_ = std::make_shared<lr::Memory::Window>();
  std::shared_ptr<std::unordered_map<uint64_t, std::string>> vtables_ =
      std::make_shared<std::unordered_map<uint64_t, std::string>>();
  std::shared_ptr<std::unordered_map<uint64_t, uint32_t>> lru_ =
      std::make_shared<std::unordered_map<uint64_t, uint32_t>>();
  std::shared_ptr<std::vector<std::string>> lru_keys_ =
      std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::unordered_map<const lr::Type*, std::string>> types_ =
      std::make_shared<std::unordered_map<const lr::Type*, std::string>>();
};

// Each in-use chunk's key for the breakdown; site and module with a trace:
// the allocating frame and its module.
lr::Result<std::function<std::string_view(size_t)>> breakdown(const AccountArgs& a, Opened& o,
                                                              RefNamer& names,
                                                              const KnownObjects& known,
                                                              LiveSites& sites) {
  const auto& chunks = o.ci.heap->in_use;
  if (a.traces.empty())
    return std::function<std::string_view(size_t)>(BlockKeys(o, names, known, a.by));
  LR_ASSIGN(sites, live_sites(*o.prog, *o.ci.heap, a.traces));
  const bool module = a.by == "module";
  return std::function<std::string_view(size_t)>([&chunks, &sites, module](size_t i) {
    auto s = sites.by_ptr.find(chunks[i].user);
    if (s == sites.by_ptr.end()) return std::string_view("(not in the trace)");
    return std::string_view(module ? sites.module_of.at(s->second) : s->second);
  });
}

// The combinations that cannot be answered, said before the core is read.
std::string usage_error(const AccountArgs& a) {
  if (a.by != "type" && a.by != "site" && a.by != "set" && a.by != "module")
    return "--by: '" + a.by + "' is not one of type, set, site, module";
  if (a.by == "site" && a.traces.empty())
    return "--by site needs the allocations' trace (--trace FILE)";
  if (a.by == "set" && a.profile.empty())
    return "--by set needs a profile (--profile FILE or NAME) whose sets the blocks are in";
  if (!a.traces.empty() && a.by != "site" && a.by != "module")
    return "--trace is for --by site or module (the blocks' allocation sites)";
  if (!a.sets.empty() && a.profile.empty())
    return "--set chooses among a profile's sets (--profile)";
  return "";
}

int cmd_account(const Common& c, const AccountArgs& a) {
  if (std::string why = usage_error(a); !why.empty()) return fail_usage(why);
  std::vector<std::string> res_warnings;
  KnownObjects known;
  auto o = open_indexed(
      c,
      [&](lr::Program& p) -> lr::Result<void> {
        LR_TRY(load_residency(p, c, a, &res_warnings));
        return load_known_objects(p, a.profile, a.sets, &known);
      },
      /*gluster_itables=*/a.by == "type");
  if (!o.ok()) return fail(o.error());
  Opened& op = o.value();
  RefNamer names(*op.prog, *op.ci.index, known, op.gf);
  const LeakSet ls = find_leaked(*op.ci.index, op.gf, names);
  lr::AccountInput in;
  in.core = op.prog->core();
  in.mods = &op.prog->modules();
  in.heap = op.ci.heap;
  in.residency = op.prog->residency();
  in.chunk_class = chunk_classes(op, ls);
  LiveSites sites;
  auto key = breakdown(a, op, names, known, sites);
  if (!key.ok()) return fail(key.error());
  in.key_of = key.value();
  in.max_children = c.json ? 1000 : a.top;
  if (op.gf.report) {
    in.ranges = lr::gluster_iobuf_ranges(*op.gf.report);
    for (const auto& ar : op.gf.report->iobuf_arenas)
      if (!ar.why.empty())
        res_warnings.push_back(fmt::format(
            "GlusterFS iobuf arena {:#x}: {}; {}", ar.addr, ar.why,
            ar.region ? "its bytes are unknown" : "its bytes are counted by their mapping"));
  }
  auto acc = lr::build_account(in);
  if (!acc.ok()) return fail(acc.error());
  std::vector<std::string> warnings = res_warnings;
  warnings.insert(warnings.end(), op.warnings.begin(), op.warnings.end());
  warnings.insert(warnings.end(), sites.warnings.begin(), sites.warnings.end());
  warnings.insert(warnings.end(), acc->warnings.begin(), acc->warnings.end());
  if (!a.html.empty())
    if (auto w = write_html_page(a.html, account_html(acc.value(), c.core)); !w.ok())
      return fail(w.error());
  if (c.json) {
    nlohmann::json cats = nlohmann::json::array();
    const lr::Residency* res = in.residency;
    for (const auto& n : acc->total.children) cats.push_back(node_json(n, res));
    nlohmann::json j{{"schema", "leakref.account/1"},      {"core", c.core},
                     {"allocator", op.ci.heap->allocator}, {"by", a.by},
                     {"total_bytes", acc->total.bytes},    {"writable_bytes", acc->writable_bytes},
                     {"categories", std::move(cats)},      {"warnings", warnings}};
    if (res)
      j["resident"] = {{"total_bytes", acc->total.resident},
                       {"smaps_rss_bytes", res->smaps_rss()},
                       {"smaps_writable_rss_bytes", res->smaps_writable_rss()}};
    emit_json(j);
    return kOk;
  }
  print_warnings_text(warnings);
  print_account_text(acc.value(), a, c.core, in.residency);
  return kOk;
}

}  // namespace

Command register_account(CLI::App& app, Common& c) {
  auto a = std::make_shared<AccountArgs>();
  auto* sub = app.add_subcommand(
      "account",
      "every byte of the core's writable memory in one category (live, leaked, free...)");
  add_common(sub, c);
  sub->add_option("--by", a->by,
                  "break the heap's blocks down by: type (default), set (a profile's), site (with "
                  "--trace), module");
  sub->add_option("-p,--profile", a->profile,
                  "profile file (or NAME): blocks holding its objects take their type and set");
  sub->add_option("--set", a->sets, "only these sets of the profile")->delimiter(',');
  sub->add_option(
      "--trace", a->traces,
      "allocation trace (leakref-trace --malloc, mmleak, bcc, mtrace), for --by site or "
      "module (the allocating frame's)");
  sub->add_option("--top", a->top, "largest entries listed under each category (default 10)");
  sub->add_option("--depth", a->depth, "levels of the table shown (default 3)");
  sub->add_option("--html", a->html, "also write the account as a treemap: one page, no scripts");
  sub->add_option("--smaps", a->smaps,
                  "the process's /proc/PID/smaps at capture (default: CORE.smaps), with --pagemap");
  sub->add_option("--pagemap", a->pagemap,
                  "its mappings' pagemap entries as leakref-snap saves them (default: "
                  "CORE.pagemap): a RESIDENT column");
  return {sub, [&c, a] { return cmd_account(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
