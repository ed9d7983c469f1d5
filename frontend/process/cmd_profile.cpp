// `leakref profile CORE --profile FILE`: every object set a profile file
// declares, with refcounts, holders, verdicts and invariant violations,
// streamed as text (aligned columns), leakref.profile/1 JSON or JSON lines.
#include <dlfcn.h>
#include <fmt/format.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "corelib/answers/profile_match.hpp"
#include "corelib/profiles/profile.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/base/render.hpp"
#include "frontend/process/cmd_profile.hpp"

namespace lrcli {

nlohmann::json profile_object_json(const lr::ProfileObject& o,
                                   const std::vector<std::string>& holders, bool reconciled) {
  nlohmann::json j{{"addr", hex(o.addr)}};
  if (o.parent) j["parent"] = hex(o.parent);
  j["refcount"] = o.has_refcount ? nlohmann::json(o.refcount) : nlohmann::json(nullptr);
  if (!o.set->key.empty()) j["key"] = value_json(o.key);
  auto& l = j["labels"] = nlohmann::json::object();
  for (size_t i = 0; i < o.labels.size(); ++i) l[o.set->label[i]] = value_json(o.labels[i]);
  auto& h = j["holders"] = nlohmann::json::object();
  for (size_t i = 0; i < o.holders.size() && i < holders.size(); ++i) h[holders[i]] = o.holders[i];
  j["held"] = o.held_known ? nlohmann::json(o.held) : nlohmann::json(nullptr);
  j["unexplained"] = o.has_refcount && !holders.empty() && o.held_known && o.count_plausible
                         ? nlohmann::json(o.refcount - o.held)
                         : nlohmann::json(nullptr);
  j["verdict"] = o.verdict.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.verdict);
  j["violations"] = o.violations;
  if (!o.error.empty()) j["error"] = o.error;
  if (reconciled) {
    j["inbound"] = o.inbound < 0 ? nlohmann::json(nullptr) : nlohmann::json(o.inbound);
    j["inbound_words"] =
        o.inbound_words < 0 ? nlohmann::json(nullptr) : nlohmann::json(o.inbound_words);
    if (o.over) j["over"] = o.over;
    if (o.from_leaked) j["from_leaked"] = o.from_leaked;
    auto& rs = j["referrers"] = nlohmann::json::array();
    for (const auto& r : o.referrers) rs.push_back(ref_brief_json(r));
  }
  return j;
}

bool profile_flagged(const lr::ProfileObject& o) {
  return o.verdict == "extra" || o.verdict == "missing" || o.verdict == "error" ||
         !o.violations.empty() || o.over > 0 || o.from_leaked > 0;
}

namespace {

nlohmann::json summary_json(const lr::ProfileSetSummary& s, bool reconciled) {
  nlohmann::json j{{"walks", s.walks},
                   {"visited", s.objects},
                   {"matched", s.matched},
                   {"extra", s.flagged_extra},
                   {"missing", s.flagged_missing},
                   {"errors", s.errors},
                   {"mode", s.mode},
                   {"violations", s.violations},
                   {"notes", s.notes},
                   {"warnings", s.warnings},
                   {"warnings_dropped", s.warnings_dropped}};
  auto& h = j["histogram"] = nlohmann::json::object();
  for (const auto& [k, v] : s.histogram) h[std::to_string(k)] = v;
  if (reconciled) {
    j["over_referenced"] = s.over_referenced;
    j["not_indexed"] = s.not_indexed;
    j["leaked_held"] = s.leaked_held;
  }
  return j;
}

// "5 = 1 hash + 3 granted + 1 unexplained"; below what is held: "1, but
// held by 2 = 1 list + 1 hash: 1 fewer than held".
std::string explain(const lr::ProfileObject& o, const std::vector<std::string>& holders) {
  if (!o.has_refcount || holders.empty() || !o.count_plausible) return "";
  if (!o.held_known) return fmt::format("{} = ? (holders do not add up)", o.refcount);
  std::string parts;
  for (size_t i = 0; i < holders.size() && i < o.holders.size(); ++i)
    if (o.holders[i])
      parts += fmt::format("{}{} {}", parts.empty() ? "" : " + ", o.holders[i], holders[i]);
  // A sum of holders that does not fit (damage) was judged "error" already.
  int64_t d = 0;
  if (__builtin_sub_overflow(o.refcount, o.held, &d)) return fmt::format("{} = ?", o.refcount);
  if (d < 0)
    return fmt::format("{}, but held by {} = {}: {} fewer than held", o.refcount, o.held,
                       parts.empty() ? "0" : parts, o.held - o.refcount);
  std::string s = fmt::format("{} = {}", o.refcount, parts.empty() ? (d ? "" : "0") : parts);
  if (d > 0) s += fmt::format("{}{} unexplained", parts.empty() ? "" : " + ", d);
  return s;
}

// --reconcile, in text: "; 1 reference found !! 2 counted, held by nothing found".
std::string found(const lr::ProfileObject& o) {
  if (o.inbound < 0) return "";
  std::string s = fmt::format("; {} reference{} found", o.inbound, o.inbound == 1 ? "" : "s");
  if (o.inbound_words != o.inbound) s += fmt::format(" ({} words)", o.inbound_words);
  if (o.over) s += fmt::format(" !! {} counted, held by nothing found", o.over);
  if (o.from_leaked)
    s += fmt::format(" !! {} from leaked block{}", o.from_leaked, o.from_leaked == 1 ? "" : "s");
  return s;
}

class Renderer : public lr::ProfileSink {
 public:
  Renderer(const ProfileArgs& a, Out& out) : a_(a), out_(out) {}
  bool stopped() const override { return out_.failed(); }
  uint64_t flagged = 0, violations = 0, errors = 0;

 protected:
  const ProfileArgs& a_;
  Out& out_;
  void count(const lr::ProfileSetSummary& s) {
    flagged += s.flagged_extra + s.flagged_missing + s.over_referenced + s.leaked_held;
    for (const auto& [k, v] : s.violations) violations += v;
    errors += s.errors;
  }
  nlohmann::json object_json(const lr::ProfileObject& o, const std::vector<std::string>& holders) {
    return profile_object_json(o, holders, a_.index != nullptr);
  }
};

// Columns are sized from the first block of rows of each set (at most
// kBlock rows are held), then later rows stream with the same widths.
class TextRenderer final : public Renderer {
 public:
  using Renderer::Renderer;
  void set_begin(const lr::ProfileSetSummary& s) override {
    holders_ = s.active_holders;
    rows_.clear();
    widths_.clear();
  }
  void object(const lr::ProfileObject& o) override {
    if (!a_.all && !profile_flagged(o)) return;
    if (widths_.empty() && rows_.empty()) {
      std::vector<std::string> h = {"ADDR", "REFCOUNT", "VERDICT"};
      for (const auto& l : o.set->label) h.push_back(l);
      h.push_back("VIOLATES");
      h.push_back("EXPLAINED");
      out_.print("set {}:\n", o.set->name);
      rows_.push_back(std::move(h));
    }
    std::vector<std::string> r = {hex(o.addr), o.has_refcount ? std::to_string(o.refcount) : "-",
                                  o.verdict.empty() ? "-" : o.verdict};
    for (const auto& v : o.labels) r.push_back(v.to_string());
    std::string viol;
    for (const auto& v : o.violations) viol += (viol.empty() ? "" : ",") + v;
    r.push_back(viol.empty() ? "-" : viol);
    r.push_back(explain(o, holders_) + (o.error.empty() ? "" : " (" + o.error + ")") + found(o));
    rows_.push_back(std::move(r));
    if (rows_.size() >= kBlock) flush();
  }
  void set_end(const lr::ProfileSetSummary& s) override {
    flush();
    count(s);
    const lr::ProfileSet& d = *s.set;
    out_.print("set {}: {} ({}, {} walk{}): {} object{}", d.name, s.type_name, s.mode, s.walks,
               s.walks == 1 ? "" : "s", s.matched, s.matched == 1 ? "" : "s");
    if (!d.holders.empty() && !d.refcount.empty())
      out_.print(", {} with unexplained references, {} with fewer than held", s.flagged_extra,
                 s.flagged_missing);
    uint64_t nv = 0;
    for (const auto& [k, v] : s.violations) nv += v;
    if (!d.invariants.empty()) out_.print(", {} invariant violation{}", nv, nv == 1 ? "" : "s");
    if (s.errors) out_.print(", {} not evaluated", s.errors);
    if (a_.index) out_.print(", {} with a refcount above the references found", s.over_referenced);
    if (a_.index && s.leaked_held) out_.print(", {} held from leaked blocks", s.leaked_held);
    out_.put("\n");
    if (a_.index && s.not_indexed)
      out_.print("  {} object{} in no object the reference index holds: not reconciled\n",
                 s.not_indexed, s.not_indexed == 1 ? "" : "s");
    for (const auto& [k, v] : s.violations)
      out_.print("  invariant {}: {} object{}\n", k, v, v == 1 ? "" : "s");
    if (!d.refcount.empty() && a_.histogram) {
      out_.print("  refcount histogram ({}):\n", d.refcount);
      for (const auto& [k, v] : s.histogram) out_.print("    {:>8}: {}\n", k, v);
    }
    for (const auto& n : s.notes) out_.print("  note: {}\n", n);
    size_t shown = 0;
    for (const auto& w : s.warnings)
      if (shown++ < 20) out_.print("  warning: {}\n", w);
    uint64_t more = s.warnings.size() + s.warnings_dropped;
    if (more > 20)
      out_.print("  ... {} more warnings (--json lists the first {})\n", more - 20,
                 s.warnings.size());
    out_.put("\n");
  }

 private:
  static constexpr size_t kBlock = 256;
  void flush() {
    if (rows_.empty()) return;
    if (widths_.empty()) {
      widths_.assign(rows_[0].size(), 0);
      for (const auto& r : rows_)
        for (size_t i = 0; i < r.size() && i < widths_.size(); ++i)
          widths_[i] = std::max(widths_[i], r[i].size());
    }
    for (const auto& r : rows_) {
      std::string line = " ";
      for (size_t i = 0; i < r.size(); ++i) {
        // numbers right-aligned (REFCOUNT), the last column unpadded
        if (i + 1 == r.size())
          line += " " + r[i];
        else if (i == 1)
          line += fmt::format(" {:>{}}", r[i], widths_[i]);
        else
          line += fmt::format(" {:<{}}", r[i], widths_[i]);
      }
      out_.put(line + "\n");
    }
    rows_.clear();
  }
  std::vector<std::string> holders_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> widths_;
};

// leakref.profile/1, written as it is found: the object arrays are never
// held in memory.
class JsonRenderer final : public Renderer {
 public:
  JsonRenderer(const ProfileArgs& a, Out& out, bool lines) : Renderer(a, out), lines_(lines) {}
  void set_begin(const lr::ProfileSetSummary& s) override {
    holders_ = s.active_holders;
    first_obj_ = true;
    if (lines_) return;
    nlohmann::json h{{"name", s.set->name},
                     {"type", s.type_name},
                     {"holders", s.active_holders},
                     {"refcount_field", s.set->refcount.empty() ? nlohmann::json(nullptr)
                                                                : nlohmann::json(s.set->refcount)}};
    std::string t = json_text(h, -1);
    t.pop_back();  // reopen the object for "objects"
    out_.print("{}{},\"objects\":[", first_set_ ? "" : ",", t);
    first_set_ = false;
  }
  void object(const lr::ProfileObject& o) override {
    if (a_.flagged && !profile_flagged(o)) return;
    nlohmann::json j = object_json(o, holders_);
    if (lines_) {
      j["record"] = "object";
      j["set"] = o.set->name;
    }
    std::string t = json_text(j, -1);
    out_.print("{}{}\n", lines_ || first_obj_ ? "" : ",", t);
    first_obj_ = false;
  }
  void set_end(const lr::ProfileSetSummary& s) override {
    count(s);
    nlohmann::json sum = summary_json(s, a_.index != nullptr);
    if (lines_) {
      sum["record"] = "set";
      sum["set"] = s.set->name;
      sum["type"] = s.type_name;
      out_.print("{}\n", json_text(sum, -1));
      return;
    }
    out_.print("],\"summary\":{}}}\n", json_text(sum, -1));
  }

 private:
  bool lines_;
  bool first_set_ = true, first_obj_ = true;
  std::vector<std::string> holders_;
};

}  // namespace

// Where installed profiles live: $LEAKREF_PROFILE_PATH (colon-separated),
// then beside the code running this (the leakref executable or the crash
// extension): BIN/profiles (a build tree), BIN/../share/leakref/profiles
// ($PREFIX/bin/leakref) and BIN/../../../share/leakref/profiles
// ($PREFIX/lib/crash/extensions/leakref.so).
std::vector<std::string> profile_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LEAKREF_PROFILE_PATH")) {
    std::string s = env;
    size_t b = 0;
    for (;;) {
      size_t e = s.find(':', b);
      std::string d = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
      if (!d.empty()) dirs.push_back(d);
      if (e == std::string::npos) break;
      b = e + 1;
    }
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&profile_dirs), &info) && info.dli_fname) {
    // In the executable itself dladdr names it as it was invoked ("leakref"
    // from PATH): the kernel knows where it is. The crash extension gets its
    // dlopen()ed path.
    const char* self = std::strchr(info.dli_fname, '/') ? info.dli_fname : "/proc/self/exe";
    char real[PATH_MAX];
    if (realpath(self, real)) {
      std::string bin(real);
      bin = bin.substr(0, bin.rfind('/'));
      dirs.push_back(bin + "/profiles");
      dirs.push_back(bin + "/../share/leakref/profiles");
      dirs.push_back(bin + "/../../../share/leakref/profiles");
    }
  }
  return dirs;
}

void add_profile_options(CLI::App* sub, ProfileArgs& a) {
  sub->add_option("-p,--profile", a.profile, "profile file (or NAME of an installed one)")
      ->required();
  sub->add_option("--set", a.sets, "only these sets (their dependencies run too)")->delimiter(',');
  sub->add_flag("--all", a.all, "text: every object, not only flagged or violating ones");
  sub->add_flag("--flagged", a.flagged, "JSON: only flagged, violating or unevaluated objects");
  sub->add_flag("--histogram", a.histogram, "text: refcount histogram per set");
  sub->add_flag("--jsonl", a.jsonl, "one JSON object per line (objects, then each set's summary)");
  sub->add_option("--fail-on", a.fail_on, "exit 1 if: flagged, violation, error, any")
      ->delimiter(',');
  sub->add_flag("--reconcile", a.reconcile,
                "each refcount against the references found in memory (a process core's "
                "reference index): counted references nobody holds are flagged");
}

lr::Result<void> check_profile_args(const ProfileArgs& a) {
  for (const auto& f : a.fail_on)
    if (f != "flagged" && f != "violation" && f != "error" && f != "any")
      return lr::make_error(lr::Errc::kInvalidArgument, "--fail-on: unknown finding '" + f + "'");
  return {};
}

int run_and_render_profile(lr::Program& prog, const lr::Profile& prof, const ProfileArgs& a,
                           bool json, bool is_kernel, const std::string& source,
                           const std::vector<std::string>& given_warnings, Out& out, Out& err) {
  const std::vector<std::string> pre_warnings = with_partial(given_warnings, a.index);
  if (std::string why = lr::profile_mismatch(prog, prof, is_kernel); !why.empty())
    return fail(lr::make_error(lr::Errc::kUnsupported, why), err);
  lr::ProfileRunOptions ro;
  ro.only_sets = a.sets;
  ro.interrupted = a.interrupted;
  ro.reconcile = a.index;
  std::unique_ptr<Renderer> r;
  if (json || a.jsonl)
    r = std::make_unique<JsonRenderer>(a, out, a.jsonl);
  else
    r = std::make_unique<TextRenderer>(a, out);
  nlohmann::json head{
      {"schema", "leakref.profile/1"},
      {"core", source},
      {"profile", {{"name", prof.name}, {"source", prof.source}, {"format", prof.format}}}};
  // Set-up errors (a type the target lacks) come before any output.
  struct Gate final : lr::ProfileSink {
    lr::ProfileSink* inner;
    std::function<void()> before_first;
    void set_begin(const lr::ProfileSetSummary& s) override {
      if (before_first) {
        before_first();
        before_first = nullptr;
      }
      inner->set_begin(s);
    }
    void object(const lr::ProfileObject& o) override { inner->object(o); }
    void set_end(const lr::ProfileSetSummary& s) override { inner->set_end(s); }
    bool stopped() const override { return inner->stopped(); }
  } gate;
  gate.inner = r.get();
  bool opened = false;
  gate.before_first = [&] {
    opened = true;
    if (a.jsonl) {
      nlohmann::json h = head;
      h["record"] = "profile";
      out.print("{}\n", json_text(h));
    } else if (json) {
      std::string t = json_text(head);
      t.pop_back();
      out.print("{},\"sets\":[\n", t);
    } else {
      out.print("profile {} ({}) on {}\n\n", prof.name, prof.source, source);
    }
  };
  auto res = lr::run_profile(prog, prof, ro, gate);
  if (json && !a.jsonl && opened)
    out.print("],\"warnings\":{}}}\n", json_text(nlohmann::json(pre_warnings)));
  if (!json || a.jsonl) print_warnings_text(pre_warnings, err);
  if (!res.ok()) return fail(res.error(), err);
  bool findings = (fail_on_wants(a.fail_on, "flagged") && r->flagged) ||
                  (fail_on_wants(a.fail_on, "violation") && r->violations) ||
                  (fail_on_wants(a.fail_on, "error") && r->errors);
  return findings ? kFindings : kOk;
}

static int cmd_profile(const DumpOptions& c, const ProfileArgs& a) {
  if (auto u = check_profile_args(a); !u.ok()) return fail(u.error());
  auto prog = open_program(c);
  if (!prog.ok()) return fail(prog.error());
  auto prof = lr::find_profile(a.profile, profile_dirs());
  if (!prof.ok()) return fail(prof.error());
  // A build without debuginfo: the types the profile's [build] recipe makes.
  if (auto t = lr::ensure_profile_types(*prog.value(), prof.value(), cli_display()); !t.ok())
    return fail(t.error());
  ProfileArgs pa = a;
  lr::CoreIndex ci;
  std::vector<std::string> pre = prog.value()->warnings();
  if (a.reconcile) {
    auto r = lr::index_core(*prog.value(), nullptr, {}, cli_display());
    if (!r.ok()) return fail(r.error());
    ci = std::move(r).value();
    pa.index = ci.index.get();
    pre.insert(pre.end(), ci.index->warnings().begin(), ci.index->warnings().end());
  }
  std::fflush(stdout);
  return run_and_render_profile(*prog.value(), prof.value(), pa, c.json, false, c.core, pre,
                                out_stdout(), out_stderr());
}

Command register_profile(CLI::App& app, DumpOptions& c) {
  auto a = std::make_shared<ProfileArgs>();
  auto* sub = app.add_subcommand("profile",
                                 "object sets, holders and invariants declared in a profile file");
  add_dump_options(sub, c);
  add_profile_options(sub, *a);
  return {sub, [&c, a] { return cmd_profile(c, *a); }, [&c, a] { return c.json || a->jsonl; }};
}

}  // namespace lrcli
