"""make plots, the drawing half (plots/plot.py through plots/plots.sh): the
six seed-shaped pictures drawn from fixture CSVs, each a valid PNG or SVG; a
missing or malformed CSV, a missing directory and a missing gnuplot each end
it with a message naming what, and an exit status other than 0.  Host only,
no RDMA, a few seconds.

tests/data/plots is one real `make plots` run (build/plots/csv, in the guest
under TCG): the CSV files and meta.txt as written, each .out trimmed to the
lines plot.py reads:
    grep -E '^  (met|MISSED|n/a) |within [0-9.]+x of W = 0|eager up to|drains fetched data at'
"""
import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLOT = os.path.join(ROOT, "plots", "plot.py")
PLOTS_SH = os.path.join(ROOT, "plots", "plots.sh")
FIX = os.path.join(ROOT, "tests", "data", "plots")
PY = "/usr/bin/python3"
PICTURES = ("01-barrier-latency", "02-cpu-availability", "03-rendezvous", "04-rdrp-slow-receiver",
            "05-connections", "06-collective-overlap")


def need_gnuplot():
    """A missing gnuplot fails the test (never a skip): make deps installs it."""
    if not shutil.which("gnuplot"):
        pytest.fail("gnuplot is not installed: run `make deps` (it installs the Debian package gnuplot-nox)")


def plot(*args, env=None):
    e = dict(os.environ)
    e.pop("GNUPLOT", None)
    e.update(env or {})
    p = subprocess.run([PY, PLOT] + list(args), cwd=ROOT, env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def fixture_copy(tmp_path):
    d = tmp_path / "csv"
    shutil.copytree(FIX, d)
    return d


def check_png(path):
    """Signature, every chunk's CRC, IHDR first and IEND last, and the image
    data inflating to exactly height rows of the width."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "%s: not a PNG signature" % path
    pos, chunks, idat = 8, [], b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(kind + body) & 0xffffffff == crc, "%s: bad CRC in a %s chunk" % (path, kind)
        chunks.append(kind)
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
        if kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and b"IDAT" in chunks, (path, chunks)
    assert w >= 800 and h >= 400, "%s: %dx%d" % (path, w, h)
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    raw = zlib.decompress(idat)
    assert len(raw) == h * (1 + (w * channels * depth + 7) // 8), "%s: image data of the wrong size" % path
    return w, h


def check_svg(path):
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg"), (path, root.tag)
    text = "".join(t.text or "" for t in root.iter() if t.tag.endswith("text") or t.tag.endswith("tspan"))
    paths = [e for e in root.iter() if e.tag.endswith("path") or e.tag.endswith("polyline")]
    assert len(paths) > 20, "%s: %d paths: nothing drawn?" % (path, len(paths))
    return text


def meta(key):
    with open(os.path.join(FIX, "meta.txt")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            if k == key:
                return v
    raise KeyError(key)


def test_pngs_from_fixtures(tmp_path):
    need_gnuplot()
    rc, out, err = plot("--csv", FIX, "--out", str(tmp_path))
    assert rc == 0, out + err
    assert "warning" not in err, err            # gnuplot's warnings mean a panel is off
    for name in PICTURES:
        png = tmp_path / (name + ".png")
        assert str(png) in out, out
        check_png(str(png))
        gp = (tmp_path / (name + ".gp")).read_text()
        # The caption: commit, machine and accelerator, and the target count.
        assert "emunic %s" % meta("commit") in gp and meta("host") in gp, name
        assert meta("accelerator").split()[0] in gp, name
        assert "targets (from the met/MISSED lines)" in gp, name
        # Axes with units.
        assert "set xlabel" in gp and "set ylabel" in gp, name
    # Target lines drawn where emunic-bench prints one.
    gp = {n: (tmp_path / (n + ".gp")).read_text() for n in PICTURES}
    assert "target, MQ/PTP <= (spec)" in gp["01-barrier-latency"]
    assert "target, mean <= (issue 18 engine)" in gp["01-barrier-latency"]
    assert "target, MQ >= (spec)" in gp["02-cpu-availability"]
    assert "target >= 0.9x from 1M" in gp["04-rdrp-slow-receiver"]
    assert gp["06-collective-overlap"].count(">= 50%:") == 5        # one overlap target a collective
    assert gp["06-collective-overlap"].count("target <= 1.15x") == 5


def test_svgs_through_plots_sh(tmp_path):
    """plots/plots.sh with PLOTS_CSV (what `make plots PLOTS_CSV=DIR` runs)
    draws without running a benchmark; PLOTS_FORMAT=svg."""
    need_gnuplot()
    env = dict(os.environ, PLOTS_CSV=FIX, PLOTS_OUT=str(tmp_path), PLOTS_FORMAT="svg")
    env.pop("GNUPLOT", None)
    p = subprocess.run([PLOTS_SH], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out
    for name in PICTURES:
        text = check_svg(str(tmp_path / (name + ".svg")))
        assert "emunic %s" % meta("commit") in text, name
    assert not list(tmp_path.glob("*.png")) and not (tmp_path / "csv").exists(), os.listdir(tmp_path)


def test_missing_csv_named(tmp_path):
    need_gnuplot()
    d = fixture_copy(tmp_path)
    os.unlink(d / "rndv.csv")
    rc, out, err = plot("--csv", str(d), "--out", str(tmp_path / "out"))
    assert rc == 1, (rc, out, err)
    assert "plots: error: %s: missing" % (d / "rndv.csv") in err, err
    assert "Traceback" not in err, err
    for f in d.glob("barrier-*"):
        os.unlink(f)
    rc, out, err = plot("--csv", str(d), "--out", str(tmp_path / "out"))
    assert rc == 1 and "%s: missing" % (d / "barrier-2.csv") in err, (rc, err)


@pytest.mark.parametrize("name,damage,says", [
    ("p2p.csv", lambda t: "", "empty"),
    ("barrier-2.csv", lambda t: "bench;impl;ranks\n" + t.split("\n", 1)[1], "line 1: not an emunic-bench CSV header"),
    ("rndv.csv", lambda t: t.replace("MB/s", "MB/s,extra", 1), "line 2: 8 fields, want 7"),
    ("bcast-2.csv", lambda t: t.replace(",us,", ",us", 1), "line 2: 6 fields, want 7"),
    ("conn-4.csv", lambda t: t.replace("conn,static,4,ring_qps_max,", "conn,static,4,ring_qps_max,x", 1),
     "line 2: ranks '4' or value"),
    ("gather-2.csv", lambda t: t.replace("gather,ptp", "barrier,ptp", 1), "line 2: bench 'barrier', want 'gather'"),
    ("allreduce-2.csv", lambda t: "\n".join(l for l in t.split("\n") if ",mq,2,allreduce_latency_8K," not in l),
     ": no allreduce_latency_8K result for impl mq"),
    ("barrier-3.csv", lambda t: t.replace(",3,", ",5,", 1), "line 3: ranks 3, earlier rows 5"),
])
def test_malformed_csv_named(tmp_path, name, damage, says):
    need_gnuplot()
    d = fixture_copy(tmp_path)
    p = d / name
    p.write_text(damage(p.read_text()))
    rc, out, err = plot("--csv", str(d), "--out", str(tmp_path / "out"))
    assert rc == 1, (rc, out, err)
    assert ("plots: error: %s" % p) in err and says in err, err
    assert "Traceback" not in err, err


def test_missing_out_file_still_draws(tmp_path):
    """A benchmark's printed output (its target lines) missing: the picture is
    drawn without target lines, and its caption says so."""
    need_gnuplot()
    d = fixture_copy(tmp_path)
    os.unlink(d / "rndv.out")
    rc, out, err = plot("--csv", str(d), "--out", str(tmp_path / "out"))
    assert rc == 0, out + err
    gp = (tmp_path / "out" / "04-rdrp-slow-receiver.gp").read_text()
    assert "no target lines: rndv.out missing" in gp and "target >= " not in gp, gp


def test_missing_csv_dir(tmp_path):
    need_gnuplot()
    rc, out, err = plot("--csv", str(tmp_path / "nosuch"), "--out", str(tmp_path / "out"))
    assert rc == 1 and "plots: error: %s: missing CSV directory" % (tmp_path / "nosuch") in err, (rc, err)


def test_missing_gnuplot_says_make_deps(tmp_path):
    """No gnuplot (not on PATH, or GNUPLOT naming none): exit 3, `make deps`."""
    for env in ({"PATH": str(tmp_path)}, {"GNUPLOT": str(tmp_path / "gnuplot")}):
        rc, out, err = plot("--csv", FIX, "--out", str(tmp_path / "out"), env=env)
        assert rc == 3, (env, rc, out, err)
        assert "run `make deps`" in err and "gnuplot-nox" in err, err
        assert not (tmp_path / "out").exists()
    env = dict(os.environ, GNUPLOT=str(tmp_path / "gnuplot"), PLOTS_OUT=str(tmp_path / "out"))
    env.pop("PLOTS_CSV", None)
    p = subprocess.run([PLOTS_SH], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    assert p.returncode == 3 and b"run `make deps`" in p.stdout, p.stdout     # before any benchmark runs


def test_scripts_parse():
    """The two shell scripts `make plots` runs are valid bash (the benchmark
    half itself needs rxe: `make plots` runs it, see plots/run.sh)."""
    for s in ("run.sh", "plots.sh"):
        p = subprocess.run(["/bin/bash", "-n", os.path.join(ROOT, "plots", s)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        assert p.returncode == 0, (s, p.stdout)
