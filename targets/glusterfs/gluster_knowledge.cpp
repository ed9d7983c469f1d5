// The built-in glusterfs profile (glusterfs.toml beside this file, in the
// library's read-only data): the types and members the GlusterFS reports
// read, its roots, the recipe for types without debuginfo, its sets and its
// trace probes.
#include <mutex>

#include "gluster_internal.hpp"
#include "targets/glusterfs/gluster_types.hpp"

// The profile text, NUL-terminated. The assembler reads the file relative to
// the directory make runs in (the source tree's root); the Makefile makes
// this object depend on it.
asm(".pushsection .rodata.leakref_profiles,\"a\"\n"
    ".globl lr_glusterfs_toml\n"
    ".hidden lr_glusterfs_toml\n"
    "lr_glusterfs_toml:\n"
    ".incbin \"targets/glusterfs/glusterfs.toml\"\n"
    ".byte 0\n"
    ".popsection\n");
extern "C" __attribute__((visibility("hidden"))) const char lr_glusterfs_toml[];

namespace lr {

std::string_view glusterfs_profile_text() {
  return std::string_view(lr_glusterfs_toml);
}

namespace gf {

Result<const Profile*> builtin_profile() {
  static std::once_flag once;
  static Result<Profile> parsed = make_error(Errc::kBadFormat, "not parsed");
  std::call_once(once,
                 [] { parsed = parse_profile(glusterfs_profile_text(), "glusterfs (built in)"); });
  if (!parsed.ok()) return parsed.error();  // a build defect: the tests parse it
  return &parsed.value();
}

}  // namespace gf
}  // namespace lr
