#!/usr/bin/env bash
# Runs a command where an RDMA device is: on this host when it has an ACTIVE
# verbs port (a laptop with rxe, or a ConnectX machine), else in the emunic
# guest VM (QEMU with rdma_rxe), booted for this command.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if grep -qs ACTIVE /sys/class/infiniband/*/ports/*/state; then
  exec "$@"
fi
echo "emunic: no active RDMA device on this host; running in the guest VM" >&2
exec /usr/bin/python3 "$top/guest-images/guest.py" -- "$@"
