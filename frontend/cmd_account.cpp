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
#include "indexed.hpp"

namespace lrcli {

namespace {

struct AccountArgs {
  std::string by = "type";
  std::vector<std::string> traces;
  size_t top = 10;
  size_t depth = 3;
  std::string html;
};

nlohmann::json node_json(const lr::AccountNode& n) {
  nlohmann::json j{{"name", n.name}, {"bytes", n.bytes}, {"blocks", n.blocks}};
  nlohmann::json kids = nlohmann::json::array();
  for (const auto& c : n.children) kids.push_back(node_json(c));
  j["children"] = std::move(kids);
  return j;
}

std::string share(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / whole) : "-";
}

void print_node(const lr::AccountNode& n, uint64_t whole, size_t level, size_t depth) {
  out_stdout().print("{:<44} {:>14} {:>10} {:>7}\n", std::string(2 * level, ' ') + n.name, n.bytes,
                     n.blocks, share(n.bytes, whole));
  if (level + 1 < depth)
    for (const auto& c : n.children) print_node(c, whole, level + 1, depth);
}

void print_account_text(const lr::Account& acc, const AccountArgs& a, const std::string& core) {
  const uint64_t whole = acc.total.bytes;
  out_stdout().print("{}: {} bytes of writable memory, each in one category (blocks: by {})\n\n",
                     core, acc.writable_bytes, a.by);
  out_stdout().print("{:<44} {:>14} {:>10} {:>7}\n", "CATEGORY", "BYTES", "BLOCKS", "SHARE");
  for (const auto& c : acc.total.children) print_node(c, whole, 0, a.depth);
  out_stdout().print("{:<44} {:>14}\n", "total", whole);
}

// A block's type for the breakdown: the one leaks' analysis gave it (the
// leaked ones), else its vtable's class, else GlusterFS's pool or GF_MALLOC
// type. Nothing is stored per block; vtable names are kept per vtable
// pointer (only words into a module are looked up: a first word that is
// data is no vtable).
class TypeKeys {
 public:
  TypeKeys(const Opened& o, RefNamer& names) : o_(&o), names_(&names) {
    for (const auto& m : o.prog->modules().modules())
      if (m->end) lo_ = std::min(lo_, m->base), hi_ = std::max(hi_, m->end);
  }
  std::string_view operator()(size_t i) {
    if (const lr::BlockType* bt = names_->types().get(i)) return bt->name;
    const lr::HeapChunk c = o_->ci.heap->in_use[i];
    uint64_t vp = 0;
    // Most blocks' first word is data, outside every module: one compare.
    if (first_word(c.user, &vp) && vp >= lo_ && vp < hi_ && o_->prog->modules().module_at(vp)) {
      auto it = vtables_->find(vp);
      if (it == vtables_->end()) it = vtables_->emplace(vp, names_->types().vtable_class(vp)).first;
      if (!it->second.empty()) return it->second;
    }
    if (!o_->gf.namer) return {};
    *named_ = o_->gf.namer->name(c);
    return *named_;
  }

 private:
  bool first_word(uint64_t a, uint64_t* v) {
    if (const uint8_t* p = o_->prog->mem().direct(*w_, a, 8)) return std::memcpy(v, p, 8), true;
    return o_->prog->mem().read(a, v, 8).ok();
  }
  const Opened* o_;
  RefNamer* names_;
  uint64_t lo_ = UINT64_MAX, hi_ = 0;
  std::shared_ptr<std::string> named_ = std::make_shared<std::string>();  // the last GlusterFS name
  std::shared_ptr<lr::Memory::Window> w_ = std::make_shared<lr::Memory::Window>();
  std::shared_ptr<std::unordered_map<uint64_t, std::string>> vtables_ =
      std::make_shared<std::unordered_map<uint64_t, std::string>>();
};

// Each in-use chunk's key for the breakdown: its type or its allocation site.
lr::Result<std::function<std::string_view(size_t)>> breakdown(const AccountArgs& a, Opened& o,
                                                              RefNamer& names, LiveSites& sites) {
  const auto& chunks = o.ci.heap->in_use;
  if (a.by == "type") return std::function<std::string_view(size_t)>(TypeKeys(o, names));
  if (a.traces.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "--by site needs the allocations' trace (--trace FILE)");
  LR_ASSIGN(sites, live_sites(*o.prog, *o.ci.heap, a.traces));
  return std::function<std::string_view(size_t)>([&chunks, &sites](size_t i) {
    auto s = sites.by_ptr.find(chunks[i].user);
    return s == sites.by_ptr.end() ? std::string_view("(not in the trace)")
                                   : std::string_view(s->second);
  });
}

// Each block's class: objects put back on a GlusterFS mem-pool's free lists
// are pooled (free) whether or not the lists reach them; the rest are live
// or leaked as leaks decided.
std::vector<lr::ChunkClass> chunk_classes(const Opened& o, const LeakSet& ls) {
  std::vector<uint64_t> pooled = o.gf.report ? o.gf.report->dead_pooled : std::vector<uint64_t>{};
  std::sort(pooled.begin(), pooled.end());
  const auto& chunks = o.ci.heap->in_use;
  std::vector<lr::ChunkClass> out;
  out.reserve(ls.state.size());
  auto p = pooled.begin();  // chunks are sorted by address too
  for (size_t i = 0; i < ls.state.size(); ++i) {
    while (p != pooled.end() && *p < chunks[i].user) ++p;
    const bool put_back = p != pooled.end() && *p == chunks[i].user;
    out.push_back(put_back || ls.state[i] & kPoolFree ? lr::ChunkClass::kPooled
                  : ls.state[i] & kLeaked             ? lr::ChunkClass::kLeaked
                                                      : lr::ChunkClass::kLive);
  }
  return out;
}

int cmd_account(const Common& c, const AccountArgs& a) {
  if (a.by != "type" && a.by != "site")
    return fail_usage("--by: '" + a.by + "' is not one of type, site");
  if (a.by == "type" && !a.traces.empty())
    return fail_usage("--trace is for --by site (the blocks' allocation sites)");
  auto o = open_indexed(c);
  if (!o.ok()) return fail(o.error());
  Opened& op = o.value();
  KnownObjects none;
  RefNamer names(*op.prog, *op.ci.index, none, op.gf);
  const LeakSet ls = find_leaked(*op.ci.index, op.gf, names);
  lr::AccountInput in;
  in.core = op.prog->core();
  in.mods = &op.prog->modules();
  in.heap = op.ci.heap;
  in.chunk_class = chunk_classes(op, ls);
  LiveSites sites;
  auto key = breakdown(a, op, names, sites);
  if (!key.ok()) return fail(key.error());
  in.key_of = key.value();
  in.max_children = c.json ? 1000 : a.top;
  auto acc = lr::build_account(in);
  if (!acc.ok()) return fail(acc.error());
  std::vector<std::string> warnings = op.warnings;
  warnings.insert(warnings.end(), sites.warnings.begin(), sites.warnings.end());
  warnings.insert(warnings.end(), acc->warnings.begin(), acc->warnings.end());
  if (!a.html.empty())
    if (auto w = write_html_page(a.html, account_html(acc.value(), c.core)); !w.ok())
      return fail(w.error());
  if (c.json) {
    nlohmann::json cats = nlohmann::json::array();
    for (const auto& n : acc->total.children) cats.push_back(node_json(n));
    emit_json({{"schema", "leakref.account/1"},
               {"core", c.core},
               {"allocator", op.ci.heap->allocator},
               {"by", a.by},
               {"total_bytes", acc->total.bytes},
               {"writable_bytes", acc->writable_bytes},
               {"categories", std::move(cats)},
               {"warnings", warnings}});
    return kOk;
  }
  print_warnings_text(warnings);
  print_account_text(acc.value(), a, c.core);
  return kOk;
}

}  // namespace

Command register_account(CLI::App& app, Common& c) {
  auto a = std::make_shared<AccountArgs>();
  auto* sub = app.add_subcommand(
      "account",
      "every byte of the core's writable memory in one category (live, leaked, free...)");
  add_common(sub, c);
  sub->add_option("--by", a->by, "break the heap's blocks down by: type (default), site");
  sub->add_option("--trace", a->traces,
                  "allocation trace (leakref-trace --malloc, mmleak, bcc), for --by site");
  sub->add_option("--top", a->top, "largest entries listed under each category (default 10)");
  sub->add_option("--depth", a->depth, "levels of the table shown (default 3)");
  sub->add_option("--html", a->html, "also write the account as a treemap: one page, no scripts");
  return {sub, [&c, a] { return cmd_account(c, *a); }, [&c] { return c.json; }};
}

}  // namespace lrcli
