// Renders a walk's objects as the walk finds them (text with aligned columns,
// leakref.walk/1 JSON, or JSON lines), then its summary. Nothing but the
// first block of text rows and the --group-by counts is held in memory.
#pragma once

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "frontend/base/out.hpp"
#include "frontend/process/cmd_walk.hpp"

namespace lrcli {

enum class WalkFormat { kText, kJson, kJsonl };

class WalkRenderer {
 public:
  // `group_idx`: index of the first --group-by field among the object's
  // fields (SIZE_MAX: none); the group-by fields are the last ones.
  WalkRenderer(const WalkArgs& a, const lr::WalkSpec& spec, WalkFormat f, size_t group_idx,
               const std::string& source, Out& out);
  // The JSON/JSONL head (text prints nothing yet); with the first object,
  // or after the walk when none was written. Once only.
  void begin();
  void object(const lr::WalkedObject& o);
  static void on_object(void* self, const lr::WalkedObject& o) {
    static_cast<WalkRenderer*>(self)->object(o);
  }
  // After the walk: the rest of the objects, the summary and `warnings`
  // (JSON carries them; text prints them to `err`).
  void finish(const lr::WalkReport& rep, const std::vector<std::string>& warnings, Out& err);

  // Text with the summary first (--summary-first, or a terminal): the first
  // kBlockRows rows are held; when the walk has more (long output), the
  // rest are not rendered and finish() writes the summary, the header and
  // the held rows. Then rows_pass() is true: the caller walks again with
  // on_rest_object, which skips the held rows (checking they are the same
  // objects) and writes the others. Short output is rows, then summary.
  void set_summary_first() { summary_first_ = true; }
  bool rows_pass() const { return long_; }
  static void on_rest_object(void* self, const lr::WalkedObject& o) {
    static_cast<WalkRenderer*>(self)->rest_object(o);
  }
  // After the second walk: the rows written. False when its first objects
  // were not the held ones (memory changed between the walks: a live system).
  bool finish_rows();

 private:
  struct Group {
    uint64_t count = 0;
    int64_t refs = 0;
  };
  void text_row(const lr::WalkedObject& o);
  void flush_block();
  void put_row(const std::vector<std::string>& r);
  void json_object(const lr::WalkedObject& o);
  void json_reconcile(const lr::WalkedObject& o);
  std::string reconcile_text(const lr::WalkedObject& o) const;
  void flush(bool force);
  nlohmann::json summary_json(const lr::WalkReport& rep) const;
  void text_summary(const lr::WalkReport& rep);
  void rest_object(const lr::WalkedObject& o);

  const WalkArgs& a_;
  const lr::WalkSpec& spec_;
  WalkFormat f_;
  size_t group_idx_;
  std::string source_;
  Out& out_;
  fmt::memory_buffer buf_;
  uint64_t written_ = 0;
  // text: rows held until the column widths are known
  std::vector<std::vector<std::string>> block_;
  std::vector<size_t> widths_;
  bool header_done_ = false;
  bool begun_ = false;
  std::map<std::string, Group> groups_;
  bool summary_first_ = false, long_ = false;
  std::vector<uint64_t> held_addrs_;  // the held rows' objects, for the second walk
  uint64_t rest_seen_ = 0;
  bool rest_same_ = true;
};

}  // namespace lrcli
