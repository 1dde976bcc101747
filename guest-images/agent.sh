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

run_job() {
    local id=$1 t
    t=$(cat "$spool/$id.timeout" 2>/dev/null || echo 600)
    (cd "$(cat "$spool/$id.cwd" 2>/dev/null || echo /)" &&
        exec timeout -k 5 "$t" bash "$spool/$id.running") > "$spool/$id.out" 2>&1 < /dev/null
    echo $? > "$spool/$id.rc.tmp"
    mv "$spool/$id.rc.tmp" "$spool/$id.rc"
}

shopt -s nullglob
while :; do
    [ -e "$spool/shutdown" ] && poweroff_now
    for job in "$spool"/*.job; do
        id=$(basename "$job" .job)
        mv "$job" "$spool/$id.running" || continue
        run_job "$id" &
    done
    sleep 0.05
done
