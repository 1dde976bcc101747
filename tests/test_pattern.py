"""The data pattern (tests/bin/pattern.h) that every gather, allgather,
all-to-all and bcast check fills and compares with, a word at a time: on the
host (no RDMA), in the normal build and the ASan/UBSan build, which also
catches a read outside the buffer."""
import pytest

from conftest import BIN, SANBIN, run_ctest


@pytest.mark.parametrize("bindir", [BIN, SANBIN], ids=["plain", "san"])
def test_the_data_pattern_is_its_definition(bindir):
    """The same bytes as its byte definition from every alignment and
    length; a wrong byte is found exactly where it is; an empty range (from
    past to) reads nothing and finds nothing."""
    out = run_ctest(None, "%s/emunic-patterntest" % bindir)
    assert "emunic-patterntest: PASS" in out, out
