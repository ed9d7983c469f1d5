#!/usr/bin/env bash
# make demo: run a bundled fixture, snapshot it with gcore, and show leakref
# walking its structures. Uses $BUILD (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
LR="$B/leakref"
work="$(mktemp -d /tmp/leakref-demo.XXXXXX)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$B/fixtures/fx_structs_pie" "$work/manifest.json" > "$work/ready" &
pid=$!
for _ in $(seq 100); do grep -q READY "$work/ready" 2>/dev/null && break; sleep 0.1; done
gcore -o "$work/core" "$pid" > /dev/null 2>&1
core="$work/core.$pid"
run() { echo; printf "$ leakref"; printf " %q" "$@" | sed "s|$work/||g"; echo; "$LR" "$@"; }
run info "$core"
run walk "$core" --type 'struct obj' --head obj_list --list-member link --refcount ref --show name,state
run walk "$core" --type 'struct obj' --head obj_hash --hlist-member hnode --refcount ref --where 'refcount>1' --show name --summary
run walk "$core" --type 'struct obj' --head cyc_head --next next --refcount ref --summary
echo; echo "(the fixture wrote its own addresses and refcounts to manifest.json; the tests compare them exactly)"
