"""drgn side of `make bench`: walk the same list and hash table as leakref,
reading each object's refcount, and time only the walk loops.
Usage: python3 drgn_walk.py CORE BUCKETS
       python3 drgn_walk.py CORE --emit: one JSON line per list object (address,
       refcount) on stdout, what `leakref walk --jsonl` writes; timed whole."""
import json
import sys
import time

import drgn
from drgn.helpers.linux.list import hlist_for_each_entry, list_for_each_entry

core = sys.argv[1]
t0 = time.perf_counter()
prog = drgn.Program()
prog.set_core_dump(core)
prog.load_debug_info(None, default=True, main=True)
setup = time.perf_counter() - t0

if sys.argv[2] == "--emit":
    w = sys.stdout.write
    for node in list_for_each_entry("struct bnode", prog["big_list"].address_of_(), "link"):
        w(json.dumps({"addr": hex(node.value_()), "refcount": node.refcount.value_()}) + "\n")
    sys.exit(0)
nbuckets = int(sys.argv[2])

out = {"setup_s": setup}
t = time.perf_counter()
hist = {}
n = 0
for node in list_for_each_entry("struct bnode", prog["big_list"].address_of_(), "link"):
    rc = node.refcount.value_()
    hist[rc] = hist.get(rc, 0) + 1
    n += 1
out["list"] = {"count": n, "seconds": time.perf_counter() - t,
               "histogram": {str(k): v for k, v in sorted(hist.items())}}

t = time.perf_counter()
hist = {}
n = 0
buckets = prog["big_hash"]
for i in range(nbuckets):
    for node in hlist_for_each_entry("struct hnode", buckets[i].address_of_(), "hnode"):
        rc = node.refcount.value_()
        hist[rc] = hist.get(rc, 0) + 1
        n += 1
out["hash"] = {"count": n, "seconds": time.perf_counter() - t,
               "histogram": {str(k): v for k, v in sorted(hist.items())}}
print(json.dumps(out))
