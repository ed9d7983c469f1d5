// leakref-snap and the gdb macro on a live fixture process.
#include <signal.h>
#include <sys/wait.h>

#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "harness.hpp"

using nlohmann::json;

namespace {

std::string repo_dir() {
  return LR_SOURCE_DIR;
}

// A live fixture that stays up for the test; killed by the destructor.
struct Live {
  int pid = 0;
  json manifest;
  explicit Live(const std::string& exe) {
    static int n = 0;
    std::string tag = std::to_string(++n);
    std::string m = lrtest::tmp_dir() + "/live" + tag + ".manifest.json";
    std::string ready = lrtest::tmp_dir() + "/live" + tag + ".ready";
    std::string cmd = exe + " " + m + " > " + ready + " & echo $!";
    FILE* f = popen(cmd.c_str(), "r");
    if (fscanf(f, "%d", &pid) != 1) pid = 0;
    pclose(f);
    for (int i = 0; i < 200 && lrtest::read_file(ready).find("READY") == std::string::npos; ++i)
      usleep(50000);
    manifest = json::parse(lrtest::read_file(m));
  }
  ~Live() {
    if (pid) kill(pid, SIGKILL);
  }
};

// A program linked with the installed library needs the flags it was built
// with when that is the sanitized build.
#ifdef LR_SANITIZE
const std::string kSanFlags = " -fsanitize=address,undefined";
#else
const std::string kSanFlags;
#endif

// `make install` into a scratch prefix, once per run; returns the prefix.
std::string installed() {
  static std::string prefix;
  if (!prefix.empty()) return prefix;
  std::string p = lrtest::tmp_dir() + "/prefix";
  // The build directory as the build named it: an absolute name for the
  // same files would make any object this rebuilds write its .d under that
  // name, and the usual build would then lose its header dependencies.
  std::string build = lrtest::build_dir();
  if (build.rfind(repo_dir() + "/", 0) == 0) build = build.substr(repo_dir().size() + 1);
  auto inst = lrtest::run(
      {"make", "-s", "-C", repo_dir(), "install", "PREFIX=" + p, "BUILD=" + build}, 300);
  INFO(inst.out << inst.err);
  REQUIRE(inst.status == 0);
  return prefix = p;
}

json extract_json(const std::string& out) {
  auto a = out.find("{\"");
  auto b = out.rfind("}");
  REQUIRE(a != std::string::npos);
  return json::parse(out.substr(a, b - a + 1));
}

void check_list(const json& j, const json& manifest) {
  const json& want = manifest["structures"]["list"]["objects"];
  REQUIRE(j["objects"].size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(j["objects"][i]["addr"] == want[i]["addr"]);
    CHECK(j["objects"][i]["refcount"] == want[i]["refcount"]);
  }
}

}  // namespace

TEST_CASE("leakref-snap snapshots a live process and removes the core", "[scripts]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  Live live(lrtest::fixture_path("fx_structs_pie"));
  REQUIRE(live.pid > 0);
  setenv("LEAKREF", (lrtest::build_dir() + "/leakref").c_str(), 1);
  setenv("TMPDIR", lrtest::tmp_dir().c_str(), 1);
  auto r = lrtest::run(
      {repo_dir() + "/scripts/leakref-snap", std::to_string(live.pid), "walk", "--json", "--type",
       "struct obj", "--head", "obj_list", "--list-member", "link", "--refcount", "ref"},
      120);
  INFO(r.err);
  REQUIRE(r.status == 0);
  check_list(r.json(), live.manifest);
  CHECK(kill(live.pid, 0) == 0);  // still running: it was only paused
  auto ls =
      lrtest::run({"sh", "-c", "ls " + lrtest::tmp_dir() + " | grep -c leakref-snap || true"});
  CHECK(ls.out == "0\n");
  std::string kept = lrtest::tmp_dir() + "/kept.core";
  r = lrtest::run({repo_dir() + "/scripts/leakref-snap", "--out", kept, std::to_string(live.pid)},
                  120);
  CHECK(r.status == 0);
  CHECK(r.out.find("threads:") != std::string::npos);
  CHECK(!lrtest::read_file(kept).empty());
  // Its smaps and pagemap beside it (leakref account's RESIDENT column).
  CHECK(lrtest::read_file(kept + ".smaps").find("Rss:") != std::string::npos);
  CHECK(!lrtest::read_file(kept + ".pagemap").empty());
  r = lrtest::run({repo_dir() + "/scripts/leakref-snap", "999999999"});
  CHECK(r.status != 0);
  // man leakref-snap's EXAMPLES that name this program's structures, as
  // written, on this process (the GlusterFS one runs in the gluster tests'
  // manner only with a GlusterFS process, so it is not run here).
  int examples = 0;
  for (std::string ex : lrtest::man_examples("leakref-snap.1")) {
    if (ex.find("struct obj") == std::string::npos) continue;
    ++examples;
    size_t pid_at = ex.find_first_of("0123456789");
    ex.replace(pid_at, ex.find(' ', pid_at) - pid_at, std::to_string(live.pid));
    auto e = lrtest::run({"sh", "-c", "PATH='" + repo_dir() + "/scripts':$PATH " + ex}, 120);
    INFO(ex << "\n" << e.err);
    CHECK(e.status == 0);
    size_t n = live.manifest["structures"]
                            [ex.find("obj_hash") != std::string::npos ? "hash" : "list"]["objects"]
                                .size();
    CHECK(e.out.find(fmt::format(": {} visited", n)) != std::string::npos);
  }
  CHECK(examples == 2);
  // --help is the usage text, not the script's first lines of code.
  r = lrtest::run({repo_dir() + "/scripts/leakref-snap", "--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("leakref-snap [--keep]") != std::string::npos);
  CHECK(r.out.find("set -u") == std::string::npos);
  // Stopped while it analyses (a leakref that hangs): the core goes with it.
  std::string slow = lrtest::tmp_dir() + "/slow-leakref";
  lrtest::write_file(slow, "#!/bin/sh\nsleep 60\n");
  chmod(slow.c_str(), 0755);
  setenv("LEAKREF", slow.c_str(), 1);
  auto bg = lrtest::spawn({repo_dir() + "/scripts/leakref-snap", std::to_string(live.pid)});
  bool started = false;
  for (int i = 0; i < 200 && !started; ++i) {
    usleep(50000);
    auto p = lrtest::run({"pgrep", "-f", slow});
    started = p.status == 0;
  }
  REQUIRE(started);
  CHECK(lrtest::finish(bg, SIGTERM, 20) == 143);
  ls = lrtest::run({"sh", "-c", "ls " + lrtest::tmp_dir() + " | grep -c leakref-snap || true"});
  CHECK(ls.out == "0\n");
  setenv("LEAKREF", (lrtest::build_dir() + "/leakref").c_str(), 1);
}

TEST_CASE("the gdb macro snapshots the inferior and runs leakref", "[scripts]") {
  if (!lrtest::have_gcore()) LR_SKIP("gdb is not installed");
  // Two sessions at once, each on its own process, with the same snapshot
  // directory: each gets its own snapshot (a fixed path clashed), and 22
  // arguments reach leakref (past 15 the macro printed nothing).
  Live a(lrtest::fixture_path("fx_structs")), b(lrtest::fixture_path("fx_structs"));
  REQUIRE(a.pid > 0);
  REQUIRE(b.pid > 0);
  std::string snapdir = lrtest::tmp_dir() + "/gdbsnaps";
  mkdir(snapdir.c_str(), 0755);
  std::string path = lrtest::build_dir() + ":" + std::getenv("PATH");
  auto gdb = [&](int pid, const std::string& cmd) {
    return lrtest::spawn({"env", "PATH=" + path, "LEAKREF_GDB_DIR=" + snapdir, "gdb", "-nx",
                          "-batch", "-p", std::to_string(pid), "-x",
                          repo_dir() + "/scripts/leakref.gdb", "-ex", cmd});
  };
  const std::string walk =
      "leakref walk --json --type \"struct obj\" --head obj_list --list-member link --refcount ref "
      "--show name,state,flags --where \"refcount >= 1\" --limit 1000 --fail-on cycle,corrupt";
  // A slot left by a gdb that is gone (its pid: a process that has exited)
  // is taken back, and removed with the others.
  auto gone = lrtest::spawn({"true"});
  const int gone_pid = gone.pid;
  lrtest::finish(gone, 0, 10);
  const std::string stale = "/tmp/leakref-gdb.1";
  lrtest::run({"sh", "-c",
               "rm -rf " + stale + " && mkdir " + stale + " && echo " + std::to_string(gone_pid) +
                   " > " + stale + "/owner"});
  auto ga = gdb(a.pid, walk), gb = gdb(b.pid, walk);
  const int sa = lrtest::finish(ga, 0, 120), sb = lrtest::finish(gb, 0, 120);
  INFO(lrtest::read_file(ga.out_path)
       << lrtest::read_file(ga.err_path) << lrtest::read_file(gb.out_path)
       << lrtest::read_file(gb.err_path));
  REQUIRE(sa == 0);
  REQUIRE(sb == 0);
  for (auto* p : {&ga, &gb}) {
    std::string out = lrtest::read_file(p->out_path);
    INFO(out << lrtest::read_file(p->err_path));
    json j = extract_json(out);
    check_list(j, (p == &ga ? a : b).manifest);
    CHECK(j["objects"][0]["fields"].contains("flags"));
    CHECK(j["where"] == "refcount >= 1");
  }
  auto left = lrtest::run({"sh", "-c", "ls -A " + snapdir + " /tmp | grep -c leakref-gdb || true"});
  CHECK(left.out == "0\n");  // snapshots and their links are removed

  // Installed, the macro runs the installed leakref with no leakref on PATH.
  std::string prefix = installed();
  auto r = lrtest::run({"env", "PATH=/usr/bin:/bin", "gdb", "-nx", "-batch", "-p",
                        std::to_string(a.pid), "-x", prefix + "/share/leakref/leakref.gdb", "-ex",
                        "leakref walk --json --type \"struct obj\" --head obj_list "
                        "--list-member link --refcount ref"},
                       120);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  check_list(extract_json(r.out), a.manifest);

  // man leakref-gdb's EXAMPLES, as written, through the installed macro.
  int examples = 0;
  for (const auto& ex : lrtest::man_examples("leakref-gdb.7")) {
    if (ex.rfind("(gdb) ", 0) != 0) continue;
    ++examples;
    auto e = lrtest::run(
        {"env", "PATH=/usr/bin:/bin", "gdb", "-nx", "-batch", "-p", std::to_string(a.pid), "-x",
         prefix + "/share/leakref/leakref.gdb", "-ex", ex.substr(6)},
        120);
    INFO(ex << "\n" << e.out << e.err);
    CHECK(e.status == 0);
    CHECK(e.out.find("leakref: error") == std::string::npos);
    if (ex.find(" walk ") != std::string::npos)
      CHECK(e.out.find(
                fmt::format(": {} visited", a.manifest["structures"]["list"]["objects"].size())) !=
            std::string::npos);
    else
      CHECK(e.out.find("main_arena 0x") != std::string::npos);
  }
  CHECK(examples == 2);
}

// The JSON Schemas ship with the program, one per leakref.* schema the CLI
// emits (each output the suite sees is checked against them at the end of
// the run, tests/main.cpp).
TEST_CASE("make install: the JSON schemas", "[scripts][install]") {
  std::string prefix = installed();
  auto ls = lrtest::run({"sh", "-c", "cd '" + prefix + "/share/leakref/schemas' && ls"});
  REQUIRE(ls.status == 0);
  auto src = lrtest::run({"sh", "-c", "cd '" + repo_dir() + "/schemas' && ls"});
  CHECK(ls.out == src.out);
  std::set<std::string> emitted;  // every "leakref.X/N" the front ends write
  auto g =
      lrtest::run({"sh", "-c",
                   "cd '" + repo_dir() +
                       "' && grep -rhoE '\"leakref\\.[a-z.-]+/[0-9]+\"' frontend cli extension"});
  std::istringstream in(g.out);
  for (std::string w; in >> w;) {
    std::string name = w.substr(1, w.size() - 2);
    emitted.insert(name.replace(name.find('/'), 1, "-") + ".schema.json");
  }
  CHECK(emitted.size() >= 14);
  for (const auto& f : emitted) {
    INFO(f);
    CHECK(ls.out.find(f + "\n") != std::string::npos);
    json sch = json::parse(lrtest::read_file(prefix + "/share/leakref/schemas/" + f));
    CHECK(sch["$schema"] == "https://json-schema.org/draft/2020-12/schema");
  }
}

// make install gives a library users can build on: libleakref.a, its
// headers and leakref.pc; a program compiled against them from pkg-config
// alone walks a real core.
TEST_CASE("make install: the engine as a library through pkg-config", "[scripts][install]") {
  if (!lrtest::have_gcore()) LR_SKIP("gcore (gdb) is not installed");
  std::string prefix = installed();
  std::string src = lrtest::tmp_dir() + "/use_lib.cpp";
  lrtest::write_file(src, R"(#include <cstdio>
#include "corelib/walks/walkspec.hpp"
int main(int argc, char** argv) {
  auto prog = lr::Program::open_core(argv[1], {});
  if (!prog.ok()) return 3;
  lr::WalkSpec s;
  s.type = "struct obj";
  s.head = "obj_list";
  s.link = lr::WalkSpec::Link::kList;
  s.member = "link";
  s.refcount = "ref";
  auto r = lr::run_walk(**prog, s);
  if (!r.ok()) return 4;
  std::printf("%llu\n", static_cast<unsigned long long>(r->visited));
  return argc == 2 ? 0 : 1;
})");
  std::string exe = lrtest::tmp_dir() + "/use_lib";
  auto cc = lrtest::run(
      {"sh", "-c",
       "export PKG_CONFIG_PATH=" + prefix + "/lib/pkgconfig; g++ " + src + " -o " + exe +
           " $(pkg-config --cflags leakref) $(pkg-config --static --libs leakref)" + kSanFlags},
      300);
  INFO(cc.out << cc.err);
  REQUIRE(cc.status == 0);
  const auto& fc = lrtest::fixture_core("structs", lrtest::fixture_path("fx_structs"));
  auto r = lrtest::run({exe, fc.core});
  CHECK(r.status == 0);
  CHECK(r.out == std::to_string(fc.manifest["structures"]["list"]["objects"].size()) + "\n");
}

// A header change rebuilds everything that includes it, the crash
// extension and make bench's helper included (leakref.so went stale).
TEST_CASE("make: header dependencies reach leakref.so and the bench helper", "[scripts]") {
  // The build directory as the build named it (the .d files name objects so).
  std::string build = lrtest::build_dir();
  if (build.rfind(repo_dir() + "/", 0) == 0) build = build.substr(repo_dir().size() + 1);
  auto what_if = [&](const std::string& header, const std::string& target) {
    return lrtest::run({"make", "-n", "-C", repo_dir(), "-W", header, "BUILD=" + build,
                        build + "/" + target},
                       120)
        .out;
  };
  std::string ext = what_if("extension/leakref_host.h", "leakref.so");
  CHECK(ext.find("leakref_crash.c") != std::string::npos);
  CHECK(ext.find("crash_glue.cpp") != std::string::npos);
  CHECK(what_if("frontend/process/walk_render.hpp", "leakref.so")
            .find("-o " + build + "/leakref.so") != std::string::npos);
  // Both front ends link the one front-end library built from frontend/,
  // over the targets and the engine's layers, top layer first.
  const std::string lib = build + "/lib/libleakref-";
  std::string layers = lib + "targets.a";
  for (const char* t : {"glibc", "jemalloc", "tcmalloc", "linux", "glusterfs", "nfs-ganesha",
                        "libstdcxx", "libcxx", "cpython"})
    layers += " " + lib + "target-" + t + ".a";
  // The engine's layers top first, as corelib/LAYERS lists them bottom up.
  std::vector<std::string> order;
  std::istringstream ls(lrtest::read_file(repo_dir() + "/corelib/LAYERS"));
  for (std::string line; std::getline(ls, line);)
    if (!line.empty() && line[0] != '#') order.insert(order.begin(), line);
  CHECK(order.size() >= 10);
  for (const auto& l : order) layers += " " + lib + l + ".a";
  for (const char* target : {"leakref.so", "leakref"}) {
    INFO(target);
    std::string plan = what_if("frontend/base/options.hpp", target);
    CHECK(plan.find("ar rcs " + lib + "frontend.a") != std::string::npos);
    CHECK(plan.find(lib + "frontend.a " + layers) != std::string::npos);
  }
  if (access((lrtest::build_dir() + "/bench/walk_repeat.o").c_str(), F_OK) == 0)
    CHECK(what_if("corelib/walks/walkspec.hpp", "walk_repeat").find("walk_repeat.cpp") !=
          std::string::npos);
}

namespace {

// The long options a --help text lists ("--name" at the start of an entry).
std::set<std::string> help_options(const std::string& help) {
  std::set<std::string> o;
  std::regex opt(R"((?:^|\n)\s+(?:-\w,)?(--[a-z][a-z-]*))");
  for (auto it = std::sregex_iterator(help.begin(), help.end(), opt); it != std::sregex_iterator();
       ++it)
    o.insert((*it)[1]);
  return o;
}

// A man page's text as man renders it (its warnings, if any, in `warnings`).
std::string render_man(const std::string& page, std::string* warnings) {
  // Wide enough that no option is hyphenated across a line break.
  auto r =
      lrtest::run({"env", "MANWIDTH=2000", "man", "--warnings", "-E", "UTF-8", "-l", page}, 60);
  *warnings = r.err;
  return r.out;
}

}  // namespace

// Issue 16: "one header and one registration function per command instead of
// frontend/common.hpp holding every command's arguments"; issue 46: the front
// end grouped by family, what every command shares in frontend/base/ (options,
// errors, output, rendering), each command's arguments in its own
// frontend/FAMILY/cmd_NAME file.
TEST_CASE("front ends: each command's arguments live beside it, in its family's folder",
          "[scripts]") {
  namespace fs = std::filesystem;
  std::smatch m;
  for (const char* shared : {"options", "errors", "out", "render"}) {
    std::string h = lrtest::read_file(repo_dir() + "/frontend/base/" + shared + ".hpp");
    CHECK_FALSE(std::regex_search(h, m, std::regex(R"(struct \w*Args\b)")));
    CHECK_FALSE(std::regex_search(h, m, std::regex(R"(\bint cmd_\w+\()")));
  }
  CHECK_FALSE(fs::exists(repo_dir() + "/frontend/common.hpp"));
  std::regex reg(R"(\nCommand (register_\w+)\()");
  std::string commands = lrtest::read_file(repo_dir() + "/frontend/base/commands.hpp");
  std::set<std::string> registered;
  for (auto it = std::sregex_iterator(commands.begin(), commands.end(), reg);
       it != std::sregex_iterator(); ++it)
    registered.insert((*it)[1]);
  CHECK(registered.size() >= 12);
  // Each registration function is defined in exactly one frontend/ file, and an
  // argument struct is defined once, in the command's .cpp or its header.
  std::map<std::string, int> defined, args_defined;
  for (const auto& e : fs::recursive_directory_iterator(repo_dir() + "/frontend")) {
    if (!e.is_regular_file()) continue;
    std::string text = lrtest::read_file(e.path().string());
    for (const auto& r : registered)
      if (text.find("\nCommand " + r + "(") != std::string::npos && e.path().extension() == ".cpp")
        defined[r]++;
    std::regex a(R"(\nstruct (\w+Args) \{)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), a); it != std::sregex_iterator();
         ++it) {
      INFO(e.path().string());
      CHECK(e.path().filename().string().rfind("cmd_", 0) == 0);
      args_defined[(*it)[1]]++;
    }
  }
  for (const auto& r : registered) {
    INFO(r);
    CHECK(defined[r] == 1);
  }
  for (const auto& [name, n] : args_defined) {
    INFO(name);
    CHECK(n == 1);
  }
  CHECK(args_defined.count("WalkArgs") == 1);
  CHECK(args_defined.count("ProfileArgs") == 1);
}

// CI runs what the README tells a new user to run: its test command is a
// line of .ci/run, executed before anything else there.
TEST_CASE("CI runs the README's test command", "[scripts]") {
  std::string readme = lrtest::read_file(repo_dir() + "/README.md");
  std::smatch m;
  REQUIRE(std::regex_search(readme, m,
                            std::regex(R"(\n(make [^#\n]*[^ #\n]) +# [^\n]*runs every test)")));
  std::string cmd = m[1];
  std::string ci = lrtest::read_file(repo_dir() + "/.ci/run");
  size_t at = ci.find("\n" + cmd + "\n");
  INFO("README's test command: " << cmd);
  REQUIRE(at != std::string::npos);
  CHECK(ci.find("\nmake ") == at);  // the first make command CI runs
}

TEST_CASE("man pages: one per front end, complete against --help", "[scripts][man]") {
  if (!lrtest::have_program("man")) LR_SKIP("man is not installed (make test installs man-db)");
  std::string dir = repo_dir() + "/man";
  std::map<std::string, std::string> text;
  for (const char* p : {"leakref.1", "leakref-snap.1", "leakref-trace.1", "leakref-debsrc.1",
                        "leakref-crash.7", "leakref-gdb.7"}) {
    std::string w;
    text[p] = render_man(dir + "/" + p, &w);
    INFO(p << ": " << w);
    CHECK(w.empty());
    CHECK(text[p].size() > 500);
  }
  // Every subcommand's options, the kernel's and types' nested ones too.
  std::vector<std::vector<std::string>> subs = {{"info"},
                                                {"walk"},
                                                {"show"},
                                                {"sym"},
                                                {"heap"},
                                                {"gluster"},
                                                {"profile"},
                                                {"correlate"},
                                                {"trace-plan"},
                                                {"trace-info"},
                                                {"types", "gluster"},
                                                {"types", "build"},
                                                {"kernel"},
                                                {"kernel", "walk"},
                                                {"kernel", "inodes"},
                                                {"kernel", "modules"},
                                                {"kernel", "check"},
                                                {"kernel", "profile"},
                                                {"kernel", "slab"},
                                                {"kernel", "leaks"},
                                                {"kernel", "refs"},
                                                {"kernel", "retained"},
                                                {"refs"},
                                                {"leaks"},
                                                {"account"},
                                                {"retained"},
                                                {"suspects"},
                                                {"shared"},
                                                {"python"},
                                                {"diff"},
                                                {"snapshot"},
                                                {"trend"},
                                                {"batch", "run"},
                                                {"batch", "one"},
                                                {"batch", "worker"},
                                                {"batch", "report"},
                                                {"batch", "query"}};
  // Every subcommand --help lists is among them.
  std::string top = lrtest::leakref({"--help"}).out;
  std::regex sub_line(R"(\n  ([a-z][a-z-]*) {2,})");
  for (auto it = std::sregex_iterator(top.begin(), top.end(), sub_line);
       it != std::sregex_iterator(); ++it) {
    INFO("subcommand " << (*it)[1] << " is not checked against leakref.1");
    std::string name = (*it)[1];
    CHECK(std::any_of(subs.begin(), subs.end(), [&](const auto& s) { return s[0] == name; }));
  }
  std::set<std::string> missing;
  for (const auto& s : subs) {
    std::vector<std::string> args = {"help"};
    args.insert(args.end(), s.begin(), s.end());
    auto h = lrtest::leakref(args);
    REQUIRE(h.status == 0);
    auto opts = help_options(h.out);
    CHECK(opts.size() > 0);
    for (const auto& o : opts)
      if (o != "--help" && text["leakref.1"].find(o) == std::string::npos)
        missing.insert(s.back() + " " + o);
    if (s.size() == 1 && s[0] != "kernel") CHECK(text["leakref.1"].find(s[0]) != std::string::npos);
  }
  INFO("options missing from leakref.1: " << json(missing).dump());
  CHECK(missing.empty());
  for (const char* script : {"leakref-snap", "leakref-trace", "leakref-debsrc"}) {
    auto h = lrtest::run({repo_dir() + "/scripts/" + script, "--help"});
    CHECK(h.status == 0);
    std::regex opt(R"(--[a-z][a-z-]*)");
    for (auto it = std::sregex_iterator(h.out.begin(), h.out.end(), opt);
         it != std::sregex_iterator(); ++it) {
      std::string o = (*it)[0];
      INFO(script << " " << o);
      CHECK(text[std::string(script) + ".1"].find(o) != std::string::npos);
    }
  }
}

// zsh completion: compinit picks the file up for leakref, and its function
// offers what the typed words allow (compadd and _files stand in for the
// line editor, printing what they are given).
TEST_CASE("zsh completion completes subcommands and each one's options", "[scripts]") {
  if (std::system("command -v zsh >/dev/null 2>&1") != 0) LR_SKIP("zsh is not installed");
  std::string dir = lrtest::tmp_dir() + "/zfunc";
  mkdir(dir.c_str(), 0755);
  lrtest::write_file(dir + "/_leakref", lrtest::read_file(repo_dir() + "/scripts/_leakref"));
  auto reg = lrtest::run({"zsh", "-fc",
                          "fpath=(" + dir +
                              " $fpath); autoload -Uz compinit; compinit -D -u; "
                              "print -r -- $_comps[leakref]"});
  CHECK(reg.out == "_leakref\n");
  std::string script = "export LEAKREF=" + lrtest::build_dir() + "/leakref\n" + "source " + dir +
                       "/_leakref\n" +
                       "compadd() { print -r -- ${(j: :)${(P)2}} }\n"
                       "_files() { print -r -- FILES }\n"
                       "t() { words=(\"$@\"); CURRENT=$#words; _leakref }\n"
                       "t leakref wa\n"
                       "t leakref walk core --li\n"
                       "t leakref kernel --vmcore x in\n"
                       "t leakref kernel --vmcore x inodes --fl\n"
                       "t leakref types build --inc\n"
                       "t leakref heap cor\n";
  auto r = lrtest::run({"zsh", "-fc", script});
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::istringstream in(r.out);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 6);
  auto has = [](const std::string& line, const std::string& w) {
    return (" " + line + " ").find(" " + w + " ") != std::string::npos;
  };
  CHECK(has(lines[0], "walk"));
  CHECK(has(lines[0], "kernel"));
  CHECK(has(lines[1], "--list-member"));
  CHECK(has(lines[1], "--limit"));
  CHECK(!has(lines[1], "--head)"));  // words of a description are not options
  CHECK(has(lines[2], "inodes"));
  CHECK(!has(lines[2], "--vmcore"));
  CHECK(has(lines[3], "--flagged"));
  CHECK(has(lines[4], "--include-dir"));
  CHECK(lines[5] == "FILES");  // a core goes there
}

// bash completion reads subcommands and options from leakref's own help.
TEST_CASE("bash completion completes subcommands and each one's options", "[scripts]") {
  std::string script =
      "source " + repo_dir() +
      "/scripts/leakref-completion.bash\n"
      "export LEAKREF=" +
      lrtest::build_dir() +
      "/leakref\n"
      "t() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _leakref;"
      " echo \"${COMPREPLY[*]}\"; }\n"
      "t leakref wa\n"
      "t leakref walk core --li\n"
      "t leakref kernel --vmcore x in\n"
      "t leakref kernel --vmcore x inodes --fl\n"
      "t leakref types build --inc\n"
      "t leakref heap core --st\n"
      "t leakref batch r\n"
      "t leakref batch run --jo\n"
      "t leakref --\n";
  auto r = lrtest::run({"bash", "-c", script});
  REQUIRE(r.status == 0);
  std::istringstream in(r.out);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 9);
  CHECK(lines[0] == "walk");
  CHECK(lines[1] == "--limit --list-member");
  CHECK(lines[2] == "inodes");
  CHECK(lines[3] == "--flagged");
  CHECK(lines[4] == "--include-dir");
  CHECK(lines[5] == "--stats");
  CHECK(lines[6] == "report run");  // batch's subcommands
  CHECK(lines[7] == "--jobs");
  CHECK(lines[8] == "--help --version");  // once each
}

// make check-layers fails on an include that goes up, on a target including
// another, on a front end's file included, and on a target's name in the
// engine; the tree itself passes.
TEST_CASE("check-layers: the tree passes, and each kind of violation fails", "[scripts]") {
  const std::string script = repo_dir() + "/scripts/check-layers";
  auto ok = lrtest::run({"python3", script, repo_dir()});
  INFO(ok.out);
  CHECK(ok.status == 0);
  std::string dir = lrtest::tmp_dir() + "/layers";
  auto put = [&](const std::string& rel, const std::string& text) {
    REQUIRE(lrtest::run({"/bin/mkdir", "-p", dir + "/" + rel.substr(0, rel.rfind('/'))}).status ==
            0);
    lrtest::write_file(dir + "/" + rel, text);
  };
  put("corelib/base/a.hpp", "#include \"corelib/walks/w.hpp\"\n");
  put("corelib/walks/w.hpp", "// the walks\n");
  put("corelib/dump/b.cpp", "// reads glusterfs's pools\n");
  put("targets/glibc/g.cpp", "#include \"targets/linux/k.hpp\"\n");
  put("targets/linux/k.hpp", "// linux\n");
  put("frontend/f.cpp", "#include \"cli/main.hpp\"\n");
  auto bad = lrtest::run({"python3", script, dir});
  INFO(bad.out);
  CHECK(bad.status == 1);
  CHECK(bad.out.find("corelib/base/a.hpp:1: includes corelib/walks/w.hpp, which is above it") !=
        std::string::npos);
  CHECK(bad.out.find("corelib/dump/b.cpp:1: names the target 'gluster'") != std::string::npos);
  CHECK(bad.out.find("targets/glibc/g.cpp:1: includes targets/linux/k.hpp: a target includes "
                     "the engine and its own folder only") != std::string::npos);
  CHECK(bad.out.find("frontend/f.cpp:1: includes cli/main.hpp") != std::string::npos);
  CHECK(bad.out.find("check-layers: 4 violation(s)") != std::string::npos);
}

// A skipped test is not a pass: under CI=true a skip that
// tests/allowed-skips.txt does not name fails the run, and every run lists
// its skips. (man is hidden from the inner run, so its man-page test skips.)
TEST_CASE("skips: listed, and under CI=true failing unless allowed", "[scripts]") {
  const std::string bin = lrtest::build_dir() + "/leakref-tests";
  const std::string test = "man pages: one per front end\\, complete against --help";
  auto ci = lrtest::run({"/usr/bin/env", "CI=true", "PATH=/nonexistent", bin, test}, 300);
  INFO(ci.out);
  CHECK(ci.status != 0);
  CHECK(ci.out.find("skipped (1):") != std::string::npos);
  CHECK(ci.out.find("(NOT ALLOWED under CI)") != std::string::npos);
  CHECK(ci.out.find("tests: 0 passed, 1 failed, 1 skipped") != std::string::npos);
  auto local = lrtest::run({"/usr/bin/env", "CI=", "PATH=/nonexistent", bin, test}, 300);
  INFO(local.out);
  CHECK(local.status == 0);
  CHECK(local.out.find("tests: 0 passed, 0 failed, 1 skipped") != std::string::npos);
}

// make install puts the docs where leakref(1) and the README send a user:
// the README and docs/ under share/doc/leakref, and the profile format's
// complete reference as man 5 leakref-profile.
TEST_CASE("make install: the README, docs/ and man 5 leakref-profile", "[scripts][install]") {
  std::string prefix = installed();
  for (const char* f : {"/share/doc/leakref/README.md", "/share/doc/leakref/docs/architecture.md",
                        "/share/doc/leakref/docs/profiles.md", "/share/doc/leakref/docs/kernel.md",
                        "/share/man/man5/leakref-profile.5"}) {
    INFO(f);
    CHECK(lrtest::read_file(prefix + f).size() > 0);
  }
  CHECK(lrtest::read_file(prefix + "/share/man/man1/leakref.1").find("leakref\\-profile (5)") !=
        std::string::npos);
  if (!lrtest::have_program("man")) LR_SKIP("man is not installed (make test installs man-db)");
  auto m = lrtest::run({"man", "-l", prefix + "/share/man/man5/leakref-profile.5"});
  CHECK(m.status == 0);
  CHECK(m.out.find("[[set.holder]]") != std::string::npos);
}
