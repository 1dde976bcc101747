#!/usr/bin/env bash
# The main job over rxe: the data-path demo at 2 and 4 ranks, then every
# benchmark (offloaded mq vs host-progressed ptp, and the engine's own), its
# tables on stdout and its results in build/bench/*.csv.
# BENCH_ITERS overrides the calls per measurement loop (default 100).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
for n in 2 4; do
  echo "== $n ranks: write, write_imm, send, read, fetch_add, verified byte by byte"
  build/bin/emunic-run -n "$n" -t 120 build/bin/emunic-datapath --size 1M --iters 3
done
mkdir -p build/bench
iters=${BENCH_ITERS:-100}
for n in 2 4; do
  echo
  echo "== $n ranks: barrier benchmark, offloaded (mq) vs host-progressed (ptp), $iters calls a loop"
  # Both idle policies where it is cheap (2 ranks); the default one at 4.
  idle=default; [ "$n" = 2 ] && idle=both
  build/bin/emunic-run -n "$n" -t 600 build/bin/emunic-bench barrier --iters "$iters" --idle "$idle" \
    --csv "build/bench/barrier-$n.csv"
done
for n in 2 4; do
  echo
  echo "== $n ranks: allreduce benchmark, offloaded (mq, CALC) vs host-progressed (ptp), $iters calls a loop"
  build/bin/emunic-run -n "$n" -t 600 build/bin/emunic-bench allreduce --iters "$iters" \
    --csv "build/bench/allreduce-$n.csv"
done
for n in 2 4; do
  echo
  echo "== $n ranks: bcast benchmark, offloaded (mq, binomial tree) vs host-progressed (ptp), $iters calls a loop"
  build/bin/emunic-run -n "$n" -t 600 build/bin/emunic-bench bcast --iters "$iters" \
    --csv "build/bench/bcast-$n.csv"
done
for n in 2 4; do
  echo
  echo "== $n ranks: alltoall benchmark, offloaded (mq, pairwise exchange) vs host-progressed (ptp), $iters calls a loop"
  build/bin/emunic-run -n "$n" -t 600 build/bin/emunic-bench alltoall --iters "$iters" \
    --csv "build/bench/alltoall-$n.csv"
done
# Half the calls at 4 ranks, where a call is slowest, to keep each under ~30 s.
for c in gather allgather; do
  alg=linear; [ "$c" = allgather ] && alg="pairwise exchange"
  for n in 2 4; do
    k=$iters; [ "$n" = 4 ] && k=$(( iters > 1 ? iters / 2 : 1 ))
    echo
    echo "== $n ranks: $c benchmark, offloaded (mq, $alg) vs host-progressed (ptp), $k calls a loop"
    build/bin/emunic-run -n "$n" -t 600 build/bin/emunic-bench "$c" --iters "$k" --csv "build/bench/$c-$n.csv"
  done
done
echo
echo "== 2 ranks: a chain of 100 triggered puts vs the same chain driven by the app"
build/bin/emunic-run -n 2 -t 300 build/bin/emunic-bench trig --csv build/bench/trig.csv
echo
echo "== 2 ranks: chunked receiver-driven rendezvous vs one get a message (quick sizes)"
build/bin/emunic-run -n 2 -t 600 build/bin/emunic-bench rndv --quick --csv build/bench/rndv.csv
echo
echo "== 2 ranks: eager / RTR / chunked ping-pong per progress variant vs a host-progressed one (quick)"
build/bin/emunic-run -n 2 -t 600 build/bin/emunic-bench p2p --quick --csv build/bench/p2p.csv
echo
echo "== 4 ranks: QPs and start-up time, static mesh vs connections on demand (quick)"
build/bin/emunic-run -n 4 -t 600 build/bin/emunic-bench conn --quick --csv build/bench/conn.csv
echo
echo "== 2 ranks: a stream under injected connection failures (reconnect and resend) vs none (quick)"
build/bin/emunic-run -n 2 -t 600 build/bin/emunic-bench faults --quick --csv build/bench/faults.csv
echo
echo "== 2 ranks: an idle device (open, connected, nothing to do) vs none, 10 s each"
build/bin/emunic-run -n 2 -t 120 build/bin/emunic-bench idle --csv build/bench/idle.csv
echo
echo "== 2 ranks: the triggered hot potato (apps asleep) vs ib_write_lat"
build/bin/emunic-run -n 2 -t 300 build/bin/emunic-bench potato --csv build/bench/potato.csv
echo
echo "== 2 ranks: instructions (callgrind) to post a 4-task list and of the engine a task and a fired put"
build/bin/emunic-run -n 2 -t 900 build/bin/emunic-bench instr --quick --csv build/bench/instr.csv
echo
echo "== demo done in $((SECONDS - start)) s; CSV in build/bench/ (barrier-2, barrier-4, allreduce-2, allreduce-4, bcast-2, bcast-4, alltoall-2, alltoall-4, gather-2, gather-4, allgather-2, allgather-4, trig, rndv, p2p, conn, faults, idle, potato, instr)"
