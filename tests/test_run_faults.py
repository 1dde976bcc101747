"""emunic-run's fault options: the spec check (--faults, $EMUNIC_FAULTS), netem
for a loss rule, hardware counters (--counters) and --keep-going."""
import re

import pytest

from conftest import BIN, host, run_ctest

RUN = BIN + "/emunic-run"
BT = BIN + "/emunic-boottest"
DP = BIN + "/emunic-datapath"
FT = BIN + "/emunic-faulttest"

# Ranks that bootstrap (two exchanges, then FINALIZE) like a real program,
# then rank 1 fails; the others carry on for two seconds and say so.
FAIL_AFTER_BOOT = ("sh -c '%s --rounds 2 >/dev/null || exit; if [ $EMUNIC_RANK = 1 ]; then %s; fi; "
                   "sleep 2; echo rank $EMUNIC_RANK done'")


def caret_under(out, token):
    """The parser's three lines: message, the spec, a caret under token."""
    lines = out.rstrip("\n").splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("emunic-run: bad fault spec: "))
    spec, caret = lines[i + 1], lines[i + 2]
    assert caret.index("^") == spec.index(token), out
    return lines[i:]


# ---- the spec check: before anything, even on a machine with no RDMA ----------

def test_bad_spec_from_option_is_bad_usage():
    rc, out = host("%s -n 2 --faults 'rnr:peer=1,aftr=3' true" % RUN)
    assert rc == 2, out
    assert "emunic-run: bad fault spec: unknown key 'aftr' for a rnr rule" in out, out
    assert len(caret_under(out, "aftr")) == 3, out
    assert "RDMA device" not in out, out        # checked before the device


def test_bad_spec_from_environment_is_bad_usage():
    rc, out = host("EMUNIC_FAULTS='wc:status=BOGUS' %s -n 2 true" % RUN)
    assert rc == 2, out
    assert "bad value 'BOGUS' for status" in out, out
    caret_under(out, "BOGUS")
    assert "$EMUNIC_FAULTS, from the environment" in out, out


def test_option_overrides_environment_and_verbose_shows_canonical_form():
    rc, out = host("EMUNIC_FAULTS='wc:status=BOGUS' %s -v -n 2 -f 'rnr:peer=1,retries=7,hold=2ms' true" % RUN)
    assert rc in (0, 1), out        # 1: no RDMA device on this machine
    assert "emunic-run: fault injection: rnr:peer=1,after=0,retries=7,hold=2ms" in out, out


def test_help_documents_the_fault_options():
    rc, out = host("%s --help" % RUN)
    assert rc == 0
    for word in ("-f, --faults SPEC", "-c, --counters", "-k, --keep-going", "EMUNIC_FAULTS", "netem", "--nodes"):
        assert word in out, word


def test_ranks_get_the_spec(rxe):
    rc, out = rxe.run("%s -n 2 -f 'rnr:peer=1' sh -c 'echo F=$EMUNIC_FAULTS'" % RUN)
    assert rc == 0, out
    assert out.count("F=rnr:peer=1") == 2, out


# ---- --keep-going ---------------------------------------------------------------

def test_keep_going_lets_the_others_finish(rxe):
    rc, out = rxe.run("%s -k -n 3 -t 60 %s" % (RUN, FAIL_AFTER_BOOT % (BT, "exit 7")), timeout=90)
    assert rc == 7, out
    m = re.search(r"rank 1 \(pid \d+\) exited with status 7 after [\d.]+ s; keeping the others \(--keep-going\)",
                  out)
    assert m, out
    for r in (0, 2):                    # not killed: they ended on their own, after it
        assert out.index("rank %d done" % r) > m.start(), out
    assert "killing the other ranks" not in out, out
    assert "exiting with status 7, the first failure's: rank 1" in out, out


def test_keep_going_rank_killed_by_signal(rxe):
    rc, out = rxe.run("%s -k -n 3 -t 60 %s" % (RUN, FAIL_AFTER_BOOT % (BT, "kill -9 $$")), timeout=90)
    assert rc == 128 + 9, out
    assert "rank 1 (pid" in out and "was killed by signal 9" in out and "keeping the others" in out, out
    assert "rank 0 done" in out and "rank 2 done" in out, out


def test_keep_going_first_failure_sets_the_status(rxe):
    rc, out = rxe.run("%s -k -n 3 -t 60 sh -c 'case $EMUNIC_RANK in 1) exit 4;; 2) sleep 2; exit 9;; esac; "
                      "sleep 3; echo rank 0 done'" % RUN, timeout=90)
    assert rc == 4, out
    assert "exited with status 4" in out and "exited with status 9" in out and "rank 0 done" in out, out


def test_keep_going_still_fails_an_exchange_that_cannot_complete(rxe):
    """Rank 1 leaves before the second exchange: the others would wait forever."""
    rc, out = rxe.run("%s -k -n 3 -t 60 %s --fail-rank 1 --exit 7" % (RUN, BT), timeout=90)
    assert rc == 7, out
    assert "keeping the others (--keep-going)" in out, out
    assert "bootstrap: rank 1 left" in out and "killing the other ranks" in out, out
    assert "exchanges ok" not in out, out


def test_keep_going_timeout_still_kills(rxe):
    rc, out = rxe.run("%s -k -n 3 -t 3 sh -c '[ $EMUNIC_RANK = 1 ] && exit 4; sleep 60'" % RUN, timeout=60)
    assert rc == 124, out
    assert "keeping the others" in out and "timeout after 3 s; ranks still running: 0 2" in out, out


# ---- --counters -------------------------------------------------------------------

COUNTERS = re.compile(r"emunic-run: hw counters of (\S+) \(port 1\), change over the job: (.*)")


def test_counters_show_the_traffic(rxe):
    out = run_ctest(rxe, "%s -c -n 2 -t 60 %s --size 4K --iters 1" % (RUN, DP), timeout=90)
    m = COUNTERS.search(out)
    assert m and m.group(2) != "no change", out
    assert re.search(r"\w+ \+\d+", m.group(2)), out
    if m.group(1).startswith("rxe"):
        assert re.search(r"\bsent_pkts \+\d+", m.group(2)), out


def test_counters_show_an_rnr_fault(rxe):
    """--faults reaches the ranks; the RNR NAKs it causes show in the counters."""
    out = run_ctest(rxe, "%s -c -n 2 -t 60 -f 'rnr:peer=1' %s send" % (RUN, FT), timeout=90)
    assert "faulttest: rank 0: SEND: RNR_RETRY_EXC_ERR" in out, out
    m = COUNTERS.search(out)
    assert m, out
    if m.group(1).startswith("rxe"):
        assert re.search(r"\bretry_rnr_exceeded_err \+1\b", m.group(2)), out


def test_counters_after_a_failed_job(rxe):
    rc, out = rxe.run("%s -c -n 2 -t 60 sh -c '[ $EMUNIC_RANK = 1 ] && exit 5; sleep 60'" % RUN, timeout=90)
    assert rc == 5, out
    assert "killing the other ranks" in out and COUNTERS.search(out), out


# ---- loss: netem on the device's interface, for the job only ---------------------

_netem_ok = {}


def netem_ok(rxe):
    if rxe not in _netem_ok:
        _netem_ok[rxe] = rxe.run("[ $(id -u) = 0 ] && command -v tc", timeout=30)[0] == 0
    if not _netem_ok[rxe]:
        pytest.skip("needs root and tc where RDMA is")


def test_loss_sets_netem_for_the_job_and_removes_it(rxe):
    netem_ok(rxe)
    # The rank looks at the qdiscs while the job runs; the shell looks after.
    rc, out = rxe.run("%s -v -n 1 -t 60 -f 'loss:p=1%%,delay=1ms' "
                      "sh -c 'echo DURING $(tc qdisc show | grep netem)'; "
                      "rc=$?; echo AFTER $(tc qdisc show | grep -c netem); exit $rc" % RUN, timeout=90)
    assert rc == 0, out
    m = re.search(r"emunic-run: netem on (\S+): loss 1% delay 1000us", out)
    assert m, out
    during = re.search(r"DURING (.*)", out).group(1)
    assert "netem" in during and "loss 1%" in during and "delay 1ms" in during, out
    assert "netem on %s removed" % m.group(1) in out, out
    assert "AFTER 0" in out, out


@pytest.mark.parametrize("how,code", [("-n 1 -t 2 sleep 60", 124),
                                      ("-n 2 sh -c '[ $EMUNIC_RANK = 1 ] && exit 3; sleep 60'", 3)])
def test_loss_netem_removed_when_the_job_fails(rxe, how, code):
    netem_ok(rxe)
    rc, out = rxe.run("%s -f 'loss:p=5%%' %s; rc=$?; echo AFTER $(tc qdisc show | grep -c netem); exit $rc"
                      % (RUN, how), timeout=90)
    assert rc == code, out
    assert "emunic-run: netem on" in out and "AFTER 0" in out, out


def test_loss_when_tc_fails(rxe):
    """tc refusing (not root, no sch_netem): exit 1, naming the interface and tc's error; no rank runs."""
    rc, out = rxe.run("d=$(mktemp -d) && printf '#!/bin/sh\\necho \"RTNETLINK answers: Operation not permitted\" "
                      ">&2\\nexit 2\\n' > $d/tc && chmod +x $d/tc && PATH=$d:$PATH %s -n 1 -f 'loss:p=1%%' "
                      "sh -c 'echo RANK RAN'; rc=$?; rm -r $d; exit $rc" % RUN, timeout=60)
    assert rc == 1, out
    assert re.search(r"cannot set up netem on \S+ \(device \S+\) for the loss rule: "
                     r"'tc qdisc replace dev \S+ root netem loss 1%' failed: "
                     r"RTNETLINK answers: Operation not permitted", out), out
    assert "RANK RAN" not in out, out


# ---- across two guests (the loss soak is in test_two_guests.py) ----------------

def run_on_pair(pair, cmd, timeout=120):
    jobs = [g.submit(cmd.format(node=i, server=pair.IPS[0]), timeout=timeout) for i, g in enumerate(pair.guests)]
    return [g.wait(job) for g, job in zip(pair.guests, jobs)]


def test_keep_going_across_guests(guest_pair):
    """Rank 3 (node 1) fails after the bootstrap: node 1 goes on, node 0 ends with its status."""
    (rca, outa), (rcb, outb) = run_on_pair(
        guest_pair, "%s -k -n 4 --nodes 2 --node {node} --server {server}:7732 -t 60 %s"
        % (RUN, FAIL_AFTER_BOOT.replace("EMUNIC_RANK = 1", "EMUNIC_RANK = 3") % (BT, "exit 6")))
    assert rcb == 6 and "rank 3 (pid" in outb and "keeping the others" in outb and "rank 2 done" in outb, outb
    assert rca == 6, outa
    assert "rank 0 done" in outa and "rank 1 done" in outa, outa
    assert re.search(r"node 1: rank 3 \(pid \d+\) exited with status 6 .*\(--keep-going\)", outa), outa
