#!/usr/bin/env bash
# make bench: leakref vs drgn (python3-drgn) walking the same 1,000,000-node
# list and 1,000,000-entry hash table in the same gcore core, same run.
# Walk rates count walking plus reading each object's refcount (what the drgn
# loop does); setup (opening the core, DWARF) is reported separately.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
LR="$B/leakref"
N="${BENCH_NODES:-1000000}"
work="$(mktemp -d /tmp/leakref-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# snap NAME NODES: runs fx_big with NODES list nodes and hash entries, takes
# its core with gcore and prints the core's path (manifest: $work/NAME.json).
snap() {
  "$B/fixtures/fx_big" "$work/$1.json" "$2" > "$work/$1.ready" &
  local pid=$!
  for _ in $(seq 1200); do grep -q READY "$work/$1.ready" 2>/dev/null && break; sleep 0.1; done
  gcore -o "$work/$1" "$pid" > /dev/null 2>&1
  kill "$pid"
  # Written back before timing: the kernel's flusher would otherwise share
  # the machine's 2 CPUs with the walks.
  sync -f "$work/$1.$pid"
  echo "$work/$1.$pid"
}
core=$(snap core "$N")
cp "$work/core.json" "$work/manifest.json"
buckets=$(python3 -c "import json;print(json.load(open('$work/manifest.json'))['structures']['hash']['buckets'])")
echo "core: $(du -h "$core" | cut -f1), $N list nodes, $N hash entries in $buckets buckets"

best() {  # best and median walk+eval ns of 5 leakref runs (fresh processes); also checks counts
  local what="$1"; shift
  local bestns=0 wall=0 all=""
  for i in 1 2 3 4 5; do
    local t0=$(date +%s%N)
    "$LR" walk "$core" --json --summary --stats "$@" > "$work/$what.json" 2>/dev/null
    local t1=$(date +%s%N)
    local ns=$(python3 -c "import json;s=json.load(open('$work/$what.json'))['summary'];print(s['walk_ns'])")
    all="$all $ns"
    if [ "$bestns" = 0 ] || [ "$ns" -lt "$bestns" ]; then bestns=$ns; wall=$((t1-t0)); fi
  done
  echo "$bestns $wall $(echo $all | tr ' ' '\n' | sort -n | sed -n 3p)"
}
read lr_list_ns lr_list_wall lr_list_med < <(best list --type 'struct bnode' --head big_list --list-member link --refcount refcount)
read lr_hash_ns lr_hash_wall lr_hash_med < <(best hash --type 'struct hnode' --head '*big_hash' --buckets "$buckets" --hlist-member hnode --refcount refcount)

# The same walks repeated in one process (a crash session, a library user):
# the first of 10 and the best, in one line per walk: name count first best.
"$B/walk_repeat" "$core" "$buckets" > "$work/repeat.txt"

echo "drgn: walking (this takes a while)..."
d0=$(date +%s%N)
/usr/bin/python3 bench/drgn_walk.py "$core" "$buckets" > "$work/drgn.json"
d1=$(date +%s%N)

# Whole process with output, same core: every list object written out by
# leakref (JSON, JSON lines, text) and by drgn (a JSON line per object).
# Peak RSS above the --summary run's is what output costs beyond the core
# pages the walk touches. Targets: JSON >= 25x drgn, <= 64 MiB above; text
# >= 300 MB/s.
LIST=(--type 'struct bnode' --head big_list --list-member link --refcount refcount)
timed() {  # timed OUT CMD...: prints "wall_s peak_kib"
  local out="$1"; shift
  /usr/bin/time -f '%e %M' -o "$work/time" "$@" > "$out"
  cat "$work/time"
}
read s_wall s_rss < <(timed /dev/null "$LR" walk "$core" "${LIST[@]}" --json --summary)
read j_wall j_rss < <(timed "$work/objs.json" "$LR" walk "$core" "${LIST[@]}" --json)
read l_wall l_rss < <(timed "$work/objs.jsonl" "$LR" walk "$core" "${LIST[@]}" --jsonl)
read t_wall t_rss < <(timed "$work/objs.txt" "$LR" walk "$core" "${LIST[@]}")
echo "drgn: writing every list object (this takes a while)..."
read e_wall e_rss < <(timed "$work/drgn.jsonl" /usr/bin/python3 bench/drgn_walk.py "$core" --emit)
python3 - "$work" "$N" "$s_wall" "$s_rss" "$j_wall" "$j_rss" "$l_wall" "$t_wall" "$e_wall" "$e_rss" <<'PY'
import json, os, sys
work, n, s_wall, s_rss = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
j_wall, j_rss, l_wall, t_wall, e_wall, e_rss = map(float, sys.argv[5:])
objs = json.load(open(f"{work}/objs.json"))["objects"]
lines = [json.loads(l) for l in open(f"{work}/objs.jsonl")]
drgn = [json.loads(l) for l in open(f"{work}/drgn.jsonl")]
same = ([(o["addr"], o["refcount"]) for o in objs] == [(d["addr"], d["refcount"]) for d in drgn]
        == [(o["addr"], o["refcount"]) for o in lines if o["record"] == "object"])
tbytes = os.path.getsize(f"{work}/objs.txt")
print(f"whole process, {n} objects written: leakref --json {j_wall:.2f} s (peak {j_rss/1024:.0f} MiB,"
      f" {(j_rss - s_rss)/1024:.0f} MiB above --summary's), --jsonl {l_wall:.2f} s, text {t_wall:.2f} s"
      f" ({tbytes/1e6:.0f} MB: {tbytes/1e6/max(t_wall, 0.01):.0f} MB/s whole process,"
      f" {tbytes/1e6/max(t_wall - s_wall, 0.01):.0f} MB/s beyond the --summary run's {s_wall:.2f} s);"
      f" drgn {e_wall:.2f} s"
      f" (peak {e_rss/1024:.0f} MiB): --json {e_wall/max(j_wall, 0.01):.0f}x faster")
print("output targets: --json >= 25x drgn, <= 64 MiB above the walk's pages, text >= 300 MB/s;",
      "same objects as drgn" if same else "MISMATCH with drgn")
sys.exit(0 if same else 1)
PY

# glibc heap walk: a second fx_big core with >= 5 M allocations (each list
# node and hash entry is one malloc). Reference points
# (peers-chap-core-analyzer.md): chap ~1 us and ~210 B per allocation; drgn
# has no heap walker. Target: <= 0.1 us and <= 32 B per allocation.
HN="${BENCH_HEAP_NODES:-2600000}"
heapcore=$(snap heapcore "$HN")
heap_best=""
for i in 1 2 3 4 5; do
  "$B/leakref" heap "$heapcore" --json --stats > "$work/heap.json" || { echo "leakref heap failed"; exit 1; }
  r=$(python3 -c "import json;j=json.load(open('$work/heap.json'));s=j['stats'];print(j['walk_ns']/s['in_use'], s['index_bytes']/s['in_use'], s['in_use'])")
  if [ -z "$heap_best" ] || python3 -c "import sys;sys.exit(0 if float('${r%% *}')<float('${heap_best%% *}') else 1)"; then heap_best=$r; fi
done
# leakref diff of the two fx_big cores (1M and HN nodes: every node and hash
# entry is one 40-byte allocation), whole process, checked against the counts.
read df_wall df_rss < <(timed "$work/diff.json" "$B/leakref" diff "$core" "$heapcore" --json)
python3 - "$work/diff.json" "$N" "$HN" "$df_wall" "$df_rss" <<'PY'
import json, sys
j, n, hn = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
c = next(c for c in j["classes"] if c["kind"] == "heap" and c["name"] == "40 B")
ok = c["delta"] == 2 * (hn - n)
print(f"diff of two fx_big cores ({c['before']} and {c['after']} allocations of 40 B):"
      f" {float(sys.argv[4]):.2f} s whole process, peak {int(sys.argv[5])/1024:.0f} MiB;"
      f" {'delta exact' if ok else 'delta MISMATCH'}")
sys.exit(0 if ok else 1)
PY
rm -f "$heapcore"
read heap_ns heap_bytes heap_n <<< "$heap_best"
printf 'heap walk: %d in-use chunks, %.1f ns and %.1f B per allocation (best of 5; target <= 100 ns, <= 32 B; chap ~1000 ns, ~210 B)\n' \
  "$heap_n" "$heap_ns" "$heap_bytes"
[ "$heap_n" -ge $((2 * HN)) ] || { echo "heap walk MISMATCH: expected at least $((2 * HN)) chunks"; exit 1; }

python3 - "$work" "$N" "$lr_list_ns" "$lr_hash_ns" "$lr_list_wall" "$lr_hash_wall" "$((d1-d0))" "$lr_list_med" "$lr_hash_med" <<'PY'
import json, sys
work, n, lns, hns, lwall, hwall, dwall, lmed, hmed = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
m = json.load(open(f"{work}/manifest.json"))["structures"]
d = json.load(open(f"{work}/drgn.json"))
ok = True
for what in ("list", "hash"):
    lr = json.load(open(f"{work}/{what}.json"))["summary"]
    want = m[what]
    for who, got_n, got_h in (("leakref", lr["visited"], lr["histogram"]),
                              ("drgn", d[what]["count"], d[what]["histogram"])):
        want_h = {k: v for k, v in want["histogram"].items() if v}
        if got_n != want["count"] or got_h != want_h:
            print(f"MISMATCH {who} {what}: {got_n} {got_h} vs manifest {want['count']} {want['histogram']}")
            ok = False
print()
print(f"{'walk':<6} {'leakref nodes/s':>16} {'drgn nodes/s':>14} {'ratio':>8}   leakref walk  drgn walk"
      f"   leakref median of 5")
for what, ns, med in (("list", lns, lmed), ("hash", hns, hmed)):
    lr_rate = n / (ns / 1e9)
    dr_rate = n / d[what]["seconds"]
    print(f"{what:<6} {lr_rate/1e6:>14.1f} M {dr_rate/1e6:>12.3f} M {lr_rate/dr_rate:>7.0f}x   "
          f"{ns/1e6:>9.1f} ms  {d[what]['seconds']*1e3:>7.0f} ms"
          f"   {med/1e6:.1f} ms ({n/(med/1e9)/1e6:.1f} M/s)")
for line in open(f"{work}/repeat.txt"):
    what, cnt, first, best = line.split()
    print(f"{what} walked 10 times in one process: first {int(first)/1e6:.1f} ms, best "
          f"{int(best)/1e6:.1f} ms ({int(cnt)/(int(best)/1e9)/1e6:.1f} M nodes/s)")
print(f"whole process: leakref list {lwall/1e9:.2f} s, hash {hwall/1e9:.2f} s; "
      f"drgn (setup {d['setup_s']:.2f} s + both walks) {dwall/1e9:.2f} s")
print("targets: >= 50 M nodes/s and >= 50x drgn;", "counts and histograms match the manifest" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
PY
