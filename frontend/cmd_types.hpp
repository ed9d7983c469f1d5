// What `leakref types build` offers the commands that run profiles.
#pragma once

#include "common.hpp"

namespace lr {
struct Profile;
}

namespace lrcli {

// For a profile with a [build] recipe on a core whose executable has no
// debuginfo and no types file yet: builds its types into the cache (saying so
// on `err`) and adds them. Nothing to do is success.
lr::Result<void> ensure_profile_types(lr::Program& prog, const lr::Profile& p, Out& err);

}  // namespace lrcli
