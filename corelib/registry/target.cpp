// The registry (target.hpp): each contribution goes to the layer that asks
// for it (allocators to blocks, text dumps to dump and analyses, ...); the
// program and kernel-dump knowledge is kept here.
#include "corelib/registry/target.hpp"

#include <algorithm>
#include <mutex>

#include "corelib/dump/dump_kind.hpp"

namespace lr {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::string> names;
  std::vector<std::shared_ptr<ProcessTarget>> programs;
  std::shared_ptr<KernelDumps> kernel;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string_view base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The layers' own hooks: each keeps the first of a name.
void register_layers(const TargetSpec& spec) {
  for (const auto& a : spec.allocators) register_allocator(a);
  for (const auto& s : spec.allocator_signatures) register_allocator_signature(s);
  for (const auto& l : spec.heap_layers) register_heap_layer(l);
  for (const auto& t : spec.text_dumps) {
    register_text_dump(t.name, t.looks_like);
    if (t.read) register_snapshot_reader(t.name, t.read);
  }
  for (const auto& [n, f] : spec.thread_pointer_finders) register_thread_pointer_finder(n, f);
  for (const auto& [n, f] : spec.thread_memory_readers) register_thread_memory_reader(n, f);
  for (const auto& [n, e] : spec.refcount_encodings) register_refcount_encoding(n, e);
  for (const auto& c : spec.containers) register_container(c);
  for (const auto& l : spec.shared_layouts) register_shared_layout(l);
}

}  // namespace

Module* ProcessTarget::module(const ModuleSet& mods) const {
  for (const auto& m : mods.modules())
    if (owns_module(m->basename())) return m.get();
  return nullptr;
}

void register_target(TargetSpec spec) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> g(r.mu);
    if (std::find(r.names.begin(), r.names.end(), spec.name) != r.names.end()) return;
    r.names.push_back(spec.name);
    if (spec.process) r.programs.push_back(spec.process);
    if (spec.kernel && !r.kernel) r.kernel = spec.kernel;
  }
  register_layers(spec);
}

std::vector<std::string> target_names() {
  std::lock_guard<std::mutex> g(registry().mu);
  return registry().names;
}

std::vector<ProcessTarget*> process_targets() {
  std::lock_guard<std::mutex> g(registry().mu);
  std::vector<ProcessTarget*> out;
  for (const auto& p : registry().programs) out.push_back(p.get());
  return out;
}

std::vector<ProcessTarget*> process_targets_of(const ModuleSet& mods) {
  std::vector<ProcessTarget*> out;
  for (ProcessTarget* t : process_targets())
    if (t->recognizes(mods)) out.push_back(t);
  return out;
}

ProcessTarget* process_target_of_file(std::string_view path) {
  for (ProcessTarget* t : process_targets())
    if (t->owns_module(base_name(path))) return t;
  return nullptr;
}

std::vector<std::string> program_object_kinds() {
  std::vector<std::string> kinds;
  for (ProcessTarget* t : process_targets())
    for (auto& k : t->object_kinds())
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  return kinds;
}

KernelDumps* kernel_dumps() {
  std::lock_guard<std::mutex> g(registry().mu);
  return registry().kernel.get();
}

}  // namespace lr
