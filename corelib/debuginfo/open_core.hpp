// The engine's policy for opening a process core, the same for every front
// end: a kernel dump given as a process core is refused (saying what it is),
// the types files asked for are added, and without them the types built for
// exactly this executable (cached by its build-id) are found by themselves.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"
#include "corelib/debuginfo/program.hpp"

namespace lr {

// How a caller names what it passed, in the engine's messages (the engine
// names none of a front end's options itself).
struct TypesOrigin {
  std::string prefix;         // before a types file's errors: "--types "
  std::string mismatch_hint;  // after "built for build-id A, but EXE has B"
};

// How the front end in use names a types file in the engine's messages (its
// option, "--types "): set once at start-up; empty until then.
void set_types_origin(const TypesOrigin& o);
const TypesOrigin& types_origin();

struct CoreOpenOptions {
  ProgramOptions program;
  std::vector<std::string> types;  // DWARF types files for a program without debuginfo
  TypesOrigin types_origin;
  std::string kernel_dump_hint;  // after "PATH is a kernel dump (KIND), not a process core"
};

// Opens `path` as a process core. kUnsupported "PATH is a kernel dump (KIND),
// not a process core[: HINT]" for a kernel dump; each types file's errors
// name it.
Result<std::unique_ptr<Program>> open_process_core(const std::string& path,
                                                   const CoreOpenOptions& o);

// Adds a types file's DWARF to `prog`: refused when it is not readable, has
// no DWARF, or was stamped for another build of the core's executable.
Result<void> add_types_file(Program& prog, const std::string& path, const TypesOrigin& origin = {});

// The cached types for the core's executable (no DWARF of its own): the
// types file `types build` made for its build-id, else the newest one a
// profile's [build] recipe made for it. "" when there is none.
std::string cached_types_for(const Program& prog);

}  // namespace lr
