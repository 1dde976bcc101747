#!/usr/bin/env bash
# ab-bench.sh: two (or more) builds of emunic, the same collective
# benchmarks, alternated run by run on one machine, so that a slow spell of the host
# (under QEMU's TCG one run of the same code reads 1.5-2x another) falls on
# every build alike.  Prints, for each benchmark, size and build, the median
# over the runs of mq/ptp (the mean latencies' ratio, its range, and the
# medians' ratio) and of the mq and ptp means.
#
# usage: scripts/ab-bench.sh [-r RUNS] [-n RANKS] [-i ITERS] [-s SIZES] BENCHES TREE...
#   BENCHES  emunic-bench collective subcommands, space-separated
#            ("bcast gather"): allreduce, bcast, alltoall, gather, allgather
#   TREE     a built checkout (its build/bin is used), e.g. a `git worktree`
#            of the parent commit, built with `make all`
#   -r RUNS  runs of each benchmark a build (default 4)
#   -n RANKS ranks (default 2)
#   -i ITERS calls a loop (emunic-bench --iters; default 50)
#   -s SIZES emunic-bench --sizes (default 8,8K)
# Run it where the device is, e.g. in the guest:
#   scripts/on-rxe.sh scripts/ab-bench.sh "bcast gather" "$PWD" "$PWD/../parent"
# Exit status: 0, 2 on bad arguments, 1 if a benchmark run failed or its
# table had no rows to compare.
set -euo pipefail

usage() { sed -n '2,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
runs=4 ranks=2 iters=50 sizes=8,8K
while getopts "r:n:i:s:h" o; do
	case $o in
	r) runs=$OPTARG ;; n) ranks=$OPTARG ;; i) iters=$OPTARG ;; s) sizes=$OPTARG ;; *) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 3 ] || usage	# BENCHES and at least two builds
for v in "$runs" "$ranks" "$iters"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || { echo "ab-bench: '$v' is not a positive count" >&2; exit 2; }
done
benches=$1
shift
for t in "$@"; do
	[ -x "$t/build/bin/emunic-bench" ] || { echo "ab-bench: $t/build/bin/emunic-bench is missing: build $t first (make all)" >&2; exit 2; }
done

res=$(mktemp)
trap 'rm -f "$res"' EXIT
for i in $(seq 1 "$runs"); do
	for t in "$@"; do
		for c in $benches; do
			# The table's rows: "SIZE ptp MEAN MEDIAN [SLOWEST] - OVERLAP" then "SIZE mq MEAN MEDIAN ...".
			if ! out=$("$t/build/bin/emunic-run" -n "$ranks" -t 600 "$t/build/bin/emunic-bench" "$c" \
				--iters "$iters" --sizes "$sizes" 2>&1); then
				echo "ab-bench: run $i of $c with $t failed:" >&2
				echo "$out" | tail -5 >&2
				exit 1
			fi
			# Tab-separated (a tree's path may hold spaces; ENVIRON
			# keeps its backslashes); no row is an error, not an
			# empty table.
			if ! echo "$out" | AB_BENCH="$c" AB_TREE="$t" awk -v OFS='\t' '
				$2 == "ptp" { pm[$1] = $3; pd[$1] = $4 }
				$2 == "mq" && ($1 in pm) {
					print ENVIRON["AB_BENCH"], $1, ENVIRON["AB_TREE"], $3 / pm[$1], $4 / pd[$1], pm[$1], $3; n++
				}
				END { exit !n }' >> "$res"; then
				echo "ab-bench: run $i of $c with $t: no ptp/mq rows in its table (not a collective benchmark?)" >&2
				exit 1
			fi
			echo "ab-bench: run $i/$runs: $c with $t" >&2
		done
	done
done

# Medians by (bench, size, build), in the order first seen.
awk -F'\t' '
	function med(s,   a, n, i, j, x) {
		n = split(s, a, " ")
		for (i = 2; i <= n; i++) { x = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function lo(s,   a, n, i, m) { n = split(s, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 < m) m = a[i] + 0; return m }
	function hi(s,   a, n, i, m) { n = split(s, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0; return m }
	{ k = $1 SUBSEP $2 SUBSEP $3; if (!(k in n)) order[++nk] = k
	  n[k]++; r[k] = r[k] " " $4; rm[k] = rm[k] " " $5; p[k] = p[k] " " $6; q[k] = q[k] " " $7 }
	END {
		printf "%-10s %-5s %-40s %4s %22s %13s %9s %9s\n", "bench", "size", "build", "runs", "mq/ptp mean [range]", "mq/ptp p50", "ptp us", "mq us"
		for (i = 1; i <= nk; i++) {
			k = order[i]; split(k, f, SUBSEP)
			printf "%-10s %-5s %-40s %4d %9.2fx [%.2f-%.2f] %12.2fx %9.0f %9.0f\n", f[1], f[2], f[3], n[k],
			       med(r[k]), lo(r[k]), hi(r[k]), med(rm[k]), med(p[k]), med(q[k])
		}
	}' "$res"
