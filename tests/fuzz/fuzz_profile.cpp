// libFuzzer target: profile files (TOML, then the profile checks), with the
// targets registered as the CLI has them (a container kind is a link).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corelib/profiles/profile.hpp"
#include "targets/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lr::register_targets();
  std::string_view s(reinterpret_cast<const char*>(data), size);
  (void)lr::parse_profile(s, "fuzz.toml");
  return 0;
}
