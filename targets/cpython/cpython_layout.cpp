// CPython's layout from its DWARF and its release's headers
// (cpython_layout.hpp).
#include "targets/cpython/cpython_layout.hpp"

#include <fmt/format.h>

#include <span>

#include "corelib/debuginfo/modules.hpp"
#include "corelib/debuginfo/program.hpp"
#include "corelib/debuginfo/types.hpp"

namespace lr {

bool is_python_file(std::string_view b) {
  return b.rfind("python3", 0) == 0 || b.rfind("libpython3", 0) == 0;
}

Module* python_module(const ModuleSet& mods) {
  for (const auto& m : mods.modules())
    if (!m->types_only && is_python_file(m->basename()) && m->find_one_symbol("_PyRuntime"))
      return m.get();
  return nullptr;
}

namespace {

// A static variable of obmalloc.c by its name, or by the name an LTO
// build gives it ("arenas.lto_priv.0"): 0 when the module has neither.
uint64_t static_var(Module& m, const std::string& name) {
  if (const Symbol* s = m.find_one_symbol(name)) return s->addr;
  const std::string lto = name + ".lto_priv.";
  for (const Symbol& s : m.symbols())
    if (s.is_object && s.name.rfind(lto, 0) == 0) return s.addr;
  return 0;
}

// "3.11.2" from PY_VERSION_HEX.
std::string version_text(uint32_t hex) {
  return fmt::format("{}.{}.{}", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
}

// The offset of member path `path` of type `name`.
Result<uint64_t> offset_of(TypeRegistry& types, std::string_view name, std::string_view path) {
  LR_ASSIGN(const Type* t, types.find(name));
  LR_ASSIGN(FieldLoc f, resolve_path(t, path));
  return f.offset;
}

Result<uint64_t> size_of(TypeRegistry& types, std::string_view name) {
  LR_ASSIGN(const Type* t, types.find(name));
  if (!t->strip() || t->strip()->size == 0)
    return make_error(Errc::kNotFound, fmt::format("{} has no size", name));
  return t->strip()->size;
}

// A bit field of PyASCIIObject's state word, from its DWARF.
Result<PyLayout::Bits> state_bits(TypeRegistry& types, uint64_t state, const char* name) {
  LR_ASSIGN(const Type* t, types.find("PyASCIIObject"));
  LR_ASSIGN(FieldLoc f, resolve_path(t, std::string("state.") + name));
  const uint64_t shift = (f.offset - state) * 8 + f.bit_offset;
  if (f.bit_size == 0 || f.bit_size > 8 || shift + f.bit_size > 32)
    return make_error(Errc::kBadFormat,
                      fmt::format("PyASCIIObject.state.{} is no bit field", name));
  return PyLayout::Bits{static_cast<uint16_t>(shift), f.bit_size};
}

struct Field {
  uint64_t PyLayout::*out;
  std::string_view type, path;
};

// The offsets of `fields`, from the DWARF; the first missing one is the
// error.
template <size_t N>
Result<void> read_fields(TypeRegistry& types, const Field (&fields)[N], PyLayout& L) {
  for (const Field& f : fields) {
    auto r = offset_of(types, f.type, f.path);
    if (!r.ok())
      return make_error(r.error().code,
                        fmt::format("{}.{}: {}", f.type, f.path, r.error().message));
    L.*f.out = r.value();
  }
  return {};
}

// What 3.11 and 3.13 name apart (cpython_layout.hpp says what changed).
constexpr Field k311[] = {
    {&PyLayout::ts_cframe, "PyThreadState", "cframe"},
    {&PyLayout::cf_current, "_PyCFrame", "current_frame"},
    {&PyLayout::fr_code, "struct _PyInterpreterFrame", "f_code"},
    {&PyLayout::fr_func, "struct _PyInterpreterFrame", "f_func"},
    {&PyLayout::fr_prev_instr, "struct _PyInterpreterFrame", "prev_instr"},
    {&PyLayout::long_digit, "struct _longobject", "ob_digit"},
};
constexpr Field k313[] = {
    {&PyLayout::ts_cframe, "PyThreadState", "current_frame"},
    {&PyLayout::fr_code, "struct _PyInterpreterFrame", "f_executable"},
    {&PyLayout::fr_func, "struct _PyInterpreterFrame", "f_funcobj"},
    {&PyLayout::fr_prev_instr, "struct _PyInterpreterFrame", "instr_ptr"},
    {&PyLayout::long_digit, "struct _longobject", "long_value.ob_digit"},
    {&PyLayout::long_tag, "struct _longobject", "long_value.lv_tag"},
    {&PyLayout::values_items, "struct _dictvalues", "values"},
    {&PyLayout::interp_obmalloc, "PyInterpreterState", "obmalloc"},
};

// Every offset the readers use, from the DWARF; the first missing one is
// the error.
Result<void> fields_from_dwarf(TypeRegistry& types, PyLayout& L) {
  static constexpr Field kFields[] = {
      {&PyLayout::ob_refcnt, "PyObject", "ob_refcnt"},
      {&PyLayout::ob_type, "PyObject", "ob_type"},
      {&PyLayout::ob_size, "PyVarObject", "ob_size"},
      {&PyLayout::tp_name, "PyTypeObject", "tp_name"},
      {&PyLayout::tp_basicsize, "PyTypeObject", "tp_basicsize"},
      {&PyLayout::tp_itemsize, "PyTypeObject", "tp_itemsize"},
      {&PyLayout::tp_flags, "PyTypeObject", "tp_flags"},
      {&PyLayout::tp_base, "PyTypeObject", "tp_base"},
      {&PyLayout::tp_dict, "PyTypeObject", "tp_dict"},
      {&PyLayout::str_state, "PyASCIIObject", "state"},
      {&PyLayout::str_length, "PyASCIIObject", "length"},
      {&PyLayout::interp_head, "_PyRuntimeState", "interpreters.head"},
      {&PyLayout::interp_next, "PyInterpreterState", "next"},
      {&PyLayout::gc_generations, "PyInterpreterState", "gc.generations"},
      {&PyLayout::gc_permanent, "PyInterpreterState", "gc.permanent_generation"},
      {&PyLayout::interp_threads, "PyInterpreterState", "threads.head"},
      {&PyLayout::ts_next, "PyThreadState", "next"},
      {&PyLayout::ts_chunk, "PyThreadState", "datastack_chunk"},
      {&PyLayout::ts_top, "PyThreadState", "datastack_top"},
      {&PyLayout::fr_previous, "struct _PyInterpreterFrame", "previous"},
      {&PyLayout::fr_stacktop, "struct _PyInterpreterFrame", "stacktop"},
      {&PyLayout::fr_localsplus, "struct _PyInterpreterFrame", "localsplus"},
      {&PyLayout::co_nlocalsplus, "PyCodeObject", "co_nlocalsplus"},
      {&PyLayout::co_stacksize, "PyCodeObject", "co_stacksize"},
      {&PyLayout::sc_previous, "_PyStackChunk", "previous"},
      {&PyLayout::sc_size, "_PyStackChunk", "size"},
      {&PyLayout::sc_top, "_PyStackChunk", "top"},
      {&PyLayout::sc_data, "_PyStackChunk", "data"},
      {&PyLayout::ts_native_tid, "PyThreadState", "native_thread_id"},
      {&PyLayout::fr_owner, "struct _PyInterpreterFrame", "owner"},
      {&PyLayout::co_name, "PyCodeObject", "co_name"},
      {&PyLayout::co_qualname, "PyCodeObject", "co_qualname"},
      {&PyLayout::co_filename, "PyCodeObject", "co_filename"},
      {&PyLayout::co_firstlineno, "PyCodeObject", "co_firstlineno"},
      {&PyLayout::co_linetable, "PyCodeObject", "co_linetable"},
      {&PyLayout::co_localsplusnames, "PyCodeObject", "co_localsplusnames"},
      {&PyLayout::co_code, "PyCodeObject", "co_code_adaptive"},
      {&PyLayout::bytes_sval, "PyBytesObject", "ob_sval"},
      {&PyLayout::tuple_item, "PyTupleObject", "ob_item"},
      {&PyLayout::list_item, "PyListObject", "ob_item"},
      {&PyLayout::list_allocated, "PyListObject", "allocated"},
      {&PyLayout::dict_used, "PyDictObject", "ma_used"},
      {&PyLayout::dict_keys, "PyDictObject", "ma_keys"},
      {&PyLayout::dict_values, "PyDictObject", "ma_values"},
      {&PyLayout::dk_log2_size, "PyDictKeysObject", "dk_log2_size"},
      {&PyLayout::dk_log2_index_bytes, "PyDictKeysObject", "dk_log2_index_bytes"},
      {&PyLayout::dk_kind, "PyDictKeysObject", "dk_kind"},
      {&PyLayout::dk_nentries, "PyDictKeysObject", "dk_nentries"},
      {&PyLayout::dk_indices, "PyDictKeysObject", "dk_indices"},
      {&PyLayout::entry_key, "PyDictKeyEntry", "me_key"},
      {&PyLayout::entry_value, "PyDictKeyEntry", "me_value"},
      {&PyLayout::uentry_key, "PyDictUnicodeEntry", "me_key"},
      {&PyLayout::uentry_value, "PyDictUnicodeEntry", "me_value"},
      {&PyLayout::md_dict, "PyModuleObject", "md_dict"},
      {&PyLayout::md_name, "PyModuleObject", "md_name"},
      {&PyLayout::md_state, "PyModuleObject", "md_state"},
      {&PyLayout::ht_cached_keys, "PyHeapTypeObject", "ht_cached_keys"},
      {&PyLayout::cell_ref, "PyCellObject", "ob_ref"},
      {&PyLayout::func_closure, "PyFunctionObject", "func_closure"},
      {&PyLayout::func_defaults, "PyFunctionObject", "func_defaults"},
      {&PyLayout::func_kwdefaults, "PyFunctionObject", "func_kwdefaults"},
      {&PyLayout::ao_address, "struct arena_object", "address"},
      {&PyLayout::ao_pool_address, "struct arena_object", "pool_address"},
      {&PyLayout::ao_ntotalpools, "struct arena_object", "ntotalpools"},
      {&PyLayout::ph_count, "struct pool_header", "ref.count"},
      {&PyLayout::ph_freeblock, "struct pool_header", "freeblock"},
      {&PyLayout::ph_szidx, "struct pool_header", "szidx"},
      {&PyLayout::ph_nextoffset, "struct pool_header", "nextoffset"},
      {&PyLayout::ph_maxnextoffset, "struct pool_header", "maxnextoffset"},
  };
  if (auto r = read_fields(types, kFields, L); !r.ok()) return r;
  if (auto r = L.minor() == 11 ? read_fields(types, k311, L) : read_fields(types, k313, L); !r.ok())
    return r;
  LR_ASSIGN(L.type_size, size_of(types, "PyTypeObject"));
  LR_ASSIGN(L.ascii_size, size_of(types, "PyASCIIObject"));
  LR_ASSIGN(L.compact_size, size_of(types, "PyCompactUnicodeObject"));
  for (auto [out, name] : {std::pair{&L.st_interned, "interned"}, std::pair{&L.st_kind, "kind"},
                           std::pair{&L.st_compact, "compact"}, std::pair{&L.st_ascii, "ascii"}}) {
    auto b = state_bits(types, L.str_state, name);
    if (!b.ok()) return b.error();
    *out = b.value();
  }
  LR_ASSIGN(L.gc_head, size_of(types, "PyGC_Head"));
  LR_ASSIGN(L.gen_size, size_of(types, "struct gc_generation"));
  LR_ASSIGN(L.arena_size_of, size_of(types, "struct arena_object"));
  LR_ASSIGN(L.pool_header_size, size_of(types, "struct pool_header"));
  LR_ASSIGN(L.entry_size, size_of(types, "PyDictKeyEntry"));
  LR_ASSIGN(L.uentry_size, size_of(types, "PyDictUnicodeEntry"));
  return {};
}

// The free lists kept as arrays (PyLayout::free_arrays), each as its
// array's and its count's member paths in PyInterpreterState.
Result<void> free_arrays(TypeRegistry& types, PyLayout& L) {
  static constexpr std::pair<std::string_view, std::string_view> k311[] = {
      {"dict_state.free_list", "dict_state.numfree"},
      {"dict_state.keys_free_list", "dict_state.keys_numfree"},
      {"list.free_list", "list.numfree"},
      {"async_gen.value_freelist", "async_gen.value_numfree"},
      {"async_gen.asend_freelist", "async_gen.asend_numfree"}};
  static constexpr std::pair<std::string_view, std::string_view> k313[] = {
      {"object_state.freelists.dicts.items", "object_state.freelists.dicts.numfree"},
      {"object_state.freelists.dictkeys.items", "object_state.freelists.dictkeys.numfree"},
      {"object_state.freelists.lists.items", "object_state.freelists.lists.numfree"},
      {"object_state.freelists.async_gens.items", "object_state.freelists.async_gens.numfree"},
      {"object_state.freelists.async_gen_asends.items",
       "object_state.freelists.async_gen_asends.numfree"}};
  LR_ASSIGN(const Type* interp, types.find("PyInterpreterState"));
  for (const auto& [items, numfree] : L.minor() == 11 ? std::span(k311) : std::span(k313)) {
    LR_ASSIGN(FieldLoc a, resolve_path(interp, items));
    LR_ASSIGN(FieldLoc n, resolve_path(interp, numfree));
    const Type* t = a.type ? a.type->strip() : nullptr;
    if (!t || t->size == 0 || t->size % 8)
      return make_error(Errc::kBadFormat,
                        fmt::format("PyInterpreterState.{} is no array of pointers", items));
    L.free_arrays.push_back({a.offset, n.offset, t->size / 8});
  }
  return {};
}

// 3.13's pymalloc state: the main interpreter's (_PyRuntime.interpreters.main
// ->obmalloc; Objects/obmalloc.c's obmalloc_state_main), whose `mgmt` holds
// the arena table and its counts.
Result<void> main_obmalloc(const Program& prog, PyLayout& L) {
  TypeRegistry& types = prog.types();
  LR_ASSIGN(uint64_t main_off, offset_of(types, "_PyRuntimeState", "interpreters.main"));
  LR_ASSIGN(uint64_t arenas, offset_of(types, "struct _obmalloc_state", "mgmt.arenas"));
  LR_ASSIGN(uint64_t maxarenas, offset_of(types, "struct _obmalloc_state", "mgmt.maxarenas"));
  LR_ASSIGN(uint64_t raw, offset_of(types, "struct _obmalloc_state", "mgmt.raw_allocated_blocks"));
  LR_ASSIGN(uint64_t interp, prog.mem().read_u64(L.runtime + main_off));
  if (!interp) return make_error(Errc::kBadFormat, "it has no main interpreter");
  LR_ASSIGN(L.main_obmalloc, prog.mem().read_u64(interp + L.interp_obmalloc));
  if (!L.main_obmalloc)
    return make_error(Errc::kBadFormat, "its main interpreter has no pymalloc state");
  L.arenas_var = L.main_obmalloc + arenas;
  L.maxarenas_var = L.main_obmalloc + maxarenas;
  L.raw_blocks_var = L.main_obmalloc + raw;
  return {};
}

}  // namespace

Result<PyLayout> python_layout(const Program& prog) {
  Module* m = python_module(prog.modules());
  if (!m) return make_error(Errc::kNotFound, "the process runs no CPython (no _PyRuntime)");
  PyLayout L;
  L.module = m;
  L.runtime = m->find_one_symbol("_PyRuntime")->addr;
  const Symbol* pv = m->find_one_symbol("Py_Version");
  const Symbol* tt = m->find_one_symbol("PyType_Type");
  if (!pv)
    return make_error(Errc::kUnsupported,
                      fmt::format("{} is a CPython older than 3.11 (it has no Py_Version); "
                                  "leakref reads CPython 3.11 and 3.13",
                                  m->basename()));
  auto hex = prog.mem().read_u64(pv->addr);
  if (!hex.ok() || !tt)
    return make_error(Errc::kBadFormat,
                      fmt::format("{}: Py_Version or PyType_Type is unreadable", m->basename()));
  L.hex = static_cast<uint32_t>(hex.value());
  L.version = version_text(L.hex);
  L.type_type = tt->addr;
  if ((L.hex >> 24) != 3 || (L.minor() != 11 && L.minor() != 13))
    return make_error(Errc::kUnsupported,
                      fmt::format("{} is CPython {}; leakref reads CPython 3.11 and 3.13 "
                                  "(Debian 12's python3.11, Debian 13's python3.13)",
                                  m->basename(), L.version));
  if (!m->has_dwarf())
    return make_error(
        Errc::kUnsupported,
        fmt::format("{} is CPython {} without its debug info ({}); install "
                    "python{}.{}-dbg",
                    m->basename(), L.version, m->debug_missing, L.hex >> 24, L.minor()));
  L.from = "the DWARF of " + m->debug_path;
  if (L.minor() == 13) {
    L.cframe = false;
    L.immortals = true;
    L.inline_values = true;
    L.preheader_flags = kTpManagedDict | kTpManagedWeakref;
  }
  if (auto r = fields_from_dwarf(prog.types(), L); !r.ok())
    return make_error(Errc::kUnsupported, fmt::format("CPython {} ({}): its DWARF lacks {}",
                                                      L.version, m->basename(), r.error().message));
  if (auto r = free_arrays(prog.types(), L); !r.ok())
    return make_error(Errc::kUnsupported, fmt::format("CPython {} ({}): its DWARF lacks {}",
                                                      L.version, m->basename(), r.error().message));
  if (L.minor() == 11) {
    L.arenas_var = static_var(*m, "arenas");
    L.maxarenas_var = static_var(*m, "maxarenas");
    L.raw_blocks_var = static_var(*m, "raw_allocated_blocks");
  } else if (auto r = main_obmalloc(prog, L); !r.ok()) {
    return make_error(Errc::kBadFormat, fmt::format("CPython {} ({}): {}", L.version, m->basename(),
                                                    r.error().message));
  }
  return L;
}

}  // namespace lr
