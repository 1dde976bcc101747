"""Pictures as gnuplot scripts: a Figure is a multiplot of panels over inline
datablocks, drawn by gnuplot (pngcairo or svg); helpers for the panels."""
import math
import os
import shutil
import subprocess
import sys

from benchdata import Targets, size_label


class ToolError(Exception):
    """gnuplot missing or failing."""

def q(s):
    """A gnuplot double-quoted string."""
    return '"%s"' % str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def block(name, rows):
    """An inline datablock; None is a missing value ('?')."""
    lines = []
    for r in rows:
        lines.append(" ".join("?" if v is None else q(v) if isinstance(v, str) else "%.6g" % v for v in r))
    return "$%s << EOD\n%s\nEOD\n" % (name, "\n".join(lines) or "?")


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]
TARGET_COLOR = "#c00000"


class Figure:
    def __init__(self, name, title, layout, size, fmt):
        self.name, self.title, self.layout, self.size, self.fmt = name, title, layout, size, fmt
        self.data, self.panels, self.sources, self.notes = [], [], [], []
        self.targets = []       # Targets objects drawn from

    def use(self, table):
        """Draws from TABLE: its CSV goes in the caption's sources, the
        targets its benchmark printed are read; returns those targets."""
        tg = Targets(table.out_path())
        self.sources.append(table.path)
        self.targets.append(tg)
        return tg

    def add_data(self, name, rows):
        self.data.append(block(name, rows))

    def script(self, out_file, caption):
        w, h = self.size
        if self.fmt == "svg":
            term = "set terminal svg size %d,%d dynamic noenhanced font 'DejaVu Sans,11' background 'white'" % (w, h)
        else:
            term = "set terminal pngcairo size %d,%d noenhanced font 'DejaVu Sans,11' background 'white'" % (w, h)
        rows, cols = self.layout
        nlines = caption.count("\n") + 1
        cap = (nlines * 15 + 12) / h          # the caption, at the bottom
        bottom = cap + 75 / h                 # room for the last row's tics and x label
        top = 1 - 95 / h                      # the title
        common = ("set encoding utf8; set datafile missing '?'; set style data linespoints\n"
                  "set grid back lc '#dddddd'; set tics font ',10'; set pointsize 1.2\n"
                  "set key opaque box lc '#cccccc' samplen 2 spacing 1.1 font ',9'")
        s = ["# %s\n# drawn by plots/plot.py; redraw with: gnuplot %s.gp" % (self.title, self.name),
             term, "set output %s" % q(out_file)]
        s += self.data
        s.append("set multiplot layout %d,%d title %s font ',15' margins 0.07,0.97,%.3f,%.3f spacing %.3f,%.3f"
                 % (rows, cols, q(self.title), bottom, top, 95 / w, 115 / h))
        for i, p in enumerate(self.panels):
            s.append("\n# ---- panel %d\nreset\n%s" % (i + 1, common))
            if i == 0:
                s.append("set label 900 %s at screen 0.01,%.3f left font ',9' tc '#333333'"
                         % (q(caption), cap - 17 / h))
            s.append(p)
        s.append("unset multiplot")
        return "\n".join(s) + "\n"


def gnuplot_bin():
    g = os.environ.get("GNUPLOT") or "gnuplot"
    path = shutil.which(g)
    if not path:
        raise ToolError("%s not found: the pictures need gnuplot; run `make deps` (it installs the "
                        "Debian package gnuplot-nox)" % g)
    return path


def draw(fig, out_dir, caption, gp):
    out_file = os.path.join(out_dir, "%s.%s" % (fig.name, fig.fmt))
    script_file = os.path.join(out_dir, fig.name + ".gp")
    text = fig.script(os.path.basename(out_file), caption)
    with open(script_file, "w", encoding="utf-8") as f:
        f.write(text)
    if os.path.exists(out_file):
        os.unlink(out_file)
    p = subprocess.run([gp, os.path.basename(script_file)], cwd=out_dir, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    msg = p.stdout.decode(errors="replace").strip()
    if p.returncode != 0 or not os.path.isfile(out_file) or os.path.getsize(out_file) == 0:
        raise ToolError("gnuplot failed on %s (exit %d):\n%s" % (script_file, p.returncode, msg))
    if msg:     # warnings: show them, they mean a panel is off
        print("plots: gnuplot on %s said:\n%s" % (script_file, msg), file=sys.stderr)
    return out_file


# ---- pictures ------------------------------------------------------------------

def yrange(values, entries, log=False, extra=()):
    """An explicit y range holding VALUES (and EXTRA: target limits), with
    room at the top for a key of ENTRIES lines; from 0 unless LOG."""
    vs = [v for v in list(values) + list(extra) if v is not None and math.isfinite(v) and (v > 0 or not log)]
    k = min(0.6, 0.062 * entries + 0.05)        # the key's share of the height
    if not vs:
        return "set yrange [*:*]"
    if log:
        lo = 10 ** math.floor(math.log10(min(vs) * 0.7))
        top = math.log10(max(vs) * 1.2)
        hi = 10 ** (math.log10(lo) + (top - math.log10(lo)) / (1 - k))
        return "set yrange [%g:%g]" % (lo, hi)
    hi = max(max(vs), 0) * 1.05 / (1 - k)
    return "set yrange [%g:%g]" % (min(0, min(vs)), hi or 1)


def key2(entries, where="top left"):
    """A key in two columns past four entries: (its command, its rows)."""
    if entries <= 4:
        return "set key %s" % where, entries
    rows = (entries + 1) // 2
    return "set key %s maxrows %d" % (where, rows), rows


def rank_tics(ranks):
    """Job sizes on x: a log2 axis once they span a factor of 4 (2, 4, 8, ...)."""
    tics = "set xtics (%s)" % ", ".join("'%d' %d" % (n, n) for n in ranks)
    if ranks[-1] >= 4 * ranks[0]:
        return "set logscale x 2; %s; set xrange [%g:%g]" % (tics, ranks[0] / 1.25, ranks[-1] * 1.25)
    return "%s; set xrange [%g:%g]" % (tics, ranks[0] - 0.4, ranks[-1] + 0.4)


def size_tics(sizes):
    return "set logscale x 2; set xtics (%s); set xrange [%g:%g]" % (
        ", ".join("'%s' %d" % (size_label(s), s) for s in sizes), sizes[0] / 1.6, sizes[-1] * 1.6)


def col(rows, i):
    return [r[i] for r in rows]


def have(rows):
    return any(r[1] is not None for r in rows)


def status_count(found):
    met = sum(t["status"] == "met" for t in found)
    missed = sum(t["status"] == "MISSED" for t in found)
    return ", ".join(s for s in ("%d met" % met if met else "", "%d MISSED" % missed if missed else "") if s)


def plotcmd(plots):
    return "plot " + ", \\\n  ".join(plots)
