// libFuzzer target: CPython's value, stack and location-table readers
// (targets/cpython: py_values, py_frames) over adversarial memory, with
// 3.11's and 3.13's layouts as python3.X-dbg's DWARF gives them (the
// offsets below, printed by gdb from Debian's 3.11.2 and 3.13.5). The
// input's first byte picks the reader and the release; the rest is
// sparse_memory.hpp's records, or a location table.
// Strings that claim 2^62 characters, tuples past their size, thread and
// frame chains that loop, tables of any bytes: neither a crash nor a hang,
// and every answer within its bound.
#include <cstddef>
#include <cstdint>
#include <string>

#include "targets/cpython/py_frames.hpp"
#include "targets/cpython/py_values.hpp"
#include "tests/fuzz/sparse_memory.hpp"

namespace {

using lrfuzz::kBase;

lr::PyLayout layout_311() {
  lr::PyLayout L;
  L.runtime = kBase;
  L.type_type = kBase + 0x1000;
  L.tp_name = 0x18, L.tp_basicsize = 0x20, L.tp_itemsize = 0x28, L.tp_flags = 0xa8;
  L.str_state = 0x20, L.str_length = 0x10, L.ascii_size = 48, L.compact_size = 72;
  L.st_interned = {0, 2}, L.st_kind = {2, 3}, L.st_compact = {5, 1}, L.st_ascii = {6, 1};
  L.interp_head = 0x28, L.interp_next = 0, L.interp_threads = 0x10;
  L.ts_next = 0x8, L.ts_cframe = 0x38, L.ts_native_tid = 0xa0, L.cf_current = 0x8;
  L.fr_code = 0x20, L.fr_previous = 0x30, L.fr_prev_instr = 0x38, L.fr_localsplus = 0x48;
  L.fr_owner = 0x45;
  L.co_nlocalsplus = 0x4c, L.co_firstlineno = 0x48, L.co_localsplusnames = 0x60;
  L.co_filename = 0x70, L.co_name = 0x78, L.co_linetable = 0x88, L.co_code = 0xb8;
  L.bytes_sval = 0x20, L.tuple_item = 0x18, L.long_digit = 0x18;
  return L;
}

// 3.13: no _PyCFrame (ts_cframe is tstate.current_frame), an int's tag,
// entry frames owned by the C stack.
lr::PyLayout layout_313() {
  lr::PyLayout L = layout_311();
  L.hex = 0x030d05f0;
  L.cframe = false, L.immortals = true, L.inline_values = true;
  L.ascii_size = 40, L.compact_size = 56;
  L.interp_head = 0x278, L.interp_next = 0x1c60, L.interp_threads = 0x1cb0;
  L.ts_cframe = 0x48, L.cf_current = 0;
  L.fr_code = 0, L.fr_previous = 0x8, L.fr_prev_instr = 0x38, L.fr_owner = 0x46;
  L.fr_localsplus = 0x48;
  L.co_nlocalsplus = 0x48, L.co_firstlineno = 0x44, L.co_code = 0xc8;
  L.long_tag = 0x10, L.long_digit = 0x18;
  return L;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static lrfuzz::SparseMemory* mem = new lrfuzz::SparseMemory;
  static const lr::PyLayout L311 = layout_311(), L313 = layout_313();
  const uint8_t pick = data[0] % 3;
  const lr::PyLayout& L = (data[0] / 3) % 2 ? L313 : L311;
  if (pick == 0) {
    // A location table: any bytes, any instruction offset.
    const std::string table(reinterpret_cast<const char*>(data + 1), size - 1);
    const int64_t at = size > 1 ? data[1] * 2 - 2 : 0;
    const int line = lr::python_line(table, 1000, at);
    if (line < -1) __builtin_trap();  // a line, or none
    return 0;
  }
  mem->clear();
  mem->load(data + 1, size - 1);
  const lr::PyValues v(*mem, L);
  if (pick == 1) {
    for (uint64_t o = kBase; o < kBase + 0x400; o += 0x40) {
      auto s = v.str(o, 64);
      if (s && s->size() > 64 * 4 + 3) __builtin_trap();
      (void)v.repr(o);
      (void)v.small_int(o);
      auto b = v.bytes(o, 256);
      if (b && b->size() > 256) __builtin_trap();
      (void)v.tuple_item(o, 3);
    }
    return 0;
  }
  const auto stacks = lr::python_stacks(v);
  if (stacks.size() > 64 * 4096) __builtin_trap();
  size_t frames = 0;
  for (const auto& t : stacks) frames += t.frames.size();
  if (frames > (1u << 18)) __builtin_trap();
  return 0;
}
