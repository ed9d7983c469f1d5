// How the CLI and the crash extension open a process core for the engine's
// answers: with the options every command takes, a progress line on a
// terminal, notes on stderr; and the JSON of the engine's references.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "corelib/answers/alloc_sites.hpp"
#include "corelib/answers/block_names.hpp"
#include "corelib/answers/core_index.hpp"
#include "frontend/base/options.hpp"

namespace lrcli {

// The front end's display: a progress line on stderr (only on a terminal),
// and notes (types built now) as lines on stderr.
lr::ProgressDisplay* cli_display();

// The core, its heap, what its program's targets say of its blocks and the
// reference index (a progress line on a terminal). `before` (may be empty)
// runs on the opened program before the index is built: arguments that need
// the core fail fast. `caches`: what the program's caches keep is read too
// (the account's breakdown by type says so).
lr::Result<lr::IndexedCore> open_indexed_core(
    const DumpOptions& c, const std::function<lr::Result<void>(lr::Program&)>& before = {},
    bool caches = false);

// The live blocks' sites from the allocation traces `paths` (kInvalidArgument
// naming --trace when they hold no allocation record).
lr::Result<lr::LiveSites> sites_from_traces(const lr::Program& prog, const lr::HeapWalk& heap,
                                            const std::vector<std::string>& paths);

// One referring word as --reconcile lists it: {"kind", "from" (or
// "register"), "tid" (threads' words)}.
nlohmann::json ref_brief_json(const lr::Ref& r);
// With what it is and the word it read: {"kind", "what", "value", ...}.
nlohmann::json ref_json(lr::RefNamer& names, const lr::Program& prog, const lr::Ref& r);

}  // namespace lrcli
