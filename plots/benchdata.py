"""emunic-bench's results as plots/plot.py reads them: the CSV files (--csv)
and the met/MISSED target lines of each benchmark's printed output (.out)."""
import csv
import math
import os
import re

HEADER = ["bench", "impl", "ranks", "metric", "value", "unit"]


class DataError(Exception):
    """A CSV or .out file missing or malformed; the message names it."""


def size_bytes(tok):
    """'8', '4097', '64K', '1M' -> bytes; None if not a size."""
    m = re.fullmatch(r"(\d+)([KMG]?)", tok)
    if not m:
        return None
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def size_label(b):
    for shift, suf in ((30, "G"), (20, "M"), (10, "K")):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, suf)
    return str(b)


class Table:
    """One benchmark's CSV: bench,impl,ranks,metric,value,unit,ratio_vs_BASE."""

    def __init__(self, path, bench):
        self.path, self.bench = path, bench
        if not os.path.isfile(path):
            raise DataError("%s: missing (plots/run.sh writes it; run `make plots`, or point "
                            "PLOTS_CSV at a directory it wrote)" % path)
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            rows = list(csv.reader(f))
        if not rows:
            raise DataError("%s: empty: the benchmark wrote no result (see %s)" % (path, self.out_path()))
        head = rows[0]
        if head[:6] != HEADER or len(head) != 7 or not head[6].startswith("ratio_vs_"):
            raise DataError("%s line 1: not an emunic-bench CSV header (want %s,ratio_vs_BASE; got %r)"
                            % (path, ",".join(HEADER), ",".join(head)))
        self.values = {}        # (impl, metric) -> value
        self.units = {}
        self.impls = []
        self.ranks = None
        for i, r in enumerate(rows[1:], start=2):
            if not r:
                continue
            if len(r) != 7:
                raise DataError("%s line %d: %d fields, want 7: %r" % (path, i, len(r), ",".join(r)))
            b, impl, ranks, metric, value, unit, _ = r
            if b != bench:
                raise DataError("%s line %d: bench %r, want %r" % (path, i, b, bench))
            try:
                n = int(ranks)
                v = float(value)
            except ValueError:
                raise DataError("%s line %d: ranks %r or value %r is not a number" % (path, i, ranks, value))
            if not math.isfinite(v) or n < 1 or not impl or not metric:
                raise DataError("%s line %d: bad row %r" % (path, i, ",".join(r)))
            if self.ranks is not None and n != self.ranks:
                raise DataError("%s line %d: ranks %d, earlier rows %d" % (path, i, n, self.ranks))
            self.ranks = n
            if impl not in self.impls:
                self.impls.append(impl)
            self.values[(impl, metric)] = v
            self.units[metric] = unit
        if not self.values:
            raise DataError("%s: a header and no results (see %s)" % (path, self.out_path()))

    def out_path(self):
        return os.path.splitext(self.path)[0] + ".out"

    def get(self, impl, metric):
        try:
            return self.values[(impl, metric)]
        except KeyError:
            raise DataError("%s: no %s result for impl %s" % (self.path, metric, impl))

    def opt(self, impl, metric):
        return self.values.get((impl, metric))

    def suffixes(self, prefix):
        """Sizes (bytes, sorted) of metrics PREFIX_SIZE."""
        out = set()
        for (_, m) in self.values:
            if m.startswith(prefix + "_"):
                b = size_bytes(m[len(prefix) + 1:])
                if b is not None:
                    out.add(b)
        if not out:
            raise DataError("%s: no %s_SIZE results" % (self.path, prefix))
        return sorted(out)

    def need_impl(self, impl):
        if impl not in self.impls:
            raise DataError("%s: no rows for impl %s (impls: %s)" % (self.path, impl, ", ".join(self.impls)))


TARGET_RE = re.compile(r"^  (met|MISSED|n/a)\s+(?P<what>.*?(?:<=|>=)\s*\S+.*?)\s+"
                       r"(?P<impl>[A-Za-z0-9]\S*)\s+(?P<value>(?:\d|no value|ptp has none).*)$")


class Targets:
    """The met/MISSED lines of a benchmark's printed output (NAME.out)."""

    def __init__(self, path):
        self.path, self.lines, self.text = path, [], None
        if not os.path.isfile(path):
            return
        with open(path, encoding="utf-8", errors="replace") as f:
            self.text = f.read()
        for line in self.text.splitlines():
            m = TARGET_RE.match(line)
            if not m:
                continue
            lim = re.search(r"(<=|>=)\s*([\d.]+)\s*(x|%)", m.group("what"))
            self.lines.append({"status": m.group(1), "what": m.group("what"), "impl": m.group("impl"),
                               "value": m.group("value"), "op": lim.group(1) if lim else None,
                               "limit": float(lim.group(2)) if lim else None,
                               "unit": lim.group(3) if lim else None})

    def find(self, prefix, impl=None):
        return [t for t in self.lines if t["what"].startswith(prefix) and (impl is None or t["impl"] == impl)]

    def limit(self, prefix):
        for t in self.find(prefix):
            if t["limit"] is not None:
                return t["limit"]
        return None

    def counts(self):
        met = sum(t["status"] == "met" for t in self.lines)
        return met, sum(t["status"] == "MISSED" for t in self.lines)

    def search(self, regex, default=None):
        m = re.search(regex, self.text or "")
        return m.group(1) if m else default


def read_meta(d):
    meta = {}
    p = os.path.join(d, "meta.txt")
    if os.path.isfile(p):
        with open(p, encoding="utf-8", errors="replace") as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep:
                    meta[k.strip()] = v.strip()
    return meta


def tables(d, bench, want_ranks=None):
    """Every DIR/BENCH.csv and DIR/BENCH-*.csv, by their ranks; an error
    naming the file expected when there is none."""
    found = {}
    names = sorted(f for f in os.listdir(d) if f.endswith(".csv") and
                   (f == bench + ".csv" or re.fullmatch(re.escape(bench) + r"-\d+\.csv", f)))
    for f in names:
        t = Table(os.path.join(d, f), bench)
        found.setdefault(t.ranks, t)
    if not found:
        want = "%s-%s.csv" % (bench, want_ranks) if want_ranks else bench + "-N.csv"
        raise DataError("%s: missing (plots/run.sh writes it; run `make plots`, or point PLOTS_CSV "
                        "at a directory it wrote)" % os.path.join(d, want))
    return found
