// correlate's core side (trace_objects.hpp).
#include "corelib/answers/trace_objects.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "corelib/answers/core_index.hpp"
#include "corelib/registry/target.hpp"

namespace lr {

namespace {

std::string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// A profile set's objects with the holders the profile counted for each.
class HeldSink : public ProfileSink {
 public:
  HeldSink(std::string kind, std::vector<CoreObject>* out) : kind_(std::move(kind)), out_(out) {}
  void set_begin(const ProfileSetSummary& s) override {
    names_ = s.active_holders;
    type_ = s.type_name;
  }
  void object(const ProfileObject& o) override {
    if (!o.has_refcount) return;
    CoreObject c;
    c.addr = o.addr;
    c.kind = kind_;
    c.refcount = o.refcount;
    c.label = type_;
    // Holders that do not add up (damage) explain nothing: unknown.
    c.explained = o.held_known ? o.held : -1;
    std::vector<std::string> parts;
    for (size_t i = 0; i < o.holders.size() && i < names_.size(); ++i)
      parts.push_back(fmt::format("{} {}", names_[i], o.holders[i]));
    c.explained_by = fmt::format("holders ({})", fmt::join(parts, " + "));
    out_->push_back(std::move(c));
  }
  void set_end(const ProfileSetSummary& s) override {
    for (const auto& w : s.warnings)
      warnings.push_back(fmt::format("set '{}': {}", s.set->name, w));
  }
  std::vector<std::string> warnings;

 private:
  std::string kind_, type_;
  std::vector<std::string> names_;
  std::vector<CoreObject>* out_;
};

}  // namespace

TraceObjectSource trace_object_source(const Program& prog, bool walk_asked) {
  if (walk_asked) return {TraceObjectSource::kWalk, nullptr};
  for (ProcessTarget* t : process_targets_of(prog.modules()))
    if (!t->object_kinds().empty()) return {TraceObjectSource::kProgram, t};
  return {TraceObjectSource::kHeap, nullptr};
}

void set_explained(CoreObject& o, const std::map<uint64_t, int64_t>& counts) {
  auto it = counts.find(o.addr);
  o.explained = it == counts.end() ? -1 : it->second;
  o.explained_by = plural(static_cast<uint64_t>(std::max<int64_t>(o.explained, 0)),
                          "pointer in live memory", "pointers in live memory");
}

Result<std::map<uint64_t, int64_t>> scan_pointers(
    Program& prog, const HeapWalk& heap, const std::vector<std::pair<uint64_t, uint64_t>>& targets,
    const std::vector<uint64_t>& skip, std::vector<std::string>* warnings, ProgressDisplay* show) {
  if (targets.empty()) return std::map<uint64_t, int64_t>{};
  LR_ASSIGN(CoreIndex ci, index_core(prog, &heap, skip, show));
  warnings->insert(warnings->end(), ci.index->warnings().begin(), ci.index->warnings().end());
  return count_references(*ci.index, targets);
}

Result<std::vector<CoreObject>> walk_objects(Program& prog, const WalkSpec& spec,
                                             const std::string& kind, HeapWalk* heap,
                                             bool* have_heap, std::vector<std::string>* warnings,
                                             ProgressDisplay* show) {
  if (spec.refcount.empty())
    return make_error(Errc::kInvalidArgument, "the walk names no refcount to correlate");
  LR_ASSIGN(WalkReport wr, run_walk(prog, spec));
  std::vector<CoreObject> out;
  std::vector<std::pair<uint64_t, uint64_t>> scan;
  for (const auto& w : wr.objects) {
    if (!w.has_refcount) continue;
    CoreObject o;
    o.addr = w.addr;
    o.kind = kind;
    o.refcount = w.refcount;
    o.label = wr.type_name;
    out.push_back(o);
    scan.emplace_back(w.addr, wr.type_size);
  }
  auto hw = read_heap(prog, show);
  if (hw.ok()) {
    *heap = std::move(hw.value());
    *have_heap = true;
    LR_ASSIGN(auto counts, scan_pointers(prog, *heap, scan, {}, warnings, show));
    for (auto& o : out) set_explained(o, counts);
  }
  return out;
}

Result<std::vector<CoreObject>> held_objects(Program& prog, const Profile& prof,
                                             const std::string& set, const std::string& kind,
                                             std::vector<std::string>* warnings) {
  std::vector<CoreObject> out;
  HeldSink sink(kind, &out);
  ProfileRunOptions o;
  o.only_sets = {set};
  LR_TRY(run_profile(prog, prof, o, sink));
  warnings->insert(warnings->end(), sink.warnings.begin(), sink.warnings.end());
  return out;
}

Result<ProgramObjects> program_objects(Program& prog, ProcessTarget& target,
                                       const std::string& types_file, ProgressDisplay* show) {
  LR_ASSIGN(TypesSource ts, target.ensure_types(prog, types_file));
  if (!ts.note.empty() && show) show->note(ts.note);
  LR_ASSIGN(ProgramObjects po, target.objects(prog, types_file));
  // The index's warnings come before the target's own (what the pointers
  // rest on, then what the program's reading could not do).
  std::vector<std::string> scanned_w;
  LR_ASSIGN(auto counts, scan_pointers(prog, *po.heap, po.scan, po.pooled_free, &scanned_w, show));
  po.warnings.insert(po.warnings.begin(), scanned_w.begin(), scanned_w.end());
  std::set<uint64_t> scanned;
  for (const auto& [addr, size] : po.scan) scanned.insert(addr);
  for (auto& o : po.objects)
    if (scanned.count(o.addr)) set_explained(o, counts);
  return po;
}

bool core_heap(Program& prog, HeapWalk* heap, std::vector<std::string>* warnings,
               ProgressDisplay* show) {
  auto hw = read_heap(prog, show);
  if (!hw.ok()) {
    warnings->push_back("the core's heap: " + hw.error().message +
                        "; blocks are not checked against it");
    return false;
  }
  *heap = std::move(hw.value());
  warnings->insert(warnings->end(), heap->warnings.begin(), heap->warnings.end());
  return true;
}

}  // namespace lr
