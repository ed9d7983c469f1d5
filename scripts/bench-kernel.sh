#!/usr/bin/env bash
# make bench-kernel: per-entry cost of `leakref walk` (the crash extension)
# against crash's own `list -s` with the same fields, side by side in one
# crash session on the same real Debian 6.1 vmcore (scripts/kernel-vmcore).
# `list -s` runs on the 301-inode small tmpfs (it costs ~0.1 s per entry);
# `leakref walk` on the 40,001-inode tmpfs, cold (first command: vmlinux
# DWARF and page cache are built) and warm. Also times the standalone CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
eval "$(scripts/kernel-vmcore --mem 768M)"
LR="$B/leakref"
heads=$("$LR" kernel --vmcore "$PELF" --vmlinux "$VMLINUX" inodes -t tmpfs --json |
  python3 -c '
import json, sys
sbs = json.load(sys.stdin)["super_blocks"]
big = max(sbs, key=lambda s: s["inode_count"])
small = [s for s in sbs if 200 <= s["inode_count"] <= 1000][0]
print(small["s_inodes"], small["inode_count"], big["s_inodes"], big["inode_count"])')
read -r SMALL NSMALL BIG NBIG <<< "$heads"
W=$(mktemp -d /tmp/leakref-bench-kernel.XXXXXX)
trap 'rm -rf "$W"' EXIT
walk="leakref walk --type \"struct inode\" --head $BIG --list-member i_sb_list --refcount i_count --show i_ino --summary --stats"
cat > "$W/cmds" <<CMDS
extend $PWD/$B/leakref.so
!date +T0=%s.%N
$walk
!date +T1=%s.%N
$walk
!date +T2=%s.%N
list -o inode.i_sb_list -H $SMALL -s inode.i_ino,i_count
!date +T3=%s.%N
list -o inode.i_sb_list -H $SMALL -S inode.i_ino,i_count
!date +T4=%s.%N
exit
CMDS
echo "bench-kernel: $(crash --version 2>/dev/null | awk 'NF{print; exit}'), vmcore $PELF"
timeout -k 5 1200 crash -s --no_crashrc "$VMLINUX" "$PELF" -i "$W/cmds" > "$W/out" 2> "$W/err" || true
eval "$(grep -E '^T[0-9]=' "$W/out")"
nlist=$(sed -n '/^T2=/,/^T3=/p' "$W/out" | grep -c 'i_ino = ' || true)
grep -q "visited" "$W/out" || { echo "bench-kernel: leakref walk did not run"; cat "$W/out" "$W/err"; exit 1; }
eng=$(cat "$W/out" "$W/err" | sed -n 's/.*walked and evaluated [0-9]* objects in \([0-9.]*\) ms.*/\1/p' | head -n 2 | tr '\n' ' ')
python3 - "$T0" "$T1" "$T2" "$T3" "$T4" "$NBIG" "$nlist" "$NSMALL" $eng <<'PY'
import sys
t0, t1, t2, t3, t4 = map(float, sys.argv[1:6])
nbig, nlist, nsmall = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
eng = [float(x) / 1e3 for x in sys.argv[9:11]]
first, second, lists, listS = t1 - t0, t2 - t1, t3 - t2, t4 - t3
if nlist != nsmall:
    print(f"  list -s printed {nlist} entries, expected {nsmall}")
pl = lists / nsmall
print(f"  list -s  inode.i_ino,i_count : {nsmall:>6} entries in {lists:8.3f} s = {pl*1e3:10.3f} ms/entry")
print(f"  list -S  inode.i_ino,i_count : {nsmall:>6} entries in {listS:8.3f} s = {listS/nsmall*1e3:10.3f} ms/entry")
def row(name, t):
    pe = t / nbig
    print(f"  {name:<30}: {nbig:>6} entries in {t:8.4f} s = {pe*1e6:8.3f} us/entry = "
          f"{nbig/t/1e6:6.2f} M entries/s; {pl/pe:>9,.0f}x cheaper per entry than list -s")
if len(eng) == 2:
    row("walk, cold page cache", eng[0])
    row("walk, warm", eng[1])
row("2nd command, whole", second)
row("1st command, whole", first)
print(f"  (the 1st command of a session also indexes the vmlinux DWARF and symbols: "
      f"{first - (eng[0] if eng else 0):.2f} s, once per crash session)")
PY
# The same walk standalone (libkdumpfile and the ELF reader), for reference.
for f in "$KDUMP" "$PELF"; do
  /usr/bin/time -f "  standalone $(basename "$f"): %e s wall, %M KB max RSS (whole process)" \
    "$LR" kernel --vmcore "$f" --vmlinux "$VMLINUX" walk --type "struct inode" --head "$BIG" \
    --list-member i_sb_list --refcount i_count --show i_ino --summary --stats 2>&1 >/dev/null |
    sed 's/^leakref: /  engine: /'
done

# Slab caches: `leakref slab --cache C` (every allocated object, with its
# allocation track where the cache keeps them) against crash's own
# `kmem -S C` (which lists objects one by one only for CPU slabs and CPU
# partial slabs, and counts the others per slab), side by side in one crash
# session; and the table of every cache against `kmem -s`. Per object: each
# command's time over the objects it lists. Both are timed warm (each ran
# once before); `!date` itself costs milliseconds (crash forks a shell), so
# the median of five empty intervals is subtracted, and leakref, much faster
# than that, runs $REP times between its two dates, kmem -S $KREP times.
REP=50
KREP=5
# The session's first slab command scans the struct page array and keeps
# its slab heads for the session (the dump does not change); it is timed
# alone (C0-C1), cold. crash's own cost of running any command is timed too
# (F0-F1: $REP x `eval 1`): both tools pay it once per command.
cat > "$W/slab.cmds" <<CMDS
extend $PWD/$B/leakref.so
leakref slab --cache filp > /dev/null
!date +C0=%s.%N
leakref slab --cache kmem_cache --scan-pages > /dev/null
!date +C1=%s.%N
CMDS
for i in 0 1 2 3 4 5; do echo "!date +E${i}=%s.%N" >> "$W/slab.cmds"; done
echo "!date +F0=%s.%N" >> "$W/slab.cmds"
for i in $(seq $REP); do echo "eval 1 > /dev/null" >> "$W/slab.cmds"; done
echo "!date +F1=%s.%N" >> "$W/slab.cmds"
for c in filp dentry kmalloc-8; do
  cat >> "$W/slab.cmds" <<CMDS
leakref slab --cache $c > /dev/null
kmem -S $c > /dev/null
!date +L0_$c=%s.%N
CMDS
  for i in $(seq $REP); do echo "leakref slab --cache $c > $W/lr.$c" >> "$W/slab.cmds"; done
  cat >> "$W/slab.cmds" <<CMDS
!date +L1_$c=%s.%N
CMDS
  for i in $(seq $KREP); do echo "kmem -S $c > $W/km.$c" >> "$W/slab.cmds"; done
  cat >> "$W/slab.cmds" <<CMDS
!date +L2_$c=%s.%N
CMDS
done
cat >> "$W/slab.cmds" <<CMDS
leakref slab > /dev/null
kmem -s > /dev/null
!date +A0=%s.%N
leakref slab > $W/lr.all
!date +A1=%s.%N
kmem -s > $W/km.all
!date +A2=%s.%N
exit
CMDS
timeout -k 5 1200 crash -s --no_crashrc "$VMLINUX" "$PELF" -i "$W/slab.cmds" > "$W/slab.out" 2> "$W/slab.err" || true
grep -q '^A2=' "$W/slab.out" || { echo "bench-kernel: the slab session did not finish"; tail -n 20 "$W/slab.out" "$W/slab.err"; exit 1; }
eval "$(grep -E '^(L[0-2]_[a-z0-9_-]+|A[0-2]|E[0-5]|C[01]|F[01])=' "$W/slab.out" | sed 's/-/_/g')"
TICK=$(python3 -c 'import sys, statistics; e = list(map(float, sys.argv[1:])); print(statistics.median(b - a for a, b in zip(e, e[1:])))' $E0 $E1 $E2 $E3 $E4 $E5)
FLOOR=$(python3 -c 'import sys; f0, f1, t, r = map(float, sys.argv[1:]); print(max(f1 - f0 - t, 0) / r)' "$F0" "$F1" "$TICK" "$REP")
echo "  slab caches, one crash session, warm (leakref slab --cache C vs kmem -S C; per listed object;"
python3 - "$TICK" "$C0" "$C1" "$F0" "$F1" "$REP" <<'PY'
import sys
tick, c0, c1, f0, f1, rep = map(float, sys.argv[1:7])
print(f"  a !date costs {tick*1e3:.2f} ms, subtracted from each interval;")
print(f"  crash's own cost of any command (eval 1): {(f1-f0-tick)/rep*1e3:.3f} ms, in both tools' figures;")
print(f"  the session's first scan of the struct page array (kept for the session): {(c1-c0-tick)*1e3:.1f} ms):")
PY
for c in filp dentry kmalloc-8; do
  v=${c//-/_}
  lr_n=$(grep -c '^0x' "$W/lr.$c" || true)
  km_n=$(grep -cE '^\s+\[[0-9a-f]+\]' "$W/km.$c" || true)
  km_alloc=$(awk '/^CACHE/{getline; print $3; exit}' "$W/km.$c")
  eval "l0=\$L0_$v l1=\$L1_$v l2=\$L2_$v"
  python3 - "$c" "$l0" "$l1" "$l2" "$lr_n" "$km_n" "$km_alloc" "$TICK" "$REP" "$FLOOR" "$KREP" <<'PY'
import sys
c = sys.argv[1]
l0, l1, l2 = map(float, sys.argv[2:5])
lr_n, km_n, km_alloc = map(int, sys.argv[5:8])
tick, rep, floor, krep = float(sys.argv[8]), int(sys.argv[9]), float(sys.argv[10]), int(sys.argv[11])
lr = max(l1 - l0 - tick, 1e-6) / rep
km = max(l2 - l1 - tick, 1e-6) / krep
lpo = lr / max(lr_n, 1)
kpo = km / km_n if km_n else float("nan")
ratio = (f"{kpo / lpo:,.0f}x cheaper per listed object" if km_n else
         f"kmem -S listed no object; per allocated object {km / max(km_alloc, 1) * 1e6:.2f} us, "
         f"{km / max(km_alloc, 1) / lpo:,.1f}x")
print(f"    {c:<10} leakref {lr*1e3:8.3f} ms, {lr_n:>6} objects listed ({lpo*1e6:7.3f} us/object); "
      f"kmem -S {km*1e3:8.2f} ms, {km_n:>6} of its {km_alloc} allocated listed "
      f"({kpo*1e6:8.2f} us/object): {ratio}")
if km_n:
    net = ((km - floor) / km_n) / (max(lr - floor, 1e-9) / max(lr_n, 1))
    print(f"{'':15}without crash's own cost of a command in either: {net:,.0f}x")
PY
done
python3 - "$A0" "$A1" "$A2" "$TICK" <<'PY'
import sys
a0, a1, a2, tick = map(float, sys.argv[1:5])
print(f"    every cache: leakref slab {1e3*(a1-a0-tick):.1f} ms (the session's slab pages), "
      f"kmem -s {1e3*(a2-a1-tick):.1f} ms")
PY
for f in "$PELF" "$KDUMP"; do
  /usr/bin/time -f "  standalone slab --cache filp on $(basename "$f"): %e s wall, %M KB max RSS (whole process)" \
    "$LR" kernel --vmcore "$f" --vmlinux "$VMLINUX" slab --cache filp 2>&1 >/dev/null | tail -n 1
done

# The reference index (`kernel leaks`, `kernel refs`): the whole index of
# the 768 MiB guest, standalone (goal: at most 2 s, and at most 5 % of the
# dump's memory held by the index), and in one crash session: the first
# `leaks` builds it, a later `refs` reuses it; crash's own answer to "who
# points here", `search -k VALUE`, scans all memory for one value, timed
# beside it.
echo "  reference index (kernel leaks / refs), guest RAM 768 MiB:"
for f in "$PELF" "$KDUMP"; do
  /usr/bin/time -f "%e %M" -o "$W/time" "$LR" kernel --vmcore "$f" --vmlinux "$VMLINUX" leaks \
    --json > "$W/leaks.json"
  python3 - "$f" "$W/leaks.json" "$W/time" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[2]))
wall, rss = open(sys.argv[3]).read().split()
ix = j["index"]
ram = 768 << 20
print(f"    standalone leaks on {os.path.basename(sys.argv[1])}: {float(wall):.2f} s wall "
      f"(index {ix['build_ns']/1e9:.2f} s: {ix['objects']} objects, {ix['references']} references, "
      f"{ix['bytes_scanned']/2**20:.0f} MiB scanned); index memory {ix['memory_bytes']/2**20:.1f} MiB = "
      f"{100*ix['memory_bytes']/ram:.2f} % of the guest's RAM; {int(rss)/1024:.0f} MiB max RSS "
      f"(whole process: the dump pages it read, mapped or cached, included); {j['summary']['objects']} unreferenced objects")
PY
done
target=$("$LR" kernel --vmcore "$PELF" --vmlinux "$VMLINUX" leaks --cache lrk_obj --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["caches"][0]["objects"][0]["addr"])')
cat > "$W/refs.cmds" <<CMDS
extend $PWD/$B/leakref.so
!date +R0=%s.%N
leakref leaks > $W/crash-leaks.txt
!date +R1=%s.%N
leakref refs $target > $W/crash-refs.txt
!date +R2=%s.%N
search -k ${target#0x} > $W/crash-search.txt
!date +R3=%s.%N
exit
CMDS
timeout -k 5 1200 crash -s --no_crashrc "$VMLINUX" "$PELF" -i "$W/refs.cmds" > "$W/refs.out" 2> "$W/refs.err" || true
grep -q '^R3=' "$W/refs.out" || { echo "bench-kernel: the refs session did not finish"; tail -n 20 "$W/refs.out" "$W/refs.err"; exit 1; }
eval "$(grep -E '^R[0-3]=' "$W/refs.out")"
python3 - "$R0" "$R1" "$R2" "$R3" <<'PY'
import sys
r0, r1, r2, r3 = map(float, sys.argv[1:5])
print(f"    in crash: leakref leaks (builds the index, 1st command) {r1-r0:.2f} s; "
      f"leakref refs (reuses it) {(r2-r1)*1e3:.0f} ms; crash's search -k for the same value {r3-r2:.2f} s")
PY

# The slab pass on sid's 7.x (sheaves, per_node lists) against Debian 12's
# 6.1, the same guest setup (768 MiB, the same files): `leakref kernel slab`
# whole process, run alternately on the two dumps (the page cache warm for
# both), the median of 7 pairs. Goal: 7.x within 1.5x of 6.1.
echo "  slab pass, every cache, standalone, 6.1 vs 7.x (median of 7 alternating pairs):"
eval "$(scripts/kernel-vmcore --kernel 7.x --mem 768M | sed 's/^/K7_/')"
pair() {
  /usr/bin/time -f "%e" -o "$W/t" "$LR" kernel --vmcore "$1" --vmlinux "$2" slab > /dev/null
  cat "$W/t"
}
pair "$PELF" "$VMLINUX" > /dev/null
pair "$K7_PELF" "$K7_VMLINUX" > /dev/null
t61=() t7=()
for _ in 1 2 3 4 5 6 7; do
  t61+=("$(pair "$PELF" "$VMLINUX")")
  t7+=("$(pair "$K7_PELF" "$K7_VMLINUX")")
done
python3 - "${t61[*]}" "${t7[*]}" <<'PY'
import statistics, sys
a = statistics.median(map(float, sys.argv[1].split()))
b = statistics.median(map(float, sys.argv[2].split()))
print(f"    6.1 {a:.2f} s, 7.x {b:.2f} s: 7.x/6.1 = {b/a:.2f}x (goal: at most 1.5x)")
PY
