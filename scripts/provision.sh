#!/usr/bin/env bash
# Provisions a machine for emunic and proves it works: the Debian packages
# (scripts/deps.sh), rxe0 on the private interface, the build, a two-rank job
# on this node, and with --nodes the two-node checks across machines.  The
# Vagrantfile runs it in every VM; tests/test_vagrant.py runs it with --guest
# in the emunic test guest, so it cannot rot.
#
#   scripts/provision.sh [OPTIONS]
#
#   --ip ADDR         the private interface is the one holding ADDR
#   --netdev IF       ... or name it (default: the interface of the default
#                     route, else the first one up that is not lo)
#   --rxe NAME        the rxe device (default rxe0); created on the interface
#                     unless it exists
#   --build-dir DIR   build into DIR (default: build/ in the tree; --guest:
#                     /tmp/emunic-provision)
#   --nodes K --node I --server ADDR[:PORT]
#                     after the local check, the two-node checks as node I of
#                     K, node 0 serving them at ADDR (port 7711 and the next)
#   --background      run this node's part of the two-node checks in the
#                     background and return at once (Vagrant brings its VMs
#                     up one by one: node 0's provisioning ends before node
#                     1's starts); the log: DIR/two-node-I.log, its last line
#                     "two-node: ok" or "two-node: FAILED ..."
#   --guest           what the emunic test guest can do: no apt-get (no
#                     network; the host's packages are checked instead), no
#                     writes under / (read-only; nothing persisted in /etc),
#                     only the programs the checks run are built
#   -h, --help        this text
#
# Exit: 0 done and every check passed; 1 a step failed (named on stderr);
# 2 bad usage.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "provision: $*" >&2; }
die() { say "error: $*"; exit 1; }
usage() { sed -n '/^#   scripts/,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }

ip_addr= netdev= rxe=rxe0 build= nodes=1 node=0 server= background= guest=
while [ $# -gt 0 ]; do
    case "$1" in
        --ip) ip_addr=${2:?}; shift ;;
        --netdev) netdev=${2:?}; shift ;;
        --rxe) rxe=${2:?}; shift ;;
        --build-dir) build=${2:?}; shift ;;
        --nodes) nodes=${2:?}; shift ;;
        --node) node=${2:?}; shift ;;
        --server) server=${2:?}; shift ;;
        --background) background=1 ;;
        --guest) guest=1 ;;
        -h|--help) usage ;;
        *) say "unknown option '$1'"; usage ;;
    esac
    shift
done
case "$nodes$node" in *[!0-9]*) say "--nodes and --node take numbers"; exit 2 ;; esac
if [ "$nodes" -gt 1 ]; then
    [ -n "$server" ] && [ "$node" -lt "$nodes" ] || { say "--nodes $nodes needs --server and --node 0..$((nodes - 1))"; exit 2; }
    case "$server" in *:*) ;; *) server=$server:7711 ;; esac
fi
[ "$(id -u)" -eq 0 ] || die "run as root (apt-get, rdma link add, modprobe)"
[ -n "$build" ] || build=$([ -n "$guest" ] && echo /tmp/emunic-provision || echo "$top/build")
mkdir -p "$build"
build=$(cd "$build" && pwd)
bin=$build/bin
ulimit -l unlimited 2>/dev/null || say "warning: cannot lift the locked-memory limit (RDMA registers memory)"

# --- 1. packages ---------------------------------------------------------
t0=$SECONDS
# deps.sh as root installs what is missing; as another user it only checks
# and prints the apt-get line, which is what the guest (no network, read-only
# root) needs.
if [ -n "$guest" ]; then
    if ! setpriv --reuid=nobody --regid=nogroup --clear-groups "$top/scripts/deps.sh"; then
        die "packages missing (the guest shares the host's: install them on the host)"
    fi
    say "packages: every one scripts/deps.sh lists is installed ($((SECONDS - t0)) s)"
else
    "$top/scripts/deps.sh" || die "scripts/deps.sh could not install the packages"
    say "packages: installed (scripts/deps.sh, $((SECONDS - t0)) s)"
fi

# --- 2. rxe on the private interface -------------------------------------
if [ -n "$ip_addr" ] && [ -z "$netdev" ]; then
    netdev=$(ip -o -4 addr show | awk -v a="$ip_addr" '{split($4, p, "/"); if (p[1] == a) {print $2; exit}}')
    [ -n "$netdev" ] || die "no interface holds $ip_addr"
fi
if [ -z "$netdev" ]; then
    netdev=$(ip -o route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')
fi
if [ -z "$netdev" ]; then
    netdev=$(ip -o link show up | awk -F': ' '$2 != "lo" {sub(/@.*/, "", $2); print $2; exit}')
fi
[ -n "$netdev" ] && [ -e "/sys/class/net/$netdev" ] || die "no network interface for rxe (give --netdev or --ip)"

if [ -e "/sys/class/infiniband/$rxe" ]; then
    have=$(rdma link show "$rxe/1" 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "netdev") print $(i + 1)}')
    [ -z "$have" ] || [ "$have" = "$netdev" ] ||
        die "$rxe exists on $have, not on $netdev (rdma link delete $rxe, or give --rxe another name)"
    say "rdma: $rxe present on $netdev"
else
    [ -d /sys/module/rdma_rxe ] || modprobe rdma_rxe ||
        die "cannot load rdma_rxe (Debian's linux-image-amd64 has it; a -cloud kernel does not)"
    out=$(rdma link add "$rxe" type rxe netdev "$netdev" 2>&1) || die "rdma link add $rxe on $netdev: $out"
    say "rdma: created $rxe on $netdev"
fi
for _ in $(seq 100); do
    grep -qs ACTIVE "/sys/class/infiniband/$rxe/ports/1/state" && break
    sleep 0.1
done
grep -qs ACTIVE "/sys/class/infiniband/$rxe/ports/1/state" ||
    die "$rxe port 1 is not ACTIVE ($(cat "/sys/class/infiniband/$rxe/ports/1/state" 2>/dev/null))"

if [ -z "$guest" ] && [ -d /etc/systemd/system ]; then
    # Kept across reboots (vagrant reload), and memory locking for the users.
    cat > /etc/systemd/system/emunic-rxe.service <<EOF
[Unit]
Description=emunic: rxe device $rxe on $netdev (scripts/provision.sh)
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStartPre=-/sbin/modprobe rdma_rxe
ExecStart=/bin/sh -c 'rdma link show $rxe/1 >/dev/null 2>&1 || rdma link add $rxe type rxe netdev $netdev'

[Install]
WantedBy=multi-user.target
EOF
    systemctl daemon-reload 2>/dev/null && systemctl enable emunic-rxe.service >/dev/null 2>&1 || true
    printf '* soft memlock unlimited\n* hard memlock unlimited\n' > /etc/security/limits.d/90-emunic.conf
fi

# --- 3. build ------------------------------------------------------------
# As the owner of the tree, so that its user can rebuild later.
owner=$(stat -c %U "$top")
as_owner=()
[ "$owner" = root ] || [ "$owner" = UNKNOWN ] || as_owner=(runuser -u "$owner" --)
[ "$owner" = root ] || chown "$owner" "$build" 2>/dev/null || as_owner=()
targets=(all)
[ -n "$guest" ] && targets=("$bin/emunic-run" "$bin/emunic-datapath" "$bin/emunic-allreduce")
t0=$SECONDS
log=$build/provision-make.log
if ! "${as_owner[@]}" make -C "$top" --no-print-directory O="$build" -j"$(nproc)" "${targets[@]}" >"$log" 2>&1; then
    grep -E 'error|Error' "$log" | head -20 >&2 || true
    die "the build failed (log: $log)"
fi
say "build: ${targets[*]##*/} in $build ($((SECONDS - t0)) s)"

# --- 4. a two-rank job on this node ----------------------------------------
t0=$SECONDS
out=$("$bin/emunic-run" -n 2 -d "$rxe" -t 120 "$bin/emunic-datapath" --size 64K --iters 2 2>&1) ||
    { echo "$out" >&2; die "the two-rank job on $rxe failed"; }
grep -q "verified (0 mismatches)" <<<"$out" || { echo "$out" >&2; die "the two-rank job did not verify"; }
say "check: two ranks on $rxe ($((SECONDS - t0)) s): $(grep -m1 -o '2 ranks on .*' <<<"$out" | head -c 120)"

[ "$nodes" -gt 1 ] || { say "done"; exit 0; }

# --- 5. the two-node checks -------------------------------------------------
# The same jobs on every node, node I starting its share of the ranks; node
# 0's emunic-run serves the bootstrap and the others retry until it is up.
# A rank failing anywhere fails the job on every node.
host=${server%:*} port=${server##*:}
tlog=$build/two-node-$node.log
two_node() {
    local n=$nodes i=$node wait_s=300 out rc attempt
    run() { "$bin/emunic-run" -v -d "$rxe" --nodes "$n" --node "$i" --server "$host:$1" -t "$2" "${@:3}"; }
    echo "two-node: node $i of $n, $netdev $(ip -o -4 addr show dev "$netdev" | awk '{print $4; exit}'), node 0 at $host"
    # Node 0 waits for the others to come up (Vagrant: created, provisioned
    # and built one after the other); the others retry until node 0 listens.
    # The ranks' bootstrap waits as long (EMUNIC_BOOT_TIMEOUT, 300 s else).
    [ "$i" -eq 0 ] && wait_s=1800
    for attempt in $(seq 30); do
        rc=0
        out=$(EMUNIC_BOOT_TIMEOUT=$wait_s run "$port" "$wait_s" -n "$n" "$bin/emunic-datapath" \
                --size 256K --iters 2 2>&1) || rc=$?
        [ "$rc" -ne 0 ] && [ "$i" -gt 0 ] && grep -q "cannot reach node 0" <<<"$out" && continue
        break
    done
    echo "$out"
    [ "$rc" -eq 0 ] || { echo "two-node: FAILED datapath (exit $rc)"; return 1; }
    # An offloaded collective across the machines, every result checked.
    # (Not emunic-barrier: it checks the order of entries and exits by the
    # clock, which only ranks on one machine share.)
    run $((port + 1)) 300 -n $((2 * n)) "$bin/emunic-allreduce" inflight 2>&1 ||
        { echo "two-node: FAILED allreduce (exit $?)"; return 1; }
    echo "two-node: ok"
}
if [ -n "$background" ]; then
    # Detached from the provisioner's session; bounded by the jobs' -t and the wait.
    # A previous run's job (vagrant provision again) would hold the port.
    old=$(cat "$build/two-node-$node.pid" 2>/dev/null || true)
    if [ -n "$old" ] && [ "$(ps -o args= -p "$old" 2>/dev/null | awk '{print $1}')" = timeout ]; then
        kill -TERM -- "-$old" 2>/dev/null || true
        sleep 1
    fi
    rm -f "$tlog"
    # setsid: a session (and process group) of its own, which outlives the
    # provisioner's; its pid is the group's id.
    setsid timeout -k 5 2400 bash -c "$(declare -f two_node); $(declare -p nodes node bin rxe host port netdev); two_node" \
        > "$tlog" 2>&1 < /dev/null &
    echo $! > "$build/two-node-$node.pid"
    say "two-node: node $node joins the checks in the background, node 0 at $host:$port (log: $tlog)"
    exit 0
fi
if ! two_node 2>&1 | tee "$tlog" >&2 || ! grep -q "^two-node: ok" "$tlog"; then
    die "the two-node checks failed (this node's log: $tlog; node 0's: two-node-0.log in its build dir)"
fi
say "done"
