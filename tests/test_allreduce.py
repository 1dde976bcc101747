"""The offloaded allreduce (emunic/coll.h, engines/coll/allreduce.c):
recursive doubling with CALC tasks on the barrier's schedule, and
reduce-scatter + allgather (engines/coll/rsag.c) from a size threshold
(EMUNIC_RSAG_BYTES=0 forces it for every size), checked against a host
reference on rxe at 2 to 8 ranks (powers of two and the fold for the
others), every op x type, sizes from 0 bytes to 1 MiB, counts that leave
blocks empty or uneven, several in flight, a late rank, and bad calls that
leave the object working."""
import re
import subprocess

import pytest

from conftest import BIN, SANBIN, run_ctest, assert_every_rank_failed_at_once

RUN = BIN + "/emunic-run"
RSAG = "EMUNIC_RSAG_BYTES"


def allreduce(rxe, n, checks, prog=BIN + "/emunic-allreduce", timeout=400, spec=None, rsag=None):
    """Runs one or more checks (of one kind) in one process: a launch at 8
    ranks costs ~2.5 s under TCG."""
    f = "-f '%s' " % spec if spec else ""
    env = "%s=%s " % (RSAG, rsag) if rsag is not None else ""
    out = run_ctest(rxe, "%s%s -n %d -t %d %s%s %s" % (env, RUN, n, timeout - 60, f, prog, checks), timeout=timeout)
    for check in checks.split():
        assert "emunic-allreduce: %s: PASS" % check in out, out
    return out


# ops: every op x type; sizes: 0 bytes to 1 MiB; bits: random doubles,
# -0/+0 and NaNs give every rank the same bits.
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_every_op_type_and_size(rxe, n):
    out = allreduce(rxe, n, "ops sizes" + (" bits" if n in (2, 3, 5, 8) else ""))
    assert "%d ranks: 98 op x type pairs" % n in out, out


# The last with every allreduce reduce-scatter + allgather: each list posts
# its own gathers' receives between the earlier ones' and the next's.
@pytest.mark.parametrize("n,rsag", [(4, None), (5, None), (5, "0")])
def test_three_in_flight_waited_out_of_order(rxe, n, rsag):
    allreduce(rxe, n, "inflight", rsag=rsag)


@pytest.mark.parametrize("n", [3, 4])
def test_a_late_rank_and_in_place(rxe, n):
    allreduce(rxe, n, "late")


# A CALC's send failing on rank 0 (4 ranks: its second step is a CALC on a
# QP), and a rank that takes no data (RNR for everyone sending to it); the
# CALC's failure also where every allreduce is reduce-scatter + allgather
# (rank 0's CALC sends: its second halving and its first gather).
FAULTS = {"wc:status=REM_ACCESS_ERR,rank=0,op=3,opcode=calc": 4, "rnr:peer=1": 3}


@pytest.mark.parametrize("spec,rsag", [(s, None) for s in sorted(FAULTS)] + [(sorted(FAULTS)[1], "0")])
def test_a_fault_fails_every_rank_with_a_named_error(rxe, spec, rsag):
    n = FAULTS[spec]
    out = allreduce(rxe, n, "fault", spec=spec, timeout=200, rsag=rsag)
    firsts = re.findall(r"emunic-allreduce: rank (\d+): first failure: allreduce (\d+): (.*)", out)
    assert sorted(int(r) for r, _, _ in firsts) == list(range(n)), out
    for r, at, why in firsts:
        assert why == "Input/output error", out
    assert_every_rank_failed_at_once(out)
    # The failure itself is named: rank, peer, QP, opcode and status.
    assert re.search(r"emunic: rank \d: peer \d qp \d+: (CALC|SEND|RECV) \((wr_id \d+|arrival)\) failed: ", out), out
    if spec.startswith("wc") and rsag:
        # Rank 0's third CALC send is allreduce 2's first.
        ats = {int(r): int(at) for r, at, _ in firsts}
        assert all(at >= 2 for at in ats.values()) and ats[0] in (2, 3), out
    elif spec.startswith("wc"):
        # Allreduces 1 and 2 succeed (and each rank checked their results).
        # The third's CALC send fails on rank 0; an allreduce is done when
        # its partners' data came, so that failure may be reported by the
        # next one (include/emunic/coll.h), never later.
        ats = {int(r): int(at) for r, at, _ in firsts}
        assert all(at >= 3 for at in ats.values()) and ats[0] in (3, 4), out


def test_bad_calls_are_named_and_change_nothing(rxe):
    out = allreduce(rxe, 3, "invalid")
    for line in ("MAXLOC is not defined on INT32", "BXOR is not defined on DOUBLE",
                 "are more than max_bytes (1048576)", "a barrier call on a collective created for allreduce"):
        assert line in out, line


def test_clean_under_asan_and_ubsan(rxe):
    allreduce(rxe, 3, "inflight", prog=SANBIN + "/emunic-allreduce", timeout=500)
    allreduce(rxe, 3, "rsag", prog=SANBIN + "/emunic-allreduce", timeout=500, rsag="0")


# ---- reduce-scatter + allgather -------------------------------------------------

def test_the_rsag_schedule_on_the_host():
    """rsag.c's steps for 1 to 64 ranks and many counts, run as messages
    between simulated ranks (no device needed)."""
    p = subprocess.run([BIN + "/emunic-allreduce", "plan"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 0 and re.search(r"plan: \d+ cases: PASS", out), out


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_rsag_every_op_type_count_and_size(rxe, n):
    """Every op x type, counts from 0 to 2n + 1 and odd ones (empty and
    uneven blocks), sizes up to 1 MiB: all reduce-scatter + allgather."""
    out = allreduce(rxe, n, "rsag", rsag="0")
    assert "%d ranks: 98 op x type pairs" % n in out, out


# The bits say which algorithm ran: sums of random doubles associate
# differently (recursive doubling pairs at distance 1 first, the halving at
# N/2 first); the default threshold, and objects with attr.rsag_bytes never
# and 8 (the attribute wins over the variable).
@pytest.mark.parametrize("n,rsag", [(4, None), (6, "never"), (8, "0")])
def test_the_threshold_picks_the_algorithm(rxe, n, rsag):
    allreduce(rxe, n, "order", rsag=rsag)


def test_checks_run_together_only_of_one_kind(rxe):
    """Several checks share a process only if all are offloaded or all
    host-progressed, and fault runs alone: usage errors, before any rank
    opens a device."""
    for args, says in (("ops ptp-ops", "ptp-ops cannot run with ops"),
                       ("ptp-sizes bits", "bits cannot run with ptp-sizes"), ("ops fault", "fault runs alone"), ("fault ops", "fault runs alone"),
                       ("ops nosuch", "no check named nosuch")):
        rc, out = rxe.run("%s -n 2 -t 60 %s/emunic-allreduce %s" % (RUN, BIN, args), timeout=120)
        assert rc != 0 and says in out, out


def test_a_malformed_threshold_is_named(rxe):
    rc, out = rxe.run("%s=12X %s -n 2 -t 60 %s/emunic-allreduce ops" % (RSAG, RUN, BIN), timeout=120)
    assert rc != 0, out
    assert "allreduce: EMUNIC_RSAG_BYTES='12X' is not a byte count" in out, out
    rc, out = rxe.run("%s=12X %s -n 2 -t 60 %s/emunic-allreduce ptp-ops" % (RSAG, RUN, BIN), timeout=120)
    assert rc != 0, out
    assert "ptp allreduce: EMUNIC_RSAG_BYTES='12X' is not a byte count" in out, out


# The host-progressed baseline (baseline/ptp_allreduce.c, for emunic-bench):
# the same algorithm and operand order, run by the app thread over verbs.
@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_the_host_progressed_baseline_is_right_too(rxe, n):
    out = allreduce(rxe, n, {3: "ptp-ops ptp-bits ptp-sizes", 8: "ptp-ops ptp-bits ptp-sizes",
                             5: "ptp-ops ptp-order"}.get(n, "ptp-ops"))
    assert "%d ranks: 98 op x type pairs" % n in out, out
    if n in (3, 8):
        allreduce(rxe, n, "ptp-rsag", rsag="0")
