// libFuzzer target: profile files (TOML, then the profile checks).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corelib/profiles/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  (void)lr::parse_profile(s, "fuzz.toml");
  return 0;
}
