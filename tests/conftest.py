"""Fixtures that run emunic's binaries on a real rxe (or HCA) device.

`rxe` runs a shell command where an RDMA device is: directly on the host when
it has an ACTIVE verbs port, else inside the emunic guest VM, booted once for
the whole session.  `guest_pair` boots two guests joined by a socket netdev.
"""
import glob
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
SANBIN = os.path.join(ROOT, "build", "san", "bin")
sys.path.insert(0, os.path.join(ROOT, "guest-images"))

import guest as guestlib  # noqa: E402

_timings = {}
_accel = []


def host_has_rdma():
    for f in glob.glob("/sys/class/infiniband/*/ports/*/state"):
        with open(f) as fh:
            if "ACTIVE" in fh.read():
                return True
    return False


class HostRunner:
    where = "host"

    def run(self, cmd, timeout=120, env=None):
        e = dict(os.environ, **{k: str(v) for k, v in (env or {}).items()})
        try:
            p = subprocess.run(cmd, shell=True, cwd=ROOT, env=e, timeout=timeout,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except subprocess.TimeoutExpired as ex:
            return 124, (ex.stdout or b"").decode(errors="replace") + "\n[timed out]"
        return p.returncode, p.stdout.decode(errors="replace")


class GuestRunner:
    where = "guest"

    def __init__(self, g):
        self.g = g

    def run(self, cmd, timeout=120, env=None):
        return self.g.run(cmd, timeout=timeout, cwd=ROOT, env=env)


def boot_twice(make):
    """Boots what make() makes, once more if the first boot hung: under TCG
    a guest kernel now and then locks up before userspace (a soft lockup in
    its crypto self-tests, cryptomgr_test, was seen once in ~25 boots), which
    says nothing of emunic.  A second failure is the test's error."""
    try:
        return make().boot()
    except guestlib.GuestError as e:
        if "no ready signal" not in str(e):
            raise
        _timings["boots retried"] = _timings.get("boots retried", 0) + 1
        sys.stderr.write("emunic: a guest boot hung, booting again: %s\n" % str(e).splitlines()[0])
        return make().boot()


@pytest.fixture(scope="session")
def rxe():
    if host_has_rdma():
        yield HostRunner()
        return
    guestlib.build_image()
    g = boot_twice(guestlib.Guest)
    _timings["guest boot (s)"] = g.boot_seconds
    _accel.append(guestlib.accel_line(g.accel))
    try:
        yield GuestRunner(g)
    finally:
        g.shutdown()


@pytest.fixture(scope="session")
def guest_pair():
    guestlib.build_image()
    pair = boot_twice(lambda: guestlib.GuestPair(mem_mb=2048))
    _timings["two-guest boot (s)"] = max(g.boot_seconds for g in pair.guests)
    try:
        yield pair
    finally:
        pair.shutdown()


def host(cmd, timeout=60):
    """Run on the host itself (for the no-RDMA error paths)."""
    p = subprocess.run(cmd, shell=True, cwd=ROOT, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode(errors="replace")


# Every memcheck run of the suite: only definite leaks are errors (rdma-core's
# device list and provider stay "possibly lost" at exit), exit 99 on any.  No
# inlined frames in stacks: reading them cost ~4 s a process in the TCG guest.
MEMCHECK = ("valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite "
            "--show-possibly-lost=no --read-inline-info=no")

# The test programs' exit statuses (tests/bin/harness.h); 77 comes with a
# "SKIP: reason" line.
CTEST_PASS, CTEST_SKIP = 0, 77



def assert_every_rank_failed_at_once(out):
    """A collective object's first failure disconnects it from its peers
    (engines/coll/common.c, coll_leave_if_failed): their operations fail
    in turn and disconnect theirs, so every rank fails naming a failure
    and none waits out its bound (before, ranks two hops from the fault
    failed only at their timeout: 2 s here, 30 s by default)."""
    assert "not complete after" not in out, out
    assert re.search(r"emunic: rank \d+: coll: \w+ \d+ failed: disconnecting from peers?( \d+)+, so that", out), out

def run_ctest(runner, cmd, timeout=120, env=None, what=None):
    """Runs a C test program (or emunic-run with one): where RDMA is through
    `runner` (the rxe fixture), on the host itself when it is None.  Exit 0
    returns the output; 77 skips the test with the program's SKIP reason;
    anything else fails it with `what`, the command, the status and the
    output."""
    if runner is None:
        rc, out = host(cmd, timeout=timeout)
    else:
        rc, out = runner.run(cmd, timeout=timeout, env=env)
    if rc == CTEST_SKIP:
        why = [l.split("SKIP:", 1)[1].strip() for l in out.splitlines() if "SKIP:" in l]
        pytest.skip(why[0] if why else "exit 77 without a SKIP line: " + cmd)
    if rc != CTEST_PASS:
        pytest.fail("%s%s: exit %d\n%s" % (what + ": " if what else "", cmd, rc, out), pytrace=False)
    return out


def pytest_collection_modifyitems(session, config, items):
    """Runs the modules that need no guest first, then those that need the
    session guest, then those that boot the pair, each group in name order
    and each module whole: a booted guest stays up until the session ends,
    and an idle one still costs a few per cent of a host CPU, taken from the
    guest running the tests (it was ~23% before the agent slept on its
    doorbell, when the pair, booted two thirds of the way in, slowed every
    test after it).  A module whose fixtures take a guest fixture by
    request.getfixturevalue names it in GUEST_FIXTURES.  Host work runs
    while no guest does: beside a guest, even at nice 19, it slowed the
    guest's tests by more than it took on its own (test_allreduce and the
    spin checks: 115 + 56 s one after the other, 189 s side by side)."""
    def group(mod):
        names = set().union(*(set(i.fixturenames) for i in by_mod[mod]))
        names |= set(getattr(by_mod[mod][0].module, "GUEST_FIXTURES", ()))
        return 2 if "guest_pair" in names else 1 if "rxe" in names else 0

    by_mod = {}
    for it in items:
        by_mod.setdefault(it.module.__name__, []).append(it)
    order = sorted(by_mod, key=lambda m: (group(m), list(by_mod).index(m)))
    items[:] = [it for m in order for it in by_mod[m]]


def pytest_sessionstart(session):
    _timings["t0"] = time.monotonic()


def pytest_terminal_summary(terminalreporter):
    wall = time.monotonic() - _timings.pop("t0", time.monotonic())
    parts = ["%s %.1f" % (k, v) for k, v in _timings.items()]
    terminalreporter.write_line("emunic: suite wall time %.1f s; %s%s" % (
        wall, ", ".join(parts) or "no guest", "; guests under " + _accel[0] if _accel else ""))
