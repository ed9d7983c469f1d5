// Where CPython keeps what leakref reads, for the interpreter of one core:
// the objects' and types' fields, the GC's generation lists, and pymalloc's
// arena table, from the interpreter's own DWARF (Debian's python3.X-dbg).
// What DWARF cannot say (the tp_flags bits, the arena and pool sizes, the
// pre-header before an object) comes from the release's headers, by the
// version the interpreter's Py_Version states. An interpreter without
// debug info, or a release leakref does not know, is refused naming it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "corelib/base/result.hpp"

namespace lr {

class Module;
class ModuleSet;
class Program;

// Py_TPFLAGS_* (Include/object.h of 3.11; 3.12 added MANAGED_WEAKREF, 3.13
// INLINE_VALUES).
inline constexpr uint64_t kTpInlineValues = 1ull << 2;    // 3.13: attribute values after the object
inline constexpr uint64_t kTpManagedWeakref = 1ull << 3;  // 3.12+: a weakref list before it
inline constexpr uint64_t kTpManagedDict = 1ull << 4;     // dict pointers before the object
inline constexpr uint64_t kTpHeapType = 1ull << 9;
inline constexpr uint64_t kTpReady = 1ull << 12;
inline constexpr uint64_t kTpHaveGc = 1ull << 14;
inline constexpr uint64_t kTpLongSubclass = 1ull << 24;
inline constexpr uint64_t kTpUnicodeSubclass = 1ull << 28;
inline constexpr uint64_t kTpListSubclass = 1ull << 25;
inline constexpr uint64_t kTpTupleSubclass = 1ull << 26;
inline constexpr uint64_t kTpBytesSubclass = 1ull << 27;
inline constexpr uint64_t kTpDictSubclass = 1ull << 29;
inline constexpr uint64_t kTpTypeSubclass = 1ull << 31;

// _PyInterpreterFrame.owner of a frame on the C stack (3.12's
// FRAME_OWNED_BY_CSTACK, Include/internal/pycore_frame.h): an entry frame
// with no code (f_executable is None), which py-bt does not show. 3.11's
// owners stop at 2.
inline constexpr uint8_t kFrameOwnedByCStack = 3;

struct PyLayout {
  std::string version;  // "3.11.2"
  uint32_t hex = 0;     // PY_VERSION_HEX
  uint32_t minor() const { return (hex >> 16) & 0xff; }
  // What changed between the releases leakref reads (3.11, 3.13), each
  // cited where it is used:
  // - 3.13 dropped _PyCFrame: tstate.current_frame is the frame itself;
  bool cframe = true;
  // - 3.12 made objects immortal: a count whose low 32 bits read as a
  //   negative int32 is never changed (Include/object.h, _Py_IsImmortal);
  bool immortals = false;
  // - 3.13 keeps a managed dict's values inline, after the object
  //   (tp_basicsize): the values' items at `values_items` from there
  //   (struct _dictvalues); 3.11 keeps them in a block of their own whose
  //   address is the word before the dict pointer;
  bool inline_values = false;
  uint64_t values_items = 0;
  // - 3.12 gave an int a tag (its digits' count << 3 | sign) in place of
  //   ob_size (Include/cpython/longintrepr.h): its offset, 0 in 3.11.
  uint64_t long_tag = 0;
  // The flags that give an object two words before its GC head: 3.11's
  // MANAGED_DICT, 3.12's Py_TPFLAGS_PREHEADER (MANAGED_DICT | MANAGED_WEAKREF).
  uint64_t preheader_flags = kTpManagedDict;
  std::string from;  // "the DWARF of /usr/lib/debug/..."
  Module* module = nullptr;
  uint64_t runtime = 0, type_type = 0;  // &_PyRuntime, &PyType_Type
  // PyObject, PyVarObject
  uint64_t ob_refcnt = 0, ob_type = 8, ob_size = 16;
  // PyTypeObject
  uint64_t tp_name = 0, tp_basicsize = 0, tp_itemsize = 0, tp_flags = 0, tp_base = 0, tp_dict = 0;
  uint64_t type_size = 0;
  // str (Objects/unicodeobject.c, 3.11): PyASCIIObject's length and its
  // `state` bitfield (interned, kind, compact, ascii: bit offsets and widths
  // from the state word's start); a compact ASCII str is a PyASCIIObject
  // and its characters, a compact other one a PyCompactUnicodeObject and
  // its characters of `kind` bytes, each with a terminating NUL.
  uint64_t str_state = 0, str_length = 0, ascii_size = 0, compact_size = 0;
  struct Bits {
    uint16_t shift = 0, width = 0;
    uint32_t of(uint32_t state) const { return (state >> shift) & ((1u << width) - 1); }
  };
  Bits st_interned, st_kind, st_compact, st_ascii;
  uint64_t gc_head = 16;  // sizeof(PyGC_Head)
  // The interpreters: _PyRuntime.interpreters.head, PyInterpreterState.next,
  // and the GC's generations in it: interp.gc.generations[i].head,
  // permanent_generation.head, each a gc_generation of `gen_size` bytes.
  uint64_t interp_head = 0, interp_next = 0, gc_generations = 0, gc_permanent = 0;
  uint64_t gen_size = 0, ngenerations = 3;
  // Each thread's frames on its data stack (3.11's _PyInterpreterFrame in
  // _PyStackChunks): interp.threads.head, tstate.next, tstate.cframe and
  // cframe.current_frame (3.13: ts_cframe is tstate.current_frame),
  // tstate.datastack_chunk and datastack_top; a frame's code (3.13:
  // f_executable), caller, saved stack top (-1: not saved) and slots; a
  // code's local and stack slots; a chunk's caller, size, saved top (in
  // slots from `data`) and data.
  uint64_t interp_threads = 0, ts_next = 0, ts_cframe = 0, ts_chunk = 0, ts_top = 0;
  uint64_t cf_current = 0, fr_code = 0, fr_previous = 0, fr_stacktop = 0, fr_localsplus = 0;
  uint64_t co_nlocalsplus = 0, co_stacksize = 0;
  uint64_t sc_previous = 0, sc_size = 0, sc_top = 0, sc_data = 0;
  // What a Python user's names are made of: a frame's function and its
  // last instruction (3.11's prev_instr, 3.13's instr_ptr: both the
  // instruction a calling frame is in; tstate.native_thread_id: the
  // thread's LWP); a code's
  // names, first line, location table (3.11's, Objects/locations.md) and
  // instructions; bytes' and tuples' contents; a list's, dict's and keys
  // table's fields and the entries' two forms (general, with the hash; str
  // keys only); a module's dict and name; a heap type's shared keys.
  uint64_t ts_native_tid = 0, fr_func = 0, fr_prev_instr = 0, fr_owner = 0;
  uint64_t co_name = 0, co_qualname = 0, co_filename = 0, co_firstlineno = 0, co_linetable = 0,
           co_localsplusnames = 0, co_code = 0;
  // An int's digits: 30 bits each in a 32-bit word (PYLONG_BITS_IN_DIGIT on
  // 64-bit builds, Include/cpython/longintrepr.h).
  uint64_t bytes_sval = 0, tuple_item = 0, list_item = 0, list_allocated = 0, long_digit = 0;
  uint64_t dict_used = 0, dict_keys = 0, dict_values = 0;
  uint64_t dk_log2_size = 0, dk_log2_index_bytes = 0, dk_kind = 0, dk_nentries = 0, dk_indices = 0;
  uint64_t entry_key = 0, entry_value = 0, entry_size = 0;
  uint64_t uentry_key = 0, uentry_value = 0, uentry_size = 0;
  uint64_t md_dict = 0, md_name = 0, md_state = 0, ht_cached_keys = 0;
  // A closure's cells: a cell's contents, and a function's closure (a tuple
  // of cells), defaults and keyword defaults.
  uint64_t cell_ref = 0, func_closure = 0, func_defaults = 0, func_kwdefaults = 0;
  // pymalloc (Objects/obmalloc.c): the addresses of `arenas` and
  // `maxarenas` (in 3.11 statics an LTO build renames arenas.lto_priv.0; in
  // 3.13 members of the main interpreter's obmalloc state,
  // interp->obmalloc->mgmt), struct arena_object and struct pool_header.
  uint64_t arenas_var = 0, maxarenas_var = 0;
  uint64_t raw_blocks_var = 0;  // raw_allocated_blocks: its requests passed on to malloc
  // The interpreter's free lists kept as arrays (dicts, dict keys, lists,
  // async generators' values and asends: Objects/dictobject.c,
  // listobject.c, genobject.c; in 3.11 interp.dict_state and its likes, in
  // 3.13 interp.object_state.freelists): the array's offset in the
  // interpreter, its `numfree` count's, and its slots. The slots past
  // numfree keep the objects they last held, reused or freed since.
  struct FreeArray {
    uint64_t items = 0, numfree = 0, capacity = 0;
  };
  std::vector<FreeArray> free_arrays;
  // 3.13: PyInterpreterState.obmalloc, and the main interpreter's value of
  // it (an interpreter with its own holds objects leakref does not walk).
  uint64_t interp_obmalloc = 0, main_obmalloc = 0;
  uint64_t arena_size_of = 0, ao_address = 0, ao_pool_address = 0, ao_ntotalpools = 0;
  uint64_t pool_header_size = 0, ph_count = 0, ph_freeblock = 0, ph_szidx = 0, ph_nextoffset = 0,
           ph_maxnextoffset = 0;
  // obmalloc.c's ARENA_SIZE and POOL_SIZE (64-bit, radix tree: 3.10+).
  uint64_t arena_size = 1ull << 20, pool_size = 1ull << 14;
  // The bytes of an object's header the census reads for a type with
  // `flags` and `itemsize`: a str's length and state, a var-sized object's
  // ob_size, else its type.
  uint64_t head_read(uint64_t flags, uint64_t itemsize) const {
    if (flags & kTpUnicodeSubclass) return std::max(str_length + 8, str_state + 4);
    return itemsize ? ob_size + 8 : ob_type + 8;
  }
  uint64_t pool_overhead() const { return (pool_header_size + 15) & ~uint64_t{15}; }
  // Bytes before an object of a type with `flags`: its PyGC_Head, and in
  // 3.11 the managed dict's two pointers (pycore_object.h,
  // _PyType_PreHeaderSize).
  uint64_t preheader(uint64_t flags) const {
    return ((flags & kTpHaveGc) ? gc_head : 0) + ((flags & preheader_flags) ? 16 : 0);
  }
  // Whether a count `refcnt` is an immortal object's (3.12+).
  bool immortal(int64_t refcnt) const {
    return immortals && static_cast<int32_t>(static_cast<uint32_t>(refcnt)) < 0;
  }
};

// The module of `mods` that holds the interpreter (defines _PyRuntime):
// python3.X itself or libpython3.X.so; null when the process has none.
Module* python_module(const ModuleSet& mods);
// Whether a file a process maps is CPython's (by base name).
bool is_python_file(std::string_view basename);

// The layout of `prog`'s interpreter. kNotFound: the process runs no
// CPython; kUnsupported: a release leakref does not know, or one without
// its debug info (the message names the version and the package).
Result<PyLayout> python_layout(const Program& prog);

}  // namespace lr
