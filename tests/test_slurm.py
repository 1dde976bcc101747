"""emunic's programs launched by Slurm: `srun --mpi=pmix` starts the ranks and
they bootstrap through Slurm's PMIx server (no emunic-run).

The test starts its own one-node cluster where the RDMA device is (the test
guest): munged, slurmctld and slurmd from Debian's packages with a throw-away
config in a directory of the guest's /tmp (scripts/slurm/cluster.sh), a node
of 4 CPUs, every daemon stopped at the end.  Then the barrier benchmark runs
at 2 and 4 ranks under srun and under emunic-run with the same options: both
must pass every check it makes and print the same report, tables, rows,
targets and CSV metrics, with only the numbers (and met/MISSED) differing.
"""
import csv
import difflib
import io
import os
import re

import pytest

from conftest import BIN, ROOT

CLUSTER = os.path.join(ROOT, "scripts", "slurm", "cluster.sh")
RUN = BIN + "/emunic-run"
BENCH = BIN + "/emunic-bench"
BARRIER_ARGS = "barrier --iters 10 --warmup 2 --sweep-iters 2"
GUEST_FIXTURES = ("rxe",)      # the slurm fixture's, for conftest's test order


@pytest.fixture(scope="module")
def slurm(request):
    # The guest runs the host's programs: installed here means there too.
    missing = [p for p in ("/usr/sbin/slurmd", "/usr/sbin/slurmctld", "/usr/bin/srun", "/usr/sbin/munged")
               if not os.path.exists(p)]
    if missing:
        pytest.skip("Slurm is not installed (%s; make deps installs slurmd, slurmctld, slurm-client, munge)"
                    % ", ".join(missing))
    rxe = request.getfixturevalue("rxe")
    d = "/tmp/emunic-slurm-%d" % os.getpid()     # the guest's own /tmp when in the guest
    rc, out = rxe.run("%s start %s 4" % (CLUSTER, d), timeout=120)
    assert rc == 0, out
    try:
        yield lambda cmd, timeout=300: rxe.run(". %s/env && %s" % (d, cmd), timeout=timeout)
    finally:
        # stop fails when a daemon it started outlives SIGKILL.
        rc, out = rxe.run("%s stop %s && rm -rf %s" % (CLUSTER, d, d), timeout=60)
        assert rc == 0 and re.search(r"stopped munged \(\d+\), slurmctld \(\d+\), slurmd \(\d+\)", out), out


def test_cluster_is_up_with_pmix(slurm):
    rc, out = slurm("sinfo -h -N -o '%N %T %c' && timeout 30 srun --mpi=list", timeout=60)
    assert rc == 0, out
    assert re.search(r"^\S+ idle 4$", out, re.M), out
    assert re.search(r"^\s+pmix$", out, re.M), out


def test_srun_pmix_bootstrap(slurm):
    """srun --mpi=pmix -n 4: each rank finds rank and size through PMIx."""
    rc, out = slurm("timeout 120 srun --mpi=pmix -n 4 %s/emunic-boottest --rounds 4" % BIN, timeout=150)
    assert rc == 0, out
    assert sorted(re.findall(r"rank (\d) of 4 via pmix: 4 exchanges ok", out)) == ["0", "1", "2", "3"], out
    # Slurm's PMIx server names the ranks on this node (the core's CPU, the waiters' assist).
    assert sorted(re.findall(r"exchanges ok, local rank (\d) of 4$", out, re.M)) == ["0", "1", "2", "3"], out


def shape(out):
    """The report with its numbers and verdicts taken out: what must be the
    same whichever launcher started the ranks."""
    lines = []
    note = False
    for line in out.splitlines():
        # Progress lines (stderr: how they interleave with the report is the
        # launcher's I/O forwarding), emunic-run's own, and the CSV's path.
        if line.startswith(("emunic-bench: [", "emunic-run:")) or "CSV:" in line:
            continue
        # A note on the numbers ("x raw above 1.10: the work delayed the
        # barrier itself"), and its indented continuation, comes when the
        # numbers call for it, under either launcher.
        note = line.lstrip().startswith("note:") or (note and line.startswith("   ") and
                                                      not line.lstrip()[:1].isdigit())
        if note:
            continue
        line = re.sub(r"\bbootstrap (pmix|emunic-run)\b", "bootstrap B", line)
        # A target's line: the verdict and what follows it (by how much it
        # was missed) depend on the numbers; what and whose do not.
        m = re.match(r"\s+(met|MISSED|n/a)\s+(.+?)\s{2,}(mq-\w+)", line)
        if m:
            line = "V %s %s" % (m.group(2), m.group(3))
        line = re.sub(r"[-+]?\d+(\.\d+)?", "#", line)
        # A cell with no value ("-": a baseline of 0, a step not measured)
        # is a number that did not come this time; a ratio a number too.
        line = re.sub(r"(?<!\S)(-|#x)(?!\S)", "#", line)
        line = re.sub(r"\s+", " ", line).strip()
        if line:
            lines.append(line)
    return lines


def csv_rows(path):
    with open(path) as f:
        rows = list(csv.reader(io.StringIO(f.read())))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


@pytest.mark.parametrize("n", [2, 4])
def test_barrier_bench_under_srun_matches_emunic_run(slurm, n):
    outdir = os.path.join(ROOT, "build", "bench")
    os.makedirs(outdir, exist_ok=True)
    res = {}
    for how, launch in (("emunic-run", "%s -n %d -t 240" % (RUN, n)),
                        ("srun", "timeout 240 srun --mpi=pmix --kill-on-bad-exit=1 -n %d" % n)):
        path = os.path.join(outdir, "test-slurm-%s-%d.csv" % (how, n))
        if os.path.exists(path):
            os.remove(path)
        rc, out = slurm("%s %s %s --csv %s" % (launch, BENCH, BARRIER_ARGS, path), timeout=300)
        assert rc == 0, (how, out)
        # The ranks bootstrapped through the launcher's own channel.
        assert re.search(r"device\s+\S+, %d ranks, bootstrap %s," % (n, {"srun": "pmix"}.get(how, how)), out), \
            (how, out)
        assert "4. application thread CPU time" in out and re.search(r"^\s+\d+ target\(s\) missed$", out, re.M), \
            (how, out)
        res[how] = (out, path)
    (out_r, csv_r), (out_s, csv_s) = res["emunic-run"], res["srun"]
    diff = "\n".join(difflib.unified_diff(shape(out_r), shape(out_s), "emunic-run", "srun", lineterm=""))
    assert not diff, diff + "\n\n" + out_r + "\n\n" + out_s
    head_r, rows_r = csv_rows(csv_r)
    head_s, rows_s = csv_rows(csv_s)
    assert head_s == head_r
    key = lambda r: (r["bench"], r["impl"], r["ranks"], r["metric"], r["unit"])  # noqa: E731
    assert sorted(map(key, rows_s)) == sorted(map(key, rows_r)), (rows_r, rows_s)
    assert {r["ranks"] for r in rows_s} == {str(n)}
    for r in rows_s:
        assert float(r["value"]) >= 0, r
