"""emunic-bench: the barrier benchmark (offloaded mq vs host-progressed ptp).

Only structure and sanity are checked: every table, every metric in the CSV,
positive times, availabilities in [0, 100], ratios present.  Targets are
printed by the benchmark with met/MISSED and are never asserted here: under
QEMU's TCG the times are far too noisy for that.
"""
import csv
import io
import os
import re

from conftest import BIN, ROOT, SANBIN, host

RUN = BIN + "/emunic-run"
BENCH = BIN + "/emunic-bench"

CSV_HEADER = ["bench", "impl", "ranks", "metric", "value", "unit", "ratio_vs_ptp"]
SWEEP = ["work_slice_time_w%03d" % w for w in range(0, 101, 10)]
METRICS = {
    "barrier_latency": "us", "barrier_latency_p50": "us",
    "ibarrier_latency": "us", "ibarrier_latency_p50": "us",
    "app_cpu_post_wait": "us", "app_cpu_post_overlap": "us", "app_cpu_wait_overlap": "us",
    "cpu_avail_test_loop": "%", "test_loop_time_p50": "us", "tests_per_call": "count",
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


def read_csv(path):
    with open(path) as f:
        text = f.read()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and rows[0] == CSV_HEADER, text
    return [dict(zip(CSV_HEADER, r)) for r in rows[1:]], text


def test_barrier_bench_two_ranks(rxe):
    path = os.path.join(ROOT, "build", "bench", "test-barrier-2.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.remove(path)
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
    verdicts = re.findall(r"^\s+(met|MISSED|n/a)\s+(.+?)\s{2,}(mq-\w+)", out, re.M)
    assert len(verdicts) == 2 * 4, out
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
    for args in ("", "nosuch", "barrier --iters 0", "barrier --signal rdma", "barrier --conn ring",
                 "barrier --idle busy", "barrier --bogus", "barrier extra"):
        rc, out = host("%s %s" % (BENCH, args))
        assert rc == 2, (args, out)
        assert "usage:" in out, (args, out)


def test_unwritable_csv_is_a_runtime_error():
    """Checked before any measurement (a job of one needs no launcher)."""
    rc, out = host("%s barrier --csv /nonexistent/dir/x.csv" % BENCH)
    assert rc == 3, out
    assert re.search(r"emunic-bench: rank 0: barrier opening the CSV file /nonexistent/dir/x.csv: ", out), out
