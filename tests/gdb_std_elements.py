# Run inside gdb (gdb -batch -nx -ex 'set language c++' -ex 'python
# exec(open(THIS).read())' EXE CORE)
# with LR_GLOBALS=g_vec,g_map,... in the environment: prints, as one JSON
# object, each global's elements as gdb's own libstdc++ pretty-printers
# give them: a list of elements, each the list of its scalar leaves as
# text (a map's entry: its key's leaves, then its value's).
import json
import os

import gdb  # noqa: E402  (gdb's embedded module)


def leaves(v, out):
    t = v.type.strip_typedefs()
    if t.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
        for f in t.fields():
            if f.is_base_class or f.artificial:
                leaves(v.cast(f.type) if f.is_base_class else v[f], out)
            else:
                leaves(v[f.name], out)
    else:
        out.append(str(v))
    return out


result = {}
for name in os.environ["LR_GLOBALS"].split(","):
    v = gdb.parse_and_eval(name)
    if v.type.strip_typedefs().code == gdb.TYPE_CODE_PTR:
        v = v.dereference()
    pp = gdb.default_visualizer(v)
    t = v.type.strip_typedefs()
    if pp is None and (t.tag or "").startswith("std::array<"):
        # No printer: gdb prints std::array as the struct it is.
        elems = v["_M_elems"]
        lo, hi = elems.type.strip_typedefs().range()
        result[name] = [leaves(elems[i], []) for i in range(lo, hi + 1)]
        continue
    if pp is None:
        raise SystemExit("no libstdc++ pretty-printer for " + name)
    kids = []
    for label, c in pp.children():
        if label == "get()":  # a unique_ptr: its object, when it holds one
            if int(c) != 0:
                kids.append(leaves(c.dereference(), []))
        else:
            kids.append(leaves(c, []))
    if getattr(pp, "display_hint", lambda: None)() == "map":
        kids = [kids[i] + kids[i + 1] for i in range(0, len(kids), 2)]
    result[name] = kids
print("LR-JSON " + json.dumps(result))
