// What a ref/unref trace is joined against (correlate's core side): a walk's
// or a profile set's objects, the objects of a program a target knows (each
// explained as the program itself takes references), or, in any other
// program, only the heap (an allocation trace's blocks checked against it).
#pragma once

#include <string>
#include <vector>

#include "corelib/analyses/correlate.hpp"
#include "corelib/base/progress.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/profiles/profile.hpp"
#include "corelib/registry/process_target.hpp"
#include "corelib/walks/walkspec.hpp"

namespace lr {

// Where the objects come from. A walk or profile set when one is asked for;
// else the first program target that knows the process; else the heap.
struct TraceObjectSource {
  enum Kind { kWalk, kProgram, kHeap } kind = kHeap;
  ProcessTarget* target = nullptr;  // kProgram
};
TraceObjectSource trace_object_source(const Program& prog, bool walk_asked);

// The references to each target's start found in live memory (the core's
// reference index over `heap`, without the chunks in `skip`); -1 for a
// target in no heap block.
Result<std::map<uint64_t, int64_t>> scan_pointers(
    Program& prog, const HeapWalk& heap, const std::vector<std::pair<uint64_t, uint64_t>>& targets,
    const std::vector<uint64_t>& skip, std::vector<std::string>* warnings,
    ProgressDisplay* show = nullptr);

// The objects a walk reaches (its refcount required: kInvalidArgument
// otherwise), refs explained by the pointers found to each; the core's heap
// read into `heap` (`*have_heap`) when it can be.
Result<std::vector<CoreObject>> walk_objects(Program& prog, const WalkSpec& spec,
                                             const std::string& kind, HeapWalk* heap,
                                             bool* have_heap, std::vector<std::string>* warnings,
                                             ProgressDisplay* show = nullptr);

// A profile set's objects, each explained by the holders the profile
// declares (the program's own statement of what holds a reference), as
// `profile` counts them.
Result<std::vector<CoreObject>> held_objects(Program& prog, const Profile& prof,
                                             const std::string& set, const std::string& kind,
                                             std::vector<std::string>* warnings);

// A program target's objects: those it explains itself, the rest explained
// by the pointers found to them in live memory.
Result<ProgramObjects> program_objects(Program& prog, ProcessTarget& target,
                                       const std::string& types_file,
                                       ProgressDisplay* show = nullptr);

// The core's heap, to tell which never-freed blocks are still in use; false
// with a warning when it cannot be read.
bool core_heap(Program& prog, HeapWalk* heap, std::vector<std::string>* warnings,
               ProgressDisplay* show = nullptr);

// "3 pointers in live memory": an object's refs explained by `counts`.
void set_explained(CoreObject& o, const std::map<uint64_t, int64_t>& counts);

}  // namespace lr
