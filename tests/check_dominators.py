#!/usr/bin/env python3
"""Checks a graph leakref exported (retained --export) against networkx.

usage: check_dominators.py GRAPH.json [--only NODE,...]

--only: the check on the part of the graph that decides those nodes' answers
(a vmcore's whole graph takes networkx hours): C, the nodes and everything
below them, and A, every node with a path into C. Every path from "top" to
a node of A stays in A, so A's induced graph gives every node of A its
dominator exactly, and a node of C keeps its whole dominator subtree in C:
the idoms of A and the retained sizes of C are checked.

networkx's immediate_dominators (Cooper, Harvey and Kennedy's algorithm,
not leakref's) from the node "top" must give every node the idom leakref
gave it, and each node's retained size must be the sum of the sizes of the
nodes of its subtree in networkx's dominator tree. Prints one line per
difference (at most 20) and a summary; exit 1 when there is any.
"""
import json
import sys

import networkx as nx


def main():
    with open(sys.argv[1]) as f:
        g = json.load(f)
    graph = nx.DiGraph()
    nodes = {n["node"]: n for n in g["nodes"]}
    graph.add_nodes_from(nodes)
    graph.add_edges_from((a, b) for a, b in g["edges"])
    sized = nodes  # whose retained sizes are checked
    if len(sys.argv) == 4 and sys.argv[2] == "--only":
        only = [x for x in sys.argv[3].split(",") if x]
        missing = [x for x in only if x not in nodes]
        if missing:
            print(f"not in the graph: {', '.join(missing[:5])}")
            return 1
        below = set(only)
        for x in only:
            below |= nx.descendants(graph, x)
        above = set(below) | {"top"}
        for x in below:
            above |= nx.ancestors(graph, x)
        graph = graph.subgraph(above).copy()
        sized = {x: nodes[x] for x in below}
        nodes = {x: nodes[x] for x in above}
    idom = nx.immediate_dominators(graph, "top")
    bad = []
    idom["top"] = "top"  # networkx releases differ on whether the start is in
    for name, n in nodes.items():
        want = idom.get(name)
        if want is None:
            bad.append(f"{name}: networkx does not reach it from top")
        elif want != n["idom"]:
            bad.append(f"{name}: idom {n['idom']}, networkx {want}")
    # Retained sizes: subtree sums over networkx's tree, leaves first.
    size = {name: n.get("size", 0) for name, n in nodes.items()}
    total = dict(size)
    count = {name: (1 if n["kind"] == "block" else 0) for name, n in nodes.items()}
    kids = {}
    for v, d in idom.items():
        if v != d:
            kids.setdefault(d, []).append(v)
    order, todo = [], ["top"]
    while todo:
        v = todo.pop()
        order.append(v)
        todo.extend(kids.get(v, []))
    for v in reversed(order):
        if v != "top":
            total[idom[v]] += total[v]
            count[idom[v]] += count[v]
    for name, n in sized.items():
        if name in total and (total[name] != n["retained"] or count[name] != n["retained_blocks"]):
            bad.append(f"{name}: retained {n['retained']} in {n['retained_blocks']}, "
                       f"networkx's tree {total[name]} in {count[name]}")
    for line in bad[:20]:
        print(line)
    print(f"{len(nodes)} nodes, {graph.number_of_edges()} edges, {len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
