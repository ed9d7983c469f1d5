// leakref — post-mortem refcount-leak analysis of cores.
#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>

#include "corelib/base/names.hpp"
#include "frontend/base/commands.hpp"
#include "frontend/base/errors.hpp"
#include "frontend/base/options.hpp"
#include "frontend/kernel/cmd_kernel.hpp"

using namespace lrcli;

namespace {

bool has_word(const std::vector<std::string>& words, const char* w) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

// "; did you mean '--where'?" for an unexpected "--wehre" (CLI11 names it
// only), from the options of the subcommand typed (its own subcommands'
// too), not every subcommand's.
std::string option_hint(const CLI::App& app, const std::vector<std::string>& words,
                        const std::string& what) {
  size_t at = what.find("--");
  if (what.find("not expected") == std::string::npos || at == std::string::npos) return "";
  std::string bad = what.substr(at);
  bad = bad.substr(0, bad.find_first_of(" =\n"));
  std::vector<std::string> names;
  const CLI::App* typed = &app;
  for (const auto& w : words)
    if (!w.empty() && w[0] != '-') {
      for (const CLI::App* sub : app.get_subcommands({}))
        if (sub->get_name() == w) typed = sub;
      break;
    }
  std::vector<const CLI::App*> apps = {typed};
  for (size_t i = 0; i < apps.size(); ++i) {
    for (const CLI::Option* o : apps[i]->get_options())
      for (const auto& n : o->get_lnames()) names.push_back("--" + n);
    for (const CLI::App* sub : apps[i]->get_subcommands({})) apps.push_back(sub);
  }
  return lr::did_you_mean(bad, names);
}

}  // namespace

int main(int argc, char** argv) {
  // Arrays of a MiB or more are mapped on their own, always: glibc's
  // threshold otherwise rises to the size of the last one freed (up to
  // 32 MiB), and later arrays below it stay in the heap after they are
  // freed. A big core's answers make and drop many arrays of tens of MiB;
  // freed, they should be given back (`retained`: 8 % of its peak).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  start_front_end();
  CLI::App app{"leakref: walk refcounted structures in cores through DWARF", "leakref"};
  use_leakref_help(app);
  app.require_subcommand(1);
  app.set_version_flag("--version", "leakref 0.1.0");
  DumpOptions c;
  const std::vector<Command> commands = {
      register_info(app, c),     register_walk(app, c),      register_show(app, c),
      register_sym(app, c),      register_heap(app, c),      register_gluster(app, c),
      register_profile(app, c),  register_correlate(app, c), register_trace_plan(app),
      register_trace_info(app),  register_types(app),        register_kernel(app),
      register_diff(app, c),     register_snapshot(app, c),  register_trend(app, c),
      register_refs(app, c),     register_leaks(app, c),     register_account(app, c),
      register_retained(app, c), register_suspects(app, c),  register_shared(app, c),
      register_python(app, c),   register_batch(app)};

  one_value_per_option(&app);
  // `leakref help [SUBCOMMAND...]`, and typos named as such.
  std::vector<std::string> words(argv + 1, argv + argc);
  if (!words.empty() && words[0] == "help") {
    if (words.size() == 1) {
      fmt::print("{}", app.help());
      return kOk;
    }
    if (std::string u = unknown_subcommand(app, words[1]); !u.empty()) return fail_usage(u);
    if (words[1] == "kernel" && words.size() > 2)
      return cmd_kernel("", "", {}, {words.begin() + 2, words.begin() + 3}, true);
    CLI::App* sub = app.get_subcommand(words[1]);
    std::string prefix = "leakref";  // what --help's usage line shows
    if (words.size() > 2 && !sub->get_subcommands({}).empty()) {
      if (std::string u = unknown_subcommand(*sub, words[2]); !u.empty()) return fail_usage(u);
      prefix += " " + words[1];
      sub = sub->get_subcommand(words[2]);
    }
    fmt::print("{}", sub->help(prefix));
    return kOk;
  }
  if (!words.empty())
    if (std::string u = unknown_subcommand(app, words[0]); !u.empty()) return fail_usage(u);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Under --json a pipeline reading stdout sees this error as JSON too.
    json_errors(has_word(words, "--json") || has_word(words, "--jsonl"),
                has_word(words, "--jsonl"));
    fail_usage(fmt::format("{}{}", e.what(), option_hint(app, words, e.what())));
    fmt::print(stderr, "run 'leakref --help' or 'leakref SUBCOMMAND --help'\n");
    return kUsage;
  }
  try {
    for (const auto& cmd : commands) {
      if (!*cmd.sub) continue;
      json_errors(cmd.json(), has_word(words, "--jsonl"));
      return cmd.run();
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "leakref: internal error: {}\n", e.what());
    return kInternal;
  }
  return kUsage;
}
