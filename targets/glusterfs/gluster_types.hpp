// DWARF types for GlusterFS 10.x without debuginfo: compile the installed
// libglusterfs-dev headers with the defines Debian's build used, into a
// small shared object whose only content is debug info. Cached by the
// build-id of the libglusterfs the core maps.
#pragma once

#include <string>
#include <vector>

#include "corelib/base/result.hpp"

namespace lr {

struct GlusterTypesBuild {
  std::string compiler = "gcc";
  std::string include_root = "/usr/include";  // where glusterfs/, tirpc/ live
  std::vector<std::string> omit_defines;      // for experiments: drop these -D names
};

// The defines (config.h/GF_CPPDEFINES subset the headers read). A missing
// HAVE_ATOMIC_BUILTINS silently changes every gf_atomic_t.
const std::vector<std::string>& gluster_type_defines();

// Writes the types object to `out_path` (atomically: temp file + rename).
// kNotFound when the headers or compiler are missing, kIo on other failures;
// the message carries the compiler's first error lines. `command` receives
// the command line used.
Result<void> build_gluster_types(const std::string& out_path, const GlusterTypesBuild& opts,
                                 std::string* command);

// $XDG_CACHE_HOME/leakref (or ~/.cache/leakref)/gluster-types-<build_id>.so;
// "" when no cache directory can be named.
std::string gluster_types_cache_path(const std::string& libglusterfs_build_id);

}  // namespace lr
