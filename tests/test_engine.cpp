// The engine's answers without the CLI: the registry (which target knows a
// program, a file, a dump), leak states and the account's classification on
// a fixture core against the fixture's own manifest, correlate's object
// sources, profile matching and snapshot assembly. Each calls corelib
// directly, as a program built on the engine would.
#include <catch2/catch.hpp>
#include <set>

#include "corelib/answers/block_keys.hpp"
#include "corelib/answers/core_index.hpp"
#include "corelib/answers/leak_states.hpp"
#include "corelib/answers/profile_match.hpp"
#include "corelib/answers/snapshots.hpp"
#include "corelib/answers/trace_objects.hpp"
#include "corelib/debuginfo/open_core.hpp"
#include "corelib/registry/target.hpp"
#include "harness.hpp"

using nlohmann::json;

namespace {

// Memory nothing can read: programs made only of their modules.
struct NoMemory final : lr::Memory {
  const uint8_t* span(uint64_t, size_t) const override { return nullptr; }
  lr::Result<void> read(uint64_t, void*, size_t) const override {
    return lr::make_error(lr::Errc::kFault, "no memory");
  }
};

// A program whose only memory is its module list: the files a process maps
// (paths that exist nowhere: only their names count).
std::unique_ptr<lr::Program> program_of(const std::vector<std::string>& paths) {
  static NoMemory none;
  auto mods = lr::ModuleSet::empty({});
  uint64_t at = 0x400000;
  for (const auto& p : paths) {
    mods->add(p, p, at, at + 0x1000, 0, "", p == paths.front());
    at += 0x10000;
  }
  return std::make_unique<lr::Program>(&none, std::move(mods));
}

const lrtest::FixtureCore& leaks_fixture() {
  return lrtest::fixture_core("engine-leaks", lrtest::fixture_path("fx_leaks"));
}

std::unique_ptr<lr::Program> open_core(const std::string& path) {
  auto p = lr::open_process_core(path, {});
  REQUIRE(p.ok());
  return std::move(p).value();
}

std::set<uint64_t> addresses(const json& m, std::initializer_list<const char*> kinds) {
  std::set<uint64_t> out;
  for (const auto& s : lrtest::manifest_items(m, kinds)) out.insert(std::stoull(s, nullptr, 16));
  return out;
}

}  // namespace

TEST_CASE("registry: one program target per program, asked by module and by file",
          "[unit][engine]") {
  // The targets registered once, in order; allocators tried in that order.
  auto names = lr::target_names();
  REQUIRE(names.size() >= 6);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 3) ==
        std::vector<std::string>{"jemalloc", "tcmalloc", "glibc"});
  const size_t n = names.size();
  lr::TargetSpec again;
  again.name = "glibc";
  lr::register_target(again);
  CHECK(lr::target_names().size() == n);

  auto gf = program_of(
      {"/nonexistent/glusterfs", "/nonexistent/libglusterfs.so.0.0.1", "/nonexistent/libc.so.6"});
  auto targets = lr::process_targets_of(gf->modules());
  REQUIRE(targets.size() == 1);
  CHECK(targets[0]->name() == "GlusterFS");
  CHECK(targets[0]->key() == "gluster");
  CHECK(lr::process_targets_of(program_of({"/nonexistent/fx", "/nonexistent/libc.so.6"})->modules())
            .empty());
  // A file a live process maps, as /proc/PID/maps writes it.
  CHECK(lr::process_target_of_file("/usr/lib/libglusterfs.so.0.0.1 (deleted)") == targets[0]);
  CHECK(lr::process_target_of_file("libglusterfs.so.0") == targets[0]);
  CHECK(lr::process_target_of_file("/usr/lib/libglusterfs-extra/libc.so.6") == nullptr);
  CHECK(lr::program_object_kinds() == std::vector<std::string>{"dict", "inode", "fd"});
  REQUIRE(lr::kernel_dumps() != nullptr);
}

TEST_CASE("object sources: a walk when asked, else the program's target, else the heap",
          "[unit][engine]") {
  auto gf = program_of({"/nonexistent/glusterfs", "/nonexistent/libglusterfs.so.0"});
  auto plain = program_of({"/nonexistent/fx", "/nonexistent/libc.so.6"});
  CHECK(lr::trace_object_source(*gf, true).kind == lr::TraceObjectSource::kWalk);
  auto s = lr::trace_object_source(*gf, false);
  CHECK(s.kind == lr::TraceObjectSource::kProgram);
  REQUIRE(s.target != nullptr);
  CHECK(s.target->name() == "GlusterFS");
  CHECK(lr::trace_object_source(*plain, false).kind == lr::TraceObjectSource::kHeap);
  CHECK(lr::trace_object_source(*plain, true).kind == lr::TraceObjectSource::kWalk);
}

TEST_CASE("profile matching: a program's installed profiles, and the ones named",
          "[unit][engine]") {
  const std::vector<std::string> dirs = {lrtest::build_dir() + "/profiles"};
  std::vector<std::string> why;
  auto gf = program_of({"/nonexistent/glusterfsd", "/nonexistent/libglusterfs.so.0"});
  auto picked = lr::pick_profiles(*gf, false, {}, dirs, &why);
  std::set<std::string> names;
  for (const auto& p : picked) names.insert(p.name);
  CHECK(names == std::set<std::string>{"glusterfs"});
  CHECK(why.empty());
  // A profile of another program, named, is not run, and says why.
  auto plain = program_of({"/nonexistent/fx", "/nonexistent/libc.so.6"});
  CHECK(lr::pick_profiles(*plain, false, {}, dirs, &why).empty());
  CHECK(lr::pick_profiles(*plain, false, {"glusterfs"}, dirs, &why).empty());
  REQUIRE(why.size() == 1);
  CHECK(why[0].rfind("glusterfs: not run: ", 0) == 0);
  // Kernel profiles only for kernels.
  for (const auto& p : lr::pick_profiles(*plain, true, {}, dirs, &why)) CHECK(p.match_kernel);
}

TEST_CASE("leak states: exactly the fixture's leaked and unreferenced blocks, typed",
          "[engine][refs]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& fx = leaks_fixture();
  auto prog = open_core(fx.core);
  auto core = lr::index_program(std::move(prog), false);
  REQUIRE(core.ok());
  CHECK(core->tags.empty());  // no program target knows fx_leaks
  lr::KnownObjects none;
  lr::RefNamer names(core.value(), none);
  const lr::LeakStates ls = lr::find_leaks(core.value(), names);
  const auto& chunks = core->ci.heap->in_use;
  REQUIRE(ls.state.size() == chunks.size());
  std::set<uint64_t> leaked, unref;
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < chunks.size(); ++i) {
    index[chunks[i].user] = i;
    if (!(ls.state[i] & lr::kLeaked)) continue;
    leaked.insert(chunks[i].user);
    if (!(ls.state[i] & lr::kRefd)) unref.insert(chunks[i].user);
  }
  CHECK(leaked ==
        addresses(fx.manifest, {"leaked", "dead-slot", "cycle", "leaked-widget", "leaked-part"}));
  CHECK(unref == addresses(fx.manifest, {"leaked", "dead-slot", "leaked-widget"}));
  CHECK(ls.pool_free == 0);
  // Typed by vtable, then through the typed pointers among leaked blocks.
  const uint64_t w = *addresses(fx.manifest, {"leaked-widget"}).begin();
  const lr::BlockType* wt = names.types().get(index[w]);
  REQUIRE(wt != nullptr);
  CHECK(wt->name == "Widget");
  CHECK(wt->via == "vtable");
  CHECK(!wt->through_pointer);
  for (const auto& i : fx.manifest["items"])
    if (i["kind"] == "leaked-part") {
      const lr::BlockType* t =
          names.types().get(index[std::stoull(i["ptr"].get<std::string>(), nullptr, 16)]);
      REQUIRE(t != nullptr);
      CHECK(t->name == "struct part");
      CHECK(t->through_pointer);
      CHECK(t->via == i["why"].get<std::string>());
    }
  // The account's classes follow the states, block for block.
  const auto classes = lr::chunk_classes(core.value(), ls);
  for (size_t i = 0; i < chunks.size(); ++i)
    CHECK((classes[i] == lr::ChunkClass::kLeaked) == leaked.count(chunks[i].user) > 0);
}

TEST_CASE("account classification: by type, module and profile set", "[engine][account]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& fx = leaks_fixture();
  auto core = lr::index_program(open_core(fx.core), true);
  REQUIRE(core.ok());
  lr::KnownObjects known;
  auto prof = lr::load_profile(std::string(LR_SOURCE_DIR) + "/tests/profiles/fx_leaks.toml");
  REQUIRE(prof.ok());
  REQUIRE(known.add_profile(*core->prog, prof.value(), {}).ok());
  REQUIRE(known.size() > 0);
  lr::RefNamer names(core.value(), known);
  lr::find_leaks(core.value(), names);
  lr::BlockKeys by_type(core.value(), names, known, lr::BlockKeyBy::kType);
  lr::BlockKeys by_module(core.value(), names, known, lr::BlockKeyBy::kModule);
  lr::BlockKeys by_set(core.value(), names, known, lr::BlockKeyBy::kSet);
  const auto& chunks = core->ci.heap->in_use;
  const uint64_t w = *addresses(fx.manifest, {"leaked-widget"}).begin();
  const std::set<uint64_t> objects = addresses(fx.manifest, {"object"});
  REQUIRE(!objects.empty());
  size_t widgets = 0, objs = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const uint64_t a = chunks[i].user;
    if (a == w) {
      ++widgets;
      CHECK(by_type(i) == "Widget");
      CHECK(by_module(i) == "fx_leaks");
      CHECK(by_set(i) == "(in no set)");
    }
    if (objects.count(a)) {
      ++objs;
      CHECK(by_type(i) == "struct obj");
      CHECK(by_set(i) == "objs");
    }
  }
  CHECK(widgets == 1);
  CHECK(objs == objects.size());
}

TEST_CASE("snapshots: a core's classes by the engine, text inputs told apart", "[engine][diff]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  const auto& fx = leaks_fixture();
  auto in = lr::snapshot_input(fx.core);
  REQUIRE(in.ok());
  CHECK(in->kind == lr::SnapshotInput::kCore);
  lr::SnapshotRequest r;
  r.path = fx.core;
  r.open_core = [](const std::string& p) { return lr::open_process_core(p, {}); };
  lr::SnapshotExtras x;
  auto s = lr::load_snapshot(r, &x);
  REQUIRE(s.ok());
  CHECK(s->kind == "core");
  CHECK(x.prog != nullptr);
  CHECK(x.programs.empty());
  std::map<std::string, int64_t> account;
  for (const auto& c : s->classes)
    if (c.kind == "account") account[c.name] = c.bytes;
  // The account's leaked bytes are the fixture's leaked blocks' usable bytes.
  REQUIRE(account.count("leaked"));
  CHECK(account["leaked"] > 0);
  CHECK(s->unknown_kinds.empty());
  // A saved snapshot is text, read back as it was written.
  const std::string saved = lrtest::tmp_dir() + "/engine-snapshot.json";
  lrtest::write_file(saved, lr::snapshot_json(s.value()).dump());
  auto sin = lr::snapshot_input(saved);
  REQUIRE(sin.ok());
  CHECK(sin->kind == lr::SnapshotInput::kSaved);
  r.path = saved;
  auto back = lr::load_snapshot(r);
  REQUIRE(back.ok());
  CHECK(back->classes.size() == s->classes.size());
}
