// The Python stack of each thread of a CPython core, as gdb's py-bt prints
// it (Tools/gdb/libpython.py): since 3.11 each thread's frames are
// _PyInterpreterFrames chained from tstate->cframe->current_frame (3.13:
// tstate->current_frame; entry frames on the C stack skipped), each with
// its code object (function name, file) and its last instruction, whose
// line comes from the code's location table (Objects/locations.md of
// 3.11).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "corelib/base/result.hpp"
#include "targets/cpython/cpython_layout.hpp"

namespace lr {

class Memory;
class PyValues;

struct PyFrame {
  uint64_t addr = 0, code = 0;
  std::string function, file;  // co_name, co_filename ("?" unreadable)
  int line = -1;               // -1: no line (an instruction without one)
  uint64_t slots = 0;          // localsplus: the locals, then the value stack
  uint32_t nlocalsplus = 0;
  uint32_t nstack = 0;  // co_stacksize: the value stack's slots past the locals
};

struct PyThreadStack {
  uint64_t tstate = 0;
  uint64_t tid = 0;             // native_thread_id: the thread's LWP, as the core names it
  std::vector<PyFrame> frames;  // innermost first
  std::string cut;              // why the chain was not read to its end ("" whole)
};

// The innermost frame of thread state `ts` (3.11: through its _PyCFrame;
// 0 for none).
Result<uint64_t> python_current_frame(const Memory& mem, const PyLayout& L, uint64_t ts);

// Every thread of every interpreter, bounded (a damaged chain is cut, and
// says so in `cut`).
std::vector<PyThreadStack> python_stacks(const PyValues& v);

// The line of the instruction at byte offset `addrq` of a code whose first
// line is `first` and whose location table is `table` (PyCode_Addr2Line).
int python_line(const std::string& table, int first, int64_t addrq);

// Name of local slot `i` of a frame's code (co_localsplusnames[i]); "" unknown.
std::string python_local_name(const PyValues& v, uint64_t code, uint64_t i);

}  // namespace lr
