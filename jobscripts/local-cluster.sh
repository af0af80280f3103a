#!/bin/bash
# A one-node Slurm cluster on this machine, for trying `shardbench submit` and for the
# `slurm` tests: munged, slurmctld and slurmd with a config in $SB_SLURM_DIR (default
# /tmp/shardbench-slurm). Needs root and Debian's slurmctld, slurmd, slurm-client and munge.
# Environment: SB_SLURM_DIR, SB_SLURM_CPUS (default nproc), SB_SLURM_CTLD_PORT / SB_SLURM_D_PORT
# (default 6817 / 6818; change them to run a second cluster next to the first).
#
#   jobscripts/local-cluster.sh start    # prints: export SLURM_CONF=...
#   jobscripts/local-cluster.sh status
#   jobscripts/local-cluster.sh stop
#
# Idempotent: start when running only prints the export line; stop when stopped does nothing.
# Daemons are stopped by the pids recorded at start, never by name.
set -euo pipefail

dir="${SB_SLURM_DIR:-/tmp/shardbench-slurm}"
conf="$dir/slurm.conf"
export SLURM_CONF="$conf"

die() { echo "local-cluster.sh: $*" >&2; exit 1; }

alive() {  # alive NAME: the daemon whose pid file is $dir/NAME.pid runs
  local f="$dir/$1.pid"
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

write_config() {
  local host cpus mem
  host="$(hostname -s)"
  # SB_SLURM_CPUS may claim more CPUs than there are (config_overrides accepts it), so that
  # points with more ranks than cores can be tried on a small machine, oversubscribed.
  cpus="${SB_SLURM_CPUS:-$(nproc)}"
  # Leave a quarter of the memory to the system; Slurm wants MB.
  mem="$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 3 / 4}' /proc/meminfo)"
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  # No cgroups or systemd here: process groups track jobs; tasks are not bound.
  # config_overrides keeps the node usable when the real resources differ from these.
  cat > "$conf" <<CONF
ClusterName=shardbench
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=root
SlurmctldPort=${SB_SLURM_CTLD_PORT:-6817}
SlurmdPort=${SB_SLURM_D_PORT:-6818}
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
}

start_munge() {
  if alive munged; then return; fi
  # A munged we did not start (the system's) is used as it is and never stopped by us.
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  [ -r /etc/munge/munge.key ] || die "/etc/munge/munge.key missing; install the munge package"
  mkdir -p /run/munge
  chown munge:munge /run/munge
  chmod 0755 /run/munge
  # munged forks; its own pid file tells us the daemon's pid.
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid \
    || die "munged did not start"
  for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
  cp /run/munge/munged.pid "$dir/munged.pid"
  munge -n | unmunge >/dev/null || die "munge does not work (munge -n | unmunge failed)"
}

wait_idle() {
  local state=""
  for _ in $(seq 60); do
    state="$(sinfo -h -o %t 2>/dev/null | head -1 || true)"
    case "$state" in idle|mix|alloc) return 0 ;; esac
    sleep 1
  done
  die "the node is not idle after 60 s (sinfo says '${state:-nothing}'); see $dir/log/"
}

start() {
  [ "$(id -u)" = 0 ] || die "needs root (daemons run as root here)"
  for p in munged slurmctld slurmd sinfo; do
    command -v "$p" >/dev/null || [ -x "/usr/sbin/$p" ] || die "$p not found; apt-get install slurmctld slurmd slurm-client munge"
  done
  mkdir -p "$dir"
  if ! alive slurmctld || ! alive slurmd; then
    alive slurmctld || alive slurmd || write_config
    start_munge
    # -c: start from a clean state, no jobs from an earlier run come back.
    alive slurmctld || /usr/sbin/slurmctld -c -f "$conf" || die "slurmctld did not start; see $dir/log/slurmctld.log"
    alive slurmd || /usr/sbin/slurmd -f "$conf" || die "slurmd did not start; see $dir/log/slurmd.log"
    for _ in $(seq 50); do alive slurmctld && alive slurmd && break; sleep 0.1; done
  fi
  wait_idle
  echo "export SLURM_CONF=$conf"
}

stop() {
  # Reverse start order; each by its recorded pid, waiting until it is gone.
  for d in slurmd slurmctld munged; do
    if alive "$d"; then
      local pid
      pid="$(cat "$dir/$d.pid")"
      kill "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$dir/$d.pid"
  done
  echo "stopped (config and logs kept in $dir)"
}

status() {
  local up=0
  for d in munged slurmctld slurmd; do
    if alive "$d"; then echo "$d: running (pid $(cat "$dir/$d.pid"))"; up=$((up + 1)); else echo "$d: stopped"; fi
  done
  if [ "$up" = 3 ]; then
    sinfo
    echo "export SLURM_CONF=$conf"
  fi
  [ "$up" = 3 ]
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status   (config in \$SB_SLURM_DIR, default /tmp/shardbench-slurm)" >&2; exit 2 ;;
esac
