// leakref's help text: CLI11's format with two kinds of noise removed.
#include "frontend/base/commands.hpp"

namespace lrcli {

namespace {

class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    std::string n = CLI::Formatter::make_option_name(opt, positional);
    // A flag with a value ("--hashtable{val}") shows its default inside the name.
    for (size_t b = n.find('{'); b != std::string::npos; b = n.find('{', b)) {
      size_t e = n.find('}', b);
      if (e == std::string::npos) break;
      n.erase(b, e - b + 1);
    }
    return n;
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string s = CLI::Formatter::make_option_opts(opt);
    // CLI11 puts the list of excluded options last.
    if (size_t at = s.find(" Excludes:"); at != std::string::npos) s.erase(at);
    return s;
  }
};

}  // namespace

void use_leakref_help(CLI::App& app) {
  app.formatter(std::make_shared<HelpFormatter>());
}

}  // namespace lrcli
