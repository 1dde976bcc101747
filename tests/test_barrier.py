"""The recursive-doubling barrier: offloaded on the management queue (mq) and
the host-progressed point-to-point baseline (ptp), over rxe.

Every correctness run has each rank enter after a random delay and checks,
from all ranks' clocks, that no rank left a round before the last one entered.
"""
import re

import pytest

from conftest import BIN, MEMCHECK, SANBIN, host, run_ctest

RUN = BIN + "/emunic-run"
BAR = BIN + "/emunic-barrier"
ROUNDS = 1000
SKEW = 200


def barrier_cmd(n, args, prog=BAR, timeout=300, wrap=""):
    return "%s -n %d -t %d %s %s %s" % (RUN, n, timeout, wrap, prog, args)


def barrier(rxe, n, args, prog=BAR, timeout=300, wrap=""):
    """(status, output) of a run expected to fail."""
    return rxe.run(barrier_cmd(n, args, prog, timeout, wrap), timeout=timeout + 60)


def barrier_ok(rxe, n, args, prog=BAR, timeout=300, wrap=""):
    """The output of a run that must pass (conftest.run_ctest)."""
    return run_ctest(rxe, barrier_cmd(n, args, prog, timeout, wrap), timeout=timeout + 60)


def summary(out):
    m = re.search(r"emunic-barrier: .* (\d+) ranks \((\d+) QPs on rank 0\), (\d+) rounds, .*: "
                  r"(\d+) violations", out)
    assert m, out
    return {"ranks": int(m.group(1)), "qps": int(m.group(2)), "rounds": int(m.group(3)),
            "violations": int(m.group(4))}


# Both signals and both connection kinds, powers of two and not (3, 5: an
# extra rank; sparse 3: the extra rank's partner is its only QP).
MQ_CASES = [
    (2, "send", "dense"),
    (3, "write_imm", "sparse"),
    (4, "send", "sparse"),
    (5, "write_imm", "dense"),
    (8, "send", "dense"),
    (8, "write_imm", "sparse"),
]


@pytest.mark.parametrize("n,signal,conn", MQ_CASES)
def test_mq_barrier_under_skew(rxe, n, signal, conn):
    out = barrier_ok(rxe, n, "--impl mq --signal %s --conn %s --rounds %d --skew-us %d"
                         % (signal, conn, ROUNDS, SKEW))
    s = summary(out)
    assert s == {"ranks": n, "qps": s["qps"], "rounds": ROUNDS, "violations": 0}, out
    # Rank 0 is never an extra rank: sparse holds its log2 partners (and
    # rank N's, when there is an extra rank), dense a QP to every rank.
    pow2 = 1 << (n.bit_length() - 1)
    partners = (pow2.bit_length() - 1) + (1 if n > pow2 else 0)
    assert s["qps"] == (partners if conn == "sparse" else n - 1), out


def test_lists_posted_whole_and_a_bad_setting(rxe):
    """EMUNIC_COLL_PREPARED=0: each barrier posts its list whole (every
    check each time) instead of starting the list prepared at its first
    (emunic_mq_prepare / emunic_mq_start, the default, which every other run
    here uses); as right either way.  Anything but 0 or 1 fails the
    create, naming the variable."""
    out = run_ctest(rxe, "EMUNIC_COLL_PREPARED=0 " + barrier_cmd(
        5, "--impl mq --signal write_imm --rounds 300 --skew-us %d" % SKEW), timeout=360)
    s = summary(out)
    assert (s["ranks"], s["rounds"], s["violations"]) == (5, 300, 0), out
    rc, out = rxe.run("EMUNIC_COLL_PREPARED=yes " + barrier_cmd(2, "--impl mq --rounds 5", timeout=60), timeout=120)
    assert rc != 0, out
    assert "coll: barrier: EMUNIC_COLL_PREPARED='yes' is not 0 or 1" in out, out


@pytest.mark.parametrize("impl", ["mq", "ptp"])
def test_one_rank(rxe, impl):
    """A job of one: every barrier and ibarrier completes at once."""
    out = barrier_ok(rxe, 1, "--impl %s --rounds 100 --inflight 4" % impl, timeout=60)
    assert summary(out)["violations"] == 0, out
    out = barrier_ok(rxe, 1, "--impl %s --ibarrier-compute --rounds 3 --compute-ms 10" % impl, timeout=60)
    assert "3 of 3 ibarriers complete at the first test" in out, out


@pytest.mark.parametrize("n,signal", [(2, "send"), (3, "write_imm"), (4, "send"), (5, "write_imm"),
                                      (8, "send")])
def test_ptp_barrier_under_skew(rxe, n, signal):
    out = barrier_ok(rxe, n, "--impl ptp --signal %s --rounds %d --skew-us %d" % (signal, ROUNDS, SKEW))
    s = summary(out)
    assert (s["ranks"], s["rounds"], s["violations"]) == (n, ROUNDS, 0), out


def test_verification_can_fail(rxe):
    """With no barrier at all (--impl none) the check must report violations."""
    rc, out = barrier(rxe, 4, "--impl none --rounds 50 --skew-us 2000", timeout=60)
    assert rc == 1, out
    assert re.search(r"VIOLATION round \d+: rank \d left [\d.]+ us before rank \d entered", out), out
    assert summary(out)["violations"] > 0, out


@pytest.mark.parametrize("impl,args", [
    ("mq", "--conn sparse --inflight 8"),
    ("mq", "--signal write_imm --inflight 64"),
    ("ptp", "--inflight 8"),
])
def test_ibarriers_in_flight(rxe, impl, args):
    """Up to K ibarriers posted before any completes (peers run K barriers
    ahead), completed in order by test calls and wait."""
    out = barrier_ok(rxe, 5, "--impl %s %s --rounds 600 --skew-us %d" % (impl, args, SKEW))
    s = summary(out)
    assert (s["ranks"], s["rounds"], s["violations"]) == (5, 600, 0), out


@pytest.mark.parametrize("n,signal,conn", [(4, "send", "dense"), (5, "write_imm", "sparse")])
def test_mq_ibarrier_progresses_while_app_computes(rxe, n, signal, conn):
    """Posted, then only computing: one test call must find it complete."""
    out = barrier_ok(rxe, n, "--impl mq --signal %s --conn %s --ibarrier-compute --rounds 5 "
                         "--compute-ms 500" % (signal, conn))
    assert "%d of %d ibarriers complete at the first test" % (5 * n, 5 * n) in out, out


def test_a_blocking_post_with_no_room_says_why(rxe):
    """Rank 0 holds 64 ibarriers in flight, as many as the object keeps,
    while rank 1 stays away until it returns: its blocking barrier must fail
    ENOSPC at its bound, naming the reason and the oldest operation (each
    -ENOSPC site records why, engines/coll/request.c no_room); then rank 1
    comes and every ibarrier completes."""
    out = barrier_ok(rxe, 2, "--impl mq --full --timeout-ms 2000", timeout=60)
    m = re.search(r"a blocking barrier behind 64 ibarriers in flight: No space left on device after (\d+) ms",
                  out)
    assert m and 2000 <= int(m.group(1)) < 4000, out
    assert re.search(r"rank 0: coll: barrier (\d+): no room to post it for 2000 ms: 64 are in flight, the most "
                     r"it keeps, and barrier (\d+), the oldest, is not complete", out), out


def test_a_failure_queued_behind_a_waited_ibarrier_is_named_by_that_wait(rxe):
    """Two ibarriers run for 2 s (from when both ranks posted both; on rank
    0 also until its fault statistics count the injected failure) before
    the first is waited; the second's WAIT on rank 0 fails (rank 0's third
    receive turned into an error; the first barrier is the untimed one).
    The wait for the first succeeds and must read the failure queued
    behind it before it returns (engines/coll/complete.c coll_wait_seq),
    naming it (and disconnecting, so that its peers fail now), not leave it
    to the application's next call: rank 0's line for that failure comes
    before its line for the first wait.  Without the read, it comes after."""
    rc, out = barrier(rxe, 2, "--impl mq --behind --timeout-ms 10000",
                      wrap="-f wc:status=REM_ACCESS_ERR,rank=0,op=3,opcode=recv", timeout=60)
    assert rc == 0, out
    lines = [l for l in out.splitlines() if "rank 0:" in l]
    failed = [i for i, l in enumerate(lines) if "coll: barrier 3: WAIT for peer 1 failed: remote access error" in l]
    waited = [i for i, l in enumerate(lines) if "behind: ibarrier 1 waited: ok" in l]
    assert failed and waited and failed[0] < waited[0], out
    assert "rank 0: behind: ibarrier 2 waited: Input/output error" in out, out
    # (Rank 1's second may complete: rank 0's signal for it was sent.)


def test_ptp_ibarrier_needs_the_app(rxe):
    """The same check fails for the host-progressed baseline: it proves the
    check can fail, and that the mq result is the progress core's work."""
    rc, out = barrier(rxe, 4, "--impl ptp --ibarrier-compute --rounds 5 --compute-ms 300")
    assert rc == 1, out
    assert "NOT complete at the first test" in out, out
    assert re.search(r"rank \d: round \d: ibarrier not complete after 300 ms", out), out


def test_mq_missing_rank_is_named(rxe):
    """The extra rank (4 of 5) stops: its partner, rank 0, times out and
    names it; the job fails instead of hanging.  Ranks 1-3 wait on rank 0
    and start waiting a little earlier than it, so with equal timeouts they
    time out first and the job ends before rank 0 names rank 4 (seen in CI):
    the others get a longer bound, so rank 0's fires first."""
    rc, out = barrier(rxe, 5, "--impl mq --rounds 20 --stall-rank 4 --timeout-ms 10000 --timeout-rank 0:3000",
                      timeout=120)
    assert rc == 3, out
    assert re.search(r"rank 0: coll: barrier \d+ not complete after 3000 ms; signals missing from "
                     r"peer 4 \(\d+ of \d+\)", out), out


def test_ptp_rejects_sparse():
    """Options are checked before bootstrap: no RDMA, no guest needed."""
    rc, out = host("%s --impl ptp --conn sparse" % BAR)
    assert rc == 2, out
    assert "dense connections only" in out, out


def test_sanitized_build_is_clean(rxe):
    out = barrier_ok(rxe, 4, "--impl mq --conn sparse --rounds 200", prog=SANBIN + "/emunic-barrier")
    assert summary(out)["violations"] == 0, out
    assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out, out


@pytest.mark.parametrize("impl", ["mq", "ptp"])
def test_memcheck_is_clean(rxe, impl):
    out = barrier_ok(rxe, 2, "--impl %s --signal write_imm --rounds 30" % impl,
                         wrap=MEMCHECK)
    assert summary(out)["violations"] == 0, out
