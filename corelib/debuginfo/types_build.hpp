// Types for a program without debuginfo: C headers compiled, with the
// defines its build used, into a small shared object whose DWARF leakref
// reads like any debuginfo (--types FILE). The file records the build-id of
// the executable it was made for, so it is never used with another build.
#pragma once

#include <string>
#include <vector>

#include "corelib/base/result.hpp"

namespace lr {

struct TypesBuild {
  std::string compiler = "cc";
  std::string source;  // the translation unit; "" = one #include per header
  std::vector<std::string> headers, include_dirs, defines;  // defines: NAME or NAME=VALUE
  std::string target_build_id;  // stamped into the file ("" = for no particular build)
  // Keep the headers' extern variable declarations in the DWARF, so a global
  // of the program gets its type (an array's length, a pointer) from them.
  bool declare_variables = true;
};

// Compiles `o` into `out_path` (written whole or not at all). `command`, when
// not null, receives the compiler command line. kNotFound: no compiler;
// kIo: the compiler failed (its first error in the message) or the file
// could not be written.
Result<void> build_types(const TypesBuild& o, const std::string& out_path, std::string* command);

// The build-id a types file was stamped with; "" when it has none (any
// DWARF file: debuginfo, an older types file).
std::string types_file_target(const std::string& path);

// $XDG_CACHE_HOME/leakref (or ~/.cache/leakref); "" when neither variable
// is set. leakref-debsrc unpacks sources under its src/.
std::string cache_dir();

// cache_dir()/PREFIX-<build_id>.so; "" when
// neither variable is set.
std::string types_cache_path(const std::string& prefix, const std::string& build_id);

}  // namespace lr
