"""emunic-run: launching, the bootstrap channel, and every way a job can go wrong."""
import os
import re
import time

import pytest

from conftest import BIN, ROOT, host, host_has_rdma, run_ctest

RUN = BIN + "/emunic-run"
BT = BIN + "/emunic-boottest"


def test_ranks_get_rank_and_size(rxe):
    out = run_ctest(rxe, "%s -n 3 sh -c 'echo R=$EMUNIC_RANK/$EMUNIC_SIZE L=$EMUNIC_LOCAL_RANK'" % RUN)
    assert sorted(re.findall(r"R=(\d)/3 L=\d", out)) == ["0", "1", "2"], out


@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_bootstrap_exchange(rxe, n):
    out = run_ctest(rxe, "%s -n %d -t 60 %s --rounds 5" % (RUN, n, BT))
    assert out.count("via emunic-run: 5 exchanges ok") == n, out


def test_rank_failure_kills_the_rest(rxe):
    t0 = time.monotonic()
    rc, out = rxe.run("%s -n 4 -t 60 %s --fail-rank 2 --exit 7" % (RUN, BT))
    assert rc == 7, out
    assert "rank 2 (pid" in out and "exited with status 7" in out, out
    assert "exchanges ok" not in out, out
    assert time.monotonic() - t0 < 30


def test_rank_killed_by_signal(rxe):
    rc, out = rxe.run("%s -n 3 -t 60 %s --fail-rank 1 --signal 9" % (RUN, BT))
    assert rc == 128 + 9, out
    assert "rank 1 (pid" in out and "killed by signal 9" in out, out


def test_rank_leaving_mid_exchange_is_an_error(rxe):
    rc, out = rxe.run("%s -n 3 -t 60 %s --fail-rank 0 --leave" % (RUN, BT))
    assert rc == 1, out
    assert "rank 0 left" in out, out


def test_timeout_kills_the_job(rxe):
    t0 = time.monotonic()
    rc, out = rxe.run("%s -n 2 -t 2 %s --fail-rank 1 --sleep 60" % (RUN, BT))
    assert rc == 124, out
    assert "timeout after 2 s; ranks still running: 0 1" in out, out
    assert time.monotonic() - t0 < 20


def test_missing_program(rxe):
    rc, out = rxe.run("%s -n 2 /no/such/program" % RUN)
    assert rc == 127, out
    assert "'/no/such/program': program not found" in out
    rc, out = rxe.run("%s -n 2 no-such-program-in-path" % RUN)
    assert rc == 127, out


def test_not_executable(rxe):
    rc, out = rxe.run("%s -n 2 %s/README.md" % (RUN, BIN + "/../.."))
    assert rc == 126, out
    assert "not executable" in out


@pytest.mark.parametrize("args,msg", [
    ("-n 0 true", "-n must be a whole number from 1 to 4096, not '0'"),
    ("-n x true", "not 'x'"),
    ("true", "missing -n N"),
    ("-n 2", "missing PROGRAM"),
    ("-n 2 --bogus true", "unknown option '--bogus' (see emunic-run --help)"),
    ("-n", "option '-n' needs a value"),
    ("-n 2 --nodes 2 true", "--nodes 2 needs --server"),
])
def test_bad_usage(rxe, args, msg):
    rc, out = rxe.run("%s %s" % (RUN, args))
    assert rc == 2, out
    assert msg in out, out
    assert len(out.strip().splitlines()) == 1, out


def test_unknown_device(rxe):
    rc, out = rxe.run("%s -n 2 -d mlx5_9 true" % RUN)
    assert rc == 1, out
    assert "no RDMA device named 'mlx5_9' (devices here: rxe0" in out, out


def test_help_is_a_manual():
    rc, out = host("%s --help" % RUN)
    assert rc == 0
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "ENVIRONMENT", "EXIT STATUS", "EXAMPLES"):
        assert "\n" + section + "\n" in "\n" + out, section


@pytest.mark.skipif(host_has_rdma(), reason="this host has an RDMA device")
def test_no_rdma_device_at_all():
    """On a machine without RDMA (this host), one clear line and exit 1."""
    rc, out = host("%s -n 2 true" % RUN)
    assert rc == 1, out
    assert "no RDMA device on this machine" in out and "rdma link add" in out, out


MPI_ENV = "OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1"


def test_pmix_launch_under_open_mpi(rxe):
    """Under Open MPI's mpirun (a PMIx server) ranks bootstrap through PMIx."""
    out = run_ctest(rxe, "%s timeout 90 mpirun --allow-run-as-root --oversubscribe -np 3 %s --rounds 4"
                    % (MPI_ENV, BT), timeout=120)
    assert out.count("via pmix: 4 exchanges ok") == 3, out
    # PMIx names the ranks on this node, for the core's CPU and the waiters' assist.
    assert sorted(re.findall(r"via pmix: 4 exchanges ok, local rank (\d) of 3", out)) == ["0", "1", "2"], out


def test_pmix_datapath_under_open_mpi(rxe):
    out = run_ctest(rxe, "%s timeout 90 mpirun --allow-run-as-root --oversubscribe -np 2 %s/emunic-datapath "
                    "--iters 1" % (MPI_ENV, BIN), timeout=120)
    assert "verified (0 mismatches)" in out, out


def test_libpmix_is_opened_only_under_a_pmix_launcher():
    """No emunic program links libpmix (it and its libraries cost every
    process's start); a PMIx launcher's environment opens it, and a library
    that cannot be opened, or is not a libpmix, or a PMIx server that is not
    there, is a named error, exit 3, no hang.  Host only."""
    for linked in (BT, os.path.join(ROOT, "build", "lib", "libemunic.so")):
        rc, out = host("ldd %s" % linked)
        assert rc == 0 and "libpmix" not in out, (linked, out)
    pmix = "PMIX_NAMESPACE=emunic-test PMIX_RANK=0 "
    rc, out = host(pmix + "EMUNIC_PMIX_LIB=/nonexistent/libpmix.so.2 %s" % BT)
    assert rc == 3, out
    assert ("bootstrap (pmix): a PMIx launcher started this process (PMIX_NAMESPACE=emunic-test) but libpmix "
            "cannot be opened: /nonexistent/libpmix.so.2:") in out, out
    rc, out = host(pmix + "EMUNIC_PMIX_LIB=libc.so.6 %s" % BT)
    assert rc == 3, out
    assert "bootstrap (pmix): the libpmix opened lacks a call emunic needs:" in out and "PMIx_" in out, out
    rc, out = host("env -u EMUNIC_PMIX_LIB " + pmix + "timeout 30 " + BT)
    assert rc == 3, out
    assert "bootstrap (pmix): PMIx_Init failed:" in out, out
