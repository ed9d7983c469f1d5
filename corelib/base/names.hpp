// Names for people: the nearest of some names to a misspelt one ("did you
// mean"), text made visible, C++ symbols demangled.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lr {

// The name in `names` nearest to `s` by edit distance, when it is close
// enough to be what was meant (at most max(2, |s|/3) edits); "" otherwise.
std::string closest_name(std::string_view s, const std::vector<std::string>& names);

// ", did you mean 'X'?" for the nearest of `names`, or "".
std::string did_you_mean(std::string_view s, const std::vector<std::string>& names);

// `s` with control characters and bytes past ASCII as \xNN: text read from
// a dump put into a message that reaches a terminal.
std::string visible(std::string_view s);

// A C++ symbol as its source spells it ("holder_thread(void*)"); C names
// and names that do not demangle unchanged.
std::string demangle(const std::string& name);
// A C++ symbol's name as its source (and DWARF) writes it: demangled, its
// ABI tags ("[abi:cxx11]") left out: "g_list" for "_Z6g_listB5cxx11".
std::string source_name(const std::string& name);

}  // namespace lr
