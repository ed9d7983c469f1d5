#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "corelib/profiles/profile.hpp"
#include "corelib/walks/walkspec.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/progress.hpp"
#include "frontend/process/cmd_profile.hpp"
#include "frontend/process/cmd_walk.hpp"
#include "frontend/process/walk_render.hpp"

namespace lrcli {

namespace {
// A count of things: a positive number. 0 would read as "not given" (from
// the type, or no limit) and a name as CLI11's "Could not convert".
CLI::Validator positive_count(const char* hint) {
  return CLI::Validator(
      [hint](std::string& s) -> std::string {
        uint64_t v = 0;
        if (!lr::parse_u64(s, &v)) return fmt::format("'{}' is not a number{}", s, hint);
        if (v == 0) return "0 is not a count: give at least 1";
        return "";
      },
      "");
}
}  // namespace

void add_walk_options(CLI::App* sub, WalkArgs& w, bool required) {
  sub->add_option("--type", w.type, "object type, e.g. 'struct node'")->required(required);
  sub->add_option("--head", w.head, "SYMBOL, SYMBOL@module, *SYMBOL or ADDR where the walk starts")
      ->required(required);
  // The link kinds below are one of a kind (CLI11 refuses two).
  auto* o_next = sub->add_option("--next", w.next,
                                 "NULL-terminated chain through this pointer field (one link kind: "
                                 "this or one of the next seven)");
  auto* o_list =
      sub->add_option("--list-member", w.list_member, "list_head member (ring at --head)");
  auto* o_hl =
      sub->add_option("--hlist-member", w.hlist_member, "hlist_node member (hlist_head at --head)");
  auto* o_arr = sub->add_flag("--array", w.array, "--head is an array of the type");
  auto* o_parr = sub->add_flag("--pointer-array", w.pointer_array,
                               "--head is an array of pointers to the type");
  auto* o_tree = sub->add_option("--tree-member", w.tree_member,
                                 "rb_node/avltree_node member (tree rooted at --head)");
  auto* o_xa =
      sub->add_flag("--xarray", w.xarray, "--head is an xarray/radix tree/idr of pointers");
  auto* o_ht = sub->add_flag("--hashtable{val}", w.hashtable,
                             "--head is an nfs-ganesha hash_table_t; objects are its entries' "
                             "values (--hashtable=key: keys)");
  auto* o_std =
      sub->add_flag("--std{.}", w.std_container,
                    "--head is a C++ standard container (libstdc++ or libc++: vector, list, "
                    "forward_list, map, set, unordered_map, unordered_set, multi "
                    "forms); objects are its elements, of its element type unless "
                    "--type says (--std='*': what pointer elements point at; "
                    "--std=PATH: what that pointer member of each element points "
                    "at, as --std=second.px for a map of boost::intrusive_ptr)");
  o_next->excludes(o_list, o_hl, o_arr, o_parr, o_tree, o_xa, o_ht, o_std);
  o_list->excludes(o_hl, o_arr, o_parr, o_tree, o_xa, o_ht, o_std);
  o_hl->excludes(o_arr, o_parr, o_tree, o_xa, o_ht, o_std);
  o_arr->excludes(o_parr, o_tree, o_xa, o_ht, o_std);
  o_parr->excludes(o_tree, o_xa, o_ht, o_std);
  o_tree->excludes(o_xa, o_ht, o_std);
  o_xa->excludes(o_ht, o_std);
  o_ht->excludes(o_std);
  sub->add_option("--count", w.count, "array length (default: from the symbol's type)")
      ->check(positive_count("; for a length the program holds, use --count-from"));
  sub->add_option("--count-from", w.count_from,
                  "array length read from this integer (SYMBOL, SYMBOL.member)");
  sub->add_option("--buckets", w.buckets,
                  "--head is a hash table of N buckets (default: from type)")
      ->check(positive_count(
          "; a bucket count the program holds is a profile's buckets = \"SYMBOL\" (man 5 "
          "leakref-profile)"));
  sub->add_option("--refcount", w.refcount,
                  "refcount field (atomic_t, refcount_t, kref, lockref, ints)");
  sub->add_option("--show", w.show, "fields to print (a,b->c,d[2])")->delimiter(',');
  sub->add_option("--where", w.where, "filter: 'refcount>1 && flags==0', fields, &&, ||");
}

lr::WalkSpec walk_spec_from(const WalkArgs& a) {
  lr::WalkSpec spec;
  spec.type = a.type;
  spec.head = a.head;
  if (!a.next.empty()) {
    spec.link = lr::WalkSpec::Link::kNext;
    spec.member = a.next;
  } else if (!a.list_member.empty()) {
    spec.link = lr::WalkSpec::Link::kList;
    spec.member = a.list_member;
  } else if (!a.hlist_member.empty()) {
    spec.link = lr::WalkSpec::Link::kHlist;
    spec.member = a.hlist_member;
  } else if (a.array) {
    spec.link = lr::WalkSpec::Link::kArray;
  } else if (a.pointer_array) {
    spec.link = lr::WalkSpec::Link::kPointerArray;
  } else if (!a.tree_member.empty()) {
    spec.link = lr::WalkSpec::Link::kTree;
    spec.member = a.tree_member;
  } else if (a.xarray) {
    spec.link = lr::WalkSpec::Link::kXarray;
  } else if (!a.hashtable.empty()) {
    spec.link = lr::WalkSpec::Link::kContainer;
    spec.container = "hashtable";
    spec.member = a.hashtable;
  } else if (!a.std_container.empty()) {
    spec.link = lr::WalkSpec::Link::kContainer;
    spec.container = "std";
    spec.member = a.std_container;
  } else if (a.addresses) {
    spec.link = lr::WalkSpec::Link::kAddresses;
    spec.addresses = a.addresses;
    spec.addresses_mode = a.addresses_mode;
    spec.addresses_at = a.addresses_at;
  }  // else kNone: run_walk says how to link objects
  spec.count = a.count;
  spec.count_from = a.count_from;
  spec.buckets = a.buckets;
  spec.refcount = a.refcount;
  spec.show = a.show;
  spec.where = a.where;
  if (a.limit) spec.limits.max_nodes = a.limit;
  spec.limits.max_nodes_name = "--limit";
  spec.where_name = "--where";
  spec.limits.interrupted = a.interrupted;
  spec.keep_values = !a.summary_only;
  spec.reconcile = a.index;
  return spec;
}

void add_walk_run_options(CLI::App* sub, WalkArgs& w) {
  sub->add_option("--limit", w.limit, "stop after N objects (default 100000000)")
      ->check(positive_count(""));
  sub->add_option("--fail-on", w.fail_on,
                  "exit 1 if: match, cycle, fault, corrupt, issue, over, zero, leaked-held, any")
      ->delimiter(',');
  sub->add_flag("--summary", w.summary_only, "print only the summary");
  auto* first = sub->add_flag("--summary-first", w.summary_first,
                              "text: the summary before the rows when there are more than 256 "
                              "(walks twice; the default on a terminal)");
  sub->add_flag("--summary-last", w.summary_last, "text: the summary after the rows, streamed")
      ->excludes(first);
  sub->add_flag("--stats", w.stats, "print walk timing to stderr");
  sub->add_option("--group-by", w.group_by,
                  "count matched objects by this field's value (repeat: by several)");
  sub->add_option("--sort", w.sort,
                  "order objects by addr, refcount or a field (-FIELD: descending); holds "
                  "them all in memory");
  sub->add_flag("--jsonl", w.jsonl, "one JSON record per line: the walk, each object, the summary");
  sub->add_flag("--reconcile", w.reconcile,
                "each refcount against the references found in memory (the core's or the "
                "kernel image's reference index): counted references nobody holds are flagged");
  sub->add_option("--profile", w.profile,
                  "walk a profile set (with --set) instead of --type/--head/...");
  sub->add_option("--set", w.profile_set, "the profile set to walk (one walked from a symbol)");
}

namespace {}  // namespace

lr::Result<void> check_walk_args(const WalkArgs& a) {
  static const std::set<std::string> kFail = {"match", "cycle", "fault",       "corrupt", "issue",
                                              "over",  "zero",  "leaked-held", "any"};
  for (const auto& f : a.fail_on)
    if (!kFail.count(f))
      return lr::make_error(lr::Errc::kInvalidArgument, "--fail-on: unknown finding '" + f + "'");
  if (!a.where.empty()) LR_TRY(lr::Filter::check_syntax(a.where, "--where"));
  bool linked = !a.next.empty() || !a.list_member.empty() || !a.hlist_member.empty() ||
                !a.tree_member.empty() || a.array || a.pointer_array || a.xarray ||
                !a.hashtable.empty() || !a.std_container.empty();
  if (a.profile.empty() != a.profile_set.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "--profile and --set go together (the set whose walk to run)");
  if (!a.profile.empty() && (!a.type.empty() || !a.head.empty() || linked || a.buckets || a.count ||
                             !a.count_from.empty()))
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "give a walk (--type/--head/...) or a profile set (--profile/--set), "
                          "not both");
  if (a.profile.empty() && a.head.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "--type and --head are required (or --profile FILE --set SET)");
  if (a.profile.empty() && a.type.empty() && a.std_container.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "--type is required (but with --std, whose elements' type the "
                          "container says)");
  return {};
}

namespace {

// The walk of a profile set, with this command's fields, filter and limits.
lr::Result<lr::WalkSpec> profile_walk_spec(lr::Program& prog, const WalkArgs& a, bool is_kernel) {
  LR_ASSIGN(lr::Profile prof, lr::find_profile(a.profile, profile_dirs()));
  if (std::string why = lr::profile_mismatch(prog, prof, is_kernel); !why.empty())
    return lr::make_error(lr::Errc::kUnsupported, why);
  LR_ASSIGN(lr::WalkSpec spec, lr::profile_set_walk(prog, prof, a.profile_set));
  for (const auto& s : prof.sets)  // the head as the profile names it, for the report
    if (s.name == a.profile_set && spec.head.empty()) spec.head = s.head;
  lr::WalkSpec mine = walk_spec_from(a);
  if (!a.refcount.empty()) spec.refcount = a.refcount;
  spec.show = mine.show;
  spec.where = mine.where;
  spec.limits = mine.limits;
  spec.keep_values = mine.keep_values;
  spec.evaluate = true;
  return spec;
}

}  // namespace

namespace {

// --sort FIELD / -FIELD (ps's convention): ascending / descending by the
// object's address, refcount or a field (numbers as numbers).
void sort_objects(std::vector<lr::WalkedObject>& objs, const std::string& sort, size_t idx) {
  bool desc = !sort.empty() && sort[0] == '-';
  std::string key = desc ? sort.substr(1) : sort;
  auto less = [&](const lr::WalkedObject& x, const lr::WalkedObject& y) {
    if (key == "addr") return x.addr < y.addr;
    if (key == "refcount")
      return std::pair(x.has_refcount, x.refcount) < std::pair(y.has_refcount, y.refcount);
    const lr::FieldValue& fx = x.fields[idx];
    const lr::FieldValue& fy = y.fields[idx];
    int64_t a = 0, b = 0;
    bool ia = fx.as_int(&a), ib = fy.as_int(&b);
    if (ia && ib) return a < b;
    if (ia != ib) return ia;  // numbers before values that are not
    return fx.to_string() < fy.to_string();
  };
  if (desc)
    std::stable_sort(objs.begin(), objs.end(),
                     [&](const auto& x, const auto& y) { return less(y, x); });
  else
    std::stable_sort(objs.begin(), objs.end(), less);
}

}  // namespace

namespace {

// The walk as run_and_render_walk runs it: the --sort key and the
// --group-by fields are evaluated like shown ones, after them.
struct PreparedWalk {
  lr::WalkSpec spec;
  size_t sort_idx = SIZE_MAX, group_idx = SIZE_MAX;
};

lr::Result<PreparedWalk> prepare_walk(lr::Program& prog, const WalkArgs& a, bool is_kernel) {
  PreparedWalk p;
  if (!a.profile.empty()) {
    LR_ASSIGN(p.spec, profile_walk_spec(prog, a, is_kernel));
  } else {
    p.spec = walk_spec_from(a);
  }
  lr::WalkSpec& spec = p.spec;
  std::string sort_key = a.sort.empty() || a.sort[0] != '-' ? a.sort : a.sort.substr(1);
  if (!sort_key.empty() && sort_key != "addr" && sort_key != "refcount") {
    p.sort_idx = spec.show.size();  // its own key, even when also shown (structs differ)
    spec.show.push_back(sort_key);
  }
  const size_t nshown = a.show.size();
  if (sort_key == "refcount" && spec.refcount.empty())
    return lr::make_error(lr::Errc::kInvalidArgument, "--sort refcount needs --refcount");
  if (!a.group_by.empty()) {
    p.group_idx = spec.show.size();
    for (const auto& g : a.group_by) spec.show.push_back(g);
    spec.keep_values = true;
  }
  // The keys added here are values to compare or group by.
  if (spec.show.size() > nshown) spec.scalar_from = nshown;
  return p;
}

bool summary_first(const WalkArgs& a, WalkFormat f, Out& out) {
  if (f != WalkFormat::kText || a.summary_only || a.summary_last) return false;
  return a.summary_first || (&out == &out_stdout() && isatty(STDOUT_FILENO));
}

// The rows after the held ones, for a summary-first rendering that was long:
// the sorted objects, or a second walk of the same memory.
void render_rest(lr::Program& prog, lr::WalkSpec spec, const lr::WalkReport& rep, bool held,
                 WalkRenderer& r, Out& err) {
  bool same = true;
  if (held) {  // --sort: every object is in the report already
    for (const auto& o : rep.objects) WalkRenderer::on_rest_object(&r, o);
  } else {
    spec.on_object_ctx = &r;
    spec.on_object = &WalkRenderer::on_rest_object;
    spec.limits.progress = nullptr;
    auto again = lr::run_walk(prog, spec);
    same = again.ok() && again.value().visited == rep.visited;
  }
  if (!r.finish_rows() || !same)
    err.print(
        "leakref: warning: the second walk (for the rows after the summary) met other "
        "objects than the first: memory changed between them; use --summary-last\n");
}

bool walk_findings(const WalkArgs& a, const lr::WalkReport& rep) {
  const lr::WalkResult& wr = rep.walk;
  return (fail_on_wants(a.fail_on, "match") && rep.matched > 0) ||
         (fail_on_wants(a.fail_on, "cycle") && wr.stop == lr::WalkStop::kCycle) ||
         (fail_on_wants(a.fail_on, "fault") &&
          (wr.stop == lr::WalkStop::kFault || rep.unreadable_objects)) ||
         (fail_on_wants(a.fail_on, "corrupt") && wr.stop == lr::WalkStop::kCorrupt) ||
         (fail_on_wants(a.fail_on, "issue") && wr.issue_count > 0) ||
         (fail_on_wants(a.fail_on, "over") && rep.over_referenced > 0) ||
         (fail_on_wants(a.fail_on, "zero") && rep.zero_referenced > 0) ||
         (fail_on_wants(a.fail_on, "leaked-held") && rep.leaked_held > 0);
}

}  // namespace

int run_and_render_walk(lr::Program& prog, const WalkArgs& a, bool json, bool is_kernel,
                        const std::string& source, const std::vector<std::string>& given_warnings,
                        Out& out, Out& err) {
  const std::vector<std::string> pre_warnings = with_partial(given_warnings, a.index);
  auto prep = prepare_walk(prog, a, is_kernel);
  if (!prep.ok()) return fail(prep.error(), err);
  lr::WalkSpec& spec = prep.value().spec;
  WalkFormat f = a.jsonl ? WalkFormat::kJsonl : json ? WalkFormat::kJson : WalkFormat::kText;
  WalkRenderer r(a, spec, f, prep.value().group_idx, source, out);
  if (summary_first(a, f, out)) r.set_summary_first();
  if (a.sort.empty()) {  // streamed; with --sort every object is held, then sorted
    spec.on_object = &WalkRenderer::on_object;
    spec.on_object_ctx = &r;
  }
  // The renderer writes its head with the first object, so a walk that
  // cannot start prints only its error. The CLI shows progress on a terminal.
  std::atomic<uint64_t> done{0};
  std::optional<Progress> progress;
  if (&err == &out_stderr()) {
    spec.limits.progress = &done;
    progress.emplace("walking", &done, !a.summary_only);
  }
  auto rep_r = lr::run_walk(prog, spec);
  progress.reset();  // erased before the summary is written
  if (!rep_r.ok()) {
    print_warnings_text(pre_warnings, err);
    return fail(rep_r.error(), err);
  }
  r.begin();
  lr::WalkReport& rep = rep_r.value();
  if (!a.sort.empty()) {
    sort_objects(rep.objects, a.sort, prep.value().sort_idx);
    for (const auto& o : rep.objects) r.object(o);
  }
  std::vector<std::string> warnings = pre_warnings;
  for (const auto& w : rep.warnings) warnings.push_back(w);
  r.finish(rep, warnings, err);
  if (r.rows_pass()) render_rest(prog, spec, rep, !a.sort.empty(), r, err);
  if (a.stats)
    err.print("leakref: walked and evaluated {} objects in {:.3f} ms ({:.1f} M objects/s)\n",
              rep.visited, rep.walk_ns / 1e6, rep.walk_ns ? rep.visited * 1e3 / rep.walk_ns : 0.0);
  return walk_findings(a, rep) ? kFindings : kOk;
}

static int cmd_walk(const DumpOptions& c, const WalkArgs& a) {
  // Usage errors are reported before the core is opened.
  if (auto u = check_walk_args(a); !u.ok()) return fail(u.error());
  auto prog = open_program(c);
  if (!prog.ok()) return fail(prog.error());
  WalkArgs w = a;
  lr::CoreIndex ci;
  if (a.reconcile) {
    auto r = lr::index_core(*prog.value(), nullptr, {}, cli_display());
    if (!r.ok()) return fail(r.error());
    ci = std::move(r).value();
    w.index = ci.index.get();
  }
  std::fflush(stdout);
  std::vector<std::string> pre = prog.value()->warnings();
  if (ci.index) {
    pre.insert(pre.end(), ci.index->warnings().begin(), ci.index->warnings().end());
  }
  return run_and_render_walk(*prog.value(), w, c.json, false, c.core, pre, out_stdout(),
                             out_stderr());
}

Command register_walk(CLI::App& app, DumpOptions& c) {
  auto w = std::make_shared<WalkArgs>();
  auto* sub = app.add_subcommand("walk", "walk a list, hash table, chain or array of objects");
  add_dump_options(sub, c);
  add_walk_options(sub, *w, false);  // or --profile/--set: check_walk_args
  add_walk_run_options(sub, *w);
  return {sub, [&c, w] { return cmd_walk(c, *w); }, [&c, w] { return c.json || w->jsonl; }};
}

}  // namespace lrcli
