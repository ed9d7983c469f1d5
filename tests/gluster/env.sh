#!/bin/bash
# A real GlusterFS 10.3 volume on loopback for the integration tests:
#   env.sh start DIR       glusterd (if not running), volume, brick in DIR/brick, FUSE mount DIR/mnt
#   env.sh workload DIR    files, nested dirs, renames, deletes, files held open by a background process
#   env.sh snapshot DIR WHO  statedump, gcore, statedump again of WHO (fuse|brick|PID) into DIR/snap-WHO.N
#   env.sh io DIR TAG      create/write/stat/read/rename/unlink 100 files under DIR/mnt/io-TAG
#   env.sh inject DIR PID FN ADDR N   call FN(ADDR) N times in the live process with gdb
#   env.sh stop DIR        unmount, stop and delete the volume, kill what start started, remove DIR
# State (volume name, pids) lives in DIR/state. Every step is bounded by timeouts.
set -u
cmd=$1 dir=$2
state=$dir/state
vol() { cat "$state/volume"; }
log() { echo "env.sh: $*" >&2; }
g() { timeout 60 gluster --mode=script "$@"; }

pid_of() {
  case $1 in
    fuse) pgrep -f "glusterfs.*--volfile-id=$(vol) $dir/mnt" | head -1 ;;
    brick) pgrep -f "glusterfsd.*--brick-name $dir/brick" | head -1 ;;
    *) echo "$1" ;;
  esac
}

# Waits for a new statedump of PID (one not in $2) and prints its path.
statedump() {
  local pid=$1 before=$2 f i
  kill -USR1 "$pid" || return 1
  for i in $(seq 1 200); do
    for f in /var/run/gluster/*."$pid".dump.*; do
      [ -e "$f" ] || continue
      grep -qxF "$f" "$before" && continue
      grep -q '^DUMP-END-TIME' "$f" 2>/dev/null && { echo "$f"; return 0; }
    done
    sleep 0.1
  done
  log "no statedump from pid $pid after 20 s"
  return 1
}

case $cmd in
start)
  mkdir -p "$dir/brick" "$dir/mnt" "$state"
  echo "lrtest$$" > "$state/volume"
  if ! pgrep -x -r R,S,D glusterd >/dev/null; then  # a zombie glusterd does not count
    glusterd --log-file="$dir/glusterd.log" </dev/null >/dev/null 2>&1 || exit 1
    touch "$state/started-glusterd"
    for i in $(seq 1 100); do g volume list >/dev/null 2>&1 && break; sleep 0.2; done
  fi
  g volume create "$(vol)" "$(hostname):$dir/brick" force >&2 || exit 1
  g volume start "$(vol)" >&2 || exit 1
  timeout 60 glusterfs --volfile-server=localhost --volfile-id="$(vol)" "$dir/mnt" </dev/null >/dev/null 2>&1 || exit 1
  for i in $(seq 1 100); do mountpoint -q "$dir/mnt" && break; sleep 0.2; done
  mountpoint -q "$dir/mnt" || { log "mount did not appear"; exit 1; }
  ;;
workload)
  m=$dir/mnt
  mkdir -p "$m/d1/d2/d3/d4" "$m/d1/e2" "$m/top" || exit 1
  for i in $(seq 1 60); do echo "file $i" > "$m/top/f$i"; done
  for i in $(seq 1 20); do echo "nested $i" > "$m/d1/d2/d3/d4/n$i"; echo "e $i" > "$m/d1/e2/e$i"; done
  for i in $(seq 1 15); do mv "$m/top/f$i" "$m/d1/r$i"; done
  for i in $(seq 16 35); do rm "$m/top/f$i"; done
  mv "$m/d1/e2" "$m/d1/e2renamed"
  ls -lR "$m" >/dev/null
  # Files held open by a background process (its pid in state/holder).
  # Reading and writing through some of them makes open-behind really open
  # them, so the brick holds fds too.
  (exec 3<"$m/top/f40" 4<"$m/top/f41" 5>>"$m/top/f42" 6<"$m/d1/r3" 7<"$m/d1/d2/d3/d4/n7"
   read -r _ <&3; echo more >&5; read -r _ <&6
   exec sleep 100000) </dev/null >/dev/null 2>&1 &
  echo $! > "$state/holder"
  sleep 3  # let open-behind and the brick settle
  sync
  ;;
snapshot)
  who=$3
  pid=$(pid_of "$who")
  [ -n "$pid" ] || { log "no $who process"; exit 1; }
  n=$(ls -d "$dir"/snap-"$who".* 2>/dev/null | wc -l)
  out=$dir/snap-$who.$n
  mkdir -p "$out"
  ls /var/run/gluster/*."$pid".dump.* > "$out/before" 2>/dev/null || true
  d1=$(statedump "$pid" "$out/before") || exit 1
  # Dumps are named by epoch second: move each away so the next is seen as new.
  mv "$d1" "$out/dump1" || exit 1
  timeout 120 gcore -o "$out/core" "$pid" >"$out/gcore.log" 2>&1 || { log "gcore failed"; exit 1; }
  mv "$out/core.$pid" "$out/core"
  d2=$(statedump "$pid" "$out/before") || exit 1
  mv "$d2" "$out/dump2" || exit 1
  echo "$pid" > "$out/pid"
  echo "$out"
  ;;
io)
  t=$dir/mnt/io-$3
  mkdir -p "$t" || exit 1
  for i in $(seq 1 100); do head -c 4096 /dev/urandom > "$t/f$i" || exit 1; done
  for i in $(seq 1 100); do stat "$t/f$i" >/dev/null && cat "$t/f$i" >/dev/null || exit 1; done
  ls -l "$t" >/dev/null
  for i in $(seq 1 30); do mv "$t/f$i" "$t/g$i" || exit 1; done
  rm -f "$t"/f* "$t"/g* && rmdir "$t" || exit 1
  # Existing files too: their inodes are referenced and released again.
  cat "$dir"/mnt/top/f5* >/dev/null && ls -lR "$dir/mnt/d1" >/dev/null || exit 1
  ;;
inject)
  # A leak on purpose: FN_ADDR(ADDR) takes a reference nobody will drop,
  # called N times from outside like gdb's `call`, which returns to the
  # program's entry point: that names the call site. INJECT=gdb uses gdb;
  # INJECT=/path/lr_inject the ptrace helper (see fixtures/lr_inject.c).
  pid=$3 fn=$4 addr=$5 n=$6
  if [ "${INJECT:-gdb}" = gdb ]; then
    args=()
    for i in $(seq 1 "$n"); do args+=(-ex "call ((void *(*)(void *))$fn)((void *)$addr)"); done
    timeout 120 gdb -p "$pid" -batch -nx "${args[@]}" >"$dir/inject.log" 2>&1
    grep -q '^\$'"$n"' = ' "$dir/inject.log" || { log "gdb inject failed"; cat "$dir/inject.log" >&2; exit 1; }
  else
    timeout 120 "$INJECT" "$pid" "$fn" "$addr" "$n" >"$dir/inject.log" 2>&1 || { log "inject failed"; cat "$dir/inject.log" >&2; exit 1; }
  fi
  ;;
stop)
  [ -d "$state" ] || exit 0
  [ -f "$state/holder" ] && kill "$(cat "$state/holder")" 2>/dev/null
  umount -l "$dir/mnt" 2>/dev/null
  pkill -f "glusterfs.*--volfile-id=$(vol) $dir/mnt" 2>/dev/null
  g volume stop "$(vol)" force >/dev/null 2>&1
  g volume delete "$(vol)" >/dev/null 2>&1
  pkill -f "glusterfsd.*--brick-name $dir/brick" 2>/dev/null
  if [ -f "$state/started-glusterd" ]; then
    pkill -x glusterd
    pkill -f '/var/lib/glusterd/hooks/' 2>/dev/null  # volume-delete hooks left behind
  fi
  rm -rf "$dir"
  ;;
*) log "unknown command $cmd"; exit 2 ;;
esac
