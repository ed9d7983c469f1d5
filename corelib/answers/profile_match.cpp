// Profiles for a dump and their types (profile_match.hpp).
#include "corelib/answers/profile_match.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "corelib/debuginfo/open_core.hpp"
#include "corelib/registry/target.hpp"

namespace lr {

void add_profile_recipe(const Profile& p, TypesBuild* b) {
  std::filesystem::path base = std::filesystem::path(p.source).parent_path();
  b->headers.insert(b->headers.begin(), p.build_headers.begin(), p.build_headers.end());
  for (std::string i : p.build_include) {
    if (i.starts_with("{cache}")) i = cache_dir() + i.substr(7);
    b->include_dirs.push_back(std::filesystem::path(i).is_absolute() ? i : (base / i).string());
  }
  b->defines.insert(b->defines.end(), p.build_defines.begin(), p.build_defines.end());
}

namespace {

// The program target whose module the profile describes, when the process
// maps it: the profile's types are that target's.
ProcessTarget* owner_of(const Program& prog, const Profile& p) {
  for (ProcessTarget* t : process_targets_of(prog.modules()))
    for (const auto& m : p.match_modules)
      if (t->owns_module(m)) return t;
  return nullptr;
}

// The profile's [build] types for an executable without debuginfo, cached
// per build-id and recipe (a changed recipe makes its own file).
Result<void> build_recipe_types(Program& prog, const Profile& p, ProgressDisplay* show) {
  const Module* exe = prog.modules().exe();
  std::string out = types_cache_path("types", exe->build_id + "-" + profile_recipe_hash(p));
  if (out.empty())
    return make_error(Errc::kNotFound,
                      "no cache directory (HOME unset) for the profile's [build] types: give " +
                          types_origin().prefix + "FILE");
  struct stat st;
  if (::stat(out.c_str(), &st) == 0) return add_types_file(prog, out, types_origin());
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(out).parent_path(), ec);
  TypesBuild b;
  add_profile_recipe(p, &b);
  b.target_build_id = exe->build_id;
  std::string cmd;
  if (auto r = build_types(b, out, &cmd); !r.ok())
    return make_error(r.error().code,
                      fmt::format("profile {} [build]: {}{}", p.name, r.error().message,
                                  p.build_note.empty() ? "" : " (" + p.build_note + ")"));
  if (show)
    show->note(fmt::format(
        "leakref: {} has no debuginfo: built its types from profile {}'s [build] headers into {}",
        exe->path, p.name, out));
  return add_types_file(prog, out, types_origin());
}

}  // namespace

Result<void> ensure_profile_types(Program& prog, const Profile& p, ProgressDisplay* show) {
  // A profile of a program target's module describes that module, whichever
  // program maps it: its types are the target's, built per module build-id.
  if (ProcessTarget* t = owner_of(prog, p)) {
    LR_ASSIGN(TypesSource ts, t->ensure_types(prog, ""));
    if (!ts.note.empty() && show) show->note(ts.note);
    return {};
  }
  const Module* exe = prog.modules().exe();
  if (p.build_headers.empty() || !exe || exe->has_dwarf() || exe->build_id.empty()) return {};
  // Types given or found in the cache that declare every type the profile
  // names are enough; others (made by another recipe) are not.
  bool loaded = false;
  for (const auto& m : prog.modules().modules()) loaded |= m->types_only;
  if (loaded && profile_types_bind(prog, p).ok()) return {};
  return build_recipe_types(prog, p, show);
}

std::vector<Profile> pick_profiles(Program& prog, bool kernel,
                                   const std::vector<std::string>& names,
                                   const std::vector<std::string>& dirs,
                                   std::vector<std::string>* warnings) {
  std::vector<Profile> out;
  if (!names.empty()) {
    for (const auto& p : names) {
      auto prof = find_profile(p, dirs);
      if (!prof.ok())
        warnings->push_back(prof.error().message);
      else if (std::string why = profile_mismatch(prog, prof.value(), kernel); !why.empty())
        warnings->push_back(p + ": not run: " + why);
      else
        out.push_back(std::move(prof).value());
    }
    return out;
  }
  std::set<std::string> seen;
  for (const auto& dir : dirs) {
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().extension() == ".toml") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto prof = load_profile(f);
      if (!prof.ok() || !seen.insert(prof->name).second) continue;
      if (prof->match_kernel != kernel) continue;
      if (prof->match_executables.empty() && prof->match_modules.empty() && !kernel) continue;
      if (profile_mismatch(prog, prof.value(), kernel).empty())
        out.push_back(std::move(prof).value());
    }
  }
  return out;
}

Result<Profile> profile_for(Program& prog, const std::string& name,
                            const std::vector<std::string>& dirs, bool kernel,
                            ProgressDisplay* show) {
  LR_ASSIGN(Profile prof, find_profile(name, dirs));
  if (std::string why = profile_mismatch(prog, prof, kernel); !why.empty())
    return make_error(Errc::kUnsupported, why);
  if (!kernel) LR_TRY(ensure_profile_types(prog, prof, show));
  return prof;
}

Result<void> load_known_objects(Program& prog, const std::string& profile,
                                const std::vector<std::string>& sets,
                                const std::vector<std::string>& dirs, KnownObjects* known,
                                ProgressDisplay* show) {
  if (profile.empty()) return {};
  LR_ASSIGN(Profile prof, profile_for(prog, profile, dirs, false, show));
  return known->add_profile(prog, prof, sets);
}

}  // namespace lr
