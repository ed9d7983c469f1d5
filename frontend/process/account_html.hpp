// `leakref account --html`: the account as one self-contained page.
#pragma once

#include <string>

#include "corelib/analyses/account.hpp"

namespace lrcli {

// The page: a treemap (SVG, no scripts) and the table, of `acc` of `core`.
std::string account_html(const lr::Account& acc, const std::string& core);

}  // namespace lrcli
