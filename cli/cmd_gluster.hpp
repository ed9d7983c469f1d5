// What `leakref gluster` offers correlate: GlusterFS types for a core, and
// the statedump-format writer (gluster_statedump.cpp).
#pragma once

#include <string>

#include "common.hpp"

namespace lr {
struct GlusterReport;
struct GlusterSections;
}  // namespace lr

namespace lrcli {

// GlusterFS types for `prog`: real debuginfo, else `types_file`, else the
// synthesized cache (built on first use). Returns where they came from.
lr::Result<std::string> ensure_gluster_types(lr::Program& prog, const std::string& types_file);
// Writes `r` to stdout in the section format of GlusterFS's own statedump.
void write_statedump(const lr::GlusterReport& r, const lr::GlusterSections& sec,
                     const std::string& core);

}  // namespace lrcli
