// The third-party headers every front-end file includes (through its base
// headers), precompiled once per build (the Makefile's $(PCH)): CLI11, nlohmann-json
// and fmt are most of a front-end file's compile time. Each file still
// includes what it uses; this only makes that cheaper.
// (No #pragma once: it is compiled as a main file; -include reads it once.)

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>
