"""The chunked receiver-driven rendezvous (engines/rndv) on rxe: seed 004
Table 1 matching, byte-exact transfers of random sizes, transfers that land
with no test call, the credit bound checked from the progress core's trace,
truncation and bad arguments."""
import pytest

from conftest import BIN, MEMCHECK, SANBIN, run_ctest

RUN = "%s/emunic-run -n %d -t %d %s/emunic-rndv %s"

CHECKS = {
    "table1": "the seven orderings of seed 004 Table 1 match as MPI requires, expected and unexpected",
    "edges": "sizes at the first-chunk and chunk boundaries arrive byte-exact",
    "notest": "an 8 MiB message lands while the receiver only computes; the first test says done",
    "credits": "never more than c gets in flight, read from the trace",
    "truncate": "a message larger than the buffer: -EMSGSIZE, prefix only, sender completes",
    "bad": "bad rank or tag is -EINVAL on that request only",
    "inhandler": "emunic_wait from an event handler: -EDEADLK at once, not a wait nothing can end",
}


def test_inhandler_started_rtr(rxe):
    """The same on a receive whose RTR went (started: it waits on its own
    counter), which then completes."""
    out = run(rxe, "inhandler", args="--proto rtr")
    assert "(started): emunic_wait from an event handler: -EDEADLK" in out, out


def run(rxe, check, n=2, args="", timeout=240, binpath=BIN, wrap=""):
    cmd = RUN % (BIN, n, timeout - 20, wrap + binpath, check) + " " + args
    out = run_ctest(rxe, cmd, timeout=timeout)
    assert "emunic-rndv: %s: PASS" % check in out, out
    return out


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_rndv(rxe, check):
    run(rxe, check)


@pytest.mark.parametrize("c,s", [(2, 32768), (3, 4096)])
def test_credits_is_the_bound(rxe, c, s):
    """4 KiB chunks make 1500 gets: more than the trigger window, so later
    gets are posted by the progress core as earlier ones complete."""
    out = run(rxe, "credits", args="--credits %d --chunk %d" % (c, s))
    assert "at most %d in flight (c = %d)" % (c, c) in out, out


@pytest.mark.parametrize("n,args", [
    (2, "--count 12 --seed 7"),
    (4, "--count 4 --max 4194304 --seed 11"),
    (3, "--count 6 --chunk 0 --credits 1 --seed 5"),            # one get per message
    (2, "--count 40 --slots 2 --first 512 --max 65536 --seed 3"),  # slots recycle by credits
])
def test_random_sizes(rxe, n, args):
    """Random sizes 0..16 MiB between every pair, every byte checked."""
    run(rxe, "sizes", n=n, args=args, timeout=400)


def test_table1_sanitizers(rxe):
    run(rxe, "table1", binpath=SANBIN, timeout=400)


def test_memcheck(rxe):
    run(rxe, "edges", args="--chunk 16384", timeout=600,
        wrap=MEMCHECK + " ")


@pytest.mark.parametrize("args", ["--proto chunked", "--proto rtr", "--proto rtr --progress test"],
                         ids=["chunked", "rtr", "rtr-test"])
@pytest.mark.parametrize("assist", ["", "env EMUNIC_ASSIST_US=0 "], ids=["assist", "sleep"])
def test_wait_sleeps_until_moved(rxe, args, assist):
    """emunic_wait on a request its peer answers 300 ms later (an eager
    receive, a rendezvous receive, a rendezvous send: under RTR one still
    waiting for its RTR) neither polls (a 200 us nap loop slept ~740 times
    there) nor waits for its own recheck: with --recheck-ms 600000 only the
    endpoint's wake-up (rndv_wake_posted) can end the sleep before the 20 s
    timeout.  Then two threads wait at once and must not wake each other
    (each at most 20 sleeps; 52-55 when every test's flush woke them).
    EMUNIC_ASSIST_US=0 makes the waiter sleep at once; by default it runs
    the engine itself first, here (2 ranks, 2 vCPUs) until done, so the
    sleep bounds bind in the "sleep" runs."""
    out = run(rxe, "sleep", args=args + " --recheck-ms 600000", wrap=assist)
    assert out.count("done in") == 5, out
