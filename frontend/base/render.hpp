// What every command's text, JSON and HTML are made of: addresses, field
// values and value trees as JSON, HTML text and pages.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "corelib/base/result.hpp"
#include "corelib/objects/objects.hpp"

namespace lrcli {

std::string hex(uint64_t v);  // "0x1f"
nlohmann::json value_json(const lr::FieldValue& v);
// A value tree as JSON: structs as objects (members in order), arrays as
// lists, scalars as value_json renders them.
nlohmann::ordered_json tree_json(const lr::ValueNode& n);
// Text escaped for HTML (&, <, >, ").
std::string html_escape(const std::string& s);
// Writes a command's --html page to `path`; kIo naming it when it cannot.
lr::Result<void> write_html_page(const std::string& path, const std::string& page);

}  // namespace lrcli
