#!/usr/bin/env bash
# Runs a command where an RDMA device is: on this host when it has an ACTIVE
# verbs port (a laptop with rxe, or a ConnectX machine), else in the emunic
# guest VM (QEMU with rdma_rxe), booted for this command, which may run for
# EMUNIC_GUEST_TIMEOUT seconds (default 3600: the demo is ~6-12 min under
# TCG, and each of its steps has its own emunic-run bound; guest.py's own
# default of 600 s cut a slow host's demo short).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if grep -qs ACTIVE /sys/class/infiniband/*/ports/*/state; then
  exec "$@"
fi
echo "emunic: no active RDMA device on this host; running in the guest VM" >&2
exec /usr/bin/python3 "$top/guest-images/guest.py" --timeout "${EMUNIC_GUEST_TIMEOUT:-3600}" -- "$@"
