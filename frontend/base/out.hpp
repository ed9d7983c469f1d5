// Where a command's text goes: stdout/stderr for the CLI, crash's fp for the
// extension; every command writes through one of these sinks, never around
// them.
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace lr {
class RefSource;
}

namespace lrcli {

// A write that fails (the reader of `| head` went away) makes the sink
// refuse everything after it, so a command stops producing output.
class Out {
 public:
  virtual ~Out() = default;
  void put(std::string_view s) {
    if (!failed_ && !s.empty() && !write(s)) failed_ = true;
  }
  template <class... A>
  void print(fmt::format_string<A...> f, A&&... a) {
    if (!failed_) put(fmt::format(f, std::forward<A>(a)...));
  }
  bool failed() const { return failed_; }

 protected:
  virtual bool write(std::string_view s) = 0;  // false: stop writing

 private:
  bool failed_ = false;
};
Out& out_stdout();
Out& out_stderr();

// "leakref: warning: W" lines.
void print_warnings_text(const std::vector<std::string>& w, Out& err = out_stderr());
// `w` and "partial: REASON" for each reason `index` (may be null) is
// partial: the references nobody could read may be the ones a refcount
// counts, so --reconcile says so beside its answer.
std::vector<std::string> with_partial(std::vector<std::string> w, const lr::RefSource* index);
// A JSON document, indented, invalid UTF-8 from target memory replaced.
void emit_json(const nlohmann::json& j, Out& out = out_stdout());
// `j` as JSON text (`indent` as nlohmann's dump). Strings from a dump (a
// mapped file's name, a symbol) need not be UTF-8: invalid bytes become
// U+FFFD instead of aborting the output. Every JSON the front end writes
// goes through here.
// (A template: nlohmann::ordered_json keeps its members' order.)
template <class Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace lrcli
