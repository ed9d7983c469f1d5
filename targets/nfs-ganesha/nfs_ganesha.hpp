// nfs-ganesha beyond its profile (nfs-ganesha.toml): its own hash table
// (src/include/hashtable.h) as a container kind profiles and walks name
// "hashtable".
#pragma once

namespace lr {

void register_nfs_ganesha();

}  // namespace lr
