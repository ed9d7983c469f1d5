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
// `r` in the section format of GlusterFS's own statedump (`core`'s mtime as
// the dump time); write_statedump writes it to stdout.
std::string statedump_text(const lr::GlusterReport& r, const lr::GlusterSections& sec,
                           const std::string& core);
void write_statedump(const lr::GlusterReport& r, const lr::GlusterSections& sec,
                     const std::string& core);

}  // namespace lrcli
