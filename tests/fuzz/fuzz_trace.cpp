// libFuzzer target for one trace parser (LR_FUZZ_PARSER, set by the Makefile:
// one binary per format), followed by the join over what it produced, so the
// lifetime/balance code meets the same hostile records.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corelib/analyses/correlate.hpp"
#include "corelib/analyses/trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lr::Trace t;
  t.source = "fuzz";
  std::string_view text(reinterpret_cast<const char*>(data), size);
  lr::trace_detail::LR_FUZZ_PARSER(text, t);
  for (const auto& e : t.events)
    if (e.fn >= t.functions.size() || e.stack >= t.stacks.size()) __builtin_trap();
  for (const auto& s : t.alloc_stacks)
    if (s.stack >= t.stacks.size()) __builtin_trap();
  std::vector<lr::CoreObject> objs;
  for (size_t i = 0; i < t.events.size() && i < 64; ++i) {
    lr::CoreObject o;
    o.addr = t.events[i].ptr;
    o.kind = i % 3 ? "any" : t.functions[t.events[i].fn].kind;
    o.refcount = t.events[i].before >= 0 ? t.events[i].before : 1;
    o.explained = i % 2 ? -1 : 0;
    objs.push_back(o);
  }
  lr::FrameResolver fr(nullptr, nullptr);
  lr::CorrelateOptions opts;
  opts.history_ptr = t.events.empty() ? 0 : t.events[0].ptr;
  auto rep = lr::correlate({t}, objs, fr, opts, nullptr);
  if (rep.objects.size() > objs.size()) __builtin_trap();
  return 0;
}
