// The Python stacks of a CPython core (py_frames.hpp).
#include "targets/cpython/py_frames.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "corelib/dump/memory.hpp"
#include "targets/cpython/py_values.hpp"

namespace lr {

namespace {

constexpr int kMaxInterpreters = 64, kMaxThreads = 4096, kMaxFrames = 1 << 14;
constexpr size_t kMaxAllFrames = 1 << 18;  // over every thread: a damaged core stays bounded
constexpr size_t kMaxTable = 1 << 20;

// A varint of the location table: 6 bits a byte, bit 6 set when more follow.
uint32_t varint(const std::string& t, size_t& p) {
  uint32_t v = 0;
  for (int shift = 0; p < t.size() && shift < 32; shift += 6) {
    const uint8_t b = static_cast<uint8_t>(t[p++]);
    v |= uint32_t(b & 63) << shift;
    if (!(b & 64)) break;
  }
  return v;
}

int32_t signed_varint(const std::string& t, size_t p) {
  const uint32_t u = varint(t, p);
  return (u & 1) ? -int32_t(u >> 1) : int32_t(u >> 1);
}

}  // namespace

int python_line(const std::string& t, int first, int64_t addrq) {
  if (addrq < 0) return first;
  int64_t line = first, end = 0;
  size_t p = 0;
  while (p < t.size()) {
    const uint8_t b = static_cast<uint8_t>(t[p]);
    if (!(b & 0x80)) {  // not an entry's first byte: a damaged table
      ++p;
      continue;
    }
    // Bits 3-6: the form; bits 0-2: the code units covered, less one.
    const int code = (b >> 3) & 15;
    if (code == 13 || code == 14) line += signed_varint(t, p + 1);  // no columns, long
    if (code >= 10 && code <= 12) line += code - 10;                // one line
    const int64_t start = end;
    end += ((b & 7) + 1) * 2;
    // A line no source has (a damaged table's sum) is none.
    if (addrq >= start && addrq < end)
      return code == 15 || line < 0 || line > INT32_MAX ? -1 : static_cast<int>(line);
    do ++p;
    while (p < t.size() && !(static_cast<uint8_t>(t[p]) & 0x80));
  }
  return -1;
}

Result<uint64_t> python_current_frame(const Memory& mem, const PyLayout& L, uint64_t ts) {
  LR_ASSIGN(uint64_t f, mem.read_u64(ts + L.ts_cframe));
  if (!L.cframe || !f) return f;
  return mem.read_u64(f + L.cf_current);
}

std::string python_local_name(const PyValues& v, uint64_t code, uint64_t i) {
  auto names = v.mem().read_u64(code + v.layout().co_localsplusnames);
  if (!names.ok()) return "";
  auto item = v.tuple_item(names.value(), i);
  auto s = item ? v.str(*item, 80) : std::nullopt;
  return s ? *s : "";
}

namespace {

class Stacks {
 public:
  explicit Stacks(const PyValues& v) : v_(v), mem_(v.mem()), L_(v.layout()) {}

  std::vector<PyThreadStack> run() {
    auto is = mem_.read_u64(L_.runtime + L_.interp_head);
    for (int n = 0; is.ok() && is.value() && n < kMaxInterpreters; ++n) {
      auto ts = mem_.read_u64(is.value() + L_.interp_threads);
      for (int t = 0; ts.ok() && ts.value() && t < kMaxThreads; ++t) {
        out_.push_back(thread(ts.value()));
        ts = mem_.read_u64(ts.value() + L_.ts_next);
      }
      is = mem_.read_u64(is.value() + L_.interp_next);
    }
    return std::move(out_);
  }

 private:
  PyThreadStack thread(uint64_t ts) {
    PyThreadStack s;
    s.tstate = ts;
    if (auto tid = mem_.read_u64(ts + L_.ts_native_tid); tid.ok()) s.tid = tid.value();
    auto f = python_current_frame(mem_, L_, ts);
    for (int n = 0; f.ok() && f.value(); ++n) {
      if (++read_ > kMaxAllFrames) {
        s.cut = fmt::format("more than {} frames in all threads: read no further", kMaxAllFrames);
        return s;
      }
      if (n == kMaxFrames) {
        s.cut = fmt::format("more than {} frames: a cycle", kMaxFrames);
        return s;
      }
      auto owner = mem_.read_as<uint8_t>(f.value() + L_.fr_owner);
      auto fr =
          owner.ok() && owner.value() != kFrameOwnedByCStack ? frame(f.value()) : std::nullopt;
      if (!owner.ok() || (!fr && owner.value() != kFrameOwnedByCStack)) {
        s.cut = fmt::format("frame {:#x} is unreadable", f.value());
        return s;
      }
      if (fr) s.frames.push_back(std::move(*fr));
      f = mem_.read_u64(f.value() + L_.fr_previous);
    }
    if (!f.ok()) s.cut = "the frame chain breaks";
    return s;
  }

  std::optional<PyFrame> frame(uint64_t f) {
    PyFrame fr;
    fr.addr = f;
    auto code = mem_.read_u64(f + L_.fr_code);
    auto prev = mem_.read_u64(f + L_.fr_prev_instr);
    if (!code.ok() || !prev.ok()) return std::nullopt;
    fr.code = code.value();
    fr.slots = f + L_.fr_localsplus;
    auto n = mem_.read_as<int32_t>(fr.code + L_.co_nlocalsplus);
    fr.nlocalsplus = n.ok() && n.value() > 0 && n.value() < (1 << 16) ? uint32_t(n.value()) : 0;
    auto st = mem_.read_as<int32_t>(fr.code + L_.co_stacksize);
    fr.nstack = st.ok() && st.value() > 0 && st.value() < (1 << 16) ? uint32_t(st.value()) : 0;
    fr.function = text(fr.code + L_.co_name);
    fr.file = text(fr.code + L_.co_filename);
    auto first = mem_.read_as<int32_t>(fr.code + L_.co_firstlineno);
    auto table = mem_.read_u64(fr.code + L_.co_linetable);
    auto bytes = table.ok() ? v_.bytes(table.value(), kMaxTable) : std::nullopt;
    if (first.ok() && bytes) {
      // The last instruction, in bytes from the first (prev_instr may lie
      // one unit before it: a frame not yet started).
      const int64_t addrq = int64_t(prev.value()) - int64_t(fr.code + L_.co_code);
      fr.line = python_line(*bytes, first.value(), addrq < 0 ? -1 : addrq);
    }
    return fr;
  }

  std::string text(uint64_t field) const {
    auto p = mem_.read_u64(field);
    auto s = p.ok() ? v_.str(p.value(), 200) : std::nullopt;
    return s ? *s : "?";
  }

  const PyValues& v_;
  const Memory& mem_;
  const PyLayout& L_;
  std::vector<PyThreadStack> out_;
  size_t read_ = 0;
};

}  // namespace

std::vector<PyThreadStack> python_stacks(const PyValues& v) {
  return Stacks(v).run();
}

}  // namespace lr
