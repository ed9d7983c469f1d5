#!/bin/bash
# Overhead of leakref-trace on a real GlusterFS FUSE I/O workload (root):
# a volume on loopback, then ROUNDS interleaved pairs of the same I/O loop
# (100 files: create+write 4 KiB, stat, read, 30 renames, unlink; then reads
# of older files), once untraced and once with the capture attached.
# Prints per-loop times, the median ratio, events/s and lost records.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-5}
env_sh=$here/tests/gluster/env.sh
[ "$(id -u)" = 0 ] || { echo "bench-trace: needs root (glusterd, FUSE, uprobes)"; exit 1; }
command -v bpftrace >/dev/null || { echo "bench-trace: bpftrace missing (make deps)"; exit 1; }
dir=$(mktemp -d /tmp/leakref-bench-trace.XXXXXX)
trap 'bash "$env_sh" stop "$dir"' EXIT
bash "$env_sh" start "$dir" || exit 1
bash "$env_sh" workload "$dir" >/dev/null || exit 1
vol=$(cat "$dir/state/volume")
pid=$(pgrep -f "glusterfs.*--volfile-id=$vol $dir/mnt" | head -1)
export LEAKREF=$here/$BUILD/leakref

loop() {  # prints seconds for one I/O loop
  local t0 t1
  t0=$(date +%s%N)
  bash "$env_sh" io "$dir" "$1" || exit 1
  t1=$(date +%s%N)
  echo "scale=3; ($t1 - $t0) / 1000000000" | bc
}

plain=() traced=() events=0 lost=0 secs=0
bash "$env_sh" io "$dir" warm >/dev/null
for r in $(seq 1 "$ROUNDS"); do
  p=$(loop "p$r")
  rm -f "$dir/ready"
  "$here/scripts/leakref-trace" -p "$pid" -o "$dir/t$r.lrt" --ready "$dir/ready" 2>"$dir/t$r.err" &
  tr=$!
  for _ in $(seq 1 600); do [ -e "$dir/ready" ] && break; sleep 0.1; done
  t=$(loop "t$r")
  sleep 1
  kill -TERM "$tr"; wait "$tr"  # background jobs of a script ignore SIGINT
  e=$(grep -c '^E ' "$dir/t$r.lrt")
  l=$(awk '/^X / {for (i = 1; i <= NF; i++) if ($i ~ /^lost=/) {sub("lost=", "", $i); print $i}}' "$dir/t$r.lrt")
  events=$((events + e)); lost=$((lost + ${l:-0}))
  secs=$(echo "$secs + $t" | bc)
  plain+=("$p"); traced+=("$t")
  printf 'round %d: untraced %6.3f s   traced %6.3f s   %7d events  %d lost\n' "$r" "$p" "$t" "$e" "${l:-0}"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
mp=$(median "${plain[@]}") mt=$(median "${traced[@]}")
echo "median loop: untraced $mp s, traced $mt s, overhead $(echo "scale=2; $mt / $mp" | bc)x (target <= 2x)"
echo "events: $events in $secs s of traced loops ($(echo "scale=0; $events / $secs" | bc) events/s), lost $lost"
