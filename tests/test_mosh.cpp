// A real C++ daemon: mosh-server 1.4.0, built from Debian's source with its
// DWARF (scripts/mosh-build), serving Debian's own mosh-client over
// loopback while a shell prints through it; then its core. Its live state
// is standard containers and shared_ptrs: each framebuffer is a
// std::vector<std::shared_ptr<Row>> whose rows are shared, copy on write,
// between the current screen and the states in flight (a std::list).
// Truth from outside: gdb and libstdc++'s own pretty-printers on the same
// core (tests/gdb_mosh.py), and the counts themselves: every control block
// of a program that does not leak has exactly its counted owners.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "harness.hpp"

using nlohmann::json;

namespace {

std::map<std::string, std::string> mosh_build(std::string* why) {
  auto r = lrtest::run({std::string(LR_SOURCE_DIR) + "/scripts/mosh-build"}, 900);
  if (r.status != 0) *why = "scripts/mosh-build failed: " + r.err;
  std::map<std::string, std::string> kv;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (auto eq = line.find('='); eq != std::string::npos)
      kv[line.substr(0, eq)] = line.substr(eq + 1);
  return kv;
}

struct MoshCore {
  std::string server, core, why;
};

// The server started by hand as sshd would ("mosh-server new"), the client
// on a pseudo-terminal of `script` typing into the server's shell: a few
// hundred lines of output, a directory listing, then a marker the shell
// prints only once it ran the commands ("LR-DONE-42" from $((6*7))).
MoshCore mosh_core() {
  MoshCore m;
  auto kv = mosh_build(&m.why);
  if (!m.why.empty()) return m;
  m.server = kv["SERVER"];
  const std::string dir = lrtest::tmp_dir() + "/mosh";
  lrtest::run({"/bin/mkdir", "-p", dir});
  auto s = lrtest::run({"/usr/bin/env", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", m.server, "new", "-i",
                        "127.0.0.1", "-l", "LANG=C.UTF-8", "--", "/bin/sh"},
                       60);
  std::smatch conn, det;
  const std::string both = s.out + s.err;
  if (!std::regex_search(both, conn, std::regex("MOSH CONNECT (\\d+) (\\S+)")) ||
      !std::regex_search(both, det, std::regex("detached, pid = (\\d+)"))) {
    m.why = "mosh-server new did not start: " + both;
    return m;
  }
  const int server_pid = std::stoi(det[1]);
  const std::string feed =
      "sleep 2; echo 'i=0; while [ $i -lt 300 ]; do echo line $i; i=$((i+1)); done'; sleep 2; "
      "echo 'ls -la /usr/lib | head -80'; sleep 1; echo 'echo LR-DONE-$((6*7))'; sleep 600";
  auto client = lrtest::spawn(
      {"setsid", "/usr/bin/env", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "MOSH_KEY=" + conn[2].str(),
       "/bin/sh", "-c",
       "(" + feed + ") | script -qfc 'stty rows 40 cols 120; exec mosh-client 127.0.0.1 " +
           conn[1].str() + "' /dev/null"});
  const bool done = lrtest::wait_for_text(client.out_path, "LR-DONE-42", 120);
  if (done) sleep(1);  // the last frames' acknowledgements
  auto g = lrtest::run({"gcore", "-o", dir + "/mosh", std::to_string(server_pid)}, 300);
  ::kill(server_pid, SIGKILL);
  ::kill(-client.pid, SIGKILL);
  lrtest::finish(client, SIGKILL, 10);
  if (!done)
    m.why = "the client never showed the shell's marker: " + lrtest::read_file(client.err_path);
  if (g.status != 0) m.why = "gcore failed: " + g.err;
  m.core = dir + "/mosh." + std::to_string(server_pid);
  return m;
}

json gdb_view(const MoshCore& m) {
  const std::string script = std::string(LR_SOURCE_DIR) + "/tests/gdb_mosh.py";
  auto r = lrtest::run({"gdb", "-batch", "-nx", "-ex", "set language c++", "-ex",
                        "python exec(open('" + script + "').read())", m.server, m.core},
                       300);
  INFO("gdb: " << r.err);
  const size_t at = r.out.find("LR-JSON ");
  REQUIRE(at != std::string::npos);
  return json::parse(r.out.substr(at + 8, r.out.find('\n', at) - at - 8));
}

// leakref's walk of a framebuffer's rows: [get(), _M_pi] of each.
json walked_rows(const std::string& core, const std::string& head) {
  auto r = lrtest::leakref(
      {"walk", core, "--std", "--head", head, "--show", "_M_ptr,_M_refcount._M_pi", "--json"}, 120);
  INFO("walk --head " << head << ": " << r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["warnings"].empty());
  CHECK(j["summary"]["stop"] == "end");
  json out = json::array();
  for (const auto& o : j["objects"])
    out.push_back({o["fields"]["_M_ptr"], o["fields"]["_M_refcount._M_pi"]});
  return out;
}

json gdb_rows(const json& rows) {
  json out = json::array();
  for (const auto& r : rows) out.push_back({r[0], r[1]});
  return out;
}

// The account by type groups the server's state by the containers that
// hold it, named from the locals and parameters of its frames: the screen
// is a local of run_server() (inlined into main), the connection a
// shared_ptr whose control block pointer alone lives in main's frame.
void check_account(const MoshCore& m, const json& g) {
  auto r = lrtest::leakref({"account", m.core, "--json"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["warnings"].empty());
  std::map<std::string, json> live;
  for (const auto& c : j["categories"])
    if (c["name"] == "live")
      for (const auto& k : c["children"]) live[k["name"]] = k;
  std::set<std::string> blocks, cells;
  for (const auto& row : g["rows"]) blocks.insert(row[1]), cells.insert(row[4]);
  const std::string rows = "run_server()::terminal.terminal.fb.rows";
  const std::string held[] = {
      "control block of shared_ptr<Terminal::Row> " + rows + "[]",
      "elements of std::vector<Cell> " + rows + "[][].cells",
      "elements of std::vector<shared_ptr<Terminal::Row>> " + rows,
  };
  for (const auto& name : held) {
    INFO(name);
    REQUIRE(live.count(name));
  }
  CHECK(live[held[0]]["blocks"] == blocks.size());
  CHECK(live[held[1]]["blocks"] == cells.size());
  CHECK(live[held[2]]["blocks"] == 1);
  // The states in flight, through the connection the frames hold.
  const std::string net = "Transport<Terminal::Complete, Network::UserStream>";
  CHECK(live.count("struct " + net));
  CHECK(live.count("elements of std::vector<shared_ptr<Terminal::Row>> " + net +
                   ".sender.sent_states[].state.terminal.fb.rows"));
  // The list's nodes, each named by the list, though an iterator in the
  // connection (sender.assumed_receiver_state) points at one of them.
  const std::string nodes =
      "node of std::list<TimestampedState<Terminal::Complete>> " + net + ".sender.sent_states";
  INFO(nodes);
  REQUIRE(live.count(nodes));
  CHECK(live[nodes]["blocks"] == g["sent_states"].size());
}

}  // namespace

TEST_CASE("mosh-server: its containers walk and its shared_ptrs reconcile, as gdb says",
          "[core][cpp][mosh][root]") {
  if (!lrtest::have_gcore()) LR_SKIP("mosh: gcore is not installed");
  if (!lrtest::have_program("mosh-client") || !lrtest::have_program("script"))
    LR_SKIP("mosh: mosh-client is not installed (make test installs it)");
  const MoshCore m = mosh_core();
  INFO(m.why);
  REQUIRE(m.why.empty());
  const json g = gdb_view(m);
  REQUIRE(g["rows"].size() == 40);  // the client's 40 lines
  REQUIRE(!g["sent_states"].empty());
  // The current screen's rows and each state in flight's, as the walk
  // reads them from the two addresses serve() was given.
  const std::string complete = "((Terminal::Complete *)" + g["terminal"].get<std::string>() + ")";
  CHECK(walked_rows(m.core, complete + "->terminal.fb.rows") == gdb_rows(g["rows"]));
  const std::string net = "((ServerConnection *)" + g["network"].get<std::string>() + ")";
  auto w = lrtest::leakref(
      {"walk", m.core, "--std", "--head", net + "->sender.sent_states", "--show", "num", "--json"});
  INFO(w.err << w.out);
  REQUIRE(w.status == 0);
  json nums = json::array(), want = json::array();
  const json walked = w.json();
  for (const auto& o : walked["objects"]) nums.push_back(o["fields"]["num"]);
  for (const auto& s : g["sent_states"]) want.push_back(s["num"]);
  CHECK(nums == want);

  // Every control block: a daemon that does not leak has each one's owners
  // exactly as counted; and the counts are those gdb's printer shows.
  auto r = lrtest::leakref({"shared", m.core, "--all", "--json", "--fail-on", "any"}, 300);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json j = r.json();
  CHECK(j["partial"] == false);
  CHECK(j["verdicts"]["ok"] == j["control_blocks"]);
  std::map<std::string, json> by_block;
  for (const auto& b : j["blocks"]) by_block[b["addr"]] = b;
  size_t rows_seen = 0, shared_rows = 0;
  auto check_rows = [&](const json& rows) {
    for (const auto& row : rows) {
      INFO("row " << row.dump());
      auto it = by_block.find(row[1]);
      REQUIRE(it != by_block.end());
      const json& b = it->second;
      CHECK(b["object"] == row[0]);
      CHECK(b["use_count"] == row[2]);
      // libstdc++'s printer shows the weak count less the one weak
      // reference the shared owners hold together (printers.py,
      // SharedPointerPrinter); leakref shows _M_weak_count as it is.
      CHECK(b["weak_count"].get<int>() - 1 == row[3].get<int>());
      // Each owner counted is found; words beyond those are unsure ones
      // (a stale copy in a block of unknown type), never typed owners.
      CHECK(b["live_owners"].get<int>() - b["unsure_owners"].get<int>() <=
            b["expected_owners"].get<int>());
      CHECK(b["live_owners"] >= b["expected_owners"]);
      CHECK(b["type"].get<std::string>().find("Terminal::Row") != std::string::npos);
      ++rows_seen;
      shared_rows += row[2].get<int>() > 1;
    }
  };
  check_rows(g["rows"]);
  for (const auto& s : g["sent_states"]) check_rows(s["rows"]);
  CHECK(rows_seen >= 80);
  CHECK(shared_rows > 0);  // rows shared between screens: use counts above one
  check_account(m, g);

  // A stack word is named by the local holding it, as the DWARF places it
  // at the frame's pc: the screen's row array, from run_server()'s
  // terminal (inlined into main).
  auto refs = lrtest::leakref({"refs", m.core, g["rows_array"].get<std::string>(), "--json"});
  INFO(refs.err);
  REQUIRE(refs.status == 0);
  const json rj = refs.json();
  bool named = false;
  for (const auto& f : rj["objects"][0]["referrers"])
    named = named || (f["value"] == g["rows_array"] &&
                      f["what"].get<std::string>().find(
                          "local run_server()::terminal.terminal.fb.rows._M_impl._M_start") !=
                          std::string::npos);
  CHECK(named);
}
