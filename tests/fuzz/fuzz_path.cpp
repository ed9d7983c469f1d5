// libFuzzer target: member-path parsing and --where expression parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corelib/debuginfo/types.hpp"
#include "corelib/objects/filter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  auto p = lr::parse_member_path(s);
  if (p.ok()) {
    // Resolving against an empty struct must fail cleanly, never crash.
    lr::Type t;
    t.kind = lr::TypeKind::kStruct;
    (void)lr::resolve_path(&t, p.value());
  }
  (void)lr::Filter::check_syntax(s);
  return 0;
}
