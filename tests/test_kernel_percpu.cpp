// Per-CPU variables (runqueues, rcu_data): a symbol's value is no CPU's
// instance (x86-64 links them zero-based, arm64 at a template the kernel
// frees after boot), so `VAR:CPU` names one CPU's, as crash writes it, and
// a per-CPU variable named without a CPU is refused. Checked against what
// only the right address holds (CPU 0's run queue says cpu 0 and its idle
// task is swapper/0) and against crash's own `p runqueues`.
#include <catch2/catch.hpp>
#include <regex>

#include "harness.hpp"
#include "kernel_guest.hpp"

using namespace lrtest;
using namespace kguest;
using nlohmann::json;

namespace {

RunResult kernel_walk(const Dump& d, const std::string& head) {
  return leakref({"kernel", "--vmcore", d.pelf, "--vmlinux", d.vmlinux, "walk", "--head", head,
                  "--type", "struct rq", "--array", "--count", "1", "--show", "cpu"},
                 300);
}

// CPU 0's run queue, standalone: its address.
std::string cpu0_runqueue(const Dump& d) {
  json w = kernel_json(d, d.pelf,
                       {"walk", "--head", "runqueues:0", "--type", "struct rq", "--array",
                        "--count", "1", "--show", "cpu,idle->comm", "--json"});
  REQUIRE(w["objects"].size() == 1);
  const json& o = w["objects"][0];
  CHECK(o["fields"]["cpu"] == 0);
  CHECK(o["fields"]["idle->comm"] == "swapper/0");
  return o["addr"].get<std::string>();
}

void refusals(const Dump& d) {
  // The guests have one CPU.
  RunResult bare = kernel_walk(d, "runqueues");
  CHECK(bare.status == 2);
  CHECK(bare.out.empty());
  CHECK(bare.err.find("runqueues is a per-CPU variable: name a CPU, as runqueues:0") !=
        std::string::npos);
  RunResult past = kernel_walk(d, "runqueues:1");
  CHECK(past.status == 2);
  CHECK(past.err.find("CPU 1: this kernel has 1 (nr_cpu_ids)") != std::string::npos);
  RunResult other = kernel_walk(d, "init_task:0");
  CHECK(other.status == 2);
  CHECK(other.err.find("init_task: not a per-CPU variable") != std::string::npos);
}

}  // namespace

TEST_CASE(
    "kernel: runqueues:0 is CPU 0's run queue on 5.10, 6.1, 6.12, 7.x and arm64; "
    "runqueues alone is refused",
    "[kernel][percpu]") {
  for (const auto& kv : kernels()) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      cpu0_runqueue(d);
      refusals(d);
    }
}

TEST_CASE("kernel: runqueues:0 is where crash's p runqueues puts CPU 0's, standalone and in crash",
          "[kernel][percpu]") {
  NEED_CRASH();
  for (const char* kv : {"5.10", "6.1"}) DYNAMIC_SECTION("Linux " << kv) {
      const Dump& d = dump(kv);
      NEED_KERNEL(d);
      const std::string addr = cpu0_runqueue(d);
      RunResult r;
      crash_session({"extend " + build_dir() + "/leakref.so", "p runqueues",
                     "leakref walk --head runqueues:0 --type 'struct rq' --array --count 1 "
                     "--show cpu"},
                    &r, kv);
      INFO(r.out.substr(0, 3000) << r.err.substr(0, 2000));
      REQUIRE(r.status == 0);
      std::smatch m;
      REQUIRE(
          std::regex_search(r.out, m, std::regex(R"(PER-CPU ADDRESSES:\s*\[0\]: ([0-9a-f]+))")));
      CHECK("0x" + m[1].str() == addr);
      // The extension's walk inside the same session: the same object.
      CHECK(r.out.find(addr + "  0") != std::string::npos);
    }
}
