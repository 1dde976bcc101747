"""emunic-info: what emunic makes of the devices (driver, native offloads, the
GID it uses, whether the emulated NIC can start, its QP sizes against the
device's limits, the settings, the accelerator), on rxe0 in the guest and on
the host.  Everything else about a device is ibv_devinfo's: each block points
to it, and the tests check that the pointer works.

The `rxe` fixture (conftest.py) runs shell commands on a machine with rxe0;
the host tests run the binary directly and need no RDMA device.
"""
import os
import re
import subprocess

import pytest

from conftest import MEMCHECK

BIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "build", "bin"))
SAN_BIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "build", "san", "bin"))
INFO = os.path.join(BIN, "emunic-info")

NO_DEVICES = ("emunic-info: no RDMA devices found: load rdma_rxe and run "
              "'rdma link add rxe0 type rxe netdev <if>', or run inside the emunic guest "
              "(guest-images/guest.py)")


@pytest.fixture(scope="module", autouse=True)
def built():
    assert os.access(INFO, os.X_OK), "%s is missing: run make first" % INFO


def host_has_rdma():
    try:
        return bool(os.listdir("/sys/class/infiniband"))
    except OSError:
        return False


def run_host(*args, env=None):
    e = dict(os.environ)
    e.pop("EMUNIC_DEVICE", None)
    e.update(env or {})
    return subprocess.run([INFO, *args], capture_output=True, text=True, timeout=60, env=e)


def section(out, dev):
    """The lines of one device's block, from its hca_id line to the next one."""
    m = re.search(r"^hca_id: %s\n(.*?)(?=^hca_id: |\Z)" % re.escape(dev), out, re.M | re.S)
    assert m, "no 'hca_id: %s' block in:\n%s" % (dev, out)
    return m.group(1)


# -- on rxe0 ------------------------------------------------------------------

def test_rxe0_active_and_emunic_gid_marked(rxe):
    rc, out = rxe.run(INFO)
    assert rc == 0, out
    assert re.search(r"^accelerator:\s+\S", out, re.M), out
    rxe0 = section(out, "rxe0")
    assert re.search(r"^\tdriver:\s+rdma_rxe \(Soft-RoCE over \S+\)$", rxe0, re.M), rxe0
    assert re.search(r"^\tport: 1$", rxe0, re.M), rxe0
    assert re.search(r"^\t\tstate:\s+PORT_ACTIVE \(4\)$", rxe0, re.M), rxe0
    assert re.search(r"^\t\tlink_layer:\s+Ethernet$", rxe0, re.M), rxe0
    assert re.search(r"^\t\tactive_mtu:\s+(256|512|1024|2048|4096) \([1-5]\)$", rxe0, re.M), rxe0
    assert re.search(r"^\tnative offloads:\s+none \(emulated by the emunic progress core\)$",
                     rxe0, re.M), rxe0

    marked = [l for l in rxe0.splitlines() if "<- emunic uses this" in l]
    assert len(marked) == 1, "want exactly one marked GID on rxe0's one port:\n" + rxe0
    m = re.search(r"\[(\d+)\]\s+RoCEv2\s+::ffff:(\d+\.\d+\.\d+\.\d+)\s+(\S+)\s+"
                  r"<- emunic uses this \(RoCEv2, IPv4 (\d+\.\d+\.\d+\.\d+)\)$", marked[0])
    assert m, marked[0]
    assert m.group(2) == m.group(4), "the marker's IPv4 address is not the GID's: " + marked[0]
    assert m.group(3) not in ("-", "?"), "the GID names no netdev: " + marked[0]
    # The same GID emunic_vdev_open picks: rxe puts the IPv4-mapped RoCEv2 GID at index 1.
    assert m.group(1) == "1", marked[0]
    # The verdict names the port and the GID it marked.
    assert re.search(r"^\temulated NIC:\s+can start \(port 1, GID \[1\]", rxe0, re.M), rxe0
    # The device interface: the backend auto takes on rxe, and what rxe can do.
    assert re.search(r"^\tdevice interface:\s+backend emulated \(EMUNIC_BACKEND=auto: emulated \(rxe0: not an "
                     r"mlx5 device\)\); capabilities atomic write-imm rnr$", rxe0, re.M), rxe0
    # ... so it lacks nothing the engines use (siw's line: test_siw.py).
    assert "device lacks" not in rxe0, rxe0
    # The rest is ibv_devinfo's: one line says how to see it.
    assert re.search(r"^\tmore:\s+ibv_devinfo -d rxe0 -v$", rxe0, re.M), rxe0


def devinfo_limit(devinfo, key):
    m = re.search(r"^\s+%s:\s+(\d+)$" % key, devinfo, re.M)
    assert m, "ibv_devinfo -v shows no %s:\n%s" % (key, devinfo)
    return int(m.group(1))


def test_rxe0_verbose_shows_emunic_limits_and_settings(rxe):
    """-v: emunic's QP sizes against the device's limits (the same numbers
    ibv_devinfo gives) and the settings the library reads.  The device's own
    limits, flags, ODP and per-port details moved to ibv_devinfo: its output
    still has them."""
    rc, out = rxe.run("EMUNIC_LIST_TASKS=64 %s -d rxe0 -v" % INFO)
    assert rc == 0, out
    assert out.count("hca_id:") == 1, "-d rxe0 shows other devices too:\n" + out
    rxe0 = section(out, "rxe0")
    rc, devinfo = rxe.run("ibv_devinfo -d rxe0 -v")
    assert rc == 0, devinfo
    for key in ("max_qp", "max_qp_wr", "max_cq", "max_cqe", "max_mr", "max_sge", "max_qp_rd_atom",
                "max_srq", "gid_tbl_len", "max_msg_sz", "active_speed", "active_width", "port_lid"):
        assert re.search(r"^\s+%s:\s+\S" % key, devinfo, re.M), "ibv_devinfo -v lacks %s:\n%s" % (key, devinfo)
    assert "RC_RNR_NAK_GEN" in devinfo, devinfo

    m = re.search(r"^\t\twork requests:\s+(\d+) send, (\d+) receive a QP \(max_qp_wr (\d+)\)$", rxe0, re.M)
    assert m, rxe0
    assert int(m.group(3)) == devinfo_limit(devinfo, "max_qp_wr"), (m.group(0), devinfo)
    assert 0 < int(m.group(1)) <= int(m.group(3)) and 0 < int(m.group(2)) <= int(m.group(3)), m.group(0)
    m = re.search(r"^\t\tSGEs a request:\s+(\d+) \(max_sge (\d+)\)$", rxe0, re.M)
    assert m and int(m.group(2)) == devinfo_limit(devinfo, "max_sge"), rxe0
    m = re.search(r"^\t\treads in flight:\s+(\d+) each way \(max_qp_rd_atom (\d+), max_qp_init_rd_atom (\d+)\)$",
                  rxe0, re.M)
    assert m and int(m.group(2)) == devinfo_limit(devinfo, "max_qp_rd_atom"), rxe0

    head = out[:out.index("hca_id:")]
    assert re.search(r"^emunic settings:", head, re.M), head
    assert re.search(r"^\tEMUNIC_LIST_TASKS:\s+'64' \(", head, re.M), head
    for name in ("EMUNIC_IDLE", "EMUNIC_CPU", "EMUNIC_SINK_MBPS", "EMUNIC_FAULTS"):
        assert re.search(r"^\t%s:\s+(unset|'.*') \(" % name, head, re.M), (name, head)


def test_rxe0_start_opens_and_closes_the_emulated_nic(rxe):
    rc, out = rxe.run(INFO + " -d rxe0 --start")
    assert rc == 0, out
    rxe0 = section(out, "rxe0")
    assert re.search(r"^\tstarted:\s+yes, in \d+ ms: a one-rank emulated NIC, longest task list 1024, "
                     r"core (sleeps|spins) when idle$", rxe0, re.M), rxe0
    # A setting the library refuses: the start fails, named, with exit 1.
    rc, out = rxe.run("EMUNIC_LIST_TASKS=99999 %s -d rxe0 -s" % INFO)
    assert rc == 1, out
    assert re.search(r"^\tstarted:\s+no: emunic_dev_open: Invalid argument", out, re.M), out
    assert "a task-list limit of 99999 is more than the command ring's 4096 entries" in out, out


def test_unknown_device_names_the_devices(rxe):
    rc, out = rxe.run(INFO + " -d nosuchdev")
    assert rc == 1, out
    assert "hca_id:" not in out, out
    lines = [l for l in out.splitlines() if "nosuchdev" in l]
    assert len(lines) == 1, out
    assert re.search(r"no RDMA device named 'nosuchdev'.*devices here: .*\brxe0\b", lines[0]), lines[0]


def test_emunic_device_env_is_the_default(rxe):
    rc, out = rxe.run("EMUNIC_DEVICE=nosuchdev " + INFO)
    assert rc == 1, out
    assert "EMUNIC_DEVICE" in out and "rxe0" in out, out
    rc, out = rxe.run("EMUNIC_DEVICE=nosuchdev %s -d rxe0" % INFO)
    assert rc == 0 and "hca_id: rxe0" in out, "-d must override EMUNIC_DEVICE:\n" + out
    rc, out = rxe.run("EMUNIC_DEVICE=rxe0 " + INFO)
    assert rc == 0 and "hca_id: rxe0" in out, out


def test_valgrind_clean(rxe):
    rc, out = rxe.run("%s %s -v >/dev/null" % (MEMCHECK, INFO), timeout=300)
    assert rc == 0, out


def test_sanitizer_build_clean(rxe):
    rc, out = rxe.run(os.path.join(SAN_BIN, "emunic-info") + " -v --start >/dev/null")
    assert rc == 0, out


# -- on the host --------------------------------------------------------------

@pytest.mark.parametrize("args", [["--bogus"], ["-x"], ["-d"], ["--device"], ["-d", ""],
                                  ["unexpected-argument"], ["--start=yes"]])
def test_bad_usage_exits_2(args):
    r = run_host(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    assert "emunic-info --help" in r.stderr, r.stderr


def test_help():
    r = run_host("--help")
    assert r.returncode == 0, r.stderr
    for s in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT",
              "EXAMPLES"):
        assert re.search(r"^%s$" % s, r.stdout, re.M), "no %s section" % s
    for s in ("-d, --device NAME", "-v, --verbose", "-s, --start", "-h, --help", "EMUNIC_DEVICE"):
        assert re.search(r"^\s+%s$" % re.escape(s), r.stdout, re.M), s
    assert run_host("-h").stdout == r.stdout


@pytest.mark.skipif(host_has_rdma(), reason="the host has RDMA devices")
def test_host_without_rdma_says_so():
    for args in ([], ["-v"], ["-d", "rxe0"], ["--start"]):
        r = run_host(*args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert r.stdout == "", r.stdout
        assert NO_DEVICES in r.stderr.splitlines(), r.stderr
