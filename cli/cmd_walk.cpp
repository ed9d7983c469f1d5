#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common.hpp"
#include "leakref/profile.hpp"
#include "leakref/walkspec.hpp"

namespace lrcli {

void add_walk_options(CLI::App* sub, WalkArgs& w, bool required) {
  sub->add_option("--type", w.type, "object type, e.g. 'struct node'")->required(required);
  sub->add_option("--head", w.head, "SYMBOL, SYMBOL@module, *SYMBOL or ADDR where the walk starts")
      ->required(required);
  auto* o_next =
      sub->add_option("--next", w.next, "NULL-terminated chain through this pointer field");
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
  o_next->excludes(o_list, o_hl, o_arr, o_parr, o_tree, o_xa, o_ht);
  o_list->excludes(o_hl, o_arr, o_parr, o_tree, o_xa, o_ht);
  o_hl->excludes(o_arr, o_parr, o_tree, o_xa, o_ht);
  o_arr->excludes(o_parr, o_tree, o_xa, o_ht);
  o_parr->excludes(o_tree, o_xa, o_ht);
  o_tree->excludes(o_xa, o_ht);
  o_xa->excludes(o_ht);
  sub->add_option("--count", w.count, "array length (default: from the symbol's type)");
  sub->add_option("--count-from", w.count_from,
                  "array length read from this integer (SYMBOL, SYMBOL.member)");
  sub->add_option("--buckets", w.buckets,
                  "--head is a hash table of N buckets (default: from type)");
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
    spec.link = lr::WalkSpec::Link::kHashTable;
    spec.member = a.hashtable;
  }  // else kNone: run_walk says how to link objects
  spec.count = a.count;
  spec.count_from = a.count_from;
  spec.buckets = a.buckets;
  spec.refcount = a.refcount;
  spec.show = a.show;
  spec.where = a.where;
  if (a.limit) spec.limits.max_nodes = a.limit;
  spec.limits.interrupted = a.interrupted;
  spec.keep_values = !a.summary_only;
  return spec;
}

void add_walk_run_options(CLI::App* sub, WalkArgs& w) {
  sub->add_option("--limit", w.limit, "stop after N objects (default 100000000)");
  sub->add_option("--fail-on", w.fail_on, "exit 1 if: match, cycle, fault, corrupt, issue, any")
      ->delimiter(',');
  sub->add_flag("--summary", w.summary_only, "print only the summary");
  sub->add_flag("--stats", w.stats, "print walk timing to stderr");
  sub->add_option("--group-by", w.group_by, "count matched objects by this field's value");
  sub->add_option("--profile", w.profile,
                  "walk a profile set (with --set) instead of --type/--head/...");
  sub->add_option("--set", w.profile_set, "the profile set to walk (one walked from a symbol)");
}

namespace {

struct Group {
  uint64_t count = 0;
  int64_t refs = 0;
};

}  // namespace

lr::Result<void> check_walk_args(const WalkArgs& a) {
  static const std::set<std::string> kFail = {"match", "cycle", "fault", "corrupt", "issue", "any"};
  for (const auto& f : a.fail_on)
    if (!kFail.count(f))
      return lr::make_error(lr::Errc::kInvalidArgument, "--fail-on: unknown finding '" + f + "'");
  if (!a.where.empty()) LR_TRY(lr::Filter::check_syntax(a.where));
  bool linked = !a.next.empty() || !a.list_member.empty() || !a.hlist_member.empty() ||
                !a.tree_member.empty() || a.array || a.pointer_array || a.xarray ||
                !a.hashtable.empty();
  if (a.profile.empty() != a.profile_set.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "--profile and --set go together (the set whose walk to run)");
  if (!a.profile.empty() && (!a.type.empty() || !a.head.empty() || linked || a.buckets || a.count ||
                             !a.count_from.empty()))
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "give a walk (--type/--head/...) or a profile set (--profile/--set), "
                          "not both");
  if (a.profile.empty() && (a.type.empty() || a.head.empty()))
    return lr::make_error(lr::Errc::kInvalidArgument,
                          "--type and --head are required (or --profile FILE --set SET)");
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

int run_and_render_walk(lr::Program& prog, const WalkArgs& a, bool json, bool is_kernel,
                        const std::string& source, const std::vector<std::string>& pre_warnings,
                        Out& out, Out& err) {
  lr::WalkSpec spec = walk_spec_from(a);
  if (!a.profile.empty()) {
    auto ps = profile_walk_spec(prog, a, is_kernel);
    if (!ps.ok()) return fail(ps.error(), err);
    spec = std::move(ps.value());
  }
  // The group-by field is evaluated like a shown field (appended last).
  size_t group_idx = SIZE_MAX;
  if (!a.group_by.empty()) {
    group_idx = spec.show.size();
    spec.show.push_back(a.group_by);
    spec.keep_values = true;
  }
  auto rep_r = lr::run_walk(prog, spec);
  if (!rep_r.ok()) {
    print_warnings_text(pre_warnings, err);
    return fail(rep_r.error(), err);
  }
  const lr::WalkReport& rep = rep_r.value();
  std::vector<std::string> warnings = pre_warnings;
  for (const auto& w : rep.warnings) warnings.push_back(w);
  const lr::WalkResult& wr = rep.walk;
  std::map<std::string, Group> groups;
  std::vector<std::pair<std::string, Group>> ranked;
  if (group_idx != SIZE_MAX) {
    for (const auto& o : rep.objects) {
      if (o.fields.size() <= group_idx) continue;
      Group& g = groups[o.fields[group_idx].to_string()];
      ++g.count;
      if (o.has_refcount) g.refs += o.refcount;
    }
    ranked.assign(groups.begin(), groups.end());
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& x, const auto& y) { return x.second.count > y.second.count; });
  }
  const size_t nshow = a.show.size();

  if (json) {
    nlohmann::json j;
    j["schema"] = "leakref.walk/1";
    j["core"] = source;
    j["type"] = rep.type_name;
    j["type_size"] = rep.type_size;
    j["mode"] = rep.mode;
    j["head"] = spec.head;
    j["head_addr"] = hex(rep.head_addr);
    j["member"] = spec.member;
    j["refcount_field"] = a.refcount.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.refcount);
    j["where"] = a.where.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.where);
    auto& objs = j["objects"] = nlohmann::json::array();
    if (!a.summary_only) {
      for (const auto& o : rep.objects) {
        nlohmann::json jo;
        jo["addr"] = hex(o.addr);
        if (!a.refcount.empty())
          jo["refcount"] = o.has_refcount ? nlohmann::json(o.refcount) : nullptr;
        if (nshow) {
          auto& f = jo["fields"] = nlohmann::json::object();
          for (size_t i = 0; i < nshow && i < o.fields.size(); ++i)
            f[a.show[i]] = value_json(o.fields[i]);
        }
        objs.push_back(std::move(jo));
      }
    }
    auto& s = j["summary"];
    s["visited"] = rep.visited;
    s["matched"] = rep.matched;
    s["unreadable"] = rep.unreadable_objects;
    s["stop"] = lr::walk_stop_name(wr.stop);
    s["stop_detail"] = wr.stop_detail;
    s["stop_addr"] =
        wr.stop == lr::WalkStop::kEnd ? nlohmann::json(nullptr) : nlohmann::json(hex(wr.stop_addr));
    s["cycle"] = wr.stop == lr::WalkStop::kCycle
                     ? nlohmann::json{{"start", hex(wr.cycle_start)}, {"length", wr.cycle_length}}
                     : nlohmann::json(nullptr);
    auto& h = s["histogram"] = nlohmann::json::object();
    for (const auto& [k, v] : rep.histogram) h[std::to_string(k)] = v;
    if (group_idx != SIZE_MAX) {
      auto& g = s["groups"] = nlohmann::json::array();
      for (const auto& [k, v] : ranked) {
        nlohmann::json jg{{"value", k}, {"count", v.count}};
        if (!a.refcount.empty()) jg["refcount_sum"] = v.refs;
        g.push_back(std::move(jg));
      }
    }
    s["issue_count"] = wr.issue_count;
    auto& iss = s["issues"] = nlohmann::json::array();
    for (const auto& is : wr.issues) iss.push_back({{"addr", hex(is.addr)}, {"what", is.what}});
    if (rep.mode.rfind("hash:", 0) == 0) {
      s["buckets"] = wr.buckets;
      s["empty_buckets"] = wr.empty_buckets;
      s["faulted_buckets"] = wr.faulted_buckets;
      s["longest_chain"] = wr.longest_chain;
    }
    if (rep.mode == "xarray") s["value_entries"] = wr.skipped;
    s["walk_ns"] = rep.walk_ns;
    j["warnings"] = warnings;
    emit_json(j, out);
  } else {
    print_warnings_text(warnings, err);
    if (!a.summary_only) {
      std::string hdr = fmt::format("{:<18}", "ADDR");
      if (!a.refcount.empty()) hdr += fmt::format("  {:>8}", "REFCOUNT");
      for (const auto& f : a.show) hdr += "  " + f;
      out.print("{}\n", hdr);
      for (const auto& o : rep.objects) {
        if (out.failed()) break;
        std::string line = fmt::format("{:<18}", hex(o.addr));
        if (!a.refcount.empty())
          line += o.has_refcount ? fmt::format("  {:>8}", o.refcount) : fmt::format("  {:>8}", "?");
        for (size_t i = 0; i < nshow && i < o.fields.size(); ++i)
          line += "  " + a.show[i] + "=" + o.fields[i].to_string();
        line += '\n';
        out.put(line);
      }
    }
    out.print("\n{} walked as {} from {} ({}): {} visited", rep.type_name, rep.mode, spec.head,
              hex(rep.head_addr), rep.visited);
    if (!a.where.empty()) out.print(", {} matched '{}'", rep.matched, a.where);
    out.print("\nstopped: {}{}\n", lr::walk_stop_name(wr.stop),
              wr.stop_detail.empty() ? "" : " — " + wr.stop_detail);
    if (rep.mode.rfind("hash:", 0) == 0)
      out.print("buckets: {} ({} empty, {} unreadable), longest chain {}\n", wr.buckets,
                wr.empty_buckets, wr.faulted_buckets, wr.longest_chain);
    if (rep.mode == "xarray") out.print("value entries (not objects): {}\n", wr.skipped);
    if (!a.refcount.empty()) {
      out.print("refcount histogram ({}):\n", a.refcount);
      for (const auto& [k, v] : rep.histogram) out.print("  {:>8}: {}\n", k, v);
    }
    if (group_idx != SIZE_MAX) {
      out.print("grouped by {} ({} distinct):\n", a.group_by, ranked.size());
      for (const auto& [k, v] : ranked) {
        if (a.refcount.empty())
          out.print("  {:>8}  {}\n", v.count, k);
        else
          out.print("  {:>8}  refs {:>8}  {}\n", v.count, v.refs, k);
      }
    }
    if (wr.issue_count) {
      out.print("issues: {}\n", wr.issue_count);
      for (const auto& is : wr.issues) out.print("  {}: {}\n", hex(is.addr), is.what);
    }
  }
  if (a.stats)
    err.print("leakref: walked and evaluated {} objects in {:.3f} ms ({:.1f} M objects/s)\n",
              rep.visited, rep.walk_ns / 1e6, rep.walk_ns ? rep.visited * 1e3 / rep.walk_ns : 0.0);

  bool findings = (fail_on_wants(a.fail_on, "match") && rep.matched > 0) ||
                  (fail_on_wants(a.fail_on, "cycle") && wr.stop == lr::WalkStop::kCycle) ||
                  (fail_on_wants(a.fail_on, "fault") &&
                   (wr.stop == lr::WalkStop::kFault || rep.unreadable_objects)) ||
                  (fail_on_wants(a.fail_on, "corrupt") && wr.stop == lr::WalkStop::kCorrupt) ||
                  (fail_on_wants(a.fail_on, "issue") && wr.issue_count > 0);
  return findings ? kFindings : kOk;
}

int cmd_walk(const Common& c, const WalkArgs& a) {
  // Usage errors are reported before the core is opened.
  if (auto u = check_walk_args(a); !u.ok()) return fail(u.error());
  auto prog = open_program(c);
  if (!prog.ok()) return fail(prog.error());
  std::fflush(stdout);
  return run_and_render_walk(*prog.value(), a, c.json, false, c.core, prog.value()->warnings(),
                             out_stdout(), out_stderr());
}

}  // namespace lrcli
