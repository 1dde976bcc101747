"""libemunic-mpich.so: the PMPI interposer (mpi/) built against MPICH
(libmpich-dev) instead of Open MPI, under MPICH's own launcher (hydra's
mpirun.mpich, the ranks forked on this node).  MPICH's handles are integers
where Open MPI's are pointers and its generalized requests call free_fn at
another time, so the same sources make a second library; the same
unmodified test program, built against MPICH, prints the same results bit
for bit with and without LD_PRELOAD at 2 and 4 ranks."""

import pytest

from conftest import BIN
from test_mpi import FAULT_ENV, check_fault_named, check_free_refused, check_offloaded, plain_results, run_job

LIB = BIN.replace("/bin", "/lib") + "/libemunic-mpich.so"
PROG = BIN + "/emunic-mpi-colls.mpich"
# MPICH's own traffic (UCX) through shared memory, never rxe: only the
# offloaded collectives use emunic.
MPICH_ENV = "UCX_TLS=self,sm"

# MPICH's results without the interposer, by size (test_mpi.plain_results).
_plain = {}


def mpirun(rxe, n, preload=True, env=(), args="", timeout=200):
    g = "".join(" -genv %s %s" % tuple(e.split("=", 1)) for e in env)
    if preload:
        g += " -genv LD_PRELOAD %s" % LIB
    return run_job(rxe, "%s timeout %d mpirun.mpich -launcher fork -n %d%s %s %s"
                   % (MPICH_ENV, timeout - 20, n, g, PROG, args), timeout)


@pytest.mark.parametrize("n", [2, 4])
def test_same_results_under_mpich(rxe, n):
    rc, pre = mpirun(rxe, n, env=["EMUNIC_MPI_VERBOSE=1"])
    assert rc == 0, pre
    check_offloaded(pre, plain_results(rxe, n, mpirun, _plain), n)


def test_request_free_on_an_offloaded_collective_is_refused(rxe):
    """MPI_Request_free on a nonblocking collective is erroneous (MPI-3.1
    5.12) and MPICH refuses its own (MPI_ERR_OTHER); the interposer refuses
    its requests too, said, leaving them to be waited for.  Without that,
    MPICH would run the generalized request's free_fn then and there, with
    the collective in flight."""
    rc, pre = mpirun(rxe, 2, args="--free-active")
    assert rc == 0, pre
    check_free_refused(pre)


def test_an_injected_fault_ends_the_job_with_a_named_error(rxe):
    """As under Open MPI: named by emunic and the interposer, and MPICH's
    error handler ends the job; its abort (hydra, fork launcher) may end
    rank 1 before rank 1 next touches the broken connection (seen once the
    guest's clock got cheap), so rank 1's own line or the abort's; and the
    other way round (CI at 875afb2): rank 1 sees the disconnect first and its
    abort ends rank 0 before rank 0's collective is next tested, so rank 0's
    engine line names it there."""
    rc, out = mpirun(rxe, 2, env=FAULT_ENV, timeout=150)
    assert rc not in (0, 124), out
    check_fault_named(out, abort_first=r"Abort\(\d+\) on node 0 \(rank 0 in comm 0\): Fatal error",
                      abort_peer=r"Abort\(\d+\) on node 1 \(rank 1 in comm 0\): Fatal error")
