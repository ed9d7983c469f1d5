#!/usr/bin/env bash
# make bench (batch part): leakref batch run over a 40-dump archive — 30 cores
# of a live fx_steady, 6 other fixture cores, 4 compressed ones (zstd, xz,
# lz4, gzip) — with -j 1 and -j 2 into fresh databases: dumps/s, the batch
# process's peak RSS and the largest worker's (each dump is its own process).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
work="$(mktemp -d /tmp/leakref-bench-batch.XXXXXX)"
trap 'rm -rf "$work"' EXIT
a="$work/archive"
mkdir -p "$a"
core_of() {  # core_of NAME EXE ARGS...: a gcore of EXE once it says READY
  local name="$1" exe="$2"; shift 2
  "$exe" "$@" > "$work/$name.out" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do grep -q READY "$work/$name.out" 2>/dev/null && break; sleep 0.1; done
  gcore -o "$a/core.$name" "$pid" > /dev/null 2>&1
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  echo "$a/core.$name.$pid"
}
for f in structs threads heap locks; do core_of "$f" "$B/fixtures/fx_$f" "$work/$f.json" > /dev/null; done
core_of structs_pie "$B/fixtures/fx_structs_pie" "$work/pie.json" > /dev/null
locks=$(ls "$a"/core.locks.*)
"$B/fixtures/fx_steady" > "$work/steady.out" 2>&1 &
sp=$!
for _ in $(seq 300); do grep -q READY "$work/steady.out" && break; sleep 0.1; done
for i in $(seq -w 1 30); do gcore -o "$a/core.steady.$i" "$sp" > /dev/null 2>&1; done
kill -9 "$sp"; wait "$sp" 2>/dev/null || true
core_of big "$B/fixtures/fx_big" "$work/big.json" 100000 > /dev/null
zstd -q -c "$locks" > "$a/core.fx_locks.0.00000000000000000000000000000000.1.1764057600000000.zst"
xz -T1 -c "$locks" > "$a/core.locks.xz"
lz4 -q -c "$locks" > "$a/core.locks.lz4"
gzip -c "$locks" > "$a/core.locks.gz"
n=$(ls "$a" | wc -l)
echo "batch archive: $n dumps, $(du -sh "$a" | cut -f1)"
for j in 1 2; do
  /usr/bin/time -f '%e %M' -o "$work/time" "$B/leakref" batch run "$a" --db "$work/j$j.db" -j "$j" -q > /dev/null
  read wall rss < "$work/time"
  read rows ok worker < <(sqlite3 -separator ' ' "$work/j$j.db" \
    "SELECT count(*), sum(status = 'ok'), max(peak_rss_kib) FROM dumps")
  [ "$rows" = "$n" ] && [ "$ok" = "$n" ] || { echo "batch -j $j: $rows rows, $ok ok of $n: MISMATCH"; exit 1; }
  python3 -c "import sys; n,w,r,k=int(sys.argv[1]),float(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]); print(f'batch -j {sys.argv[5]}: {n} dumps in {w:.2f} s = {n/w:.1f} dumps/s; peak RSS {r/1024:.0f} MiB (largest of the batch and its workers), largest worker {k/1024:.0f} MiB (its row in the database)')" "$n" "$wall" "$rss" "$worker" "$j"
done
