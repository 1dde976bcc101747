"""The point-to-point engine's eager protocol, receiver-initiated (RTR)
rendezvous with seed 000's progress variants, and connections made on demand
(seed 002), on rxe.  The checks live in tests/bin/emunic-rndv.c; every
payload is checked byte by byte."""
import pytest

from conftest import BIN, MEMCHECK, SANBIN, run_ctest

RUN = "%s/emunic-run -n %d -t %d %s/emunic-rndv %s"


def run(rxe, check, n=2, args="", timeout=240, binpath=BIN, wrap="", env=""):
    cmd = env + RUN % (BIN, n, timeout - 20, wrap + binpath, check) + " " + args
    out = run_ctest(rxe, cmd, timeout=timeout)
    assert "emunic-rndv: %s: PASS" % check in out, out
    return out


VARIANTS = ["core", "test", "test-on-init", "wait-on-send"]


@pytest.mark.parametrize("progress", VARIANTS)
def test_rtr_edges(rxe, progress):
    """Sizes around the eager limit (0, 1, limit-1, limit, limit+1, ...,
    16 MiB) through eager and the RTR rendezvous, ANY_TAG mixed in, under each
    of seed 000's progress variants."""
    run(rxe, "edges", args="--proto rtr --progress %s" % progress, timeout=300)


@pytest.mark.parametrize("args", [
    "--proto rtr --count 6 --max 2000000",
    "--proto rtr --progress test --count 4 --max 1000000 --slots 4 --first 512",
    "--on-demand --count 4 --max 1000000",
    "--on-demand --proto rtr --progress test-on-init --count 4 --max 1000000",
])
def test_random_sizes_three_ranks(rxe, args):
    """Random sizes between three ranks, every byte checked: RTR, RTR with a
    tiny eager limit and few slots, and both protocols on demand."""
    run(rxe, "sizes", n=3, args=args, timeout=400)


@pytest.mark.parametrize("proto", ["chunked", "rtr"])
def test_truncate_and_bad(rxe, proto):
    """A receive buffer too small: -EMSGSIZE on that receive only (eager and
    rendezvous); bad rank, negative or huge tag, an RTR receive from
    ANY_SOURCE: -EINVAL, and traffic afterwards is intact."""
    run(rxe, "truncate", args="--proto %s" % proto)
    run(rxe, "bad", args="--proto %s" % proto)


def test_notest_rtr_sender(rxe):
    """EMUNIC_PROGRESS_CORE: 8 MiB by RTR lands while both sides only
    compute: the sender's core answers the RTR with no test call."""
    run(rxe, "notest", args="--proto rtr", timeout=300)


def test_startall(rxe):
    """seed 000's OF_Startall: -ETIMEDOUT within its bound while no receive
    is posted, 0 once every RTR was answered (test-on-init)."""
    out = run(rxe, "startall", args="--proto rtr --progress test-on-init")
    assert "-ETIMEDOUT with no receive posted" in out


@pytest.mark.parametrize("proto", ["chunked", "rtr"])
def test_sends_before_connection_arrive_in_order(rxe, proto):
    """300 sends (eager, and every fifth a rendezvous) posted while the
    connection is held back by the peer (EMUNIC_ACCEPT_DELAY_MS) arrive in
    order, byte-exact; one QP afterwards."""
    out = run(rxe, "inorder", args="--on-demand --proto %s --count 300 --max-sends 512" % proto,
              env="EMUNIC_ACCEPT_DELAY_MS=1500 ", timeout=300)
    assert "300 sends posted before the connection was up" in out


def test_connection_storm_16_ranks(rxe):
    """16 ranks all send to all at the same moment, twice: every rank ends
    with exactly 15 QPs (one per pair), all connected, all messages in."""
    out = run(rxe, "storm", n=16, args="--on-demand --slots 8 --max-sends 32", timeout=400)
    assert "16 ranks: 15 QPs each, 120 pairs, one QP per pair" in out


def test_storm_repeated_small(rxe):
    """Simultaneous connects between 4 ranks, several jobs in a row (the
    both-connect race is resolved differently each time)."""
    for _ in range(3):
        run(rxe, "storm", n=4, args="--on-demand")


def test_any_source_connects_to_all(rxe):
    """seed 002: an ANY_SOURCE receive connects to every peer; ranks that
    talk to one peer have one QP."""
    run(rxe, "anysource", n=4, args="--on-demand")


def test_eager_exhaustion_waits(rxe):
    """HOLD_SLOTS, 4 slots, 16 eager messages and no receive: exactly 4
    arrive, 12 sends wait for a slot (none dropped); receives posted newest
    first free slots out of order, reported in order, all 16 delivered."""
    out = run(rxe, "exhaust", args="--hold --slots 4")
    assert "16 sends, 4 slots: 4 done, 12 waited for a slot" in out


def test_acks_explicit_and_piggybacked(rxe):
    """One-way traffic frees slots by explicit acks; ping-pong by acks
    carried in the reply headers."""
    out = run(rxe, "acks", args="--count 100 --slots 8")
    assert "explicit acks" in out


def test_p2p_sanitizers(rxe):
    """ASan + UBSan: RTR with every progress path touched, and on demand."""
    run(rxe, "edges", binpath=SANBIN, args="--proto rtr --progress test", timeout=400)
    run(rxe, "storm", n=4, binpath=SANBIN, args="--on-demand", timeout=400)


def test_p2p_memcheck(rxe):
    run(rxe, "truncate", args="--proto rtr --on-demand", timeout=600,
        wrap=MEMCHECK + " ")
