#!/bin/bash
# A real single-node Slurm (Debian's slurm-wlm: slurmctld + slurmd on this
# host, authenticated by munge) in a private directory, for the batch test:
#   slurm-env.sh start DIR   prints SLURM_CONF=DIR/slurm.conf once the node is idle
#   slurm-env.sh stop DIR
# Nothing under /etc is written: the daemons and the clients (sbatch, squeue)
# read DIR/slurm.conf through SLURM_CONF, munge's socket is DIR/munge.socket.
set -euo pipefail
cmd=${1:?start|stop}
dir=$(realpath -m "${2:?DIR}")

stop() {
  for p in slurmd slurmctld munged; do
    if [ -f "$dir/$p.pid" ]; then
      kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
    fi
  done
  sleep 1
  for p in slurmd slurmctld munged; do
    if [ -f "$dir/$p.pid" ]; then
      kill -9 "$(cat "$dir/$p.pid")" 2>/dev/null || true
      rm -f "$dir/$p.pid"
    fi
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
for p in munged slurmctld slurmd sbatch squeue sinfo; do
  command -v "$p" >/dev/null || { echo "slurm-env: $p is not installed (make deps)" >&2; exit 3; }
done
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 700 "$dir/munge"
# munge's own key for this cluster of one.
if [ ! -s "$dir/munge/munge.key" ]; then
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
fi
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024) - 1024}' /proc/meminfo)
# Ports away from Slurm's defaults, so a site's own Slurm is not disturbed.
cat > "$dir/slurm.conf" <<CONF
ClusterName=leakref-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16917
SlurmdPort=16918
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
# Slurm 22.05's slurmd reads cgroup.conf beside slurm.conf even with
# proctrack/linuxproc; none of its cgroup plugins is wanted here.
echo "CgroupPlugin=cgroup/v1" > "$dir/cgroup.conf"
export SLURM_CONF=$dir/slurm.conf
slurmctld -c
slurmd
for i in $(seq 60); do
  if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 1
done
echo "slurm-env: the node never became idle; logs:" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 1
