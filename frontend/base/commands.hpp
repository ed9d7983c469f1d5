// The subcommands as main() runs them: each register_* function adds its
// subcommand, with the options it owns, to the app; main runs the one the
// command line chose. The arguments live with their command, not here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "frontend/base/options.hpp"

namespace lrcli {

struct Command {
  CLI::App* sub = nullptr;     // the subcommand (owned by the app)
  std::function<int()> run;    // runs it, once the command line is parsed
  std::function<bool()> json;  // whether it writes JSON (errors then too, on stdout)
};

// The help format of every leakref app: option names without CLI11's
// flag-value braces ("--hashtable", not "--hashtable{val}") and no
// per-option "Excludes:" lists (the link kinds say once that they are one
// of a kind). Set before the subcommands are added: they copy it.
void use_leakref_help(CLI::App& app);

// `c` (owned by main) holds the options every core-reading subcommand takes.
Command register_info(CLI::App& app, DumpOptions& c);
Command register_walk(CLI::App& app, DumpOptions& c);
Command register_show(CLI::App& app, DumpOptions& c);
Command register_sym(CLI::App& app, DumpOptions& c);
Command register_heap(CLI::App& app, DumpOptions& c);
Command register_gluster(CLI::App& app, DumpOptions& c);
Command register_profile(CLI::App& app, DumpOptions& c);
Command register_correlate(CLI::App& app, DumpOptions& c);
Command register_diff(CLI::App& app, DumpOptions& c);
Command register_snapshot(CLI::App& app, DumpOptions& c);
Command register_trend(CLI::App& app, DumpOptions& c);
Command register_refs(CLI::App& app, DumpOptions& c);
Command register_leaks(CLI::App& app, DumpOptions& c);
Command register_account(CLI::App& app, DumpOptions& c);
Command register_retained(CLI::App& app, DumpOptions& c);
Command register_suspects(CLI::App& app, DumpOptions& c);
Command register_shared(CLI::App& app, DumpOptions& c);  // C++ shared_ptr census
Command register_python(CLI::App& app, DumpOptions& c);  // CPython objects and refcounts
Command register_trace_plan(CLI::App& app);
Command register_trace_info(CLI::App& app);
Command register_types(CLI::App& app);  // types build, types gluster
Command register_kernel(CLI::App& app);
Command register_batch(CLI::App& app);  // batch run, report, query, one, worker
// `types gluster`, under `types` (register_types adds it).
Command register_types_gluster(CLI::App& types);

}  // namespace lrcli
