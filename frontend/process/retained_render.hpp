// The views of a retained-size tree (corelib/answers/retained.hpp) as the
// commands render them, for a process core (`leakref retained`, `leakref
// suspects`) and a vmcore (`leakref kernel … retained`, and inside crash)
// alike: text and JSON from the same tree and namer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "corelib/answers/retained.hpp"
#include "frontend/base/out.hpp"
#include "frontend/process/cmd_retained.hpp"

namespace lrcli {

// A tree, how its nodes are named, and where it is written.
struct RetainedView {
  const lr::RetainedTree& tree;
  lr::RetainedNamer& namer;
  Out& out;
  std::string source;  // the dump's path
  std::vector<std::string> warnings;
  uint64_t index_ns = 0;             // what the reference index took
  const char* noun = "heap blocks";  // the blocks, in the headline
  const char* short_noun = "blocks";
  const char* input = "core";  // what the dump is called
};

std::string pct(uint64_t part, uint64_t whole);
// "global g [fx] > 0x... struct t (64 bytes) .next > ...".
std::string path_line(const RetainedView& o, const std::vector<uint32_t>& p);
nlohmann::ordered_json path_json(const RetainedView& o, const std::vector<uint32_t>& p);
nlohmann::ordered_json node_json(const RetainedView& o, uint32_t v);
nlohmann::ordered_json heap_json(const RetainedView& o);
void headline(const RetainedView& o);
// The node --tree or --path names (top without either).
lr::Result<uint32_t> retained_place(const RetainedView& o, const RetainedArgs& a);
// Per block: whether --group names it (every block of a type, or the block
// at a place).
lr::Result<std::vector<uint8_t>> retained_group(const RetainedView& o, const RetainedArgs& a);
// The whole graph for a check outside (networkx), never over the dump.
lr::Result<void> export_graph(const RetainedView& o, const std::string& path);
// The view the arguments ask for, as text or as leakref.retained/1.
// `group`: what --group's blocks retain (when it is given).
int retained_text(const RetainedView& o, const RetainedArgs& a, uint32_t place,
                  const lr::GroupRetained* group);
void retained_json(const RetainedView& o, const RetainedArgs& a, uint32_t place,
                   const lr::GroupRetained* group);
// A leak suspect in one sentence, and as JSON.
std::string suspect_text(const RetainedView& o, const lr::Suspect& s);
nlohmann::ordered_json suspect_json(const RetainedView& o, const lr::Suspect& s);
// The page `--html` writes: an icicle chart of the tree, the suspects, the
// holders (retained_html.cpp).
std::string retained_html(const RetainedView& o, size_t top);
// The whole command once the tree is built: the export, the view, the
// exit status under --fail-on; errors and warnings to `err`.
int render_retained(const RetainedView& o, const RetainedArgs& a, bool json, Out& err);

}  // namespace lrcli
