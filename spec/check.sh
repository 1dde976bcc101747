#!/bin/sh
# spec/check.sh MODEL [-DFLAG...]: model-checks spec/MODEL.pml (token, post_next, mq or
# trig) with spin in a temporary directory, as tests/test_spec.py does, and on
# an error prints the counterexample: each step as "process [statement]",
# then the global state it ends in.  LTL=1 checks the model's LTL formula
# instead (pan -a -f, weak fairness; slower).  MEMLIM=MB bounds pan's memory
# (default 2048).  Examples:
#   spec/check.sh token                  # errors: 0
#   spec/check.sh token -DAS_CODED_D2    # the stall of finding D2 (README.md)
#   spec/check.sh mq -DMUT_BASE          # a mutation: wait_ok fails
set -eu
here=$(cd "$(dirname "$0")" && pwd)
m=${1:?usage: spec/check.sh token|post_next|mq|trig [-DFLAG...]}
shift
m=${m%.pml}
command -v spin >/dev/null || { echo "spin is missing: run make deps" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/$m.pml" "$tmp/"
cd "$tmp"
spin -a "$@" "$m.pml" >/dev/null
if [ "${LTL:-0}" = 1 ]; then
	cc -O2 -w -DNFAIR=3 -DCOLLAPSE -DMEMLIM="${MEMLIM:-2048}" -o pan pan.c
	./pan -a -f -m100000 -w24 | tee out
else
	cc -O2 -w -DSAFETY -DNOCLAIM -DCOLLAPSE -DMEMLIM="${MEMLIM:-2048}" -o pan pan.c
	./pan -m100000 -w24 | tee out
fi
if [ -f "$m.pml.trail" ]; then
	echo "--- counterexample ($m $*)"
	spin -t -p "$@" "$m.pml" 2>&1 |
		sed -n 's/^ *[0-9]*:[[:space:]]*proc *\([0-9]* ([a-z:_]*[0-9]*)\) [^ ]* (state [0-9]*)[[:space:]]*\(\[.*\]\)$/\1 \2/p' |
		grep -v -e '\[else\]' -e '\[(1)\]' -e '\[break\]' -e '\[goto ' -e '(goto)' -e '= 0\]$' || true
	echo "--- final state"
	spin -t -g "$@" "$m.pml" 2>&1 | sed -n '/^#processes/,$p'
	exit 1
fi
