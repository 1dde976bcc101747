#!/usr/bin/python3
"""Draw the seed papers' figures from one emunic-bench run (`make plots`).

    plots/plot.py [--csv DIR] [--out DIR] [--format png|svg]

DIR (default build/plots/csv) is what plots/run.sh writes: the benchmarks'
CSV files (--csv), each one's printed output NAME.out (its met/MISSED target
lines are drawn), and meta.txt (commit, machine, accelerator).  The pictures
go to --out (default build/plots), one gnuplot script (.gp, self-contained:
the data is inline) beside each, so a picture can be redrawn or restyled with
`gnuplot FILE.gp`.

  01-barrier-latency    seed 003 figs. 4-5: barrier and ibarrier latency vs ranks
  02-cpu-availability   seed 003 figs. 6-7: CPU availability vs ranks, the fig. 7 sweep
  03-rendezvous         seed 000 figs. 4-5: overheads and latency per rendezvous variant
  04-rdrp-slow-receiver seed 004 figs. 5-6: chunked RDRP vs one get, slow receiver
  05-connections        seed 002 fig. 5, table 2: on-demand vs static connections
  06-collective-overlap overlap and latency per collective, offloaded vs host

The CSV and .out parsing is in benchdata.py, the gnuplot side in drawing.py,
the six pictures in figures.py.  Pictures need gnuplot (Debian gnuplot-nox;
GNUPLOT=PATH picks another).
Exit status: 0 all drawn; 1 a CSV or output file missing or malformed (the
message names it); 2 bad usage; 3 gnuplot missing or failing.
"""
import argparse
import os
import sys

from benchdata import DataError, read_meta
from drawing import ToolError, draw, gnuplot_bin
from figures import FIGURES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def caption(meta, fig, csv_dir):
    commit = meta.get("commit", "unknown (no meta.txt)")
    host = meta.get("host") or meta.get("run_node") or "unknown"
    accel = meta.get("accelerator", "unknown")
    where = "%s; ran in %s" % (host, accel)
    if meta.get("run_node") and meta.get("run_node") != host:
        where += " (node %s, %s CPUs, %s)" % (meta["run_node"], meta.get("run_cpus", "?"), meta.get("device", "?"))
    elif meta.get("device"):
        where += " (%s CPUs, %s)" % (meta.get("run_cpus", "?"), meta.get("device"))
    met = missed = 0
    missing = []
    for tg in fig.targets:
        if tg.text is None:
            missing.append(os.path.basename(tg.path))
        a, b = tg.counts()
        met, missed = met + a, missed + b
    tline = "targets (from the met/MISSED lines): %d met, %d MISSED" % (met, missed)
    if missing:
        tline += "; no target lines: %s missing" % ", ".join(missing)
    if fig.notes:
        tline += "; " + "; ".join(fig.notes)
    srcs = ", ".join(os.path.basename(s) for s in fig.sources)
    return ("emunic %s   machine %s\nrun %s, %s calls a loop, benchmarks %s s   data %s/{%s}\n%s"
            % (commit, where, meta.get("started", "?"), meta.get("iters", "?"), meta.get("bench_seconds", "?"),
               csv_dir, srcs, tline))


def main(argv=None):
    ap = argparse.ArgumentParser(description="Draw the seed-shaped pictures from one emunic-bench run "
                                 "(plots/run.sh's CSV directory).")
    ap.add_argument("--csv", default=os.path.join(ROOT, "build", "plots", "csv"),
                    help="the CSV directory (default build/plots/csv)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "plots"),
                    help="where the pictures go (default build/plots)")
    ap.add_argument("--format", choices=("png", "svg"), default=os.environ.get("PLOTS_FORMAT") or "png")
    ap.add_argument("--check", action="store_true", help="only check that gnuplot is there")
    a = ap.parse_args(argv)
    try:
        gp = gnuplot_bin()
        if a.check:
            return 0
        if not os.path.isdir(a.csv):
            raise DataError("%s: missing CSV directory (run `make plots`, or PLOTS_CSV=DIR from plots/run.sh)"
                            % a.csv)
        meta = read_meta(a.csv)
        figs = [(name, fn(a.csv, a.format), what) for name, fn, what in FIGURES]
        os.makedirs(a.out, exist_ok=True)
        shown = os.path.relpath(a.csv, ROOT) if os.path.abspath(a.csv).startswith(ROOT + os.sep) else a.csv
        done = []
        for name, fig, what in figs:
            done.append((draw(fig, a.out, caption(meta, fig, shown), gp), what))
    except DataError as e:
        print("plots: error: %s" % e, file=sys.stderr)
        return 1
    except ToolError as e:
        print("plots: error: %s" % e, file=sys.stderr)
        return 3
    for path, what in done:
        print("  %s\n      %s" % (path, what))
    return 0


if __name__ == "__main__":
    sys.exit(main())
