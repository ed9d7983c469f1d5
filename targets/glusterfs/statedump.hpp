// GlusterFS statedumps as snapshots (corelib/analyses/diff.hpp): GlusterFS's
// own text, and what a GlusterFS core has beyond it.
#pragma once

#include <string>
#include <string_view>

#include "corelib/analyses/diff.hpp"
#include "corelib/base/result.hpp"

namespace lr {

// A GlusterFS statedump (statedump.c's text, 10.x): its [mempool] entries,
// "- usage-type T memusage" sections and inode tables with their inodes.
// kBadFormat (naming `source` and the line) when `text` is not one.
Result<Snapshot> snapshot_from_statedump(std::string_view text, const std::string& source);
// Whether `head` (a file's first bytes) starts like a statedump.
bool looks_like_statedump(std::string_view head);

struct GlusterReport;
struct GlusterSections;
// `r` in the section format of GlusterFS's own statedump (`core`'s mtime as
// the dump time).
std::string gluster_statedump_text(const GlusterReport& r, const GlusterSections& sec,
                                   const std::string& core);
// Adds what a GlusterFS core has beyond its statedump rendering: dicts and
// fds, known by address (an address is their identity between two cores
// of one process; a freed and reused one shows as dropped or climbed).
void add_gluster_objects(Snapshot& s, const GlusterReport& r);

}  // namespace lr
