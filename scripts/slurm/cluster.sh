#!/usr/bin/env bash
# A throw-away one-node Slurm cluster in a directory of its own, for trying
# `srun --mpi=pmix` on emunic's programs without touching /etc:
#
#   scripts/slurm/cluster.sh start DIR [CPUS]   # munged, slurmctld, slurmd
#   . DIR/env                                     # SLURM_CONF for srun/sinfo
#   srun --mpi=pmix -n 4 build/bin/emunic-bench barrier --iters 50
#   scripts/slurm/cluster.sh stop DIR
#
# Everything (config, munge key and socket, state, spool, logs, pid files)
# lives in DIR, which must be writable and is created if missing; nothing
# outside it is written, so it runs on a read-only root (the emunic guest).
# The node is this machine, named after its hostname, at 127.0.0.1, with
# CPUS CPUs (default 4; more than the machine has is allowed: the config
# overrides what slurmd sees).  Ports are free ones picked at start.  Needs
# root (slurmd starts the tasks) and Debian's slurmd, slurmctld,
# slurm-client and munge; the PMIx plugin (mpi_pmix_v4.so, in
# slurm-wlm-basic-plugins) loads libpmix from libpmix-dev.
#
# Every step is bounded: start waits at most 60 s for the node to be idle and
# stops what it started when it is not; stop sends SIGTERM, then SIGKILL after
# 10 s, to the daemons named in DIR's pid files only.
set -euo pipefail

die() { echo "slurm-cluster: $*" >&2; exit 1; }
usage() { die "usage: $0 start DIR [CPUS] | stop DIR | status DIR"; }

[ $# -ge 2 ] || usage
cmd=$1 dir=$2 cpus=${3:-4}

# A pid from DIR's pid files, when that process is alive (not a zombie) and
# is the daemon the file names (a stale file's pid may be another's now).
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $stat =~ ^[0-9]+\ \(([^\)]*)\)\ ([A-Z]) ]] || return 1
    [ "${BASH_REMATCH[2]}" != Z ] && [ "${BASH_REMATCH[1]}" = "$2" ]
}

daemon_pids() {
    local d p
    for d in munged slurmctld slurmd; do
        p=$(cat "$dir/$d.pid" 2>/dev/null) || continue
        alive "$p" "$d" && echo "$p $d"
    done
    return 0
}

stop() {
    local list p d i left
    list=$(daemon_pids)
    [ -n "$list" ] || return 0
    # Jobs still running first (their step daemons outlive slurmd), then
    # slurmd, slurmctld and munged.
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --partition=emunic 2>/dev/null || true
    tac <<<"$list" | while read -r p d; do kill -TERM "$p" 2>/dev/null || true; done
    for i in $(seq 100); do
        left=$(daemon_pids)
        [ -z "$left" ] && break
        sleep 0.1
    done
    while read -r p d; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done <<<"$left"
    sleep 0.2
    left=$(daemon_pids)
    rm -f "$dir"/munged.pid "$dir"/slurmctld.pid "$dir"/slurmd.pid
    [ -z "$left" ] || die "still running after SIGKILL: $(tr '\n' ' ' <<<"$left")"
    echo "slurm-cluster: stopped $(awk '{printf "%s%s (%s)", (NR > 1 ? ", " : ""), $2, $1}' <<<"$list")" >&2
}

logs() {
    echo "slurm-cluster: the logs' last lines:" >&2
    tail -n 15 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 2>/dev/null || true
}

free_ports() {
    python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

start() {
    [ "$(id -u)" -eq 0 ] || die "needs root (slurmd starts the tasks as their user)"
    local b missing=()
    for b in munged mungekey slurmctld slurmd srun sinfo; do
        command -v "$b" >/dev/null || missing+=("$b")
    done
    [ ${#missing[@]} -eq 0 ] ||
        die "missing ${missing[*]}: apt-get install slurmd slurmctld slurm-client munge"
    [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] ||
        echo "slurm-cluster: warning: Slurm's mpi/pmix plugin is missing (slurm-wlm-basic-plugins)" >&2
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    case "$dir" in *[[:space:]]*) die "DIR must have no white space" ;; esac
    [ -z "$(daemon_pids)" ] || die "$dir has a cluster running; stop it first"
    chmod 0755 "$dir"     # munged wants its socket's directory searchable by all
    mkdir -p "$dir/state" "$dir/spool" "$dir/tmp"
    rm -f "$dir/munge.key"
    mungekey -c -k "$dir/munge.key" 2>/dev/null ||
        { head -c 1024 /dev/urandom > "$dir/munge.key" && chmod 0600 "$dir/munge.key"; }

    local host ports ctl_port d_port srun_port
    host=$(hostname -s)
    ports=$(free_ports)      # (no process substitution: the guest has no /dev/fd)
    read -r ctl_port d_port srun_port <<<"$ports"
    : > "$dir/plugstack.conf"
    cat > "$dir/slurm.conf" <<EOF
# Written by scripts/slurm/cluster.sh: a one-node throw-away cluster.
ClusterName=emunic
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$d_port
SrunPortRange=$srun_port-$((srun_port + 20))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
KillWait=5
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=emunic Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    # slurmd 22.05 loads a cgroup plugin whatever else is configured, and its
    # autodetection fails where nothing is mounted on /sys/fs/cgroup (the
    # guest).  Tasks here are tracked by process group and not confined, so
    # the plugin is never used: v1, whose start-up asks nothing of the system.
    # (cgroup/v2 wants systemd's scopes, or to make its own under a mounted
    # cgroup2: neither is there in the guest.)
    echo "CgroupPlugin=cgroup/v1" > "$dir/cgroup.conf"
    printf 'export SLURM_CONF=%s/slurm.conf\n' "$dir" > "$dir/env"
    export SLURM_CONF=$dir/slurm.conf

    munged --key-file="$dir/munge.key" --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
        --seed-file="$dir/munged.seed" --log-file="$dir/munged.log" ||
        { tail -5 "$dir/munged.log" >&2; die "munged did not start"; }
    # The daemons fork into the background and write their pid files.
    slurmctld -f "$dir/slurm.conf" -c || { logs; stop; die "slurmctld did not start"; }
    slurmd -f "$dir/slurm.conf" -N "$host" || { logs; stop; die "slurmd did not start"; }

    local i state=
    for i in $(seq 600); do
        state=$(timeout 5 sinfo -h -N -n "$host" -o %T 2>/dev/null || true)
        case "$state" in idle) break ;; esac
        sleep 0.1
    done
    if [ "$state" != idle ]; then
        echo "slurm-cluster: node $host is '${state:-unreachable}' after 60 s" >&2
        logs
        stop
        exit 1
    fi
    echo "slurm-cluster: node $host idle with $cpus CPUs; . $dir/env to use it" >&2
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    status) [ -n "$(daemon_pids)" ] || die "no daemon of $dir is running"
            daemon_pids; SLURM_CONF=$dir/slurm.conf timeout 10 sinfo -N ;;
    *) usage ;;
esac
