"""The conformance suites on siw (soft-iWARP), the guest's second device
(guest-images/agent.sh: siw0 on its own dummy netdev, siwnet0), in the same
guest as the rxe suites: no boot of its own.  Every MQ and triggered check
runs with EMUNIC_DEVICE=siw0.  What siw lacks is either substituted or
refused: immediate data, which triggered ops tell their target in, goes as
a SEND after the write (emunic/nic/imm_send.c), so the triggered checks
that count at the target run here too; atomics and RNR cannot be made up,
so a check that needs them skips with the reason the program names (exit
77), and the emulation refuses them at post (-EOPNOTSUPP: trigtest's
`unsupported` check), as it does an MQ's FETCH_ADD and WRITE_IMM (mqtest's
`unsupported`)."""
import os
import re

import pytest

from conftest import BIN, ROOT, run_ctest
from test_mq import CHECKS as MQ_CHECKS
from test_triggered import CHECKS as TRIG_CHECKS

SIW = {"EMUNIC_DEVICE": "siw0"}


@pytest.fixture(scope="module")
def siw(rxe):
    rc, out = rxe.run("cat /sys/class/infiniband/siw0/ports/1/state", timeout=30)
    built = os.path.exists(os.path.join(ROOT, "build", "guest", "siw", "siw.ko"))
    if rc != 0 and rxe.where == "guest" and built:
        pytest.fail("the guest image has siw.ko but the guest has no siw0 (guest-images/agent.sh): " + out)
    if rc != 0:
        pytest.skip("no siw0 where the suite runs (%s): %s" % (
            rxe.where, "the guest image was built without siw.ko (guest-images/build.sh said why)"
            if rxe.where == "guest" else "the guest makes it, a host need not"))
    assert "ACTIVE" in out, "siw0 is not ACTIVE: " + out
    return rxe


def test_siw0_is_up_on_its_own_netdev(siw):
    rc, out = siw.run("rdma link show siw0/1; %s/emunic-info" % BIN, timeout=60)
    assert rc == 0, out
    assert "state ACTIVE" in out and "netdev siwnet0" in out, out
    siw_part = out[out.index("hca_id: siw0"):]
    assert "siw (soft-iWARP)" in siw_part and "can start" in siw_part, out
    assert "IPv4 10.99.0.1 from its netdev" in siw_part, out
    # From the capabilities the device interface read, not from the driver's name.
    assert re.search(r"capabilities none$", siw_part, re.M), out
    assert re.search(r"device lacks:\s+atomics, immediate data, RNR", siw_part), out


def test_rxe0_stays_the_default(siw):
    """With siw0 beside it, an unnamed device is still rxe0 (iWARP last)."""
    out = run_ctest(siw, "EMUNIC_DEBUG=1 %s/emunic-run -n 1 -t 60 %s/emunic-barrier --impl mq --rounds 2"
                    % (BIN, BIN), timeout=90)
    assert "device rxe0: progress core started" in out, out


@pytest.mark.parametrize("check", sorted(MQ_CHECKS) + ["unsupported"])
def test_mq_rule_on_siw(siw, check):
    """mqtest `invalid` ends by opening a second emunic device in the same
    process: it runs because of emunic's siw mmap-key guard (emunic/iwarp.c),
    as do the triggered checks' second QPs.  `unsupported`: a list with a
    FETCH_ADD or a WRITE_IMM is refused whole, named, and nothing of it runs."""
    out = run_ctest(siw, "%s/emunic-run -n 2 -t 60 %s/emunic-mqtest %s" % (BIN, BIN, check), timeout=90,
                    env=SIW, what=MQ_CHECKS.get(check, "refused, not run") + " (siw0)")
    assert "emunic-mqtest: %s: PASS" % check in out, out
    if check == "unsupported":
        for op in ("FETCH_ADD", "WRITE_IMM"):
            assert re.search(r"emunic: rank 0: mq 0x[0-9a-f]+: task 1 of the list \(%s, wr_id 1\): device siw0: "
                             r".+; nothing was posted" % op, out), out


def test_mq_unsupported_is_skipped_on_rxe(siw):
    """rxe has atomics and immediate data: nothing to refuse, said so."""
    rc, out = siw.run("%s/emunic-run -n 2 -t 60 %s/emunic-mqtest unsupported" % (BIN, BIN), timeout=90)
    assert rc == 77 and "SKIP: unsupported on rxe0: it has atomics and immediate data, nothing to refuse" in out, out


@pytest.mark.parametrize("check", sorted(TRIG_CHECKS) + ["unsupported"])
def test_trig_rule_on_siw(siw, check):
    out = run_ctest(siw, "%s/emunic-run -n 2 -t 60 %s/emunic-trigtest %s" % (BIN, BIN, check), timeout=90,
                    env=SIW, what=TRIG_CHECKS.get(check, "refused, not run") + " (siw0)")
    assert "emunic-trigtest: %s: PASS" % check in out, out


def test_unsupported_is_skipped_on_rxe(siw):
    """rxe has atomics: nothing to refuse, said so."""
    rc, out = siw.run("%s/emunic-run -n 2 -t 60 %s/emunic-trigtest unsupported" % (BIN, BIN), timeout=90)
    assert rc == 77 and "SKIP: unsupported on rxe0: it has atomics, nothing to refuse" in out, out


def test_token_handover_on_siw(siw):
    out = run_ctest(siw, "%s/emunic-run -n 1 -t 150 %s/emunic-tokenstress 2000" % (BIN, BIN), timeout=180,
                    env=SIW)
    assert "emunic-tokenstress: PASS: 2 threads x 2000 rounds" in out, out
