// The CLI's way into the engine's answers on process cores (process_core.hpp).
#include "frontend/base/process_core.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frontend/base/options.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/progress.hpp"
#include "frontend/base/render.hpp"

namespace lrcli {

namespace {

class CliDisplay final : public lr::ProgressDisplay {
 public:
  std::shared_ptr<void> show(const std::string& what, const std::atomic<uint64_t>* count,
                             const std::string& unit, uint64_t per_unit) override {
    return std::make_shared<Progress>(what, count, false, unit, per_unit);
  }
  void note(const std::string& line) override { out_stderr().print("{}\n", line); }
};

}  // namespace

lr::ProgressDisplay* cli_display() {
  static CliDisplay d;
  return &d;
}

lr::Result<lr::IndexedCore> open_indexed_core(
    const DumpOptions& c, const std::function<lr::Result<void>(lr::Program&)>& before,
    bool caches) {
  LR_ASSIGN(auto prog, open_program(c));
  if (!prog->core())
    return lr::make_error(lr::Errc::kUnsupported,
                          "the reference index reads process cores, not kernel dumps");
  if (before) LR_TRY(before(*prog));
  return lr::index_program(std::move(prog), caches, cli_display());
}

lr::Result<lr::LiveSites> sites_from_traces(const lr::Program& prog, const lr::HeapWalk& heap,
                                            const std::vector<std::string>& paths) {
  LR_ASSIGN(std::vector<lr::Trace> traces, lr::load_traces(paths));
  lr::LiveSites out = lr::live_sites(prog, heap, traces);
  if (out.sites.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          fmt::format("--trace: no allocation records (leakref-trace --malloc, "
                                      "mmleak or bcc memleak output) in {}",
                                      fmt::join(paths, ", ")));
  return out;
}

nlohmann::json ref_brief_json(const lr::Ref& r) {
  nlohmann::json j{{"kind", lr::ref_from_name(r.kind)}};
  if (r.kind == lr::RefFrom::kRegister)
    j["register"] = r.from;
  else
    j["from"] = hex(r.from);
  if (r.tid) j["tid"] = r.tid;
  return j;
}

nlohmann::json ref_json(lr::RefNamer& names, const lr::Program& prog, const lr::Ref& r) {
  nlohmann::json j = ref_brief_json(r);
  j["what"] = names.describe(r);
  // A container's hold on a block it owns is no word: its value is the
  // block it holds.
  j["value"] = hex(r.whole ? names.block_start(r.target) : lr::ref_value(prog, r));
  if (r.whole) j["container"] = true;
  return j;
}

}  // namespace lrcli
