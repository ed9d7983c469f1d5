// The one registry through which a target (a program, a kernel, an allocator)
// tells the engine what it knows. A target fills one TargetSpec and
// registers it once; the engine then asks the registry, never a target by
// name: which allocator's walk reads a heap, what a text dump is and how it
// reads as a snapshot, how a C library finds its threads, how a refcount
// type encodes its count, which containers a profile may name, which program
// a process is and what that program knows of its blocks and objects, and
// who opens kernel dumps.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "corelib/analyses/snapshot_io.hpp"
#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/debuginfo/types.hpp"
#include "corelib/registry/kernel_dumps.hpp"
#include "corelib/registry/process_target.hpp"
#include "corelib/walks/container_kinds.hpp"
#include "corelib/walks/shared_layouts.hpp"

namespace lr {

// A text dump a target reads: told by its first bytes, read as a snapshot.
struct TextDumpSpec {
  std::string name;  // "statedump"
  bool (*looks_like)(std::string_view head) = nullptr;
  TextSnapshotReader read = nullptr;
};

struct TargetSpec {
  std::string name;  // the target's folder under targets/
  // Allocators: walks tried in registration order, and what marks a heap
  // as an allocator's when no walk reads it.
  std::vector<Allocator> allocators;
  std::vector<AllocatorSignature> allocator_signatures;
  std::vector<HeapLayer> heap_layers;  // allocators layered on the system's
  std::vector<TextDumpSpec> text_dumps;
  std::vector<std::pair<std::string, ThreadPointerFinder>> thread_pointer_finders;
  std::vector<std::pair<std::string, ThreadMemoryReader>> thread_memory_readers;
  std::vector<std::pair<std::string, RefEncoding>> refcount_encodings;
  std::vector<ContainerKind> containers;
  std::vector<SharedLayout> shared_layouts;  // a C++ library's shared_ptr control blocks
  std::shared_ptr<ProcessTarget> process;    // a user-space program it knows
  std::shared_ptr<KernelDumps> kernel;       // it opens kernel dumps
};

// Registers everything `spec` holds with the engine's layers. A name
// registered twice is kept once (the first).
void register_target(TargetSpec spec);

// The registered targets' names, in registration order.
std::vector<std::string> target_names();
// Every registered program target, in registration order.
std::vector<ProcessTarget*> process_targets();
// The program targets that recognise the process whose modules are `mods`.
std::vector<ProcessTarget*> process_targets_of(const ModuleSet& mods);
// The program target owning a file a process maps (by path or base name):
// null when none does.
ProcessTarget* process_target_of_file(std::string_view path);
// Every object kind program targets give correlate, in order, once each.
std::vector<std::string> program_object_kinds();
// The kernel-dump opener; null when no target registered one.
KernelDumps* kernel_dumps();

}  // namespace lr
