"""The offloaded broadcast (emunic/coll.h, engines/coll/bcast.c): a binomial
tree from each call's root, pipelined in segments, checked on rxe at 2 to 8
ranks (issue 19): 0 bytes to 1 MiB from the first, the last and a middle
root, every root in turn, 4 KiB segments on a sparse object, three in
flight, a late rank, bad calls that leave the object working, injected
faults; and its host-progressed baseline (baseline/ptp_bcast.c).

The suite's time is short, so each guest command runs several checks in one
process (emunic-bcast takes a list; "all" is sizes, roots and inflight)."""
import re

import pytest

from conftest import BIN, SANBIN, run_ctest, assert_every_rank_failed_at_once

RUN = BIN + "/emunic-run"


def bcast(rxe, n, checks, prog=BIN + "/emunic-bcast", timeout=300, spec=None):
    f = "-f '%s' " % spec if spec else ""
    out = run_ctest(rxe, "%s -n %d -t %d %s%s %s" % (RUN, n, timeout - 60, f, prog, checks), timeout=timeout)
    names = []
    for c in checks.split():
        names += {"all": ["sizes", "roots", "inflight"], "ptp-all": ["ptp-sizes", "ptp-roots"]}.get(c, [c])
    for c in names:
        assert "emunic-bcast: %s: PASS" % c in out, out
    return out


# sizes: 0 B to 1 MiB from roots 0, n-1 and n/2, blocking, wait and test,
# and 4 KiB segments (up to 32 of them) on a sparse object; roots: every
# root in turn; inflight: three in flight waited in reverse order, -ENOSPC
# for a fourth.  Every non-root's buffer starts as garbage, with a guard
# past the message.
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_sizes_roots_and_three_in_flight(rxe, n):
    bcast(rxe, n, "all")


@pytest.mark.parametrize("n", [3, 4, 7])
def test_a_late_rank_and_the_root_reusing_its_buffer(rxe, n):
    out = bcast(rxe, n, "late")
    assert "emunic-bcast: late: rank %d late" % (n - 1) in out, out


def test_a_blocking_post_whose_slots_are_held_says_why(rxe):
    """Root 0 runs blocking 1 MiB bcasts ahead of a child held back until
    the root is done: the child's landing ring takes three, the fourth's
    sends meet RNR, and once the root's slots all wait on them (the 8th)
    its next blocking bcast must fail ENOSPC at its bound (2 s), naming the
    slots (each -ENOSPC site records why: engines/coll/request.c no_room).
    Then the child takes every one (checked)."""
    out = bcast(rxe, 2, "slots", timeout=120)
    m = re.search(r"emunic-bcast: slots: root 0 ran (\d+) bcasts ahead, then a blocking bcast: "
                  r"No space left on device after (\d+) ms", out)
    assert m and int(m.group(1)) >= 4 and 2000 <= int(m.group(2)) < 4000, out
    n = int(m.group(1))
    assert re.search(r"rank 0: coll: bcast %d: no room to post it for 2000 ms: the buffers of earlier ones are "
                     r"not free yet \(all %d posted are complete here: a peer has not taken what it was sent\)"
                     % (n + 1, n), out), out


def test_bad_calls_are_named_and_change_nothing(rxe):
    out = bcast(rxe, 3, "invalid")
    for line in ("root -1 is not a rank", "root 3 is not a rank", "a NULL buffer",
                 "are more than max_bytes (1048576)"):
        assert line in out, line


# A SEND failing on rank 0 after two good ones (4 ranks, 1000 bytes, roots
# 0, 1, 2, ...: rank 0 sends twice as root of bcast 1, then forwards in bcast
# 3), and a rank that takes no data (RNR for every rank sending to it).
FAULTS = {"wc:status=REM_ACCESS_ERR,rank=0,op=3,opcode=send": 4, "rnr:peer=1": 3}


@pytest.mark.parametrize("spec", sorted(FAULTS))
def test_a_fault_fails_every_rank_with_a_named_error(rxe, spec):
    n = FAULTS[spec]
    out = bcast(rxe, n, "fault", spec=spec, timeout=200)
    firsts = re.findall(r"emunic-bcast: rank (\d+): first failure: bcast (\d+): (.*) \((\d+) ms\)", out)
    assert sorted(int(r) for r, _, _, _ in firsts) == list(range(n)), out
    for r, at, why, ms in firsts:
        assert why == "Input/output error", out
    assert_every_rank_failed_at_once(out)
    # The failure itself is named: rank, peer, QP, opcode and status.
    assert re.search(r"emunic: rank \d: peer \d qp \d+: (SEND|RECV) \((wr_id \d+|arrival)\) failed: ", out), out
    if spec.startswith("wc"):
        # Bcasts 1 and 2 succeed everywhere (and were checked); rank 0's
        # failed send is in bcast 3, reported by it or the next one.
        ats = {int(r): int(at) for r, at, _, _ in firsts}
        assert all(at >= 3 for at in ats.values()) and ats[0] in (3, 4), out


def test_clean_under_asan_and_ubsan(rxe):
    bcast(rxe, 3, "all", prog=SANBIN + "/emunic-bcast", timeout=500)


# The host-progressed baseline (for emunic-bench): the same tree and
# segments, run by the app thread over verbs.
@pytest.mark.parametrize("n", [2, 5, 8])
def test_the_host_progressed_baseline_is_right_too(rxe, n):
    bcast(rxe, n, "ptp-all")


def test_a_list_longer_than_the_device_takes_is_named(rxe):
    """A bcast object whose lists could be longer than the device's task-list
    limit is refused at create, with the numbers and the way out."""
    rc, out = rxe.run("EMUNIC_LIST_TASKS=16 %s -n 2 -t 60 %s/emunic-bcast sizes" % (RUN, BIN), timeout=90)
    assert rc != 0, out
    assert "bcast: a list may need 224 tasks, more than the device's limit of 16" in out, out
    assert "raise attr.segment or lower max_bytes" in out and "Argument list too long" in out, out


def test_the_binomial_tree_by_its_properties():
    """schedule.c's tree for every size 1-64 and root (host only): one
    parent each, listed by it, every rank reached within ceil(log2 size)
    levels, children in decreasing distance, every pair coll_bin_paired."""
    out = run_ctest(None, "%s/emunic-schedtest bintree" % BIN)
    assert "emunic-schedtest: bintree: PASS" in out, out
