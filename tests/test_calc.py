"""The CALC task (emunic/mq.h): the emulated NIC reduces as it sends.  Every
op x type MPI defines, and every one ConnectX's calc had on its 16-byte
big-endian slots, is checked against a reference written apart from the
library's kernels, on the host and through the progress core on rxe; every
other pair is -EINVAL at post time; a CALC reads its operands only when it
runs."""
import subprocess

import pytest

from conftest import BIN, SANBIN, run_ctest


@pytest.mark.parametrize("bindir", [BIN, SANBIN])
def test_calc_reference_on_the_host(bindir):
    """Pure logic: every pair, out of place, in place and misaligned, no
    device; also under ASan/UBSan."""
    p = subprocess.run(["%s/emunic-calctest" % bindir, "reference"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 0 and "emunic-calctest: reference: PASS" in out, out


CHECKS = {
    "all": "every valid op x type, sent by the NIC to the peer and kept local, equals the reference",
    "invalid": "every other pair, a partial element, a missing operand: -EINVAL, nothing posted, MQ usable",
    "order": "a CALC reads its operands when it runs (after its WAIT and SEND_EN), not when posted, "
             "and a local CALC after that SEND_EN sees its result",
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_calc_on_rxe(rxe, check):
    out = run_ctest(rxe, "%s/emunic-run -n 2 -t 120 %s/emunic-calctest %s" % (BIN, BIN, check), timeout=180,
                    what=CHECKS[check])
    assert "emunic-calctest: %s: PASS" % check in out, out
    if check == "all":
        assert "111 op x type pairs checked, sent and local" in out, out
    if check == "invalid":
        assert "invalid op x type pairs rejected" in out and "is not defined on" in out, out
        assert "is not a whole number of INT32 elements (4 bytes)" in out, out


def test_calc_kernels_clean_under_asan_ubsan_and_memcheck(rxe):
    """Signed overflow, wide products and pair structs: no undefined behaviour
    (UBSan), no stray access (ASan) in the engine's kernels; memcheck on the
    host reference."""
    out = run_ctest(rxe, "%s/emunic-run -n 2 -t 200 %s/emunic-calctest all" % (BIN, SANBIN), timeout=260)
    assert "emunic-calctest: all: PASS" in out, out
    p = subprocess.run(["valgrind", "-q", "--error-exitcode=9", "%s/emunic-calctest" % BIN, "reference"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    out = p.stdout.decode()
    assert p.returncode == 0 and "reference: PASS" in out, out
