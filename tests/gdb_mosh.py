# Run inside gdb on a mosh-server core (gdb -batch -nx -ex 'set language
# c++' -ex 'python exec(open(THIS).read())' MOSH-SERVER CORE): prints, as
# one JSON object, what gdb and libstdc++'s own pretty-printers say of the
# server's state, from serve()'s two reference parameters: the address of
# its Terminal::Complete and of its ServerConnection; the current
# framebuffer's rows; and each state in flight (sender.sent_states, a
# std::list) with its number and its framebuffer's rows. A row is
# [get(), _M_pi, use count, weak count, its cells' array], the counts as
# the shared_ptr printer prints them.
import json
import re

import gdb  # noqa: E402  (gdb's embedded module)

COUNTS = re.compile(r"use count (\d+), weak count (\d+)")


def rows(complete):
    v = complete["terminal"]["fb"]["rows"]
    out = []
    for _, p in gdb.default_visualizer(v).children():
        m = COUNTS.search(str(p))
        if m is None:
            raise SystemExit("no use count in " + str(p))
        cells = p["_M_ptr"].dereference()["cells"]["_M_impl"]["_M_start"]
        out.append([hex(int(p["_M_ptr"])), hex(int(p["_M_refcount"]["_M_pi"])),
                    int(m.group(1)), int(m.group(2)), hex(int(cells))])
    return out


f = gdb.newest_frame()
while f is not None and f.name() != "serve":
    f = f.older()
if f is None:
    raise SystemExit("no serve() frame")
terminal = f.read_var("terminal").referenced_value()
network = f.read_var("network").referenced_value()
states = []
for _, st in gdb.default_visualizer(network["sender"]["sent_states"]).children():
    states.append({"num": int(st["num"]), "rows": rows(st["state"])})
print("LR-JSON " + json.dumps({"terminal": hex(int(terminal.address)),
                               "network": hex(int(network.address)),
                               "rows_array": hex(int(terminal["terminal"]["fb"]["rows"]
                                                     ["_M_impl"]["_M_start"])),
                               "rows": rows(terminal), "sent_states": states}))
