"""MPI matching layer of the rendezvous engines (engines/rndv/match.c): each
check of emunic-matchtest on the host (no RDMA), in the normal build, the
ASan/UBSan build and under valgrind."""
import pytest

from conftest import BIN, SANBIN, host, run_ctest

CHECKS = {
    "table1": "seed 004 Table 1: each receive ordering, expected, unexpected and interleaved",
    "any_source": "ANY_SOURCE takes the earliest arrival; a specific source skips the others",
    "nonovertaking": "messages from one source match in send order, however they arrive",
    "ctx": "different contexts never match",
    "order": "an early message is held until the gap fills; a duplicate is -EALREADY and changes nothing",
    "cancel": "cancel removes only a posted, unmatched receive",
    "probe": "probe finds the first match and removes nothing",
    "invalid": "bad arguments are -EINVAL and leave the queues unchanged",
    "model": "20000 random operations agree with a brute-force reference",
}

WAYS = {
    "plain": BIN + "/emunic-matchtest",
    "san": SANBIN + "/emunic-matchtest",
    "valgrind": "valgrind --error-exitcode=99 --leak-check=full -q " + BIN + "/emunic-matchtest",
}


@pytest.mark.parametrize("way", sorted(WAYS))
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_match_rule(check, way):
    out = run_ctest(None, "%s %s" % (WAYS[way], check), timeout=120, what="%s (%s)" % (CHECKS[check], way))
    assert "emunic-matchtest: %s: PASS" % check in out, out


def test_all_runs_every_check():
    out = run_ctest(None, BIN + "/emunic-matchtest all")
    for check in CHECKS:
        assert "emunic-matchtest: %s: PASS" % check in out, out


def test_help_lists_every_check():
    out = run_ctest(None, BIN + "/emunic-matchtest --help")
    assert out.startswith("usage: emunic-matchtest"), out
    for check in CHECKS:
        assert check in out, out


@pytest.mark.parametrize("args", ["", "nosuch", "table1 nosuch"])
def test_bad_arguments_print_usage(args):
    rc, out = host(BIN + "/emunic-matchtest " + args)
    assert rc == 2, out
    assert "usage: emunic-matchtest" in out, out
    assert "PASS" not in out, out
    if "nosuch" in args:
        assert "unknown check 'nosuch'" in out, out
