"""Point 5 of the foundation: real data movement over rxe, every byte checked."""
import pytest

from conftest import BIN, MEMCHECK, SANBIN, run_ctest

RUN = BIN + "/emunic-run"
DP = BIN + "/emunic-datapath"
OPS = ["write", "write_imm", "send", "read", "fetch_add"]


@pytest.mark.parametrize("n", [2, 4])
def test_transfers_verified(rxe, n):
    out = run_ctest(rxe, "%s -n %d -t 120 %s --size 256K --iters 3" % (RUN, n, DP), timeout=180)
    assert "%d ranks on" % n in out
    assert "verified (0 mismatches)" in out


@pytest.mark.parametrize("size", ["1", "4095", "1M"])
def test_odd_and_large_sizes(rxe, size):
    out = run_ctest(rxe, "%s -n 2 -t 120 %s --size %s --iters 2" % (RUN, DP, size), timeout=180)
    assert "verified (0 mismatches)" in out


@pytest.mark.parametrize("op", OPS)
def test_corruption_is_detected(rxe, op):
    """A spoiled byte (or addend) must fail verification: the check can fail."""
    rc, out = rxe.run("%s -n 2 -t 120 %s --size 4K --iters 1 --corrupt %s" % (RUN, DP, op), timeout=180)
    assert rc == 1, out
    assert "FAILED verification" in out
    # The report names the operation and the peer whose data was wrong.
    assert ("fetch_add at peer" in out or "fetch_add: counter" in out) if op == "fetch_add" \
        else (op + " from peer") in out, out


def test_sanitized_build_is_clean(rxe):
    out = run_ctest(rxe, "%s -n 4 -t 120 %s/emunic-datapath --size 64K --iters 2" % (RUN, SANBIN), timeout=240)
    assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out


def test_memcheck_is_clean(rxe):
    out = run_ctest(rxe, "%s -n 2 -t 300 %s %s --size 4K --iters 1" % (RUN, MEMCHECK, DP), timeout=360)
    assert "verified (0 mismatches)" in out
