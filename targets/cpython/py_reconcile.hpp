// A CPython process's objects reconciled with the references found in its
// memory (py_reconcile.cpp): each object's ob_refcnt against the words that
// point at it from memory a root reaches (other objects, C blocks, module
// data, stacks, registers). A reference counted that no such word holds is
// a leaked reference (a Py_DECREF forgotten), unless C code keeps the
// pointer where no word says it (a register of a thread that is not
// stopped in the core, memory the core lacks, an encoded pointer).
//
// Reachability does not follow the GC's own links (each tracked object's
// PyGC_Head chains it to its generation, a list every root would reach).
// Of the objects no root reaches, the GC frees those whose every counted
// reference comes from other tracked objects it cannot reach (cyclic
// garbage, the next collection's). The rest are leaked: an object with a
// reference counted that no unreachable tracked object explains (a
// forgotten Py_DECREF, a leaked C block holding it), and everything only it
// reaches.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "corelib/answers/core_index.hpp"
#include "corelib/base/result.hpp"
#include "targets/cpython/py_objects.hpp"

namespace lr {

struct PyTypeRow {
  uint32_t type = 0;
  uint64_t objects = 0, bytes = 0, tracked = 0, free_listed = 0;
  uint64_t excess_objects = 0, excess_refs = 0;  // objects with refs counted past those found
  uint64_t unreachable = 0;                      // live objects no root reaches
  uint64_t leaked = 0;                           // of them, those no collection frees
  uint64_t immortal = 0;                         // 3.12+: never freed, counts unkept
};

struct PyObjRefs {
  uint32_t found = 0;      // words pointing at it from blocks or roots a root reaches
  uint32_t from_dead = 0;  // from blocks no root reaches
  uint32_t from_gc = 0;    // of those, from objects the GC tracks (what it can explain)
  bool reached = true;     // a root reaches its block (the GC's own links not followed)
  bool leaked = false;     // unreachable, and no collection will free it
  bool immortal = false;   // 3.12+: its count is no count (PyLayout::immortal)
  int64_t excess(int64_t refcnt) const { return immortal ? 0 : refcnt - found - from_dead; }
};

struct PyReport {
  // The census: the CPython target's tagger's (borrowed: it lives as long
  // as the indexed core), else one of its own.
  const PyCensus* held = nullptr;
  PyCensus own;
  const PyCensus& census() const { return held ? *held : own; }
  std::vector<PyObjRefs> refs;       // by census.objects
  std::vector<PyTypeRow> rows;       // by bytes, largest first
  std::vector<std::string> partial;  // the root model's reasons, when it is partial
  uint64_t live = 0, live_bytes = 0, free_listed = 0;
  uint64_t excess_objects = 0, excess_refs = 0, leaked = 0, unreachable = 0, immortal = 0;
  bool leaked_object(size_t i) const { return refs[i].leaked; }
};

// The blocks whose tail words are stale (python_owned_blocks' live_end),
// by chunk number, each with the address the stale part begins at: a word
// there holds nothing.
std::unordered_map<uint32_t, uint64_t> python_spare_slots(const RefIndex& ix, const Memory& mem,
                                                          const PyCensus& c);

// The census the CPython target's tagger made of the heap `core`'s index
// numbers; null when none was.
const PyCensus* tagged_census(const IndexedCore& core);

// The census of `core`'s objects with the references found to each.
Result<PyReport> python_report(const IndexedCore& core);

}  // namespace lr
