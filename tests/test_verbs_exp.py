"""shim/verbs_exp: a CORE-Direct program written against MLNX_OFED's verbs_exp
(tests/bin/emunic-exp-barrier.c, no emunic header; its QPs connected with
ibv_modify_qp and QP numbers exchanged out of band) runs its
recursive-doubling barrier, and the same schedule as an allreduce with
IBV_EXP_SEND_WITH_CALC, over emunic, and the bad flows fail as verbs_exp
failed them.

Each round every rank sleeps a random while, counts itself in a counter all
ranks map, and on leaving the barrier must find every rank counted.
"""
import os
import re

import pytest

from conftest import BIN, ROOT, SANBIN

RUN = BIN + "/emunic-run"
PROG = BIN + "/emunic-exp-barrier"
SRC = os.path.join(ROOT, "tests", "bin", "emunic-exp-barrier.c")
FLOWS = ["enable-on-unmanaged-qp", "wait-on-non-cross-channel-qp", "wait-on-non-cross-channel-cq",
         "enable-more-than-posted", "recv-enable-on-unmanaged-recv",
         # calc: MAXLOC is not in libmlx5's table for INT; calc needs CROSS_CHANNEL
         "calc-maxloc-on-int", "calc-on-non-cross-channel-qp"]
# The shim's own calc limits (README): whole 16-byte operands, at most two.
SHIM_FLOWS = ["calc-partial-operand", "calc-three-operands"]
# The standard verbs calls a legacy program makes on the shim's objects, and
# how each ends (the renames in verbs_exp.h, shim/verbs_exp/compat.c): done,
# or the shim's documented error, never a crash in libibverbs.
CALLS = [("ibv_modify_qp", "Invalid argument"), ("ibv_modify_qp-no-such-qp", "Invalid argument"),
         ("ibv_post_recv-in-reset", "Invalid argument"), ("ibv_post_recv-on-loopback", "Invalid argument"),
         ("ibv_modify_qp-loopback-with-receives", "Invalid argument"), ("ibv_destroy_qp-with-receives-in-init", "done"),
         ("ibv_req_notify_cq", "Operation not supported"),
         ("ibv_destroy_cq-in-use", "Device or resource busy"), ("ibv_destroy_qp", "done"),
         ("ibv_destroy_cq", "done"), ("ibv_modify_qp-own", "done"), ("ibv_destroy_qp-own", "done"),
         ("ibv_destroy_cq-own", "done")]


def run(rxe, n, args, timeout=120, prog=PROG):
    cmd = ("f=$(mktemp) && %s -n %d -t %d %s --shm $f %s; rc=$?; rm -f $f; exit $rc"
           % (RUN, n, timeout, prog, args))
    return rxe.run(cmd, timeout=timeout + 60)


def allreduces(out):
    return re.findall(r"emunic-exp-barrier: rank (\d+): allreduce: (\d+) calc cases x (\d+) rounds, (\d+) wrong; "
                      r"calc caps int (0x[0-9a-f]+) uint (0x[0-9a-f]+) fp (0x[0-9a-f]+)", out)


def summaries(out):
    return re.findall(r"emunic-exp-barrier: rank (\d+): (\d+) ranks, (\d+) rounds, (\d+) violations, "
                      r"(\d+) bad flows not as verbs_exp", out)


def test_legacy_program_includes_no_emunic_header():
    """Written as CORE-Direct programs were: verbs_exp and the C library only
    (the Makefile also builds it without emunic's include paths)."""
    with open(SRC) as f:
        includes = re.findall(r"^#include\s+[<\"]([^>\"]+)[>\"]", f.read(), re.M)
    assert "infiniband/verbs_exp.h" in includes
    assert not [i for i in includes if "emunic" in i], includes
    # It connects as verbs programs do, with nothing of emunic's.
    with open(SRC) as f:
        code = f.read()
    assert "emunic_exp_connect" not in code and "ibv_modify_qp(qp, &rtr" in code


@pytest.mark.parametrize("n", [2, 4])
def test_barrier_and_bad_flows(rxe, n):
    rc, out = run(rxe, n, "--errors --enable-index --allreduce 10 --rounds 300 --skew-us 100")
    assert rc == 0, out
    s = summaries(out)
    assert sorted(int(r[0]) for r in s) == list(range(n)), out
    for rank, size, rounds, violations, bad in s:
        assert (int(size), int(rounds), int(violations), int(bad)) == (n, 300, 0, 0), out
    # Every rank saw every bad flow refused with EINVAL, the bad WR named.
    for flow in FLOWS:
        lines = re.findall(r"rank \d+: bad flow %s: Invalid argument, as verbs_exp" % flow, out)
        assert len(lines) == n, out
    for flow in SHIM_FLOWS:
        lines = re.findall(r"rank \d+: bad flow %s: Invalid argument, as the shim documents" % flow, out)
        assert len(lines) == n, out
    # IBV_EXP_SEND_WITH_CALC: the barrier's schedule as an allreduce, every
    # op x type of libmlx5's calc table and MINLOC as cc_pingpong packed it
    # (negated MAXLOC), each reduction done by the emulated NIC as the
    # send is released (the operand it reads arrived after the post), the
    # result bit for bit the host's fold on every rank.  The calc
    # capabilities are libmlx5's: ADD, BAND, BXOR, BOR (bits 0, 2, 3, 4).
    a = allreduces(out)
    assert sorted(int(r[0]) for r in a) == list(range(n)), out
    for rank, cases, rounds, wrong, ints, uints, fps in a:
        assert (int(cases), int(rounds), int(wrong)) == (14, 10, 0), out
        assert ints == uints == fps == "0x1d", out
    assert "calc MAXLOC on INT is not in libmlx5's calc table" in out, out
    for call, end in CALLS:
        lines = re.findall(r"rank \d+: verbs call %s: %s, as the shim documents" % (call, end), out)
        assert len(lines) == n, (call, out)
    # Its QPs connected through ibv_modify_qp (INIT, RTR with the partner's
    # QP number, RTS); the transitions verbs refused are refused, named.
    assert "RESET to RTR is not a transition verbs allows" in out, out
    assert re.search(r"dest_qp_num %d is no shim QP of a rank of this job" % (n << 12 | 1), out), out
    # A task list over two management QPs whose second stretch finds its MQ
    # full is ENOMEM and posts nothing: the first stretch's enabled send
    # never arrives, and the enable index below is where it was.
    assert len(re.findall(r"rank \d+: bad flow span-overflow: Cannot allocate memory, 0 sends arrived, "
                          r"nothing posted, as the shim promises", out)) == n, out
    assert "work queue overflow (emunic's MQ or command ring is full); nothing was posted" in out, out
    # SEND_ENABLE counts as libmlx5 counted them (an index in work requests,
    # moved only by WAIT_EN_LAST), not as emunic's "the next n".
    assert len(re.findall(r"enable index: 1, 2, 3 sends arrived", out)) == n, out
    # MANAGED_RECV: a posted receive waits for its RECV_ENABLE (the
    # partner's send meets RNR until then), and RECV_ENABLE on a QP not
    # created MANAGED_RECV is EINVAL (FLOWS).
    assert len(re.findall(r"recv enable: 0 arrived before RECV_ENABLE, 1 after, as libmlx5", out)) == n, out
    assert "not created IBV_EXP_QP_CREATE_MANAGED_RECV" in out, out
    # Pairing by QP number: every odd rank moved its two extra QPs to the
    # partner to RTR in the other order, and the checks on them (enable
    # index, MANAGED_RECV) above passed, so the QPs the numbers named were
    # the ones connected (a pairing by order would have crossed them).
    assert len(re.findall(r"rank \d+: QPs \d+ and \d+ moved to RTR in the order opposite to rank \d+'s",
                          out)) == n // 2, out
    # The shim's error lines name the rank and what libmlx5 refused.
    assert "unsupported cross-channel functionality" in out, out
    assert "enables past the" in out, out
    assert "not created IBV_EXP_CQ_CREATE_CROSS_CHANNEL" in out, out


def test_calc_result_ring_wraps(rxe):
    """A QP's calc results come from a ring of one slot per send the emunic
    QP holds (4096 here); 150 rounds of the 14 cases send 4200 on the one
    pair at 2 ranks, so slots are reused, and every result is still right."""
    rc, out = run(rxe, 2, "--allreduce 150 --rounds 1", timeout=300)
    assert rc == 0, out
    assert [(r[1], r[2], r[3]) for r in allreduces(out)] == [("14", "150", "0")] * 2, out


def test_sanitized(rxe):
    """The same under ASan/UBSan (leaks included: the shim frees what the
    program left at exit)."""
    rc, out = run(rxe, 2, "--errors --allreduce 2 --rounds 100 --skew-us 100", prog=SANBIN + "/emunic-exp-barrier")
    assert rc == 0, out
    assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out, out
    assert len(summaries(out)) == 2, out
    assert [r[3] for r in allreduces(out)] == ["0", "0"], out


def test_verification_can_fail(rxe):
    """Without the barrier the check must see ranks leave early."""
    rc, out = run(rxe, 2, "--no-barrier --rounds 50 --skew-us 2000", timeout=60)
    assert rc == 1, out
    assert any(int(r[3]) > 0 for r in summaries(out)), out
