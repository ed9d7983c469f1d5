// CPython's data stacks as a heap layer that adds no blocks but says which
// of their words are dead. Since 3.11 a thread's Python frames
// (_PyInterpreterFrame) lie in chunks it maps itself (_PyStackChunk),
// pushed and popped like a C stack: the slots of a frame's value stack past
// its saved top, and a chunk past the thread's (or the chunk's saved) top,
// keep the pointers of values already popped. Scanned as roots, they would
// keep alive objects nothing holds any more, and hide the leaked references
// the census looks for. A frame whose top is not saved (-1: the frame
// executing when the core was taken) is all live.
#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "corelib/blocks/heap.hpp"
#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/dump/elfcore.hpp"
#include "targets/cpython/cpython.hpp"
#include "targets/cpython/cpython_layout.hpp"
#include "targets/cpython/py_frames.hpp"

namespace lr {

namespace {

constexpr int kMaxThreads = 4096, kMaxFrames = 1 << 16, kMaxChunks = 1 << 12;
constexpr uint64_t kMaxChunkSize = 1ull << 30;

class DeadSlots {
 public:
  DeadSlots(const Program& prog, const PyLayout& L, HeapWalk& h) : mem_(prog.mem()), L_(L), h_(h) {
    // A chunk is believed only inside one writable mapping of the core
    // that no module covers (CPython maps its chunks itself): a damaged
    // pointer must not make a module's data or a stack "dead".
    if (const CoreFile* core = prog.core())
      for (const auto& s : core->segments())
        if (s.writable && !s.executable && !prog.modules().symbolize(s.start).module)
          anon_.emplace_back(s.start, s.end);
  }

  void run() {
    auto is = mem_.read_u64(L_.runtime + L_.interp_head);
    for (int n = 0; is.ok() && is.value() && n < 64; ++n) {
      free_arrays(is.value());
      gc_links(is.value());
      auto ts = mem_.read_u64(is.value() + L_.interp_threads);
      for (int t = 0; ts.ok() && ts.value() && t < kMaxThreads; ++t) {
        thread(ts.value());
        ts = mem_.read_u64(ts.value() + L_.ts_next);
      }
      is = mem_.read_u64(is.value() + L_.interp_next);
    }
  }

 private:
  // [a, b) is dead only inside one of the thread's chunks (chunks_).
  void dead(uint64_t a, uint64_t b, const char* what) {
    for (const auto& [s, e] : chunks_)
      if (a < b && a >= s && b <= e) {
        h_.dead.push_back({a, b, what});
        return;
      }
  }

  // The GC's generation lists (Modules/gcmodule.c: each tracked object's
  // PyGC_Head chains it to the next and the previous, the heads lie in the
  // interpreter): links, never references. A list that breaks or loops
  // leaves the links past that point followed, and says so.
  void gc_links(uint64_t is) {
    for (uint64_t g = 0; g <= L_.ngenerations; ++g) {
      const uint64_t head =
          g < L_.ngenerations ? is + L_.gc_generations + g * L_.gen_size : is + L_.gc_permanent;
      module_dead(head, head + HeapWalk::kLinkBytes, "CPython GC generation list head");
      auto next = mem_.read_u64(head);
      uint64_t steps = 0;
      bool whole = true;
      while (next.ok() && (next.value() & ~uint64_t{3}) != head) {
        const uint64_t at = next.value() & ~uint64_t{3};
        // A head lies at its block's start, or past 3.11's managed dict
        // pointers (or 3.12's pre-header): anywhere else, the list is
        // damaged, and no word is taken out of a block on its say.
        if (++steps > h_.in_use.size() + 1 || !head_in_block(at)) {
          whole = false;
          break;
        }
        h_.links.push_back(at);
        next = mem_.read_u64(at);
      }
      if (!next.ok() || !whole)
        h_.partial.push_back(fmt::format(
            "{} {} at {:#x} breaks, loops or leaves the heap's blocks: the links of the "
            "objects past that point are followed as references",
            kGcListCut, g, head));
    }
  }

  // [a, b) is dead when it lies in the interpreter's module (the main
  // interpreter's state is in _PyRuntime): a damaged interpreter pointer
  // never cuts other roots.
  void module_dead(uint64_t a, uint64_t b, const char* what) {
    const Module* m = L_.module;
    if (m && a < b && a >= m->base && b <= m->end) h_.dead.push_back({a, b, what});
  }

  // Whether a PyGC_Head at `g` lies at 0 or 16 bytes into an in-use block,
  // its two words inside it.
  bool head_in_block(uint64_t g) const {
    const auto& in = h_.in_use;
    auto it = std::upper_bound(in.begin(), in.end(), g,
                               [](uint64_t a, const HeapChunk& k) { return a < k.user; });
    if (it == in.begin()) return false;
    const HeapChunk k = *--it;
    return (g == k.user || g == k.user + 16) && g + HeapWalk::kLinkBytes <= k.user + k.usable();
  }

  // The slots of the interpreter's free-list arrays past their count
  // (PyLayout::free_arrays); a count outside the array says nothing.
  void free_arrays(uint64_t is) {
    for (const auto& f : L_.free_arrays) {
      auto n = mem_.read_as<int32_t>(is + f.numfree);
      if (!n.ok() || n.value() < 0 || uint64_t(n.value()) >= f.capacity) continue;
      module_dead(is + f.items + uint64_t(n.value()) * 8, is + f.items + f.capacity * 8,
                  "CPython free list past its count");
    }
  }

  bool anonymous(uint64_t a, uint64_t b) const {
    for (const auto& [s, e] : anon_)
      if (a < b && a >= s && b <= e) return true;
    return false;
  }

  void thread(uint64_t ts) {
    auto chunk = mem_.read_u64(ts + L_.ts_chunk);
    auto top = mem_.read_u64(ts + L_.ts_top);
    if (!chunk.ok() || !top.ok()) return;
    // The thread's chunk is dead past its top; each earlier one past the
    // top it saved when the next was pushed.
    uint64_t c = chunk.value(), t = top.value();
    chunks_.clear();
    for (int n = 0; c && n < kMaxChunks; ++n) {
      auto size = mem_.read_u64(c + L_.sc_size);
      if (!size.ok() || size.value() > kMaxChunkSize || !anonymous(c, c + size.value()) ||
          t < c + L_.sc_data || t > c + size.value())
        break;
      chunks_.emplace_back(c, c + size.value());
      dead(t, c + size.value(), "Python data stack past its top");
      auto prev = mem_.read_u64(c + L_.sc_previous);
      if (!prev.ok() || !prev.value()) break;
      auto saved = mem_.read_u64(prev.value() + L_.sc_top);
      if (!saved.ok() || saved.value() > kMaxChunkSize / 8) break;
      c = prev.value();
      t = c + L_.sc_data + saved.value() * 8;
    }
    frames(ts);
  }

  // Each frame's value stack past its saved top.
  void frames(uint64_t ts) {
    auto f = python_current_frame(mem_, L_, ts);
    for (int n = 0; f.ok() && f.value() && n < kMaxFrames; ++n) {
      const uint64_t fr = f.value();
      // An entry frame lies on the C stack, with no code (3.12+).
      if (auto owner = mem_.read_as<uint8_t>(fr + L_.fr_owner);
          owner.ok() && owner.value() == kFrameOwnedByCStack) {
        f = mem_.read_u64(fr + L_.fr_previous);
        continue;
      }
      auto code = mem_.read_u64(fr + L_.fr_code);
      auto top = mem_.read_as<int32_t>(fr + L_.fr_stacktop);
      if (!code.ok() || !top.ok()) return;
      auto nlocals = mem_.read_as<int32_t>(code.value() + L_.co_nlocalsplus);
      auto stack = mem_.read_as<int32_t>(code.value() + L_.co_stacksize);
      if (nlocals.ok() && stack.ok() && top.value() >= 0 && nlocals.value() >= 0 &&
          stack.value() >= 0 && top.value() <= nlocals.value() + stack.value()) {
        const uint64_t slots = fr + L_.fr_localsplus;
        dead(slots + uint64_t(top.value()) * 8,
             slots + (uint64_t(nlocals.value()) + uint64_t(stack.value())) * 8,
             "value stack of a Python frame past its top");
      }
      f = mem_.read_u64(fr + L_.fr_previous);
    }
  }

  const Memory& mem_;
  const PyLayout& L_;
  HeapWalk& h_;
  std::vector<std::pair<uint64_t, uint64_t>> anon_;    // writable mappings of no module
  std::vector<std::pair<uint64_t, uint64_t>> chunks_;  // the thread's chunks, believed
};

Result<void> mark_data_stacks(const Program& prog, const HeapLimits&, HeapWalk& h) {
  auto L = python_layout(prog);
  // Without the layout, pymalloc's layer has said why.
  if (!L.ok()) return make_error(Errc::kNotFound, L.error().message);
  DeadSlots(prog, L.value(), h).run();
  std::sort(h.links.begin(), h.links.end());
  h.links.erase(std::unique(h.links.begin(), h.links.end()), h.links.end());
  return {};
}

}  // namespace

HeapLayer data_stack_layer() {
  return {"cpython data stacks", &mark_data_stacks};
}

}  // namespace lr
