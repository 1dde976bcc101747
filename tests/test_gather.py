"""The offloaded gather and allgather (emunic/coll.h, engines/coll/
exchange.c, the all-to-all's engine): allgather the pairwise exchange
sending each rank's own block, gather linear to any root; checked on rxe at
2 to 8 ranks (issue 19): blocks of 0 bytes up to 1 MiB a rank in all, 4 KiB
segments, every root, in place, three in flight waited in reverse order, a
late rank (a gather's late root and a root waiting for a late rank), a
task-list limit forced to 16, bad calls that leave the object working,
injected faults; and their host-progressed baselines (baseline/
ptp_exchange.c).

The suite's time is short, so each guest command runs both kinds' checks in
one process (emunic-alltoall takes a list; "gather-all" is gather-sizes,
gather-inplace and gather-inflight)."""
import re

import pytest

from conftest import BIN, SANBIN, run_ctest, assert_every_rank_failed_at_once
from test_alltoall import alltoall as run  # one runner for every kind's checks

KINDS = ("gather", "allgather")


def both(*checks):
    return " ".join("%s-%s" % (k, c) for k in KINDS for c in checks)


# sizes: blocks of 0 B up to 1 MiB / n, blocking, wait and test, of 4 KiB
# segments (up to 32 a block), and a gather at every root; inplace: sbuf
# inside rbuf; inflight: three in flight waited in reverse order, -ENOSPC for
# a fourth where the late last rank holds everything up (a gather's root).
# Every receive buffer starts as garbage, with a guard past it; a non-root's
# gather rbuf must stay untouched.  At 2 and 8 ranks the baselines too.
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_sizes_roots_in_place_and_three_in_flight(rxe, n):
    run(rxe, n, both("all", "ptp-all") if n in (2, 8) else both("all"))


# The others' data is held (landing ring, then RNR) while a gather's root is
# 1 s late, and a root waits for a late rank; an allgather's late rank.
def test_a_late_rank_or_root_loses_no_data(rxe):
    out = run(rxe, 5, both("late"))
    for k in KINDS:
        assert "emunic-alltoall: %s-late: rank 4 late 1000 ms: 4 x" % k in out, out
        assert "emunic-alltoall: %s-late: rank 4 late 1000 ms: 3 x" % k in out, out


def test_bad_calls_are_named_and_change_nothing(rxe):
    out = run(rxe, 3, both("invalid"))
    for line in ("a gather call on a collective created for bcast",
                 "an allgather call on a collective created for bcast",
                 "a bcast call on a collective created for gather",
                 "a barrier call on a collective created for allgather",
                 "an alltoall call on a collective created for gather",
                 "a gather call on a collective created for allgather",
                 "an allgather call on a collective created for gather",
                 "gather 1: root -1 is not a rank (size 3)", "gather 1: root 3 is not a rank (size 3)",
                 "gather 1: a NULL sbuf", "gather 1: a NULL rbuf", "allgather 1: a NULL rbuf",
                 "allgather 1: a NULL sbuf",
                 "are more than max_bytes (%d)" % -(-(1 << 20) // 3)):
        assert line in out, line


# The per-list task limit forced low: every call is split over several task
# lists, and the data is still right at every size.
def test_a_low_task_list_limit_splits_every_call(rxe):
    out = run(rxe, 5, both("limit"), env="EMUNIC_LIST_TASKS=16 ")
    for k in KINDS:
        assert "emunic-alltoall: %s-limit: the device's task lists hold at most 16 tasks" % k in out, out


# Faults that reach every rank.  Gather (root 0): rank 0 takes no data (RNR
# for every sender at once), or only its first four messages a peer (four
# gathers succeed and are checked, the fifth fails).  Allgather, as the
# all-to-all: a SEND failing on rank 0 after six good ones (4 ranks,
# 1000-byte blocks: three sends an allgather, so the 7th is the first of
# allgather 3), and a rank that takes no data.
FAULTS = [("gather", "rnr:peer=0", 3), ("gather", "rnr:peer=0,after=4", 5),
          ("allgather", "wc:status=REM_ACCESS_ERR,rank=0,op=7,opcode=send", 4), ("allgather", "rnr:peer=1", 3)]


@pytest.mark.parametrize("kind,spec,n", FAULTS)
def test_a_fault_fails_every_rank_with_a_named_error(rxe, kind, spec, n):
    out = run(rxe, n, kind + "-fault", spec=spec, timeout=200)
    firsts = re.findall(r"emunic-alltoall: rank (\d+): first failure: %s (\d+): (.*) \((\d+) ms\)" % kind, out)
    assert sorted(int(r) for r, _, _, _ in firsts) == list(range(n)), out
    for r, at, why, ms in firsts:
        assert why == "Input/output error", out
    assert_every_rank_failed_at_once(out)
    # The failure itself is named: rank, peer, QP, opcode and status.
    assert re.search(r"emunic: rank \d: peer \d qp \d+: (SEND|RECV) \((wr_id \d+|arrival)\) failed: ", out), out
    ats = {int(r): int(at) for r, at, _, _ in firsts}
    if spec.startswith("wc"):
        # Allgathers 1 and 2 succeed everywhere (and were checked); rank
        # 0's failed send is in allgather 3, reported by it or the next one.
        assert all(at >= 3 for at in ats.values()) and ats[0] in (3, 4), out
    if "after=4" in spec:
        # Four gathers land and were checked on the root; its gather 5 names
        # a peer: the failed senders' QPs disconnect, so the root's WAIT for
        # one fails.
        assert all(at >= 5 for at in ats.values()), out
        assert re.search(r"rank 0: coll: gather 5: WAIT for peer \d failed: ", out), out


def test_clean_under_asan_and_ubsan(rxe):
    run(rxe, 3, both("all", "invalid"), prog=SANBIN + "/emunic-alltoall", timeout=500)


def test_the_exchange_schedules_by_their_properties():
    """schedule.c's coll_xchg_step for every size 1-64, kind and gather root
    (host only): every rank that gets data (all; a gather's root) waits
    once for every other rank, which sends it exactly one block, the right
    one, and nothing else is sent."""
    out = run_ctest(None, "%s/emunic-schedtest xchg" % BIN)
    assert "emunic-schedtest: xchg: PASS" in out, out
