"""Fault injection (include/emunic/fault.h): the spec parser on the host, and
on rxe every fault kind against every engine operation, with the exact
completion status each must end in, real faults made by the transport
(RNR NAKs, retries exhausted) checked against rxe's hardware counters."""
import re

import pytest

from conftest import BIN, host, run_ctest

SPEC = BIN + "/emunic-faultspec"
RUN = BIN + "/emunic-run"
TEST = BIN + "/emunic-faulttest"
HW = "/sys/class/infiniband/rxe0/ports/1/hw_counters"

OPS = ["send", "write", "write_imm", "read", "fetch_add", "mq", "trig-put", "trig-get", "barrier",
       "eager", "rtr", "chunked", "allreduce"]

# What rank 0 (the initiator) must see, by fault.  rnr: rank 1 posts no
# receive to verbs, so what needs one (SEND, WRITE_IMM, a triggered put,
# every engine message) ends in RNR_RETRY_EXC_ERR; one-sided writes, reads
# and atomics need none and succeed, as on real hardware.  retry: rank 1's
# QP is gone, so everything ends in RETRY_EXC_ERR.  wc: the first completion
# on rank 0 is turned into the chosen status.  Engines report errno names.
RNR = {"send": "RNR_RETRY_EXC_ERR", "write": "SUCCESS", "write_imm": "RNR_RETRY_EXC_ERR", "read": "SUCCESS",
       "fetch_add": "SUCCESS", "mq": "RNR_RETRY_EXC_ERR", "trig-put": "RNR_RETRY_EXC_ERR",
       "trig-get": "SUCCESS", "barrier": "EIO", "eager": "EIO", "rtr": "EIO", "chunked": "EIO", "allreduce": "EIO"}
RETRY = {op: "RETRY_EXC_ERR" for op in OPS[:8]}
RETRY.update({op: "EIO" for op in OPS[8:]})
# An RTR send puts nothing on the wire until the receiver's RTR comes: a
# receiver whose QP silently went away leaves it only the wait's bound.
RETRY["rtr"] = "ETIMEDOUT"
WC = {op: "REM_ACCESS_ERR" for op in OPS[:8]}
WC.update({op: "EIO" for op in OPS[8:]})
FAULTS = {
    "rnr:peer=1": RNR,
    "retry:peer=1": RETRY,
    "wc:status=REM_ACCESS_ERR,rank=0,op=1": WC,
}
LABEL = {"send": "SEND", "write": "WRITE", "write_imm": "WRITE_IMM", "read": "READ", "fetch_add": "FETCH_ADD",
         "mq": "mq WAIT", "trig-put": "put", "trig-get": "get", "barrier": "barrier", "eager": "isend",
         "rtr": "isend", "chunked": "isend", "allreduce": "allreduce"}
# ibv_wc_status_str() of each, as the failure lines print it.
STATUS_STR = {"RNR_RETRY_EXC_ERR": "RNR retry counter exceeded", "RETRY_EXC_ERR": "transport retry counter exceeded",
              "REM_ACCESS_ERR": "remote access error", "REM_OP_ERR": "remote operation error"}
# The verbs status behind an engine's EIO, by fault.
CAUSE = {"rnr:peer=1": "RNR_RETRY_EXC_ERR", "retry:peer=1": "RETRY_EXC_ERR",
         "wc:status=REM_ACCESS_ERR,rank=0,op=1": "REM_ACCESS_ERR"}
LINE = re.compile(r"faulttest: rank (\d): ([\w -]+): (\w+) \(peer (\d+), qp (\d+), (\d+) ms\)")


def results(out):
    """{(rank, what): (result, ms)} from the lines emunic-faulttest prints."""
    return {(int(m[0]), m[1]): (m[2], int(m[5])) for m in LINE.findall(out)}


def counters(out, tag):
    m = re.search(tag + r" (.*)", out)
    return dict(kv.split("=") for kv in m.group(1).split()) if m else {}


# ---- the spec language (no RDMA needed) ----------------------------------------

GOOD = {
    "rnr:peer=1,after=10": "rnr:peer=1,after=10",
    "retry:peer=2,after=5": "retry:peer=2,after=5",
    "loss:p=0.05,delay=2ms": "loss:p=0.050000,delay=2ms",
    "wc:status=RNR_RETRY_EXC,op=7,seed=42": "wc:status=RNR_RETRY_EXC_ERR,op=7,count=1,seed=42",
    "wc:status=12,p=5%,seed=3;rnr:peer=0,hold=1s":
        "wc:status=RETRY_EXC_ERR,p=0.050000,count=0,seed=3;rnr:peer=0,after=0,hold=1000ms",
}

BAD = [  # spec, the message, the token the caret must sit under
    ("rnr:peer=1,aftr=10", "unknown key 'aftr' for a rnr rule", "aftr"),
    ("wc:status=BOGUS", "bad value 'BOGUS' for status", "BOGUS"),
    ("rnr:after=3", "a rnr rule needs peer=", "rnr"),
    ("loss:p=1.5", "out-of-range value '1.5' for p", "1.5"),
    ("bogus:x=1", "unknown fault kind 'bogus'", "bogus"),
    ("rnr:peer=1;;wc:status=12", "empty rule", ""),
    ("wc:status=12,op=1,p=0.1", "op= (one completion) or p=", "wc:status=12,op=1,p=0.1"),
    ("rnr:peer=1,peer=2", "peer given twice", "peer"),
    ("rnr:peer=1,after", "'after' is not KEY=VALUE", "after"),
    ("loss:p=5%,delay=2xs", "bad value '2xs' for delay", "2xs"),
    ("retry:peer=1,retries=8", "out-of-range value '8' for retries", "8"),
    ("rnr:peer=2,from=2", "peer and from are the same rank", "rnr:peer=2,from=2"),
    ("wc:status=WR_FLUSH_ERR", "WR_FLUSH_ERR is what follows a failure", "wc:status=WR_FLUSH_ERR"),
]


@pytest.mark.parametrize("spec", sorted(GOOD))
def test_spec_parses_to_canonical_form(spec):
    rc, out = host("%s '%s'" % (SPEC, spec))
    assert rc == 0 and out.strip() == "ok (%d rule%s): %s" % (
        spec.count(";") + 1, "s" if ";" in spec else "", GOOD[spec]), out


@pytest.mark.parametrize("spec,why,token", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_points_at_the_token(spec, why, token):
    rc, out = host("%s '%s'" % (SPEC, spec))
    assert rc == 1, out
    lines = out.rstrip("\n").split("\n")
    assert lines[0].startswith("bad fault spec: ") and why in lines[0], out
    assert lines[1] == "  " + spec, out
    col = lines[2].index("^") - 2
    if token:
        assert spec[col:col + len(token)] == token and lines[2].count("~") == len(token) - 1, out


def test_spec_fuzz_never_crashes():
    # The sanitizer build: a read past a token or an overflow would abort.
    out = run_ctest(None, "build/san/bin/emunic-faultspec --fuzz 30000 11", timeout=300)
    m = re.search(r"(\d+) accepted, (\d+) rejected, 0 without a caret, 0 round-trip mismatches", out)
    assert m and int(m.group(1)) > 100 and int(m.group(2)) > 1000, out


def test_bad_spec_fails_the_device_open(rxe):
    rc, out = rxe.run("EMUNIC_FAULTS='rnr:peer=9' %s -n 2 -t 60 %s send" % (RUN, TEST), timeout=90)
    assert rc != 0, out
    assert "EMUNIC_FAULTS: rule 1 names a rank the job (2 ranks) does not have" in out, out


# ---- every fault kind against every operation, on rxe ---------------------------

def run_matrix(rxe, spec, ops, timeout_ms=2000, extra=""):
    """One guest command for many runs: each op under spec, with the hw
    counters read around the whole loop."""
    keys = "rcvd_rnr_err send_rnr_err retry_exceeded_err retry_rnr_exceeded_err"
    snap = "printf '%%s ' %s; for k in %s; do printf '%%s=%%s ' $k $(cat %s/$k 2>/dev/null || echo 0); done; echo" % (
        "{tag}", keys, HW)
    loop = "; ".join("echo '### %s'; %s -n 2 -t 60 env EMUNIC_FAULTS='%s' %s %s --timeout-ms %d %s 2>&1; echo \"### rc=$?\"" % (
        op, RUN, spec, TEST, op, timeout_ms, extra) for op in ops)
    rc, out = rxe.run("%s; %s; %s" % (snap.format(tag="BEFORE"), loop, snap.format(tag="AFTER")),
                      timeout=90 * len(ops))
    parts = {m[0]: m[1] + "rc=" + m[2] for m in re.findall(r"### (\S+)\n(.*?)### rc=(\d+)", out, re.S)}
    before, after = counters(out, "BEFORE"), counters(out, "AFTER")
    delta = {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in after}
    return out, parts, delta


@pytest.mark.parametrize("spec", sorted(FAULTS))
def test_fault_against_every_operation(rxe, spec):
    # Reconnection off: each failure ends where the table says, exactly
    # (test_engines_reconnect_and_resend shows the engines surviving them).
    out, parts, delta = run_matrix(rxe, spec, OPS, extra="--reconnects 0")
    want = FAULTS[spec]
    for op in OPS:
        body = parts.get(op, "")
        assert body.endswith("rc=0"), "%s under %s: the job failed:\n%s" % (op, spec, body or out)
        got = results(body)
        assert (0, LABEL[op]) in got, "%s under %s: no result from rank 0:\n%s" % (op, spec, body)
        res, ms = got[(0, LABEL[op])]
        if op in ("barrier", "allreduce") and res == "OK" and want[op] != "OK":
            # Done when the partner's signal (data) came, before its own
            # SEND's failure was seen (include/emunic/coll.h): the next one
            # must report it.
            assert (0, "next " + op) in got, body
            res, ms = got[(0, "next " + op)]
        assert res == want[op], "%s under %s: rank 0 saw %s, not %s:\n%s" % (op, spec, res, want[op], body)
        assert "timeout after" not in body, "%s under %s: a rank hung:\n%s" % (op, spec, body)
        if res in ("SUCCESS", "OK", "ETIMEDOUT"):
            continue
        # A failure comes well before the operation's own bound (2000 ms),
        # and a line names the rank, the peer, the QP number, the opcode and
        # the verbs status behind it.
        assert ms < 1500, "%s under %s: failed only after %d ms:\n%s" % (op, spec, ms, body)
        why = STATUS_STR[res if res in STATUS_STR else CAUSE[spec]]
        assert re.search(r"emunic: rank 0: peer 1 qp \d+: (SEND|WRITE|WRITE_IMM|READ|FETCH_ADD|RECV) "
                         r"\((wr_id \d+|arrival)\) failed: %s" % why, body), "%s under %s:\n%s" % (op, spec, body)
    if spec.startswith("rnr"):
        # Real RNR NAKs from rxe: rank 1 sent them, rank 0 ran out of retries.
        assert delta.get("send_rnr_err", 0) > 0 and delta.get("retry_rnr_exceeded_err", 0) > 0, (delta, out)
    if spec.startswith("retry"):
        assert delta.get("retry_exceeded_err", 0) > 0, (delta, out)
    if spec.startswith("wc"):
        # Synthetic: nothing failed on the wire.
        assert delta.get("retry_exceeded_err", 0) == 0 and delta.get("retry_rnr_exceeded_err", 0) == 0, delta
        for op in OPS:
            assert "injected: 1 wc" in parts[op], parts[op]


ENGINE_OPS = ["eager", "rtr", "chunked"]


@pytest.mark.parametrize("spec", ["retry:peer=1", "wc:status=REM_ACCESS_ERR,rank=0,op=1"])
def test_engines_reconnect_and_resend(rxe, spec):
    # The same faults with the engine's default reconnection: the core
    # makes the connection again, the message the failure caught goes again,
    # both sides complete with no error, once.
    out, parts, delta = run_matrix(rxe, spec, ENGINE_OPS, timeout_ms=8000)
    for op in ENGINE_OPS:
        body = parts.get(op, "")
        assert body.endswith("rc=0"), "%s under %s: the job failed:\n%s" % (op, spec, body or out)
        got = results(body)
        assert got[(0, "isend")][0] == "OK" and got[(1, "irecv")][0] == "OK", "%s under %s:\n%s" % (op, spec, body)
        assert re.search(r"rank 0: reconnections: [1-9]", body), "%s under %s:\n%s" % (op, spec, body)
        assert re.search(r"emunic: rank [01]: peer [01] qp \d+: connected again \(reconnection 1\)", body), body
        if spec.startswith("wc"):   # the failure is still said, with its status
            assert re.search(r"rank 0: peer 1 qp \d+: (WRITE_IMM \(wr_id \d+\)|RECV \(arrival\)) failed: "
                             r"remote access error", body) and "reconnecting (3 of 4 left)" in body, body


def test_reconnecting_into_a_fault_that_stays_gives_up(rxe):
    # rnr with no end: every connection made again meets it too; after 4 in a
    # row the failure is final, the requests fail with EIO, well within the
    # bound, and the line says why.
    out, parts, delta = run_matrix(rxe, "rnr:peer=1", ["eager"], timeout_ms=8000)
    body = parts["eager"]
    got = results(body)
    assert got[(0, "isend")][0] == "EIO" and got[(0, "isend")][1] < 6000, body
    assert got[(1, "irecv")][0] == "EIO", body
    assert "rank 0: reconnections: 4" in body, body
    assert "4 reconnection(s) in a row did not help: the failure is final" in body, body
    assert delta.get("retry_rnr_exceeded_err", 0) >= 5, (delta, out)


@pytest.mark.parametrize("proto", ["chunked", "rtr"])
def test_seeded_faults_every_message_exactly_once(rxe, proto):
    # The seeded p= mode on rxe: about one completion in 300 on both ranks
    # becomes RETRY_EXC_ERR, so connections fail again and again in the
    # middle of eager messages, chunked gets and RTR answers.  Every one of
    # the 1,000 messages (0 B .. 200 KB) arrives byte-exact, matched to its
    # receive by tag and order, and none is left over (no duplicate).
    out = run_ctest(rxe, "%s -n 2 -t 280 -f 'wc:status=RETRY_EXC_ERR,p=0.3%%,seed=7' %s/emunic-rndv sizes "
                    "--proto %s --count 100 --max 200000 --rounds 5 2>&1" % (RUN, BIN, proto), timeout=320)
    assert "emunic-rndv: sizes: PASS" in out, out
    injected = out.count("turned into transport retry counter exceeded")
    made = [int(n) for n in re.findall(r"rank \d: (\d+) reconnection\(s\), nothing left over", out)]
    assert injected >= 5 and len(made) == 2 and min(made) >= 3, (injected, made, out)


def test_synthetic_status_is_exact(rxe):
    # Three statuses, each on the first SEND completion of rank 0, in one
    # guest command: the status is the one asked for, the line says which.
    statuses = ["RNR_RETRY_EXC_ERR", "RETRY_EXC_ERR", "REM_OP_ERR"]
    rc, out = rxe.run("; ".join(
        "echo '### %s'; %s -n 2 -t 60 -f 'wc:status=%s,rank=0,opcode=send,op=1' %s send --timeout-ms 2000 2>&1"
        % (st, RUN, st, TEST) for st in statuses), timeout=240)
    for st in statuses:
        body = out.split("### %s\n" % st)[1].split("### ")[0]
        assert results(body)[(0, "SEND")][0] == st, body
        assert "SEND completion #1 of the rule turned into %s" % STATUS_STR[st] in body, body


def test_rnr_hold_with_retries_forever_only_delays(rxe):
    # rnr_retry 7 and a 300 ms hold: the sender waits out the NAKs, no error.
    out, parts, delta = run_matrix(rxe, "rnr:peer=1,retries=7,hold=300ms", ["send", "eager"])
    assert results(parts["send"])[(0, "SEND")][0] == "SUCCESS", parts["send"]
    assert results(parts["send"])[(1, "RECV")][0] == "SUCCESS", parts["send"]
    assert results(parts["eager"])[(1, "irecv")][0] == "OK", parts["eager"]
    assert delta.get("send_rnr_err", 0) > 0 and delta.get("retry_rnr_exceeded_err", 0) == 0, (delta, out)


def test_barrier_with_a_dead_rank_fails_on_every_survivor(rxe):
    rc, out = rxe.run("%s -n 4 -t 60 %s barrier-dead --timeout-ms 4000" % (RUN, TEST), timeout=120)
    got = results(out)
    assert "rank 3: exits now" in out, out
    for r in range(3):
        assert (r, "barrier") in got, "rank %d reported nothing:\n%s" % (r, out)
    # Ranks 2 and 1 meet rank 3 in rounds 1 and 2 of the recursive doubling:
    # its exit disconnects their QPs, so they fail at once with EIO.  Rank 0
    # only meets 1 and 2, who do not signal past their failed round; it used
    # to fail at its timeout, but 1 and 2 now disconnect from it after their
    # failure (engines/coll/common.c, coll_leave_if_failed): EIO, well before
    # its 4000 ms bound.
    for r in (0, 1, 2):
        res, ms = got[(r, "barrier")]
        assert res == "EIO" and ms < 3000, "rank %d: %s after %d ms:\n%s" % (r, res, ms, out)
    assert "timeout after" not in out and "not complete after" not in out, out


def test_a_fault_on_one_pair_leaves_the_others_alone(rxe):
    # Only rank 1's QP from rank 0 goes away: rank 0's send to 1 ends in
    # RETRY_EXC_ERR, the one to 2 (same CQ, same core) is delivered.
    out = run_ctest(rxe, "%s -n 3 -t 60 -f 'retry:peer=1,from=0' %s others --timeout-ms 3000" % (RUN, TEST),
                    timeout=120)
    got = results(out)
    assert got[(0, "SEND to 1")][0] == "RETRY_EXC_ERR", out
    assert got[(0, "SEND to 2")][0] == "SUCCESS", out
    assert got[(2, "RECV")][0] == "SUCCESS", out
