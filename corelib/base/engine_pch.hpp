// The headers most of the engine's and the targets' files include,
// precompiled once per build (the Makefile's $(EPCH)): fmt and the standard
// containers are most of an engine file's compile time at -O0 (expr.cpp:
// 3.1 s without, 2.1 s with). Each file still includes what it uses; this
// only makes that cheaper. Nothing here is leakref's or a front end's.
// (No #pragma once: it is compiled as a main file; -include reads it once.)

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
