#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, for the tests of `--batch` / `--run` with
# executor slurm (tests/cli/slurm_batch_test.sh) and for trying them by hand (as root):
#   scripts/slurm-single-node.sh start STATE_DIR   # munged (unless one answers), slurmctld, slurmd
#   export SLURM_CONF=STATE_DIR/slurm.conf         # sbatch, squeue, srun, scontrol read it
#   scripts/slurm-single-node.sh stop STATE_DIR    # stops what start started, by process id
# Everything lives in STATE_DIR (slurm.conf, state, spool, logs, pid files): /etc/slurm is not
# touched, so it cannot clash with a cluster the machine already belongs to. Steps as in
# ../shared/cluster/README.md (Debian 12, Slurm 22.05: slurm-wlm munge; no cgroup.conf).
# Exit codes of start: 0 up (the node idle), 77 not possible here (not root, packages missing,
# daemons not coming up: the reason is printed), so tests can skip.
set -uo pipefail

usage() { echo "usage: $(basename "$0") start|stop STATE_DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1
state=$(mkdir -p "$2" && cd "$2" && pwd) || { echo "slurm-single-node: cannot create $2" >&2; exit 77; }
export SLURM_CONF="$state/slurm.conf"

skip() { echo "slurm-single-node: $*" >&2; exit 77; }
# Every client call is bounded: where the daemons cannot be reached (e.g. a chroot whose host name
# does not resolve), scontrol/sinfo wait out Slurm's 10 s message timeout, and munge may hang.
q() { timeout 4 "$@"; }
# up SECONDS CMD...: CMD (a bounded check) succeeds within SECONDS.
up() {
  local until=$((SECONDS + $1))
  shift
  while ((SECONDS < until)); do "$@" && return 0; sleep 0.2; done
  return 1
}
munge_ok() { q munge -n 2>/dev/null | q unmunge >/dev/null 2>&1; }
ctld_ok() { q scontrol ping 2>/dev/null | grep -q UP; }
node_idle() { q sinfo -h -o %t 2>/dev/null | grep -qx idle; }

stop() {
  # Reverse order of start; only the processes whose ids start recorded.
  for name in slurmd slurmctld munged; do
    [[ -f "$state/$name.pid" ]] || continue
    pid=$(cat "$state/$name.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$state/$name.pid"
  done
}

start() {
  [[ $(id -u) -eq 0 ]] || skip "needs root (slurmd runs jobs as their users; munged as munge)"
  for tool in munged munge unmunge slurmctld slurmd sbatch squeue scontrol sinfo; do
    command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (scripts/install-deps.sh --tests installs slurm-wlm and munge)"
  done

  # 1. Munge: Slurm's authentication. Reuse a daemon that already answers; else start one.
  if ! munge_ok; then
    [[ -s /etc/munge/munge.key ]] || mungekey -c >/dev/null 2>&1 || skip "cannot create /etc/munge/munge.key"
    chown munge:munge /etc/munge/munge.key 2>/dev/null
    mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
    # --foreground under our own background job, so its process id is the daemon's.
    runuser -u munge -- munged --foreground --force >"$state/munged.log" 2>&1 &
    echo $! >"$state/munged.pid"
    up 10 munge_ok || { stop; skip "munged did not come up: $(tail -3 "$state/munged.log")"; }
  fi

  # 2. slurm.conf for this one node (its CPUs and memory as the kernel reports them).
  local host cpus mem_mib
  host=$(hostname -s)
  cpus=$(nproc --all)
  mem_mib=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  mkdir -p "$state/ctld" "$state/spool"
  cat >"$SLURM_CONF" <<EOF
ClusterName=nemotron-test
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.daemon.pid
SlurmdPidFile=$state/slurmd.daemon.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
JobCompType=jobcomp/none
NodeName=$host CPUs=$cpus RealMemory=$mem_mib State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

  # 3. The daemons in the foreground (-D) as our background jobs: their ids are ours to stop.
  # Another slurmctld on this host (the default ports) would answer for ours: refuse to mix them.
  if ctld_ok; then
    stop
    skip "a slurmctld already answers on $host (port 6817); stop it first"
  fi
  slurmctld -D -i -f "$SLURM_CONF" >>"$state/slurmctld.log" 2>&1 &
  echo $! >"$state/slurmctld.pid"
  if ! up 20 ctld_ok || ! kill -0 "$(cat "$state/slurmctld.pid")" 2>/dev/null; then
    stop
    skip "slurmctld did not come up: $(tail -3 "$state/slurmctld.log")"
  fi
  slurmd -D -f "$SLURM_CONF" >>"$state/slurmd.log" 2>&1 &
  echo $! >"$state/slurmd.pid"
  if ! up 30 node_idle || ! kill -0 "$(cat "$state/slurmd.pid")" 2>/dev/null; then
    stop
    skip "the node is not idle after 30 s: $(q sinfo 2>&1 | tail -2); $(tail -3 "$state/slurmd.log")"
  fi
  echo "slurm-single-node: up in $state (node $host, $cpus CPUs); export SLURM_CONF=$SLURM_CONF"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
