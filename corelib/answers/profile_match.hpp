// Which profiles fit a dump, and where a profile's types come from: a
// program target's types when the profile describes a module the target
// owns (its types are built per that module's build), else the profile's
// own [build] recipe for an executable without debuginfo, cached by its
// build-id and recipe.
#pragma once

#include <string>
#include <vector>

#include "corelib/answers/block_names.hpp"
#include "corelib/base/progress.hpp"
#include "corelib/debuginfo/types_build.hpp"
#include "corelib/profiles/profile.hpp"

namespace lr {

// The profile's [build] recipe added to `b`: relative include directories
// are relative to the profile file's own directory (headers shipped beside
// it), and "{cache}/..." is under leakref's cache.
void add_profile_recipe(const Profile& p, TypesBuild* b);

// Makes the types `p` names resolvable in `prog` (types built now are noted
// on `show`).
Result<void> ensure_profile_types(Program& prog, const Profile& p, ProgressDisplay* show);

// The profiles meant for a dump: each one of `names` (a file or an installed
// name) that fits it, or, when `names` is empty, every profile in `dirs`
// whose [match] is this dump's. What was not run, and why, in `warnings`.
std::vector<Profile> pick_profiles(Program& prog, bool kernel,
                                   const std::vector<std::string>& names,
                                   const std::vector<std::string>& dirs,
                                   std::vector<std::string>* warnings);

// The profile `name` found in `dirs`, checked against `prog` (kUnsupported
// naming why it does not fit), its types made resolvable.
Result<Profile> profile_for(Program& prog, const std::string& name,
                            const std::vector<std::string>& dirs, bool kernel,
                            ProgressDisplay* show);

// The objects of `profile`'s sets (all, or `sets`) added to `known`; nothing
// when `profile` is "".
Result<void> load_known_objects(Program& prog, const std::string& profile,
                                const std::vector<std::string>& sets,
                                const std::vector<std::string>& dirs, KnownObjects* known,
                                ProgressDisplay* show);

}  // namespace lr
