#!/usr/bin/env bash
# The main job: the data-path demo at 2 and 4 ranks over rxe.
set -euo pipefail
cd "$(dirname "$0")/.."
for n in 2 4; do
  echo "== $n ranks: write, write_imm, send, read, fetch_add, verified byte by byte"
  build/bin/emunic-run -n "$n" -t 120 build/bin/emunic-datapath --size 1M --iters 3
done
