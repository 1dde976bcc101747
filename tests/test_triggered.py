"""Triggered-operation conformance on rxe: one check of emunic-trigtest per
rule of DESIGN.md ("Triggered operations"), each run by two ranks through the
progress core; a couple again with ASan/UBSan and under valgrind."""
import pytest

from conftest import BIN, MEMCHECK, SANBIN, host, run_ctest

RUN = BIN + "/emunic-run"

CHECKS = {
    "threshold": "a trigger at 5 does not fire at 4 increments and fires exactly once at the 5th",
    "already_met": "a threshold already met (equal, below, or by success + failure) fires at once",
    "chain": "a 100-op chain, each op triggered by the last one's counter, runs in order while the app computes",
    "order": "triggers on one counter fire in threshold order, ties in posting order",
    "enospc": "a full trigger table gives -ENOSPC at once, the core runs on, and entries come back",
    "target_count": "puts and gets are counted and reported (PUT/GET events, header) at the target",
    "get_overtaken": "a get's counter says done only once its data is there, even where a put behind it "
                     "completes first (siw); an uncounted get is done once a counted put behind it is",
    "failure": "a failed event counts failure, waits return on it, and triggers on it still fire",
    "threshold64": "thresholds above 2^32 are neither truncated nor fired early",
    "free_pending": "freeing a counter wakes its waiter (-ECANCELED) and fails its pending triggers",
    "invalid": "NULL/freed counters and bad ops are -EINVAL, post nothing and change no counter",
    "trace": "the trace has FIRE, ISSUE, DONE for each op, in time order",
    "disconnect_reconnecting": "emunic_qp_disconnect while the connection is being made again does not cut the "
                               "attempt short (the peer holds the request 4 s): it comes up, the put the "
                               "failure caught settles as arrived, once, then the QP ends for good and the "
                               "peer's QP loses the connection",
    "spin_no_fire": "200 arrivals about 150 us apart that fire no trigger (one armed) leave a progress core that "
                    "shares the CPUs at its least spin: it adapts only on gaps that end in a fired trigger "
                    "(EMUNIC_SPIN_MAX_US=20000, so that any gap would do)",
    "spin_fire": "the same arrivals, each firing a trigger, let a progress core that shares the CPUs adapt its "
                 "spin (skipped where the core has a CPU of its own)",
    "progress": "emunic_dev_progress(NULL) is -EINVAL; an application thread calling it in a loop runs an "
                "entry's handler itself for some of 20 puts 2 ms apart (all 20 are handled, the data intact), "
                "and a call from inside the handler runs nothing (0)",
}


def trigtest(rxe, check, prog=BIN + "/emunic-trigtest", wrap="", timeout=60, what=None):
    """Runs CHECK (one or more, space-separated) on two ranks; its output, once it passed."""
    return run_ctest(rxe, "%s -n 2 -t %d %s %s %s" % (RUN, timeout, wrap, prog, check), timeout=timeout + 30,
                     what=what)


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_trig_rule(rxe, check):
    out = trigtest(rxe, check, what=CHECKS[check])
    assert "emunic-trigtest: %s: PASS" % check in out, out


def test_failure_names_the_error(rxe):
    out = trigtest(rxe, "failure")
    assert "rank 0: peer 1 qp" in out and "READ (wr_id 7) failed: remote access error" in out, out


def test_invalid_ops_say_why(rxe):
    out = trigtest(rxe, "invalid")
    for why in ("unknown operation kind", "its QP was not created EMUNIC_QP_TRIGGERED",
                "its QP is not a live QP of this device", "offset + length runs past the end of the target",
                "its completion counter is not a live counter of this device",
                "the counter it changes is not a live counter of this device", "nothing was posted"):
        assert why in out, why


@pytest.mark.parametrize("check", ["chain", "free_pending"])
def test_sanitized_build_is_clean(rxe, check):
    out = trigtest(rxe, check, prog=SANBIN + "/emunic-trigtest", timeout=120)
    assert "emunic-trigtest: %s: PASS" % check in out, out
    assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out, out


def test_memcheck_is_clean(rxe):
    """Two checks in one run under memcheck (each on a device of its own,
    opened and closed): one valgrind start-up, which dominates under TCG."""
    # rdma-core's device list and provider (rdma_get_devices, dlopen) stay
    # "possibly lost" at exit: only definite leaks are errors.
    out = trigtest(rxe, "threshold free_pending", wrap=MEMCHECK, timeout=300)
    for check in ("threshold", "free_pending"):
        assert "emunic-trigtest: %s: PASS" % check in out, out
    assert "definitely lost" not in out and "Invalid read" not in out and "Invalid write" not in out, out


def test_help_lists_every_check():
    """Arguments are checked before bootstrap: no RDMA, no guest needed."""
    out = run_ctest(None, BIN + "/emunic-trigtest --help")
    assert out.startswith("usage: emunic-run -n 2 emunic-trigtest CHECK"), out
    for check in CHECKS:
        assert check in out, out


@pytest.mark.parametrize("args", ["", "nosuch", "threshold nosuch"])
def test_bad_arguments_print_usage(args):
    rc, out = host(BIN + "/emunic-trigtest " + args)
    assert rc == 2, out
    assert "usage: emunic-run -n 2 emunic-trigtest" in out, out
    assert "PASS" not in out, out
    if args == "nosuch":
        assert "unknown check 'nosuch'" in out, out
