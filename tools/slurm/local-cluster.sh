#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for the Slurm test and for trying profiles/slurm locally.
# Debian's slurm-wlm (slurmctld + slurmd + munge), started without systemd, as root. One fake GPU is advertised
# as gres gpu:1 (backed by /dev/null) so `resources: gpu=1` rules schedule; jobs fall back to the CPU.
# No slurmdbd: the profile used with this cluster must set `slurm-status-command: squeue` (sacct needs accounting).
#   tools/slurm/local-cluster.sh start     # ~15 s the first time (apt), ~5 s after
#   tools/slurm/local-cluster.sh status
#   tools/slurm/local-cluster.sh stop
set -euo pipefail
cmd=${1:-start}

start() {
  export DEBIAN_FRONTEND=noninteractive
  local pkgs="slurmctld slurmd slurm-client munge"
  if ! dpkg -s $pkgs >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
  fi
  local host cpus mem
  host=$(hostname -s)
  cpus=$(getconf _NPROCESSORS_ONLN)  # not nproc: it obeys OMP_NUM_THREADS, which test processes may set
  mem=$(( $(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo) * 80 / 100 ))
  mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /etc/slurm
  chown slurm:slurm /var/spool/slurmctld /var/log/slurm
  # MinJobAge keeps finished jobs visible to squeue long enough for snakemake to see them end.
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=halluflow-local
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MinJobAge=600
ReturnToService=2
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
GresTypes=gpu
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP
CONF
  echo "NodeName=${host} Name=gpu File=/dev/null" > /etc/slurm/gres.conf
  /etc/init.d/munge start >/dev/null
  /etc/init.d/slurmctld start >/dev/null
  /etc/init.d/slurmd start >/dev/null
  local state i
  for i in $(seq 60); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
    case "$state" in
      idle|mixed|allocated) sinfo; return 0 ;;
      drain*|inval*|down*) scontrol update nodename="$host" state=resume || true ;;
    esac
    sleep 1
  done
  echo "local-cluster: node did not become idle; see /var/log/slurm/" >&2
  return 1
}

stop() {
  for s in slurmd slurmctld munge; do [ -x /etc/init.d/$s ] && /etc/init.d/$s stop >/dev/null 2>&1 || true; done
  rm -rf /var/spool/slurmctld/* /var/spool/slurmd/*
  # A stopped cluster must not slow its clients: Snakemake's Slurm plugin runs `scontrol show config` whenever
  # snakemake starts, and scontrol retries a missing controller for 10 s. With a 1 s message timeout it fails at
  # once. `start` rewrites the file without it.
  if [ -f /etc/slurm/slurm.conf ] && ! grep -q '^MessageTimeout=' /etc/slurm/slurm.conf; then
    echo "MessageTimeout=1" >> /etc/slurm/slurm.conf
  fi
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) sinfo && squeue ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
