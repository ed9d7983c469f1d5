// GlusterFS as a program target (corelib/registry/process_target.hpp): a
// process is GlusterFS when it maps libglusterfs; its types are its
// debuginfo's, a types file's, or synthesized from the installed headers and
// cached per libglusterfs build-id; its heap blocks are named by the
// mem-pool or GF_MALLOC type that made them; correlate weighs its inodes,
// dicts and fds; snapshots add its statedump's classes and objects.
#pragma once

#include <string>

#include "corelib/registry/target.hpp"

namespace lr {

// The libglusterfs a process maps (what makes it GlusterFS); null when none.
Module* libglusterfs_module(const ModuleSet& mods);

// GlusterFS's types for `prog`: real debuginfo, else `types_file`, else the
// synthesized cache (built on first use, which the note says).
Result<TypesSource> ensure_gluster_types(Program& prog, const std::string& types_file);

// Everything the GlusterFS target registers: the program, and its
// statedump as a text dump snapshots read.
TargetSpec glusterfs_target();

}  // namespace lr
