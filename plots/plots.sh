#!/usr/bin/env bash
# `make plots`: one short benchmark run over rxe (plots/run.sh, in the guest
# VM when this host has no RDMA device), then the pictures drawn here from its
# CSV (plots/plot.py, gnuplot).
#
#   PLOTS_CSV=DIR   draw from DIR (an earlier run's CSV directory), run nothing
#   PLOTS_OUT=DIR   where the pictures go (default build/plots; the run's CSV
#                   in DIR/csv)
#   PLOTS_FORMAT    png (default) or svg
# plots/run.sh says what else tunes the run (PLOTS_ITERS, ...).
set -euo pipefail
here=$PWD
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
abs() { case "$1" in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }
py=${PYTHON:-/usr/bin/python3}
out=$top/build/plots
[ -n "${PLOTS_OUT:-}" ] && out=$(abs "$PLOTS_OUT")
[ -n "${PLOTS_CSV:-}" ] && PLOTS_CSV=$(abs "$PLOTS_CSV")
fmt=(--format "${PLOTS_FORMAT:-png}")
if [ -n "${PLOTS_CSV:-}" ]; then
  exec "$py" plots/plot.py --csv "$PLOTS_CSV" --out "$out" "${fmt[@]}"
fi
"$py" plots/plot.py --check     # gnuplot first: no point in a run nothing can draw
csv=$out/csv
case "$csv" in
  "$top"/*) ;;
  *) if ! grep -qs ACTIVE /sys/class/infiniband/*/ports/*/state; then
       echo "plots: PLOTS_OUT=$out is outside $top: the guest VM writes only inside the tree" >&2
       exit 2
     fi ;;
esac
mkdir -p "$csv"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
# on-rxe.sh's own lines (and guest.py's boot line, naming the accelerator) are
# on stderr: keep a copy.
# The guest gets no environment from here: hand run.sh's settings over.
fwd=()
for v in PLOTS_ITERS PLOTS_BARRIER_RANKS PLOTS_CONN_RANKS; do
  [ -n "${!v:-}" ] && fwd+=("$v=${!v}")
done
set +e
{ scripts/on-rxe.sh env "${fwd[@]}" plots/run.sh "$csv" 2>&1 1>&3 | tee "$log" >&2; rc=${PIPESTATUS[0]}; } 3>&1
set -e
if [ "$rc" != 0 ]; then
  echo "plots: the benchmark run failed (exit $rc); its outputs are in $csv/" >&2
  exit "$rc"
fi
accel=$(sed -n 's/^guest: .* booted in .* under \(.*\)$/\1/p' "$log" | head -1)
if grep -q "running in the guest VM" "$log"; then
  accel="QEMU guest, ${accel:-accelerator unknown}"
  accel=${accel%%, guest uptime*}
else
  accel="this host's RDMA device, no VM"
fi
{
  echo "host=$(uname -n)"
  echo "accelerator=$accel"
  echo "wall_seconds=$((SECONDS - start))"
} >> "$csv/meta.txt"
exec "$py" plots/plot.py --csv "$csv" --out "$out" "${fmt[@]}"
