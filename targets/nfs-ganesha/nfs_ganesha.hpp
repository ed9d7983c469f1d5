// nfs-ganesha beyond its profile (nfs-ganesha.toml): its own hash table
// (src/include/hashtable.h) as a container kind profiles and walks name
// "hashtable".
#pragma once

#include "corelib/registry/target.hpp"

namespace lr {

TargetSpec nfs_ganesha_target();

}  // namespace lr
