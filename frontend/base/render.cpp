// What every command's text and JSON are made of (render.hpp).
#include "frontend/base/render.hpp"

#include <fmt/format.h>

#include <fstream>

namespace lrcli {

std::string hex(uint64_t v) {
  return fmt::format("{:#x}", v);
}

nlohmann::json value_json(const lr::FieldValue& v) {
  using K = lr::FieldValue::Kind;
  switch (v.kind) {
    case K::kSigned:
      return v.s;
    case K::kUnsigned:
      return v.u;
    case K::kBool:
      return v.u != 0;
    case K::kPointer:
      return hex(v.u);
    case K::kEnum:
      return v.text.empty() ? nlohmann::json(v.s) : nlohmann::json(v.text);
    case K::kString:
    case K::kUuid:
      return v.text;
    case K::kFloat:
      return v.f;
    case K::kAggregate:
      return nlohmann::json{{"aggregate", v.text}};
    case K::kError:
      return nlohmann::json{{"error", v.text}};
  }
  return nullptr;
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

lr::Result<void> write_html_page(const std::string& path, const std::string& page) {
  std::ofstream f(path, std::ios::trunc);
  f << page;
  if (!f.flush()) return lr::make_error(lr::Errc::kIo, "--html " + path + ": could not be written");
  return {};
}

// JSON for a value tree: structs as objects with their members in
// declaration order (anonymous members numbered), arrays as lists (with a
// trailing {"more": N} when cut), scalars as values (as walk renders them).
nlohmann::ordered_json tree_json(const lr::ValueNode& n) {
  if (n.value.kind != lr::FieldValue::Kind::kAggregate || (n.children.empty() && !n.is_array))
    return nlohmann::ordered_json(value_json(n.value));
  if (n.is_array) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& c : n.children) arr.push_back(tree_json(c));
    if (n.more) arr.push_back({{"more", n.more}});
    return arr;
  }
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  int anon = 0;
  for (const auto& c : n.children)
    o[c.name.empty() ? fmt::format("<anonymous{}>", anon++) : c.name] = tree_json(c);
  return o;
}

}  // namespace lrcli
