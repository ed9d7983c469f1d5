// `leakref profile` and what `kernel profile` and the crash extension share
// with it: the profile options, running-and-rendering a profile, and where
// `--profile NAME` is looked for.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/program.hpp"
#include "frontend/base/out.hpp"

namespace lr {
struct Profile;
struct ProfileObject;
class RefSource;
}  // namespace lr

namespace lrcli {

struct ProfileArgs {
  std::string profile;            // file or installed name
  std::vector<std::string> sets;  // --set
  bool all = false, flagged = false, histogram = false, jsonl = false;
  bool reconcile = false;  // --reconcile (process cores: `index` is then built)
  std::vector<std::string> fail_on;
  const std::atomic<bool>* interrupted = nullptr;
  const lr::RefSource* index = nullptr;  // borrowed; the references --reconcile counts
};
// Registers --profile, --set, --all, --flagged, --histogram, --jsonl,
// --fail-on, --reconcile.
void add_profile_options(CLI::App* sub, ProfileArgs& a);
lr::Result<void> check_profile_args(const ProfileArgs& a);
// Runs profile `prof` (loaded from a.profile) on `prog` and renders it (text,
// leakref.profile/1 JSON or JSON lines); `is_kernel` for the profile's [match].
int run_and_render_profile(lr::Program& prog, const lr::Profile& prof, const ProfileArgs& a,
                           bool json, bool is_kernel, const std::string& source,
                           const std::vector<std::string>& pre_warnings, Out& out, Out& err);
// One object as leakref.profile/1 lists it (`holders`: the set's active
// holder names; `reconciled`: with the references found), and whether
// --flagged lists it (a verdict other than "ok", an invariant that does not
// hold, or counted references nobody holds).
nlohmann::json profile_object_json(const lr::ProfileObject& o,
                                   const std::vector<std::string>& holders,
                                   bool reconciled = false);
bool profile_flagged(const lr::ProfileObject& o);
// Where `--profile NAME` looks (README "Profiles").
std::vector<std::string> profile_dirs();

}  // namespace lrcli
