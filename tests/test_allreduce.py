"""The offloaded allreduce (emunic/coll.h, engines/coll/allreduce.c):
recursive doubling with CALC tasks on the barrier's schedule, checked
against a host reference on rxe at 2 to 8 ranks (powers of two and the fold
for the others), every op x type, sizes from 0 bytes to 1 MiB, several in
flight, a late rank, and bad calls that leave the object working."""
import re

import pytest

from conftest import BIN, SANBIN

RUN = BIN + "/emunic-run"


def allreduce(rxe, n, check, prog=BIN + "/emunic-allreduce", timeout=400, spec=None):
    f = "-f '%s' " % spec if spec else ""
    rc, out = rxe.run("%s -n %d -t %d %s%s %s" % (RUN, n, timeout - 60, f, prog, check), timeout=timeout)
    assert rc == 0, out
    assert "emunic-allreduce: %s: PASS" % check in out, out
    return out


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_every_op_and_type(rxe, n):
    out = allreduce(rxe, n, "ops")
    assert "%d ranks: 98 op x type pairs" % n in out, out


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_sizes_0_bytes_to_1_mib(rxe, n):
    allreduce(rxe, n, "sizes")


@pytest.mark.parametrize("n", [4, 5])
def test_three_in_flight_waited_out_of_order(rxe, n):
    allreduce(rxe, n, "inflight")


@pytest.mark.parametrize("n", [3, 4])
def test_a_late_rank_and_in_place(rxe, n):
    allreduce(rxe, n, "late")


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_every_rank_gets_the_same_bits(rxe, n):
    allreduce(rxe, n, "bits")


# A CALC's send failing on rank 0 (4 ranks: its second step is a CALC on a
# QP), and a rank that takes no data (RNR for everyone sending to it).
FAULTS = {"wc:status=REM_ACCESS_ERR,rank=0,op=3,opcode=calc": 4, "rnr:peer=1": 3}


@pytest.mark.parametrize("spec", sorted(FAULTS))
def test_a_fault_fails_every_rank_with_a_named_error(rxe, spec):
    n = FAULTS[spec]
    out = allreduce(rxe, n, "fault", spec=spec, timeout=200)
    firsts = re.findall(r"emunic-allreduce: rank (\d+): first failure: allreduce (\d+): (.*)", out)
    assert sorted(int(r) for r, _, _ in firsts) == list(range(n)), out
    for r, at, why in firsts:
        assert why in ("Input/output error", "Connection timed out"), out
    # The failure itself is named: rank, peer, QP, opcode and status.
    assert re.search(r"emunic: rank \d: peer \d qp \d+: (CALC|SEND|RECV) \((wr_id \d+|arrival)\) failed: ", out), out
    if spec.startswith("wc"):
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


# The host-progressed baseline (baseline/ptp_allreduce.c, for emunic-bench):
# the same algorithm and operand order, run by the app thread over verbs.
@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_the_host_progressed_baseline_is_right_too(rxe, n):
    out = allreduce(rxe, n, "ptp-ops")
    assert "%d ranks: 98 op x type pairs" % n in out, out
    if n in (3, 8):
        allreduce(rxe, n, "ptp-bits")
        allreduce(rxe, n, "ptp-sizes")
