#!/bin/bash
# Runs inside the guest as its first process, on the host's (read-only) root.
# Brings up the network and rxe0, then runs the jobs the host drops in the
# spool directory: <id>.job (a bash script) -> <id>.out (its output) and
# <id>.rc (its exit status, written last).  A file named "shutdown" powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LANG=C.UTF-8
spool= ip= host=emunic-guest netdev=eth0 rxe=rxe0
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
read -r uptime _ < /proc/uptime
printf 'uptime=%s\nrxe=%s\nstate=%s\nhost=%s\nip=%s\n' "$uptime" "$rxe" "$state" "$host" "$ip" > "$spool/ready.tmp"
mv "$spool/ready.tmp" "$spool/ready"

# Under TCG every program the guest starts costs ~0.1 s (exec, the dynamic
# loader, files over 9p), so the loop below starts none: bash builtins only
# (a FIFO no one writes to is its sleep), and a job is `timeout bash JOB`.
# The host renames a whole <id>.job into place; the agent remembers which
# it started instead of renaming them, and writes <id>.rc with one write
# ending in a newline, which the host waits for.
mkfifo /run/agent.nap && exec {nap}<> /run/agent.nap
nap() { read -r -t 0.05 -u "$nap" _; }
declare -A started

run_job() {
    local id=$1 t= dir=
    # The host writes both without a newline: read sets them, then says EOF.
    read -r t < "$spool/$id.timeout" || [ -n "$t" ] || t=600
    read -r dir < "$spool/$id.cwd" || [ -n "$dir" ] || dir=/
    (cd "$dir" && exec timeout -k 5 "$t" bash "$spool/$id.job") > "$spool/$id.out" 2>&1 < /dev/null
    echo $? > "$spool/$id.rc"
}

shopt -s nullglob
while :; do
    [ -e "$spool/shutdown" ] && poweroff_now
    for job in "$spool"/*.job; do
        id=${job##*/}
        id=${id%.job}
        [ -n "${started[$id]}" ] && continue
        started[$id]=1
        run_job "$id" &
    done
    nap
done
