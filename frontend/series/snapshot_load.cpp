// The engine's snapshots with the CLI's options (snapshot_load.hpp).
#include "frontend/series/snapshot_load.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>

#include "frontend/base/options.hpp"
#include "frontend/base/process_core.hpp"
#include "frontend/process/cmd_profile.hpp"

namespace lrcli {

namespace {

// The options a text input cannot take, refused naming them.
lr::Result<void> check_input(const std::string& path, const std::string& profile,
                             const std::vector<std::string>& traces) {
  LR_ASSIGN(lr::SnapshotInput in, lr::snapshot_input(path));
  const bool text = in.kind == lr::SnapshotInput::kText || in.kind == lr::SnapshotInput::kSaved;
  if (text && (!profile.empty() || !traces.empty()))
    return lr::make_error(
        lr::Errc::kInvalidArgument,
        fmt::format("{} is a {}: --{} runs on cores", path,
                    in.kind == lr::SnapshotInput::kText ? in.text_kind : "saved snapshot",
                    profile.empty() ? "trace" : "profile"));
  if (in.kind == lr::SnapshotInput::kKernelDump && !traces.empty())
    return lr::make_error(lr::Errc::kInvalidArgument,
                          path + " is a kernel dump: --trace (allocation traces) is for cores");
  return {};
}

}  // namespace

lr::Result<lr::Snapshot> load_snapshot(const DumpOptions& c, const std::string& path,
                                       const std::string& profile, lr::SnapshotExtras* extras,
                                       const std::vector<std::string>& traces, bool by_type) {
  LR_TRY(check_input(path, profile, traces));
  lr::SnapshotRequest r;
  r.path = path;
  r.profile = profile;
  r.profile_dirs = profile_dirs();
  r.open_core = [&c](const std::string& p) {
    DumpOptions cc = c;
    cc.core = p;
    return open_program(cc);
  };
  if (!traces.empty())
    r.sites = [&traces, &path](const lr::Program& prog,
                               const lr::Result<lr::HeapWalk>& heap) -> lr::Result<lr::LiveSites> {
      if (!heap.ok())
        return lr::make_error(lr::Errc::kNotFound,
                              path + ": --trace needs the core's heap: " + heap.error().message);
      return sites_from_traces(prog, heap.value(), traces);
    };
  r.by_type = by_type;
  r.vmlinux = c.vmlinux;
  r.dbg.sysroot = c.sysroot;
  r.dbg.debug_dirs = c.debug_dirs;
  r.show = cli_display();
  return lr::load_snapshot(r, extras);
}

std::string snapshot_time(double t, const std::string& unknown) {
  if (t <= 0) return unknown;
  std::time_t s = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", tm);
}

nlohmann::json verdict_json(const lr::Snapshot& older, const lr::Snapshot& newer) {
  const lr::GrowthVerdict v = lr::growth_verdict(older, newer);
  if (v.kind.empty()) return nullptr;
  return {{"kind", v.kind}, {"text", v.text}};
}

std::string verdict_line(const lr::Snapshot& older, const lr::Snapshot& newer) {
  const lr::GrowthVerdict v = lr::growth_verdict(older, newer);
  return v.kind.empty() ? "" : fmt::format("verdict: {}: {}\n", v.kind, v.text);
}

}  // namespace lrcli
