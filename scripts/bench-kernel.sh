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
eval "$(scripts/kernel-vmcore)"
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
