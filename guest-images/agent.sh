#!/bin/bash
# Runs inside the guest as its first process, on the host's (read-only) root.
# Brings up the network, rxe0 and siw0, then runs the jobs the host drops in the
# spool directory: <id>.job (a bash script) -> <id>.out (its output) and
# <id>.rc (its exit status, written last).  A file named "shutdown" powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LANG=C.UTF-8
spool= ip= host=emunic-guest netdev=eth0 rxe=rxe0
siw=siw0 siwnet=siwnet0 siwip=10.99.0.1/24
for arg in $(</proc/cmdline); do
    case "$arg" in
        emunic.spool=*) spool=${arg#*=} ;;
        emunic.ip=*) ip=${arg#*=} ;;
        emunic.host=*) host=${arg#*=} ;;
    esac
done
poweroff_now() { sync; echo o > /proc/sysrq-trigger; sleep 30; }
say() { echo "emunic-guest: $*" > /dev/console; }
[ -d "$spool" ] || { say "spool $spool missing"; poweroff_now; }

ulimit -l unlimited
ulimit -c 0
echo "$host" > /proc/sys/kernel/hostname
ip link set lo up
ip link set "$netdev" up
[ -n "$ip" ] && ip addr add "$ip" dev "$netdev"
# Ranks on one node talk through rxe loopback; the ARP/neighbour entries of the
# netdev matter only across guests.
err=$(rdma link add "$rxe" type rxe netdev "$netdev" 2>&1) || say "rdma link add failed: $err"
for _ in $(seq 200); do
    grep -q ACTIVE "/sys/class/infiniband/$rxe/ports/1/state" 2>/dev/null && break
    sleep 0.05
done
state=$(cat "/sys/class/infiniband/$rxe/ports/1/state" 2>/dev/null || echo "no $rxe")
# siw0 (soft-iWARP, EMUNIC_DEVICE=siw0) on a netdev of its own: with both
# devices on eth0, rdma_cm would bind the one address to either of them.
# The dummy netdev carries nothing; ranks on this guest reach its address
# through the kernel's local route (TCP over lo, which is what siw speaks).
err=$( (ip link add "$siwnet" type dummy && ip addr add "$siwip" dev "$siwnet" &&
        ip link set "$siwnet" up && rdma link add "$siw" type siw netdev "$siwnet") 2>&1) ||
    say "siw: $err"
siwstate=$(cat "/sys/class/infiniband/$siw/ports/1/state" 2>/dev/null || echo "no $siw")
# libibverbs dlopens the provider of every driver file in /etc/libibverbs.d
# (17 on Debian) in each process that lists the devices, as every rank
# does: ~0.1 s a process under TCG.  This guest has rxe and siw only, so
# it sees only their files (a copy on /run bound over the host's directory).
ibvd=/run/libibverbs.d
{ mkdir -p "$ibvd" && echo "driver rxe" > "$ibvd/rxe.driver" && echo "driver siw" > "$ibvd/siw.driver" &&
  mount --bind "$ibvd" /etc/libibverbs.d; } 2>/dev/null ||
    say "cannot narrow /etc/libibverbs.d to rxe and siw: every provider loads"
read -r uptime _ < /proc/uptime
printf 'uptime=%s\nrxe=%s\nstate=%s\nhost=%s\nip=%s\nsiw=%s\nsiw_state=%s\nsiw_ip=%s\n' \
    "$uptime" "$rxe" "$state" "$host" "$ip" "$siw" "$siwstate" "${siwip%/*}" > "$spool/ready.tmp"
mv "$spool/ready.tmp" "$spool/ready"

# Under TCG every program the guest starts costs 0.04-0.1 s (exec, the
# dynamic loader, files over 9p), so the loop below starts none (stty and
# mkfifo run once, here): bash builtins only, and a job is a fork.  The
# host renames a whole <id>.job into place; the agent remembers which it
# started instead of renaming them, and writes <id>.rc with one write
# ending in a newline, which the host waits for.
#
# Between looks the agent sleeps on the host's doorbell, the second serial
# port (guest.py writes a newline to it after placing each job and for
# shutdown), with a 1 s look anyway should a ring be missed.  Looking every
# 50 ms instead (a readdir and a stat over 9p each time) cost an idle guest
# ~23% of a host CPU against ~4% (QEMU's CPU time over 10 s, guest idle),
# taken from whichever guest or test was running beside it.  A QEMU without
# the port gets the 50 ms looks (a FIFO no one writes to is the sleep).
# clocal: the open must not wait for a carrier.
bell=/dev/ttyS1 nap_s=1
if ! { stty -F "$bell" raw -echo clocal 2>/dev/null && exec {nap}< "$bell"; }; then
    say "no doorbell on $bell: looking for jobs every 50 ms"
    nap_s=0.05
    mkfifo /run/agent.nap && exec {nap}<> /run/agent.nap
fi
nap() { read -r -t "$nap_s" -u "$nap" _; }
declare -A started

# A job runs in a forked copy of this shell, not in `timeout bash JOB`:
# under TCG those two execs were ~210 ms of a no-op job's 310 (end to end,
# from the host; 100 ms now).  As timeout(1) does, it gets a process group
# of its own (set -m), which a watchdog sends TERM (and CONT) at the limit
# and KILL 5 s later; the status is then 124, or 137 if it took the KILL.
# The job sees what `bash JOB` would (exported variables only, bash's
# default options, no arguments, no agent fds, not inside a function) but
# for $$ and $PPID, which are the agent's.
mkfifo /run/agent.sleep && exec {sleeper}<> /run/agent.sleep     # no writer: read -t sleeps
agent_vars="arg spool ip host netdev rxe siw siwnet siwip err state siwstate uptime bell nap_s nap sleeper
            started job id t dir pid wd rc fired agent_vars"

shopt -s nullglob
while :; do
    [ -e "$spool/shutdown" ] && poweroff_now
    for job in "$spool"/*.job; do
        id=${job##*/}
        id=${id%.job}
        [ -n "${started[$id]}" ] && continue
        started[$id]=1
        # The job's supervisor, in the background; its stderr (job
        # control's "Killed" lines) goes nowhere.
        (
            t= dir=
            # The host writes both without a newline: read sets them, then says EOF.
            read -r t < "$spool/$id.timeout" || [ -n "$t" ] || t=600
            read -r dir < "$spool/$id.cwd" || [ -n "$dir" ] || dir=/
            set -m
            (
                set +m
                shopt -u nullglob
                BASH_ARGV0=$spool/$id.job
                exec {nap}<&- {sleeper}<&-
                cd "$dir" || exit
                unset -v $agent_vars
                unset -f poweroff_now say nap
                set --
                . "$0"
            ) > "$spool/$id.out" 2>&1 < /dev/null &
            pid=$!
            (
                fired=0
                trap 'exit $fired' TERM
                read -r -t "$t" -u "$sleeper" _
                fired=124
                kill -TERM -- "-$pid" 2>/dev/null || exit 0
                kill -CONT -- "-$pid" 2>/dev/null
                read -r -t 5 -u "$sleeper" _
                fired=137
                kill -KILL -- "-$pid" 2>/dev/null || exit 124
                exit 137
            ) &
            wd=$!
            set +m
            wait "$pid"
            rc=$?
            kill -TERM "$wd" 2>/dev/null
            wait "$wd"
            fired=$?
            [ "$fired" -eq 124 ] || [ "$fired" -eq 137 ] && rc=$fired
            echo $rc > "$spool/$id.rc"
        ) 2> /dev/null &
    done
    nap
done
