// Snapshots read from text, and written as text: leakref's own saved form
// (leakref.snapshot/1, which `snapshot --json` writes so a series can be kept
// without its cores) and the text dumps targets register a reader for (a
// program's own state dump). Cores and kernel dumps are opened by their
// layers; this is the engine's one way in for everything that is text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "corelib/analyses/diff.hpp"
#include "corelib/base/result.hpp"

namespace lr {

// leakref.snapshot/1, and back (kBadFormat, naming `path`, when the JSON is
// not one: every member is checked for its type and range).
nlohmann::json snapshot_json(const Snapshot& s);
Result<Snapshot> snapshot_from_json(const nlohmann::json& j, const std::string& path);

// Whether a file's first bytes start a saved snapshot (a JSON document).
bool looks_like_saved_snapshot(std::string_view head);

// A target's reader of its text dump, registered under the name it gave
// register_text_dump (dump_kind.hpp).
using TextSnapshotReader = Result<Snapshot> (*)(std::string_view text, const std::string& source);
void register_snapshot_reader(const std::string& text_kind, TextSnapshotReader read);

// The snapshot in the text file at `path`: a saved snapshot, or a text dump
// a target reads. Anything else is refused (kBadFormat) naming the file.
Result<Snapshot> read_text_snapshot(const std::string& path);

}  // namespace lr
