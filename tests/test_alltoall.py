"""The offloaded all-to-all (emunic/coll.h, engines/coll/exchange.c): a
pairwise exchange, each block in segments, split over several task lists
where it is longer than the device's limit, checked on rxe at 2 to 8 ranks
(issue 19): blocks of 0 bytes up to 1 MiB a rank in all, 4 KiB segments, in
place, three in flight waited in reverse order, a late rank, a task-list
limit forced to 16, bad calls that leave the object working, injected
faults; and its host-progressed baseline (baseline/ptp_exchange.c).

The suite's time is short, so each guest command runs several checks in one
process (emunic-alltoall takes a list; "all" is sizes, inplace and
inflight)."""
import re

import pytest

from conftest import BIN, SANBIN, run_ctest, assert_every_rank_failed_at_once

RUN = BIN + "/emunic-run"
ALIAS = {"all": ["sizes", "inplace", "inflight"], "ptp-all": ["ptp-sizes", "ptp-inplace"]}


def alltoall(rxe, n, checks, prog=BIN + "/emunic-alltoall", timeout=300, spec=None, env=""):
    """Runs emunic-alltoall's checks (each maybe prefixed "allgather-" or
    "gather-", as tests/test_gather.py runs them) and asserts each passed."""
    f = "-f '%s' " % spec if spec else ""
    out = run_ctest(rxe, "%s%s -n %d -t %d %s%s %s" % (env, RUN, n, timeout - 60, f, prog, checks),
                    timeout=timeout)
    for c in checks.split():
        kind = re.match(r"((all)?gather-)?", c).group(0)
        for name in ALIAS.get(c[len(kind):], [c[len(kind):]]):
            assert "emunic-alltoall: %s%s: PASS" % (kind, name) in out, out
    return out


# sizes: blocks of 0 B up to 1 MiB / n, blocking, wait and test, and of
# 4 KiB segments (up to 32 a block); inplace: sbuf == rbuf; inflight: three
# in flight waited in reverse order, -ENOSPC for a fourth while the last rank
# is late.  Every receive buffer starts as garbage, with a guard past it.
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_sizes_in_place_and_three_in_flight(rxe, n):
    alltoall(rxe, n, "all")


@pytest.mark.parametrize("n", [4, 7])
def test_a_late_rank_loses_no_data(rxe, n):
    out = alltoall(rxe, n, "late")
    assert "emunic-alltoall: late: rank %d late 1000 ms: 4 x" % (n - 1) in out, out
    assert "emunic-alltoall: late: rank %d late 1000 ms: 3 x" % (n - 1) in out, out


def test_bad_calls_are_named_and_change_nothing(rxe):
    out = alltoall(rxe, 3, "invalid")
    for line in ("an alltoall call on a collective created for bcast",
                 "a bcast call on a collective created for alltoall",
                 "a barrier call on a collective created for alltoall",
                 "a NULL sbuf", "a NULL rbuf", "are more than max_bytes (%d)" % -(-(1 << 20) // 3)):
        assert line in out, line


# The per-list task limit forced low: every alltoall is split over several
# task lists, and the data is still right at every size.
@pytest.mark.parametrize("n", [3, 5])
def test_a_low_task_list_limit_splits_every_alltoall(rxe, n):
    out = alltoall(rxe, n, "limit", env="EMUNIC_LIST_TASKS=16 ")
    assert "emunic-alltoall: limit: the device's task lists hold at most 16 tasks" in out, out


# A SEND failing on rank 0 after six good ones (4 ranks, 1000-byte blocks:
# one segment a peer, three sends an alltoall, so the 7th is the first of
# alltoall 3), and a rank that takes no data (RNR for every rank sending to
# it).
FAULTS = {"wc:status=REM_ACCESS_ERR,rank=0,op=7,opcode=send": 4, "rnr:peer=1": 3}


@pytest.mark.parametrize("spec", sorted(FAULTS))
def test_a_fault_fails_every_rank_with_a_named_error(rxe, spec):
    n = FAULTS[spec]
    out = alltoall(rxe, n, "fault", spec=spec, timeout=200)
    firsts = re.findall(r"emunic-alltoall: rank (\d+): first failure: alltoall (\d+): (.*) \((\d+) ms\)", out)
    assert sorted(int(r) for r, _, _, _ in firsts) == list(range(n)), out
    for r, at, why, ms in firsts:
        assert why == "Input/output error", out
    assert_every_rank_failed_at_once(out)
    # The failure itself is named: rank, peer, QP, opcode and status.
    assert re.search(r"emunic: rank \d: peer \d qp \d+: (SEND|RECV) \((wr_id \d+|arrival)\) failed: ", out), out
    if spec.startswith("wc"):
        # Alltoalls 1 and 2 succeed everywhere (and were checked); rank 0's
        # failed send is in alltoall 3, reported by it or the next one.
        ats = {int(r): int(at) for r, at, _, _ in firsts}
        assert all(at >= 3 for at in ats.values()) and ats[0] in (3, 4), out


def test_clean_under_asan_and_ubsan(rxe):
    alltoall(rxe, 3, "all", prog=SANBIN + "/emunic-alltoall", timeout=500)


# The host-progressed baseline (for emunic-bench): the same pairwise
# exchange and segments, run by the app thread over verbs.
@pytest.mark.parametrize("n", [2, 5, 8])
def test_the_host_progressed_baseline_is_right_too(rxe, n):
    alltoall(rxe, n, "ptp-all")
