#include "corelib/base/names.hpp"

#include <cxxabi.h>

#include <cstdlib>

#include <algorithm>
#include <cstdint>

namespace lr {

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int st = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &st);
  std::string out = st == 0 && d ? d : name;
  std::free(d);
  return out;
}

std::string source_name(const std::string& name) {
  std::string out = demangle(name);
  for (size_t at; (at = out.find("[abi:")) != std::string::npos;) {
    const size_t end = out.find(']', at);
    if (end == std::string::npos) break;
    out.erase(at, end - at + 1);
  }
  return out;
}

std::string closest_name(std::string_view s, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& n : names) {
    if (n.size() > 64 || s.size() > 64) continue;
    // Edit distance counting a swap of neighbours as one edit ("inoed" is
    // one from "inode", two from "ino_t").
    std::vector<size_t> pprev(n.size() + 1), prev(n.size() + 1), cur(n.size() + 1);
    for (size_t j = 0; j <= n.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= s.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= n.size(); ++j) {
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (s[i - 1] != n[j - 1])});
        if (i > 1 && j > 1 && s[i - 1] == n[j - 2] && s[i - 2] == n[j - 1])
          cur[j] = std::min(cur[j], pprev[j - 2] + 1);
      }
      std::swap(pprev, prev);
      std::swap(prev, cur);
    }
    // Ties go to the alphabetically first name, so the answer is stable.
    if (prev[n.size()] < best_d || (prev[n.size()] == best_d && n < best)) {
      best_d = prev[n.size()];
      best = n;
    }
  }
  // Near enough to be a slip: 2 edits, or one in five characters of long names.
  return best_d <= std::max<size_t>(2, s.size() / 5) ? best : "";
}

std::string did_you_mean(std::string_view s, const std::vector<std::string>& names) {
  std::string near = closest_name(s, names);
  return near.empty() || near == s ? "" : "; did you mean '" + near + "'?";
}

std::string visible(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    static const char hex[] = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

}  // namespace lr
