"""emunic-info: device, port and GID listing, on rxe0 in the guest and on the host.

The `rxe` fixture (conftest.py) runs shell commands on a machine with rxe0;
the host tests run the binary directly and need no RDMA device.
"""
import os
import re
import subprocess

import pytest

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
    rxe0 = section(out, "rxe0")
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


def test_rxe0_verbose_shows_limits(rxe):
    rc, out = rxe.run(INFO + " -d rxe0 -v")
    assert rc == 0, out
    assert out.count("hca_id:") == 1, "-d rxe0 shows other devices too:\n" + out
    rxe0 = section(out, "rxe0")
    for key in ("max_qp", "max_qp_wr", "max_cq", "max_cqe", "max_mr", "max_sge",
                "max_qp_rd_atom", "max_srq"):
        m = re.search(r"^\t%s:\s+(\d+)$" % key, rxe0, re.M)
        assert m and int(m.group(1)) > 0, "%s missing or zero:\n%s" % (key, rxe0)
    assert re.search(r"^\tmax_mr_size:\s+0x[0-9a-f]+$", rxe0, re.M), rxe0
    assert re.search(r"^\tatomic_cap:\s+ATOMIC_\w+ \(\d\)$", rxe0, re.M), rxe0
    # rxe generates RNR NAKs: the decoded flags must say so.
    assert re.search(r"^\tdevice_cap_flags:\s+0x[0-9a-f]+ .*RC_RNR_NAK_GEN", rxe0, re.M | re.S), rxe0
    assert re.search(r"^\todp_caps:", rxe0, re.M), rxe0
    for key in ("gid_tbl_len", "max_msg_sz", "active_speed", "active_width", "port_lid"):
        assert re.search(r"^\t\t%s:\s+\S" % key, rxe0, re.M), "%s missing:\n%s" % (key, rxe0)


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
    rc, out = rxe.run("valgrind -q --error-exitcode=9 %s -v >/dev/null" % INFO, timeout=300)
    assert rc == 0, out


def test_sanitizer_build_clean(rxe):
    rc, out = rxe.run(os.path.join(SAN_BIN, "emunic-info") + " -v >/dev/null")
    assert rc == 0, out


# -- on the host --------------------------------------------------------------

@pytest.mark.parametrize("args", [["--bogus"], ["-x"], ["-d"], ["--device"], ["-d", ""],
                                  ["unexpected-argument"]])
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
    for s in ("-d, --device NAME", "-v, --verbose", "-h, --help", "EMUNIC_DEVICE"):
        assert re.search(r"^\s+%s$" % re.escape(s), r.stdout, re.M), s
    assert run_host("-h").stdout == r.stdout


@pytest.mark.skipif(host_has_rdma(), reason="the host has RDMA devices")
def test_host_without_rdma_says_so():
    for args in ([], ["-v"], ["-d", "rxe0"]):
        r = run_host(*args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert r.stdout == "", r.stdout
        assert NO_DEVICES in r.stderr.splitlines(), r.stderr
