#!/usr/bin/env bash
# The benchmark half of `make plots`: one short run of every emunic-bench
# subcommand the pictures need, over rxe, each writing its CSV (--csv) and its
# printed tables and met/MISSED target lines (NAME.out) into one directory.
# Runs where the RDMA device is: `make plots` starts it through
# scripts/on-rxe.sh (in the guest VM when the host has none).
#
#   plots/run.sh [DIR]        DIR: default build/plots/csv
#
# PLOTS_ITERS scales the calls a loop (default 20; the figures' shapes, not
# their last digit, are the point under QEMU).  PLOTS_BARRIER_RANKS and
# PLOTS_CONN_RANKS list the job sizes of the "vs ranks" pictures.
# Files: barrier-N, conn-N (N ranks), p2p, rndv, and bcast-2, allreduce-2,
# alltoall-2, gather-2, allgather-2 (.csv and .out each), meta.txt (where and
# when), timing.txt (seconds a benchmark).  Exit status: the first failing
# benchmark's (its .out ends with the error), 0 when all ran.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${1:-build/plots/csv}
iters=${PLOTS_ITERS:-20}
barrier_ranks=${PLOTS_BARRIER_RANKS:-2 3 4 8}
conn_ranks=${PLOTS_CONN_RANKS:-2 4 8}
run=build/bin/emunic-run
bench=build/bin/emunic-bench
[ -x "$bench" ] && [ -x "$run" ] || { echo "plots/run.sh: $bench or $run missing: run make first" >&2; exit 2; }
mkdir -p "$out"
rm -f "$out"/*.csv "$out"/*.out "$out"/timing.txt "$out"/meta.txt

dev=$(ls /sys/class/infiniband 2>/dev/null | head -1)
{
  # +dirty: the tree differs from the commit (tracked files only)
  dirty=$(git -C "$top" diff --quiet HEAD 2>/dev/null || echo +dirty)
  echo "commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)$dirty"
  echo "run_node=$(uname -n)"
  echo "run_kernel=$(uname -r)"
  echo "run_cpus=$(nproc)"
  echo "device=${dev:-none}"
  echo "started=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "iters=$iters"
} > "$out/meta.txt"

start=$SECONDS
# bench NAME RANKS TIMEOUT ARGS...: one benchmark; its stdout and stderr to
# NAME.out, its seconds to timing.txt; a failure stops the run.
bench() {
  local name=$1 n=$2 t=$3 t0=$SECONDS rc=0
  shift 3
  printf '  %-14s %2d ranks  ' "$name" "$n"
  "$run" -n "$n" -t "$t" "$bench" "$@" --csv "$out/$name.csv" > "$out/$name.out" 2>&1 || rc=$?
  echo "$name $((SECONDS - t0))" >> "$out/timing.txt"
  if [ "$rc" != 0 ]; then
    echo "FAILED (exit $rc)"
    tail -n 15 "$out/$name.out" | sed 's/^/    /' >&2
    echo "plots/run.sh: $name failed (exit $rc); its output: $out/$name.out" >&2
    exit "$rc"
  fi
  echo "$((SECONDS - t0)) s"
}

echo "plots/run.sh: benchmarks into $out ($iters calls a loop)"
# Seed 003 figs. 4-7: latency and CPU availability by job size; both idle
# policies of the progress core at 2 ranks, the default one above.
for n in $barrier_ranks; do
  idle=default; [ "$n" = 2 ] && idle=both
  bench "barrier-$n" "$n" 300 barrier --iters "$iters" --sweep-iters "$iters" --idle "$idle"
done
# Seed 000 figs. 4-5: overheads and latency per rendezvous progress scheme.
bench p2p 2 300 p2p --quick
# Seed 004 figs. 5-6: chunked receiver-driven rendezvous (c gets in flight)
# against one get a message, then a receiver draining at 8 MB/s (about a
# third of what rxe moves under TCG).
bench rndv 2 300 rndv --sizes 64K,1M,4M --chunks 64K/1,64K/2,64K/4,64K/8 --iters 6 --rounds 2 --sink-mbps 8
# Seed 002 fig. 5 and table 2: QPs and start-up time, static vs on demand.
for n in $conn_ranks; do
  bench "conn-$n" "$n" 300 conn --quick
done
# Overlap (OSU) and latency per collective, offloaded vs host-progressed.
for c in bcast allreduce alltoall gather allgather; do
  bench "$c-2" 2 300 "$c" --sizes 8,8K,64K --iters "$iters" --warmup 3
done
echo "bench_seconds=$((SECONDS - start))" >> "$out/meta.txt"
echo "plots/run.sh: done in $((SECONDS - start)) s"
