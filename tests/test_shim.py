"""shim/: the device interface's ops table without a device (issue 20 part
1): the not-supported defaults, set_ops, the two backends' entries, the
capabilities from a device's answer and EMUNIC_BACKEND's errors (host, also
under ASan/UBSan).  The forced mlx5 on rxe is tests/test_mlx5.py's; every
other suite runs the emulated backend."""
import pytest

from conftest import BIN, SANBIN, run_ctest


@pytest.mark.parametrize("bindir", [BIN, SANBIN], ids=["plain", "san"])
def test_ops_table_on_the_host(bindir):
    out = run_ctest(None, "%s/emunic-shimtest" % bindir, timeout=60, what="the shim's ops table")
    assert "emunic-shimtest: PASS (defaults, set_ops, backends, capabilities)" in out, out
