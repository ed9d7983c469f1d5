#!/bin/bash
# A real nfs-ganesha 4.3 (Debian's package, VFS FSAL) on loopback for the
# integration test, driven by user-space NFS clients (the test machine has no
# kernel NFS client):
#   env.sh start DIR              rpcbind (if not running), ganesha exporting DIR/export
#   env.sh hold DIR NAME FILE...  an NFSv4 client (nfs_hold) keeping FILEs open
#   env.sh list DIR               an NFSv4 client that only lists the export
#   env.sh snapshot DIR           gcore of ganesha; prints the core's path
#   env.sh stop DIR               release the clients, stop what start started
# State (pids) lives in DIR/state. Every step is bounded by timeouts.
set -u
cmd=$1 dir=$2
state=$dir/state
log() { echo "env.sh: $*" >&2; }


case $cmd in
start)
  mkdir -p "$dir/export" "$state"
  if ss -ltn 2>/dev/null | grep -q ':2049 '; then log "port 2049 is already in use"; exit 1; fi
  if ! pgrep -x -r R,S,D rpcbind >/dev/null; then  # a zombie rpcbind does not count
    rpcbind -w || { log "rpcbind did not start"; exit 1; }
    touch "$state/started-rpcbind"
  fi
  # ganesha registers with rpcbind at start and exits if it cannot.
  for i in $(seq 1 100); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
  rpcinfo -p 127.0.0.1 >/dev/null 2>&1 || { log "rpcbind does not answer on loopback"; exit 1; }
  for i in 1 2 3 4 5 6; do echo "file $i" >"$dir/export/f$i"; done
  # RQUOTA is off: its fixed port 875 lies in the reserved range root's RPC
  # clients take for outgoing connections, and one did ("Cannot bind RQUOTA
  # tcp6 socket ... Address already in use"); the test needs no quotas.
  cat >"$dir/ganesha.conf" <<CONF
NFS_CORE_PARAM { Protocols = 3, 4; Enable_RQUOTA = false; }
NFSV4 { Lease_Lifetime = 120; Graceless = true; }
EXPORT {
  Export_Id = 1; Path = $dir/export; Pseudo = /export;
  Access_Type = RW; Squash = No_Root_Squash; Protocols = 3, 4; Transports = TCP;
  SecType = sys; FSAL { Name = VFS; }
}
CONF
  ganesha.nfsd -F -f "$dir/ganesha.conf" -L "$dir/ganesha.log" -p "$dir/ganesha.pid" -N NIV_EVENT \
    </dev/null >/dev/null 2>&1 &
  echo $! >"$state/ganesha"
  for i in $(seq 1 150); do
    timeout 5 nfs-ls "nfs://127.0.0.1$dir/export?version=3" >/dev/null 2>&1 && exit 0
    kill -0 "$(cat "$state/ganesha")" 2>/dev/null || { log "ganesha exited:"; tail -3 "$dir/ganesha.log" >&2; exit 1; }
    sleep 0.2
  done
  log "ganesha did not answer NFSv3 on loopback in 30 s"; tail -3 "$dir/ganesha.log" >&2
  exit 1
  ;;
hold)
  name=$3; shift 3
  fifo=$state/hold-$name.in
  mkfifo "$fifo" || exit 1
  "${NFS_HOLD:?set NFS_HOLD to the built nfs_hold}" 127.0.0.1 /export "$@" <"$fifo" >"$state/hold-$name.out" 2>&1 &
  echo $! >"$state/hold-$name.pid"
  sleep 1000000 >"$fifo" &
  echo $! >"$state/hold-$name.writer"
  for i in $(seq 1 150); do
    grep -q '^holding' "$state/hold-$name.out" && exit 0
    kill -0 "$(cat "$state/hold-$name.pid")" 2>/dev/null || break
    sleep 0.2
  done
  log "nfs_hold $name did not open its files:"; cat "$state/hold-$name.out" >&2
  exit 1
  ;;
list)
  timeout 30 nfs-ls "nfs://127.0.0.1/export?version=4" >/dev/null || { log "nfs-ls (v4) failed"; exit 1; }
  ;;
snapshot)
  pid=$(cat "$state/ganesha")
  timeout 120 gcore -o "$dir/core" "$pid" >/dev/null 2>&1 || { log "gcore $pid failed"; exit 1; }
  echo "$dir/core.$pid"
  ;;
stop)
  for w in "$state"/hold-*.writer; do [ -f "$w" ] && kill "$(cat "$w")" 2>/dev/null; done
  for p in "$state"/hold-*.pid; do
    [ -f "$p" ] || continue
    for i in $(seq 1 50); do kill -0 "$(cat "$p")" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$(cat "$p")" 2>/dev/null
  done
  if [ -f "$state/ganesha" ]; then
    pid=$(cat "$state/ganesha")
    kill "$pid" 2>/dev/null
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
  [ -f "$state/started-rpcbind" ] && pkill -x rpcbind
  rm -rf "$dir"
  ;;
*) log "unknown command $cmd"; exit 2 ;;
esac
