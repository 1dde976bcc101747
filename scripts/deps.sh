#!/usr/bin/env bash
# Installs the Debian packages emunic needs when any is missing.  As root it
# runs apt-get itself; otherwise it prints the one line to run.
set -euo pipefail
pkgs=(
  gcc make pkg-config             # build
  libibverbs-dev librdmacm-dev    # rdma-core: verbs, the connection manager, mlx5dv.h/libmlx5 (shim/mlx5)
  ibverbs-providers rdma-core     # the rxe provider (librxe), libmlx5.so.1, udev rules
  ibverbs-utils rdmacm-utils perftest  # ibv_devinfo, rping, ib_write_lat: cross-checks
  liburing-dev                    # io_uring for the progress core's sleep mode
  libpmix-dev openmpi-bin         # PMIx bootstrap, and a PMIx launcher to test it
  libopenmpi-dev                  # mpi.h: libemunic-mpi.so (the PMPI interposer) and its tests
  mpich libmpich-dev              # the same interposer for MPICH: libemunic-mpich.so, tests/test_mpich.py
  iproute2 kmod                   # `rdma link`, modinfo (guest image)
  qemu-system-x86 busybox-static cpio xz-utils binutils  # the test guest (xz, readelf: its vmlinux)
  python3-pytest valgrind         # the suite (and valgrind.h, for the core sleeping under it)
  spin                            # the Promela model checker: spec/, tests/test_spec.py
  gnuplot-nox                     # make plots: the pictures (plots/plot.py)
  slurmd slurmctld slurm-client munge  # srun --mpi=pmix: tests/test_slurm.py's one-node cluster
  vagrant vagrant-libvirt         # the Vagrantfile: vagrant validate (tests/test_vagrant.py)
)
# One dpkg-query for all (one a package took ~7 s in the test guest).
installed=" $(dpkg-query -W -f='${Package} ${Status}\n' "${pkgs[@]}" 2>/dev/null |
  awk '$2 == "install" && $4 == "installed" { printf "%s ", $1 }' || true) "
missing=()
for p in "${pkgs[@]}"; do
  [[ "$installed" == *" $p "* ]] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "emunic: missing Debian packages; run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "emunic: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  apt-get update >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  apt-get install -y --no-install-recommends "${missing[@]}" >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
fi
rm -f "$log"
