// Where commands write (out.hpp).
#include "frontend/base/out.hpp"

#include "corelib/blocks/refindex.hpp"

#include <cstdio>

namespace lrcli {

namespace {
struct FileOut final : Out {
  explicit FileOut(std::FILE* f) : f_(f) {}
  bool write(std::string_view s) override {
    return std::fwrite(s.data(), 1, s.size(), f_) == s.size();
  }
  std::FILE* f_;
};
}  // namespace

Out& out_stdout() {
  static FileOut o(stdout);
  return o;
}

Out& out_stderr() {
  static FileOut o(stderr);
  return o;
}

void print_warnings_text(const std::vector<std::string>& w, Out& err) {
  for (const auto& s : w) err.print("leakref: warning: {}\n", s);
}

std::vector<std::string> with_partial(std::vector<std::string> w, const lr::RefSource* index) {
  if (index)
    for (const auto& p : index->partial()) w.push_back("partial: " + p);
  return w;
}

void emit_json(const nlohmann::json& j, Out& out) {
  out.put(json_text(j, 1));
  out.put("\n");
}

}  // namespace lrcli
