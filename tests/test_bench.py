"""emunic-bench: barrier (offloaded mq vs host-progressed ptp), trig (a
triggered chain vs the app driving it), rndv (chunked rendezvous vs one
get a message), p2p (ping-pong by protocol and progress scheme vs a
host-progressed one) and conn (static mesh vs connections on demand).

Only structure and sanity are checked: every table, every metric in the CSV,
positive times, availabilities in [0, 100], ratios present.  Targets are
printed by the benchmark with met/MISSED and are never asserted here: under
QEMU's TCG the times are far too noisy for that.  What is asserted is what
does not depend on time: every put landed, every message arrived intact and
matched as expected, and no more gets of one message were in flight than
the variant allows, and how many QPs each connection mode leaves a rank.
"""
import csv
import io
import os
import re

import pytest

from conftest import BIN, ROOT, SANBIN, host

RUN = BIN + "/emunic-run"
BENCH = BIN + "/emunic-bench"

CSV_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_ptp"]
SWEEP = ["work_slice_time_w%03d" % w for w in range(0, 101, 10)]
METRICS = {
    "barrier_latency": "us", "barrier_latency_p50": "us",
    "ibarrier_latency": "us", "ibarrier_latency_p50": "us",
    "app_cpu_post_wait": "us", "app_cpu_post_overlap": "us", "app_cpu_wait_overlap": "us",
    "app_cpu_barrier": "us", "cpu_avail_test_loop": "%", "test_loop_time_p50": "us", "tests_per_call": "count",
    "cpu_avail_work_slice": "%",
}
METRICS.update({m: "us" for m in SWEEP})
POSITIVE = ["barrier_latency", "barrier_latency_p50", "ibarrier_latency", "ibarrier_latency_p50",
            "test_loop_time_p50"] + SWEEP
TABLES = ["1. latency, us/call", "2. CPU availability, test loop", "3. CPU availability, one work slice",
          "4. application thread CPU time", "targets ("]


def run_bench(rxe, n, args, timeout=300):
    cmd = "%s -n %d -t %d %s barrier %s" % (RUN, n, timeout, BENCH, args)
    return rxe.run(cmd, timeout=timeout + 60)


def read_csv(path, header=None):
    header = header or CSV_HEADER
    with open(path) as f:
        text = f.read()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and rows[0] == header, text
    return [dict(zip(header, r)) for r in rows[1:]], text


def csv_path(name):
    path = os.path.join(ROOT, "build", "bench", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.remove(path)
    return path


NUM = r"(\d+(?:\.\d+)?)"


def test_barrier_bench_two_ranks(rxe):
    path = csv_path("test-barrier-2.csv")
    rc, out = run_bench(rxe, 2, "--iters 20 --sweep-iters 8 --idle both --csv %s" % path)
    assert rc == 0, out

    # The header names the device, ranks, idle policy and iterations.
    assert re.search(r"device\s+\S+, 2 ranks", out), out
    assert re.search(r"idle policy\s+progress core \(emunic_dev_idle\): sleep then spin", out), out
    assert re.search(r"iterations\s+20 calls a loop", out), out
    for t in TABLES:
        assert t in out, (t, out)
    # Every table has a row per implementation, and ratio rows for mq.
    for impl in ("ptp", "mq-sleep", "mq-spin"):
        assert len(re.findall(r"^\s+%s\s+[\d.]+" % impl, out, re.M)) >= 4, (impl, out)
    for impl in ("mq-sleep", "mq-spin"):
        assert len(re.findall(r"^\s+%s/ptp\s+[\d.]+x" % impl, out, re.M)) == 2, (impl, out)
    # Targets: a verdict each, a count at the end; never asserted.
    # 4 of the seed's targets and 6 of the engine's (issue 18) an mq impl.
    verdicts = re.findall(r"^\s+(met|MISSED|n/a)\s+(.+?)\s{2,}(mq-\w+)", out, re.M)
    assert len(verdicts) == 2 * (4 + 6), out
    assert "engine targets (issue 18), 2 ranks:" in out, out
    for what in ("barrier mean mq/ptp <= 1.15x", "ibarrier mean mq/ptp <= 1.15x",
                 "blocking barrier app CPU mq/ptp <= 1.10x", "overlapped ibarrier CPU mq/ptp <= 0.30x",
                 "availability (fig. 7) >= 50%", "availability mq/ptp >= 3x"):
        assert len([v for v in verdicts if v[1].strip() == what]) == 2, (what, out)
    assert re.search(r"^\s+\d+ target\(s\) missed$", out, re.M), out

    rows, text = read_csv(path)
    assert "CSV: %d rows in %s" % (len(rows), path) in out, out
    by = {(r["impl"], r["metric"]): r for r in rows}
    assert {r["impl"] for r in rows} == {"ptp", "mq-sleep", "mq-spin"}, text
    for impl in ("ptp", "mq-sleep", "mq-spin"):
        for metric, unit in METRICS.items():
            r = by.get((impl, metric))
            assert r, (impl, metric, text)
            assert r["bench"] == "barrier" and r["ranks"] == "2" and r["unit"] == unit, r
            v = float(r["value"])
            assert v >= 0, r
            if metric in POSITIVE:
                assert v > 0, r
            if unit == "%":
                assert 0 <= v <= 100, r
            # Every mq value has its ratio to ptp; ptp's is 1.
            ratio = r["ratio_vs_ptp"]
            if impl == "ptp" and v > 0:
                assert float(ratio) == 1.0, r
            elif by[("ptp", metric)]["value"] and float(by[("ptp", metric)]["value"]) > 0:
                assert ratio != "" and float(ratio) >= 0, r
                assert abs(float(ratio) - v / float(by[("ptp", metric)]["value"])) < 0.01 * max(
                    1, float(ratio)), r
    assert float(by[("ptp", "tests_per_call")]["value"]) >= 1, text
    # The work-slice availability is one of the steps, 0..100 by tens.
    for impl in ("ptp", "mq-sleep", "mq-spin"):
        assert float(by[(impl, "cpu_avail_work_slice")]["value"]) in [float(w) for w in range(0, 101, 10)]


def test_barrier_bench_four_ranks_sparse(rxe):
    """Four ranks (two doubling steps), write_imm and sparse connections: the
    header says so; the default idle policy is the one reported."""
    rc, out = run_bench(rxe, 4, "--iters 10 --sweep-iters 4 --signal write_imm --conn sparse")
    assert rc == 0, out
    assert re.search(r"signal\s+write_imm; connections: mq sparse \(2 QPs on rank 0\), ptp dense \(3 QPs",
                     out), out
    m = re.search(r"idle policy\s+progress core \(emunic_dev_idle\): (spin|sleep) \(default", out)
    assert m, out
    for t in TABLES:
        assert t in out, (t, out)
    assert re.search(r"^\s+mq-%s/ptp\s+[\d.]+x" % m.group(1), out, re.M), out


def test_sanitized_bench_is_clean(rxe):
    """The ASan+UBSan build, a few calls of everything, both idle policies."""
    rc, out = rxe.run("%s -n 2 -t 240 %s/emunic-bench barrier --iters 5 --warmup 2 --sweep-iters 2 "
                      "--idle both" % (RUN, SANBIN), timeout=300)
    assert rc == 0, out
    assert "4. application thread CPU time" in out, out
    assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out, out


def test_sanitized_trig_and_rndv_are_clean(rxe):
    """The ASan+UBSan build: a short trig chain; rndv with a slow receiver
    (trace, sink, several endpoints at once)."""
    for args in ("trig --quick --len 20", "rndv --quick --sizes 64K,1M --sink-mbps 100"):
        rc, out = rxe.run("%s -n 2 -t 240 %s/emunic-bench %s" % (RUN, SANBIN, args), timeout=300)
        assert rc == 0, (args, out)
        assert "target(s) missed" in out, (args, out)
        assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out, (args, out)
        assert "LeakSanitizer" not in out, (args, out)


def test_runtime_error_names_the_rank(rxe):
    """No such device: exit 3 and a rank-tagged message naming the call."""
    # Set inside the ranks: emunic-run itself checks $EMUNIC_DEVICE.
    rc, out = rxe.run("%s -n 2 -t 60 sh -c 'EMUNIC_DEVICE=nosuch0 exec %s barrier --iters 2'" % (RUN, BENCH),
                      timeout=120)
    assert rc == 3, out
    assert re.search(r"emunic-bench: rank \d: barrier ptp: emunic_ptp_create: ", out), out


def test_help_and_usage():
    """No RDMA needed: --help, and bad usage exits 2 before bootstrap."""
    rc, out = host("%s --help" % BENCH)
    assert rc == 0, out
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "SUBCOMMANDS", "CSV", "EXIT STATUS", "EXAMPLES"):
        assert re.search(r"^%s$" % section, out, re.M), (section, out)
    assert "--iters K" in out and "--idle default|spin|sleep|both" in out, out
    rc, out2 = host("%s barrier --help" % BENCH)
    assert rc == 0 and "--csv FILE" in out2, out2
    for cmd, opts in (("trig", ("--len N", "--iters K", "--work-factor F", "--quick")),
                      ("rndv", ("--sizes LIST", "--chunks LIST", "--sink-mbps M", "--rounds R", "--quick"))):
        rc, out2 = host("%s %s --help" % (BENCH, cmd))
        assert rc == 0 and "  %s [OPTIONS]  (2 ranks)" % cmd in out2, out2
        for opt in opts:
            assert opt in out2, (cmd, opt, out2)
        assert "  barrier [OPTIONS]" not in out2, out2
    for args in ("", "nosuch", "barrier --iters 0", "barrier --signal rdma", "barrier --conn ring",
                 "barrier --idle busy", "barrier --bogus", "barrier extra",
                 "trig --len 0", "trig --len 5000", "trig --iters x", "trig extra",
                 "rndv --sizes 0", "rndv --sizes 4Q", "rndv --sizes 512M", "rndv --chunks 3K/2",
                 "rndv --chunks 64K", "rndv --chunks 64K/0", "rndv --iters 201", "rndv --sink-mbps 0",
                 "rndv --sizes 256M --chunks 1K/1"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out, (args, out)
        cmd = (args.split() or [""])[0]
        if cmd in ("trig", "rndv"):
            assert "emunic-bench %s --help" % cmd in out, (args, out)


def test_two_rank_benches_refuse_other_job_sizes():
    """trig and rndv measure one pair: a job of one is bad usage (exit 2)."""
    for cmd in ("trig --quick", "rndv --quick"):
        rc, out = host("%s %s" % (BENCH, cmd))
        assert rc == 2, (cmd, out)
        assert "needs exactly 2 ranks (emunic-run -n 2), not 1" in out, (cmd, out)


def test_unwritable_csv_is_a_runtime_error():
    """Checked before any measurement (a job of one needs no launcher)."""
    rc, out = host("%s barrier --csv /nonexistent/dir/x.csv" % BENCH)
    assert rc == 3, out
    assert re.search(r"emunic-bench: rank 0: barrier opening the CSV file /nonexistent/dir/x.csv: ", out), out


# ---- trig ---------------------------------------------------------------------

TRIG_KINDS = ("app-wait", "trig-wait", "trig-compute")
TRIG_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_app-wait"]


def test_trig_bench_quick(rxe):
    """A chain of 100 triggered puts vs the app driving it: every table row,
    every CSV metric, ratios that are what the values say, every put landed."""
    path = csv_path("test-trig.csv")
    rc, out = rxe.run("%s -n 2 -t 240 %s trig --quick --csv %s" % (RUN, BENCH, path), timeout=300)
    assert rc == 0, out
    assert "a chain of 100 puts" in out, out
    assert re.search(r"chains\s+5 timed per kind after 1 warm-up", out), out
    m = re.search(r"rank 1\s+serves only; (\d+) of (\d+) puts landed in its entry, 0 words wrong", out)
    assert m and m.group(1) == m.group(2) and int(m.group(1)) == 3 * 6 * 100, out
    assert "1. chain of 100: wall time and the app thread's CPU time" in out, out
    for kind in TRIG_KINDS:
        row = re.search(r"^\s+%s((?:\s+(?:-|[\d.]+x?)){7})$" % kind, out, re.M)
        assert row, (kind, out)
        cells = row.group(1).split()
        assert all(re.match(NUM + "$", c) for c in cells[:3]), (kind, cells)
        assert all(re.match(NUM + "x$", c) for c in cells[5:]), (kind, cells)
        if kind == "app-wait":
            assert cells[3:5] == ["-", "-"] and cells[5:] == ["1.000x", "1.000x"], cells
        else:
            assert all(re.match(NUM + "$", c) for c in cells[3:5]), (kind, cells)
    m = re.search(r"trig-compute: (\d+) of 5 chains were done when the app checked", out)
    assert m and 0 <= int(m.group(1)) <= 5, out
    assert re.search(r"^\s+(met|MISSED)\s+app CPU, triggered posts / app-driven <= 0.05x\s+trig-wait\s+"
                     + NUM + "x", out, re.M), out
    assert re.search(r"^\s+info\s+wall time triggered / app-driven \(median\): trig-wait " + NUM + "x", out,
                     re.M), out
    assert re.search(r"^\s+\d target\(s\) missed$", out, re.M), out

    rows, text = read_csv(path, TRIG_HEADER)
    assert "CSV: %d rows in %s" % (len(rows), path) in out, out
    by = {(r["impl"], r["metric"]): r for r in rows}
    want = {k: ["chain_wall", "chain_wall_p50", "app_cpu", "app_cpu_p50"] for k in TRIG_KINDS}
    want["trig-wait"] += ["app_cpu_post", "app_cpu_post_p50", "app_cpu_wait", "app_cpu_post_ratio"]
    want["trig-compute"] += ["app_cpu_post", "app_cpu_post_p50", "app_cpu_check", "work", "done_at_check"]
    assert set(by) == {(k, m) for k, ms in want.items() for m in ms}, text
    for r in rows:
        assert r["bench"] == "trig" and r["ranks"] == "2", r
        v = float(r["value"])
        assert v >= 0, r
        if r["metric"] in ("chain_wall", "chain_wall_p50", "app_cpu", "app_cpu_post", "work"):
            assert v > 0 and r["unit"] == "us", r
    for kind in TRIG_KINDS:
        for metric in ("chain_wall", "chain_wall_p50", "app_cpu", "app_cpu_p50"):
            r, base = by[(kind, metric)], float(by[("app-wait", metric)]["value"])
            assert abs(float(r["ratio_vs_app-wait"]) - float(r["value"]) / base) < 0.01 * max(
                1, float(r["ratio_vs_app-wait"])), r
    # The triggered kinds' CPU is the posts and the wait (or the check).
    for kind, rest in (("trig-wait", "app_cpu_wait"), ("trig-compute", "app_cpu_check")):
        total = float(by[(kind, "app_cpu_post")]["value"]) + float(by[(kind, rest)]["value"])
        assert abs(total - float(by[(kind, "app_cpu")]["value"])) < 0.01 + 1e-6 * total, kind
    ratio = float(by[("app-wait", "app_cpu")]["value"])
    ratio = float(by[("trig-wait", "app_cpu_post")]["value"]) / ratio
    assert abs(float(by[("trig-wait", "app_cpu_post_ratio")]["value"]) - ratio) < 0.001, text
    assert 0 <= float(by[("trig-compute", "done_at_check")]["value"]) <= 5, text


# ---- rndv ---------------------------------------------------------------------

RNDV_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_single"]
RNDV_SIZES = ("64K", "1M", "4M")


def test_rndv_bench_quick_and_slow_receiver(rxe):
    """--quick (sizes 64K, 1M, 4M; single and 64K/4) and a slow receiver:
    both tables, ratios and their marks, every receive matched as expected
    and its data intact (the bench checks it), and from the receiver's
    trace at most one get of a message in flight for single, at most c = 4
    for 64K/4."""
    path = csv_path("test-rndv.csv")
    rc, out = rxe.run("%s -n 2 -t 280 %s rndv --quick --sink-mbps 50 --csv %s" % (RUN, BENCH, path),
                      timeout=340)
    assert rc == 0, out
    m = re.search(r"(\d+) of (\d+) timed receives matched expected", out)
    assert m and m.group(1) == m.group(2) and int(m.group(1)) == 2 * 2 * 3 * 3, out
    assert "1. throughput, MB/s" in out, out
    assert re.search(r"^\s+size\s+K\s+single\s+64K/4\s+x single$", out, re.M), out
    for size in RNDV_SIZES:
        row = re.search(r"^\s+%s\s+3\s+%s\s+%s\s+%sx(\*?)$" % (size, NUM, NUM, NUM), out, re.M)
        assert row, (size, out)
        single, chunked, ratio = (float(row.group(i)) for i in (1, 2, 3))
        assert single > 0 and chunked > 0, row.group(0)
        # The cells are rounded to 0.1 MB/s and 0.01x.
        lo, hi = (chunked - 0.05) / (single + 0.05) - 0.005, (chunked + 0.05) / max(single - 0.05, 0.01) + 0.005
        assert lo <= ratio <= hi, row.group(0)
        # The mark: below 0.9x, and only from 1M on.
        if abs(ratio - 0.9) > 0.005:
            assert (row.group(4) == "*") == (size != "64K" and ratio < 0.9), row.group(0)
    assert re.search(r"^\s+(met|MISSED)\s+chunked / single >= 0.9x, sizes >= 1M\s+64K/4\s+" + NUM + "x", out,
                     re.M), out

    assert "2. slow receiver: rank 1's device drains fetched data at 50 MB/s" in out, out
    inflight = {}
    for size in RNDV_SIZES:
        row = re.search(r"^\s+%s\s+3\s+%s\s+(\d+)\s+%s\s+(\d+)$" % (size, NUM, NUM), out, re.M)
        assert row, (size, out)
        assert float(row.group(1)) > 0 and float(row.group(3)) > 0, row.group(0)
        inflight[size] = (int(row.group(2)), int(row.group(4)))
        assert inflight[size][0] == 1, ("single: one get in flight", row.group(0))
        assert 1 <= inflight[size][1] <= 4, ("64K/4: at most 4 gets in flight", row.group(0))
    assert re.search(r"^\s+ok\s+gets in flight a message, slow receiver\s+single\s+1 \(limit 1\)$", out, re.M), out
    assert re.search(r"^\s+ok\s+gets in flight a message, slow receiver\s+64K/4\s+[1-4] \(limit 4\)$", out,
                     re.M), out
    assert re.search(r"^\s+\d target\(s\) missed$", out, re.M), out

    rows, text = read_csv(path, RNDV_HEADER)
    assert "CSV: %d rows in %s" % (len(rows), path) in out, out
    by = {(r["impl"], r["metric"]): r for r in rows}
    metrics = ["%s_%s" % (m, s) for s in RNDV_SIZES
               for m in ("throughput", "sink_throughput", "sink_max_inflight")]
    assert set(by) == {(i, m) for i in ("single", "chunked-64K/4") for m in metrics}, text
    for r in rows:
        assert r["bench"] == "rndv" and r["ranks"] == "2", r
        assert r["unit"] == ("count" if "inflight" in r["metric"] else "MB/s"), r
        assert float(r["value"]) > 0, r
        assert abs(float(r["ratio_vs_single"])
                   - float(r["value"]) / float(by[("single", r["metric"])]["value"])) < 0.01, r
    for size in RNDV_SIZES:
        assert float(by[("single", "sink_max_inflight_" + size)]["value"]) == 1, text
        assert float(by[("chunked-64K/4", "sink_max_inflight_" + size)]["value"]) == inflight[size][1], text


# ---- p2p ----------------------------------------------------------------------

P2P_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_host"]
P2P_SIZES = ("8", "4097", "64K", "1M")
P2P_IMPLS = ("host", "rtr-core", "rtr-test", "rtr-test-on-init", "rtr-wait-on-send", "chunked-core")


def test_p2p_bench_quick(rxe):
    """Ping-pong through the engine, every RTR progress scheme and chunked,
    against the host-progressed one: a row per size and impl with the
    overheads, test calls, latency, x host and (rendezvous sizes) MB/s; the
    CSV has every metric and ratios that are what the values say.  The
    bench checks the data of every point and the status of every message."""
    path = csv_path("test-p2p.csv")
    rc, out = rxe.run("%s -n 2 -t 240 %s p2p --quick --csv %s" % (RUN, BENCH, path), timeout=300)
    assert rc == 0, out
    assert re.search(r"protocols\s+eager up to 4K bytes \(attr.first\)", out), out
    assert re.search(r"a point\s+1 warm-up iterations", out), out
    assert "1. ping-pong, rank 0's medians" in out, out
    assert re.search(r"^\s+size\s+impl\s+K\s+isend\s+irecv\s+test\s+tests\s+latency\s+x host\s+min\s+MB/s$",
                     out, re.M), out
    for size in P2P_SIZES:
        for impl in P2P_IMPLS:
            row = re.search(r"^\s+%s\s+%s\s+5\s+%s\s+%s\s+%s\s+(\d+)\s+%s\s+%sx\s+%s\s+(-|%s)$"
                            % (size, impl, NUM, NUM, NUM, NUM, NUM, NUM, NUM), out, re.M)
            assert row, (size, impl, out)
            assert int(row.group(4)) >= 1 and float(row.group(5)) > 0, row.group(0)
            if impl == "host":
                assert row.group(6) == "1.00", row.group(0)
            # The fastest round trip is no slower than the median (cells rounded to 0.1).
            assert float(row.group(7)) <= float(row.group(5)) + 0.05, row.group(0)
            # MB/s only for the rendezvous sizes (above the 4096-byte eager limit).
            assert (row.group(8) == "-") == (size == "8"), row.group(0)
    # Who ran the engine: a test call lends its thread to it (emunic_test runs
    # emunic_dev_progress), so the ping-pongs' test loops ran passes of their
    # own (a point may have none: an isend preempted until the answer was in).
    assert re.search(r"^\s+size\s+impl\s+test passes\s+core passes\s+core wakes$", out, re.M), out
    test_passes = 0
    for size in P2P_SIZES:
        for impl in P2P_IMPLS[1:]:
            row = re.search(r"^\s+%s\s+%s\s+%s\s+%s\s+%s$" % (size, impl, NUM, NUM, NUM), out, re.M)
            assert row, (size, impl, out)
            test_passes += float(row.group(1))
    assert test_passes > 0, out

    rows, text = read_csv(path, P2P_HEADER)
    assert "CSV: %d rows in %s" % (len(rows), path) in out, out
    by = {(r["impl"], r["metric"]): r for r in rows}
    metrics = ["%s_%s" % (m, s) for s in P2P_SIZES
               for m in ("isend", "irecv", "test", "tests", "latency", "latency_min")]
    metrics += ["bandwidth_%s" % s for s in P2P_SIZES if s != "8"]
    engine = ["%s_%s" % (m, s) for s in P2P_SIZES for m in ("test_passes", "core_passes", "core_wakes")]
    assert set(by) == ({(i, m) for i in P2P_IMPLS for m in metrics} |
                       {(i, m) for i in P2P_IMPLS[1:] for m in engine}), text
    for r in rows:
        assert r["bench"] == "p2p" and r["ranks"] == "2", r
        v = float(r["value"])
        assert v >= 0, r
        kind = r["metric"].split("_")[0]
        if kind in ("test", "core") and r["unit"] == "count":
            assert r["ratio_vs_host"] in ("", "-"), r	# the host has no engine
            continue
        assert r["unit"] == {"tests": "count", "bandwidth": "MB/s"}.get(kind, "us"), r
        if kind in ("latency", "bandwidth", "tests"):
            assert v > 0, r
        if r["metric"].startswith("latency_min_"):
            assert v <= float(by[(r["impl"], r["metric"].replace("_min", ""))]["value"]) + 1e-6, r
        base = float(by[("host", r["metric"])]["value"])
        if base > 0:
            # Values are written with 3 decimals (the ratio from the exact
            # ones): a time of 0.005 us may be 0.0045 .. 0.0055.
            ratio = float(r["ratio_vs_host"])
            rounding = ratio * 0.0005 * (1 / base + (1 / v if v > 0 else 0))
            assert abs(ratio - v / base) < 0.01 * max(1, ratio) + rounding, r


# ---- conn ---------------------------------------------------------------------

CONN_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_static"]
CONN_PATTERNS = ("ring", "barrier", "allreduce", "alltoall")


def test_conn_bench_quick_four_ranks(rxe):
    """Static mesh vs connections on demand at 4 ranks: every rank has 3
    QPs with a static mesh; on demand, a ring needs at most 2 (rank + 1 and
    rank - 1), recursive doubling 2 (rank ^ 1, rank ^ 2), alltoall all 3."""
    path = csv_path("test-conn-4.csv")
    rc, out = rxe.run("%s -n 4 -t 280 %s conn --quick --csv %s" % (RUN, BENCH, path), timeout=340)
    assert rc == 0, out
    assert re.search(r"device\s+\S+.*; 4 ranks", out), out
    assert "1. QPs per rank and start-up time, ms (seed 002 table 2)" in out, out
    assert re.search(r"^\s+pattern\s+mode\s+QPs max\s+mean\s+peers\s+create\s+first\s+later\s+create\+first$",
                     out, re.M), out
    qps = {}
    for pat in CONN_PATTERNS:
        for mode in ("static", "on-demand"):
            row = re.search(r"^\s+%s\s+%s\s+(\d+)\s+%s\s+(\d+)\s+%s\s+%s\s+%s\s+%s$"
                            % (pat, mode, NUM, NUM, NUM, NUM, NUM), out, re.M)
            assert row, (pat, mode, out)
            qps[(pat, mode)] = (int(row.group(1)), float(row.group(2)))
            assert 1 <= int(row.group(3)) <= 3, row.group(0)
            assert all(float(row.group(i)) > 0 for i in (4, 5, 6, 7)), row.group(0)
        assert qps[(pat, "static")] == (3, 3.0), (pat, out)
    assert qps[("ring", "on-demand")][0] <= 2, out
    assert qps[("allreduce", "on-demand")][0] <= 2, out
    assert qps[("alltoall", "on-demand")] == (3, 3.0), out
    assert "a static mesh has 3 QPs a rank" in out, out

    rows, text = read_csv(path, CONN_HEADER)
    assert "CSV: %d rows in %s" % (len(rows), path) in out, out
    by = {(r["impl"], r["metric"]): r for r in rows}
    metrics = ["%s_%s" % (p, m) for p in CONN_PATTERNS
               for m in ("qps_max", "qps_mean", "peers_max", "create_ms", "first_ms", "later_ms")]
    assert set(by) == {(mode, m) for mode in ("static", "on-demand") for m in metrics}, text
    for r in rows:
        assert r["bench"] == "conn" and r["ranks"] == "4", r
        assert r["unit"] == ("ms" if r["metric"].endswith("_ms") else "count"), r
        assert float(r["value"]) > 0, r
        assert abs(float(r["ratio_vs_static"])
                   - float(r["value"]) / float(by[("static", r["metric"])]["value"])) < 0.01 * max(
                       1, float(r["ratio_vs_static"])), r
    assert float(by[("on-demand", "ring_qps_max")]["value"]) <= 2, text
    assert float(by[("static", "ring_qps_max")]["value"]) == 3, text


def test_p2p_and_conn_usage():
    """No RDMA needed: --help sections, bad options and job sizes exit 2."""
    for cmd, head, opts in (
            ("p2p", "  p2p [OPTIONS]  (2 ranks)",
             ("--sizes LIST", "--variants LIST", "--eager K", "--iters K", "--quick", "--csv FILE")),
            ("conn", "  conn [OPTIONS]  (2 to 16 ranks)", ("--patterns LIST", "--iters K", "--quick", "--csv FILE"))):
        rc, out = host("%s %s --help" % (BENCH, cmd))
        assert rc == 0 and head in out, out
        for opt in opts:
            assert opt in out, (cmd, opt, out)
        assert "  barrier [OPTIONS]" not in out, out
    rc, out = host("%s --help" % BENCH)
    assert rc == 0 and re.search(r"^\s+p2p\s+\S", out, re.M) and re.search(r"^\s+conn\s+\S", out, re.M), out
    for args in ("p2p --sizes 0", "p2p --sizes 8,4Q", "p2p --sizes 128M", "p2p --variants fast",
                 "p2p --variants core,core", "p2p --variants ''", "p2p --eager 0", "p2p --eager 65537",
                 "p2p --iters 0", "p2p --warmup 0", "p2p --bogus", "p2p extra",
                 "conn --patterns star", "conn --patterns ring,ring", "conn --iters 1", "conn --iters x",
                 "conn --bogus", "conn extra"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out and "emunic-bench %s --help" % args.split()[0] in out, (args, out)
    rc, out = host("%s p2p --quick" % BENCH)
    assert rc == 2 and "p2p needs exactly 2 ranks (emunic-run -n 2), not 1" in out, out
    rc, out = host("%s conn --quick" % BENCH)
    assert rc == 2 and "conn needs 2 to 16 ranks (emunic-run -n N), not 1" in out, out


# ---- faults ---------------------------------------------------------------------

FAULTS_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_p=0"]


def test_faults_bench_quick(rxe):
    """500 messages rank 0 -> 1 without faults and with 0.5% of completions
    turned into RETRY_EXC_ERR: the faulted stream reconnects at least once,
    every message checked on rank 1, and the table and CSV say so."""
    path = csv_path("test-faults.csv")
    rc, out = rxe.run("%s -n 2 -t 280 %s faults --quick --csv %s" % (RUN, BENCH, path), timeout=340)
    assert rc == 0, out
    assert "emunic-bench faults: 500 messages of 1K rank 0 -> 1, chunked protocol" in out, out
    rows = {}
    for m in re.finditer(r"^(\S+%)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)x\s+(\S+)$", out, re.M):
        rows[m.group(1)] = m.groups()
    assert set(rows) == {"0%", "0.5%"}, out
    assert rows["0%"][1] == "0" and rows["0%"][2] == "0" and rows["0%"][5] == "1.00", out
    assert int(rows["0.5%"][1]) >= 1 and int(rows["0.5%"][2]) >= 1, out
    # The cost a reconnection is a timing (noise can make it negative when a
    # reconnection is cheap, as it is since the engine of issue 18): printed,
    # never asserted beyond being a number.
    float(rows["0.5%"][6])
    assert "Every message arrived once, in order, byte-exact (checked on rank 1)." in out, out
    csv_rows, text = read_csv(path, FAULTS_HEADER)
    by = {(r["impl"], r["metric"]): r for r in csv_rows}
    assert set(by) == {(i, m) for i in ("p=0", "p=0.5%") for m in ("stream_ms", "reconnections")}, text
    assert float(by[("p=0.5%", "reconnections")]["value"]) >= 1, text


def test_faults_bench_usage():
    rc, out = host("%s faults --help" % BENCH)
    assert rc == 0 and "  faults [OPTIONS]  (2 ranks)" in out, out
    for opt in ("--rates LIST", "--messages N", "--size S", "--proto P", "--quick", "--csv FILE"):
        assert opt in out, (opt, out)
    for args in ("faults --rates x", "faults --rates 0.1,0", "faults --rates 30", "faults --messages 0",
                 "faults --size 0", "faults --proto fast", "faults --bogus", "faults extra"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out and "emunic-bench faults --help" in out, (args, out)
    rc, out = host("%s faults --quick" % BENCH)
    assert rc == 2 and "faults needs exactly 2 ranks (emunic-run -n 2), not 1" in out, out


# ---- idle -----------------------------------------------------------------------

IDLE_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_closed"]


def test_idle_bench(rxe):
    """Two ranks, each asleep 2 s with no device and 2 s with a connected one:
    the table, the target line (met or MISSED, never asserted) and the CSV."""
    path = csv_path("test-idle.csv")
    rc, out = rxe.run("%s -n 2 -t 120 %s idle --seconds 2 --csv %s" % (RUN, BENCH, path), timeout=180)
    assert rc == 0, out
    assert "emunic-bench idle: what an idle device costs" in out, out
    assert re.search(r"^\s+closed\s+" + NUM + r"\s+-$", out, re.M), out
    assert re.search(r"^\s+open\s+" + NUM + r"\s+" + NUM + "$", out, re.M), out
    assert re.search(r"^\s+(met|MISSED)\s+idle device CPU <= 1% of a CPU\s+open\s+" + NUM + "%", out, re.M), out
    rows, text = read_csv(path, IDLE_HEADER)
    by = {(r["impl"], r["metric"]): r for r in rows}
    assert set(by) == {("closed", "cpu_pct"), ("open", "cpu_pct"), ("open", "core_wakes_per_s")}, text
    assert all(float(r["value"]) >= 0 and r["ranks"] == "2" for r in rows), text


def test_idle_bench_usage():
    for args in ("idle --seconds 0", "idle --seconds x", "idle --bogus", "idle extra"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out and "emunic-bench idle --help" in out, (args, out)


# ---- potato ---------------------------------------------------------------------

POTATO_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_ib_write_lat"]


def test_potato_bench_quick(rxe):
    """The triggered hot potato (100 round trips a game, the apps asleep)
    against ib_write_lat in the same run: both figures, the target line
    (met or MISSED, never asserted) and the CSV."""
    path = csv_path("test-potato.csv")
    rc, out = rxe.run("%s -n 2 -t 240 %s potato --rounds 100 --lat-iters 500 --csv %s" % (RUN, BENCH, path),
                      timeout=300)
    assert rc == 0, out
    assert "emunic-bench potato: the triggered hot potato vs ib_write_lat" in out, out
    m = re.search(r"^\s+ib_write_lat\s+" + NUM + "$", out, re.M)
    assert m and float(m.group(1)) > 0, out
    m = re.search(r"^\s+triggered\s+" + NUM + "$", out, re.M)
    assert m and float(m.group(1)) > 0, out
    # The core's spin stays within EMUNIC_SPIN_US (20) .. EMUNIC_SPIN_MAX_US (400) (spin.c): fired
    # triggers let it adapt even where it shares the application's CPUs.
    m = re.search(r"^  \(rank 0's core, (on a CPU of its own|sharing the application's CPUs): " + NUM +
                  r" wake-ups a round trip; the spin it adapted to when the games ended: (\d+) us\)$", out, re.M)
    assert m, out
    assert 20 <= int(m.group(3)) <= 400, out
    assert re.search(r"^\s+(met|MISSED)\s+round trip triggered/ib_write_lat <= 1.5x\s+triggered\s+" + NUM + "x",
                     out, re.M), out
    rows, text = read_csv(path, POTATO_HEADER)
    assert {(r["impl"], r["metric"]) for r in rows} == {("triggered", "round_trip"),
                                                        ("ib_write_lat", "round_trip")}, text


def test_potato_bench_usage():
    for args in ("potato --rounds 0", "potato --lat-iters 5", "potato --bogus", "potato extra"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out and "emunic-bench potato --help" in out, (args, out)
    rc, out = host("%s potato --quick" % BENCH)
    assert rc == 2 and "potato needs exactly 2 ranks" in out, out


# ---- instr ----------------------------------------------------------------------

INSTR_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_none"]
INSTR_ROWS = {("mq", m) for m in ("instr_post_app", "instr_post_with_pass", "instr_post_whole_app",
                                  "instr_post_whole_with_pass", "instr_start_nb_app", "instr_start_nb_with_pass",
                                  "instr_engine_task",
                                  "instr_verbs_post_task", "instr_verbs_poll_task", "instr_idle_pass",
                                  "instr_engine_task_net")} | \
             {("triggered", m) for m in ("instr_engine_op", "instr_verbs_post_op", "instr_verbs_poll_op",
                                         "instr_idle_pass", "instr_engine_op_net")}


def test_instr_bench_quick(rxe):
    """Instructions under callgrind (each rank runs itself again under it):
    every figure, the five target lines (met or MISSED, never asserted: the
    post's for a prepared list started, blocking and not, and for a list
    posted whole) and
    the CSV.  What is checked does not depend on time: the counts are
    positive, the app side of a post is not more than the post with its
    engine pass, and verbs' share was found (the noipa wrappers of verbs.c
    have their names in the dump), so the engine's figure is net of it."""
    path = csv_path("test-instr.csv")
    rc, out = rxe.run("%s -n 2 -t 900 %s instr --quick --csv %s" % (RUN, BENCH, path), timeout=960)
    assert rc == 0, out
    assert "emunic-bench instr: instructions counted by callgrind" in out, out
    for what in (r"post a 4-task list, app side <= 300\s+mq start",
                 r"post a 4-task list, app side <= 300\s+mq whole",
                 r"post a 4-task list, app side <= 300\s+mq start nb",
                 r"engine a fired op beyond post_send <= 500\s+triggered",
                 r"engine a task beyond post_send <= 500\s+mq"):
        assert re.search(r"^\s+(met|MISSED)\s+" + what + r"\s+" + NUM + " instructions", out, re.M), (what, out)
    # The passes that found nothing, from the device's own count (the
    # engine counts a pass idle when it did nothing): never more than the
    # passes callgrind saw.
    m = re.search(r"(\d+) engine passes\s+\((\d+) found nothing\)", out)
    assert m and int(m.group(2)) <= int(m.group(1)), out
    m = re.search(r"arriving; (\d+) engine passes \((\d+) found nothing\)", out)
    assert m and int(m.group(2)) <= int(m.group(1)), out
    rows, text = read_csv(path, INSTR_HEADER)
    by = {(r["impl"], r["metric"]): float(r["value"]) for r in rows}
    assert set(by) == INSTR_ROWS, text
    assert all(r["unit"] == "instr" and r["ranks"] == "2" for r in rows), text
    assert all(v > 0 for v in by.values()), text
    assert by[("mq", "instr_post_app")] <= by[("mq", "instr_post_with_pass")], text
    assert by[("mq", "instr_post_whole_app")] <= by[("mq", "instr_post_whole_with_pass")], text
    assert by[("mq", "instr_start_nb_app")] <= by[("mq", "instr_start_nb_with_pass")], text
    # The engine is net of the verbs posting calls, which exist: a RECV and a
    # WRITE_IMM of every 4-task list, one put a fired op.
    assert by[("mq", "instr_verbs_post_task")] > 0 and by[("triggered", "instr_verbs_post_op")] > 0, text
    # The net figures leave out the idle passes at their measured cost; an
    # idle pass costs less than the work of a task or a put.
    for impl, gross in (("mq", "instr_engine_task"), ("triggered", "instr_engine_op")):
        assert by[(impl, "instr_idle_pass")] < by[(impl, gross)], text
        assert by[(impl, gross + "_net")] <= by[(impl, gross)], text
    m = re.search(r"on an empty MQ: (\d+) passes, (\d+) of them did work, mq device;\s+(\d+), (\d+), potato", out)
    assert m and int(m.group(1)) > 0 and int(m.group(3)) > 0, out
    rc, out = rxe.run("ls -d /tmp/emunic-instr.* 2>/dev/null | wc -l")
    assert rc == 0 and out.strip() == "0", "callgrind's files left behind: " + out


def test_instr_bench_usage():
    for args in ("instr --barriers 0", "instr --rounds x", "instr --bogus", "instr extra"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out and "emunic-bench instr --help" in out, (args, out)


# ---- allreduce ------------------------------------------------------------------

def test_allreduce_bench(rxe):
    """Offloaded allreduce vs the host-progressed one at 2 ranks: the table,
    a target line per size (met or MISSED, never asserted), the overlap
    targets at 8K, and every metric in the CSV."""
    path = csv_path("test-allreduce.csv")
    rc, out = rxe.run("%s -n 2 -t 300 %s allreduce --iters 20 --warmup 2 --sizes 8,8K --csv %s"
                      % (RUN, BENCH, path), timeout=360)
    assert rc == 0, out
    assert "emunic-bench allreduce: offloaded (mq, CALC on the progress core) vs host-progressed (ptp)" in out, out
    for size in ("8", "8K"):
        assert re.search(r"^\s+%s\s+ptp\s+%s\s+%s\s+-\s+%s$" % (size, NUM, NUM, NUM), out, re.M), out
        assert re.search(r"^\s+%s\s+mq\s+%s\s+%s\s+%sx\s+%s$" % (size, NUM, NUM, NUM, NUM), out, re.M), out
        assert re.search(r"^\s+(met|MISSED)\s+allreduce %s mean <= 1.15x ptp \(2 ranks\)\s+mq\s+" % size,
                         out, re.M), out
    assert re.search(r"^\s+(met|MISSED)\s+iallreduce 8K overlap >= 50% \(2 ranks\)\s+mq\s+" + NUM + "%",
                     out, re.M), out
    assert re.search(r"^\s+(met|MISSED)\s+iallreduce 8K overlap >= 2x ptp's \(2 ranks\)", out, re.M), out
    rows, text = read_csv(path)
    by = {(r["impl"], r["metric"]): float(r["value"]) for r in rows}
    for impl in ("ptp", "mq"):
        for size in ("8", "8K"):
            assert by[(impl, "allreduce_latency_" + size)] > 0, text
            assert by[(impl, "allreduce_latency_p50_" + size)] > 0, text
            assert 0 <= by[(impl, "iallreduce_overlap_" + size)] <= 100, text


def test_allreduce_bench_usage():
    for args in ("allreduce --sizes 7", "allreduce --sizes 8,x", "allreduce --iters 0", "allreduce --bogus"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out and "emunic-bench allreduce --help" in out, (args, out)


# ---- bcast ----------------------------------------------------------------------

def test_bcast_bench(rxe):
    """Offloaded bcast vs the host-progressed one at 3 ranks (a tree with a
    forwarding rank): the table, a target line per size (met or MISSED,
    never asserted) and every metric in the CSV; the check before timing
    (every root, three in flight) passed, or the bench would exit 1."""
    path = csv_path("test-bcast.csv")
    rc, out = rxe.run("%s -n 3 -t 300 %s bcast --iters 20 --warmup 2 --sizes 0,8K,100000 --segment 16K --csv %s"
                      % (RUN, BENCH, path), timeout=360)
    assert rc == 0, out
    assert "emunic-bench bcast: offloaded (mq, the tree on the progress core) vs host-progressed (ptp)" in out, out
    for size in ("0", "8K", "100000"):
        for impl in ("ptp", "mq"):
            assert re.search(r"^\s+%s\s+%s\s+%s\s+%s\s+%s\s+" % (size, impl, NUM, NUM, NUM), out, re.M), out
        assert re.search(r"^\s+(met|MISSED)\s+bcast %s mean <= 1.00x ptp \(3 ranks\)\s+mq\s+" % size,
                         out, re.M), out
    rows, text = read_csv(path)
    by = {(r["impl"], r["metric"]): float(r["value"]) for r in rows}
    for impl in ("ptp", "mq"):
        for size in ("0", "8K", "100000"):
            assert by[(impl, "bcast_latency_" + size)] > 0, text
            assert by[(impl, "bcast_latency_p50_" + size)] > 0, text
            assert by[(impl, "bcast_latency_slowest_" + size)] >= by[(impl, "bcast_latency_" + size)] * 0.999, text
            assert 0 <= by[(impl, "ibcast_overlap_" + size)] <= 100, text


def test_bcast_bench_usage():
    for args in ("bcast --sizes 32M", "bcast --sizes 8,x", "bcast --iters 0", "bcast --segment x", "bcast --bogus"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out and "emunic-bench bcast --help" in out, (args, out)


# ---- alltoall -------------------------------------------------------------------

def test_alltoall_bench(rxe):
    """Offloaded alltoall vs the host-progressed one at 3 ranks (two steps of
    the pairwise exchange): the table, a target line per size (met or MISSED,
    never asserted) and every metric in the CSV; the check before timing
    (blocking calls, three in flight) passed, or the bench would exit 3."""
    path = csv_path("test-alltoall.csv")
    rc, out = rxe.run("%s -n 3 -t 300 %s alltoall --iters 20 --warmup 2 --sizes 0,8K,64K --csv %s"
                      % (RUN, BENCH, path), timeout=360)
    assert rc == 0, out
    assert ("emunic-bench alltoall: offloaded (mq, the pairwise exchange on the progress core) vs "
            "host-progressed (ptp)") in out, out
    for size in ("0", "8K", "64K"):
        assert re.search(r"^\s+%s\s+ptp\s+%s\s+%s\s+-\s+%s$" % (size, NUM, NUM, NUM), out, re.M), out
        assert re.search(r"^\s+%s\s+mq\s+%s\s+%s\s+%sx\s+%s$" % (size, NUM, NUM, NUM, NUM), out, re.M), out
        assert re.search(r"^\s+(met|MISSED)\s+alltoall %s mean <= 1.00x ptp \(3 ranks\)\s+mq\s+" % size,
                         out, re.M), out
    # The overlap targets are set for 2 ranks only.
    assert "ialltoall 64K overlap" not in out, out
    rows, text = read_csv(path)
    by = {(r["impl"], r["metric"]): float(r["value"]) for r in rows}
    for impl in ("ptp", "mq"):
        for size in ("0", "8K", "64K"):
            assert by[(impl, "alltoall_latency_" + size)] > 0, text
            assert by[(impl, "alltoall_latency_p50_" + size)] > 0, text
            assert 0 <= by[(impl, "ialltoall_overlap_" + size)] <= 100, text
    assert {r["ranks"] for r in rows} == {"3"}, text


def test_alltoall_bench_usage():
    for args in ("alltoall --sizes 8M", "alltoall --sizes 8,x", "alltoall --iters 0", "alltoall --warmup -1",
                 "alltoall --segment x", "alltoall --bogus", "alltoall extra"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out and "emunic-bench alltoall --help" in out, (args, out)
    rc, out = host("%s alltoall --help" % BENCH)
    assert rc == 0 and "  alltoall [OPTIONS]" in out, out
    for opt in ("--sizes LIST", "--segment BYTES", "--iters K", "--warmup W", "--csv FILE"):
        assert opt in out, (opt, out)


# ---- gather, allgather ------------------------------------------------------------

XG_ALG = {"gather": "the linear gather", "allgather": "the pairwise exchange"}


@pytest.mark.parametrize("cmd", ["gather", "allgather"])
def test_gather_bench(rxe, cmd):
    """Offloaded gather / allgather vs the host-progressed ones at 3 ranks
    (a root with two peers; two steps of the exchange): the table (gather's
    with the slowest rank's column), a target line per size (met or MISSED,
    never asserted) and every metric in the CSV; the check before timing
    (blocking calls from every root, three in flight, every byte) passed,
    or the bench would exit 3.  Then 2 ranks: the overlap target lines."""
    path = csv_path("test-%s.csv" % cmd)
    rc, out = rxe.run("%s -n 3 -t 300 %s %s --iters 20 --warmup 2 --sizes 0,8K,64K --csv %s"
                      % (RUN, BENCH, cmd, path), timeout=360)
    assert rc == 0, out
    assert ("emunic-bench %s: offloaded (mq, %s on the progress core) vs host-progressed (ptp)"
            % (cmd, XG_ALG[cmd])) in out, out
    slow = r"\s+" + NUM if cmd == "gather" else ""
    for size in ("0", "8K", "64K"):
        assert re.search(r"^\s+%s\s+ptp\s+%s\s+%s%s\s+-\s+%s$" % (size, NUM, NUM, slow, NUM), out, re.M), out
        assert re.search(r"^\s+%s\s+mq\s+%s\s+%s%s\s+%sx\s+%s$" % (size, NUM, NUM, slow, NUM, NUM), out, re.M), out
        assert re.search(r"^\s+(met|MISSED)\s+%s %s mean <= 1.00x ptp \(3 ranks\)\s+mq\s+" % (cmd, size),
                         out, re.M), out
    assert "i%s 64K overlap" % cmd not in out, out
    rows, text = read_csv(path)
    by = {(r["impl"], r["metric"]): float(r["value"]) for r in rows}
    for impl in ("ptp", "mq"):
        for size in ("0", "8K", "64K"):
            lat = by[(impl, "%s_latency_%s" % (cmd, size))]
            assert lat > 0 and by[(impl, "%s_latency_p50_%s" % (cmd, size))] > 0, text
            assert 0 <= by[(impl, "i%s_overlap_%s" % (cmd, size))] <= 100, text
            if cmd == "gather":
                assert by[(impl, "gather_latency_slowest_" + size)] >= lat * 0.999, text
    assert {r["ranks"] for r in rows} == {"3"}, text
    rc, out = rxe.run("%s -n 2 -t 200 %s %s --iters 10 --warmup 2 --sizes 8,64K" % (RUN, BENCH, cmd), timeout=260)
    assert rc == 0, out
    for size in ("8", "64K"):
        assert re.search(r"^\s+(met|MISSED)\s+%s %s mean <= 1.15x ptp \(2 ranks\)\s+mq\s+" % (cmd, size),
                         out, re.M), out
    assert re.search(r"^\s+(met|MISSED)\s+i%s 64K overlap >= 50%% \(2 ranks\)\s+mq\s+%s%%; ptp %s%%$"
                     % (cmd, NUM, NUM), out, re.M), out
    assert re.search(r"^\s+(met|MISSED)\s+i%s 64K overlap >= 2x ptp's \(2 ranks\)\s+mq\s+" % cmd, out, re.M), out
    assert "i%s 8 overlap" % cmd not in out, out


@pytest.mark.parametrize("cmd", ["gather", "allgather"])
def test_gather_bench_usage(cmd):
    for args in ("--sizes 8M", "--sizes 8,x", "--iters 0", "--warmup -1", "--segment x", "--segment 8M",
                 "--bogus", "extra"):
        rc, out = host("%s %s %s" % (BENCH, cmd, args))
        assert rc == 2, (cmd, args, out)
        assert "usage:" in out and "emunic-bench %s --help" % cmd in out, (cmd, args, out)
    rc, out = host("%s %s --help" % (BENCH, cmd))
    assert rc == 0 and "  %s [OPTIONS]" % cmd in out, out
    other = "allgather" if cmd == "gather" else "gather"
    assert "  %s [OPTIONS]" % other not in out and "  alltoall [OPTIONS]" not in out, out
    for opt in ("--sizes LIST", "--segment BYTES", "--iters K", "--warmup W", "--csv FILE",
                "i%s_overlap_S" % cmd):
        assert opt in out, (opt, out)


AB = ROOT + "/scripts/ab-bench.sh"


def test_ab_bench_alternates_builds(rxe):
    """scripts/ab-bench.sh runs each build's emunic-bench in turn (A, B, A,
    B) and prints, a row per benchmark, size and build, the median mq/ptp
    over its runs.  The same tree named two ways stands for two builds."""
    rc, out = rxe.run("%s -r 2 -i 5 -s 8 gather %s %s/." % (AB, ROOT, ROOT), timeout=300)
    assert rc == 0, out
    for tree in (ROOT, ROOT + "/."):
        m = re.search(r"^gather\s+8\s+%s\s+2\s+%sx \[%s-%s\]\s+%sx\s+%s\s+%s$"
                      % (re.escape(tree), NUM, NUM, NUM, NUM, NUM, NUM), out, re.M)
        assert m, out
        assert float(m.group(2)) <= float(m.group(1)) <= float(m.group(3)), out
    runs = re.findall(r"^ab-bench: run (\d)/2: gather with (\S+)$", out, re.M)
    assert runs == [("1", ROOT), ("1", ROOT + "/."), ("2", ROOT), ("2", ROOT + "/.")], out


FAKE_RUN = """#!/bin/sh
# A stand-in for emunic-run + emunic-bench: the mq means of runs 1, 2, 3 are 200, 700, 300 (median 300, mean 400)
d=$(dirname "$0"); n=$(cat "$d/count" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$d/count"
case $((n % 3)) in 1) m=200 ;; 2) m=700 ;; *) m=300 ;; esac
[ -e "$d/norows" ] && { echo "emunic-bench: something else"; exit 0; }
printf '  8        ptp          100.0         50.0          -        0.0\\n'
printf '  8        mq           %s.0          75.0      2.00x        0.0\\n' $m
"""


def fake_tree(path, rows=True):
    b = path / "build" / "bin"
    b.mkdir(parents=True)
    (b / "emunic-run").write_text(FAKE_RUN)
    (b / "emunic-bench").write_text("#!/bin/sh\nexit 0\n")
    for f in ("emunic-run", "emunic-bench"):
        os.chmod(b / f, 0o755)
    if not rows:
        (b / "norows").write_text("")
    return str(path)


def test_ab_bench_medians_and_refusals(tmp_path):
    """The medians, ranges and order of ab-bench's summary, from stand-in
    binaries with known figures (a tree with a space in its path); a table
    with no ptp/mq rows and bad arguments are errors that say so."""
    a, b = fake_tree(tmp_path / "tree a"), fake_tree(tmp_path / "b")
    rc, out = host("%s -r 3 bcast '%s' '%s'" % (AB, a, b))
    assert rc == 0, out
    for tree in (a, b):
        assert re.search(r"^bcast\s+8\s+%s\s+3\s+3\.00x \[2\.00-7\.00\]\s+1\.50x\s+100\s+300$" % re.escape(tree),
                         out, re.M), out
    rc, out = host("%s -r 1 bcast '%s' '%s'" % (AB, a, fake_tree(tmp_path / "c", rows=False)))
    assert rc == 1 and "no ptp/mq rows in its table" in out, out


def test_ab_bench_usage():
    rc, out = host(AB)
    assert rc == 2 and "usage: scripts/ab-bench.sh" in out, out
    rc, out = host("%s gather %s" % (AB, ROOT))
    assert rc == 2 and "usage: scripts/ab-bench.sh" in out, out
    rc, out = host("%s -r 0 gather %s %s" % (AB, ROOT, ROOT))
    assert rc == 2 and "'0' is not a positive count" in out, out
    rc, out = host("%s gather /nonexistent %s" % (AB, ROOT))
    assert rc == 2 and "/nonexistent/build/bin/emunic-bench is missing" in out, out
