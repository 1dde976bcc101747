"""The Vagrantfile and its provision script (scripts/provision.sh).

Vagrant cannot start VMs here (no libvirt daemon, no VirtualBox, and the
suite already runs in QEMU guests), so its half is `vagrant validate`: with
the provider blocks ignored (what works with no provider plugin at all), with
the libvirt provider's block checked where vagrant-libvirt is installed, and
with VirtualBox's block checked through a stand-in VBoxManage that only
answers --version; a copy with a misspelt setting in each block must fail, so
the check is known to be able to fail.

The provision script's half runs it for real in the test guests with --guest
(no apt-get: the host's packages are checked; the build goes to a writable
directory in the work tree, brought up to date on the host first): in the
session's guest it creates an rxe device on a veth and runs the two-rank job;
between the two guests it finds rxe0 on eth0 and runs the two-node checks,
node 0 in the background and node 1 in the foreground, as the Vagrantfile
has them.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT

VAGRANTFILE = os.path.join(ROOT, "Vagrantfile")
PROVISION = os.path.join(ROOT, "scripts", "provision.sh")
# The guests' build directory: in the work tree, the one place both guests
# can write and see; the tree's own build/ (the script's default outside
# --guest), which `make test` has just built, so neither the host nor a guest
# compiles anything again.  What --guest builds there:
GUEST_BUILD = os.path.join(ROOT, "build")
GUEST_TARGETS = ["emunic-run", "emunic-datapath", "emunic-allreduce"]

needs_vagrant = pytest.mark.skipif(shutil.which("vagrant") is None,
                                   reason="vagrant is not installed (make deps installs it)")


def vagrant(args, cwd=ROOT, env=None, path_prepend=None, timeout=120):
    """Runs vagrant with its state (.vagrant, ~/.vagrant.d) in a temp dir and
    no network look-ups; returns (status, output)."""
    with tempfile.TemporaryDirectory(prefix="emunic-vagrant-") as tmp:
        e = dict(os.environ, VAGRANT_DOTFILE_PATH=os.path.join(tmp, "dot"),
                 VAGRANT_HOME=os.path.join(tmp, "home"), VAGRANT_CHECKPOINT_DISABLE="1",
                 VAGRANT_NO_COLOR="1", VAGRANT_CWD=cwd)
        e.pop("VAGRANT_DEFAULT_PROVIDER", None)
        e.update(env or {})
        if path_prepend:
            e["PATH"] = path_prepend + ":" + e["PATH"]
        p = subprocess.run(["vagrant"] + args, cwd=cwd, env=e, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return p.returncode, p.stdout.decode(errors="replace")


def has_libvirt_plugin():
    rc, out = vagrant(["plugin", "list"])
    return rc == 0 and "vagrant-libvirt" in out


def mutated(tmp, old, new):
    """A copy of the Vagrantfile with OLD replaced by NEW, in TMP."""
    with open(VAGRANTFILE) as f:
        text = f.read()
    assert old in text, old
    with open(os.path.join(tmp, "Vagrantfile"), "w") as f:
        f.write(text.replace(old, new))
    return tmp


def guest_build():
    """Brings the guests' build up to date on the host, just before a guest
    runs the script: the guest runs the host's own gcc and make ~40x slower
    under TCG (a fresh build there took ~8 minutes), so there the script's
    make step finds everything up to date.  Compiling would prove nothing
    more in the guest than here."""
    p = subprocess.run(["make", "-C", ROOT, "--no-print-directory", "O=" + GUEST_BUILD, "-j2"] +
                       [GUEST_BUILD + "/bin/" + t for t in GUEST_TARGETS],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert p.returncode == 0, p.stdout.decode(errors="replace")[-3000:]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


@pytest.fixture
def fake_vboxmanage(tmp_path):
    """A VBoxManage that only tells its version: Vagrant then deems the
    VirtualBox provider usable and validates its config block."""
    d = tmp_path / "bin"
    d.mkdir()
    f = d / "VBoxManage"
    f.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 7.0.14r161095 && exit 0\nexit 1\n")
    f.chmod(0o755)
    return str(d)


@needs_vagrant
def test_validate_without_provider_plugins():
    """Valid whatever providers are installed; one machine per node."""
    rc, out = vagrant(["validate", "--ignore-provider"])
    assert rc == 0 and "Vagrantfile validated successfully" in out, out
    assert re.findall(r"==> (node\d+): Ignoring provider config", out) == ["node1", "node2"], out
    rc, out = vagrant(["validate", "--ignore-provider"], env={"EMUNIC_VAGRANT_NODES": "3"})
    assert rc == 0, out
    assert re.findall(r"==> (node\d+): Ignoring", out) == ["node1", "node2", "node3"], out
    rc, out = vagrant(["validate", "--ignore-provider"], env={"EMUNIC_VAGRANT_NODES": "0"})
    assert rc != 0 and "EMUNIC_VAGRANT_NODES must be 1..64" in out, out


@needs_vagrant
def test_validate_libvirt_first(tmp_path):
    """libvirt is the default provider where vagrant-libvirt is installed, and
    its block is checked: a misspelt setting fails validation."""
    if not has_libvirt_plugin():
        pytest.skip("the vagrant-libvirt plugin is not installed (Debian: vagrant-libvirt)")
    rc, out = vagrant(["validate"])
    assert rc == 0 and "Vagrantfile validated successfully" in out, out
    rc, out = vagrant(["validate"], cwd=mutated(str(tmp_path), "lv.memory = MEM", "lv.memroy = MEM"))
    assert rc != 0 and "Libvirt Provider" in out and "memroy" in out, out


@needs_vagrant
def test_validate_virtualbox_option(tmp_path, fake_vboxmanage):
    env = {"VAGRANT_DEFAULT_PROVIDER": "virtualbox"}
    rc, out = vagrant(["validate"], env=env, path_prepend=fake_vboxmanage)
    assert rc == 0 and "Vagrantfile validated successfully" in out, out
    bad = mutated(str(tmp_path), "vb.memory = MEM", "vb.memroy = MEM")
    rc, out = vagrant(["validate"], cwd=bad, env=env, path_prepend=fake_vboxmanage)
    assert rc != 0 and "VirtualBox Provider" in out and "memroy" in out, out


def test_provision_script_usage():
    """Bad usage is exit 2 with the usage text; the Vagrantfile calls the
    script by the path the tree is synced to."""
    outs = []
    for args in (["--bogus"], ["--nodes", "2"], ["--nodes", "x"]):
        p = subprocess.run([PROVISION] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        outs.append(p.stdout.decode())
        assert p.returncode == 2, (args, outs[-1])
    assert "unknown option '--bogus'" in outs[0] and "--guest" in outs[0] and "--background" in outs[0], outs
    assert "--nodes 2 needs --server" in outs[1] and "take numbers" in outs[2], outs
    with open(VAGRANTFILE) as f:
        text = f.read()
    assert 'inline: "exec #{TREE}/scripts/provision.sh' in text, text


def test_provision_in_guest(rxe):
    """--guest in the test guest: packages checked, an rxe device created on
    the private interface, the build, a two-rank job.  (rxe0 found where it
    is: the two-guest test.)"""
    if rxe.where != "guest":
        pytest.skip("the provision script's --guest mode is for the test guest")
    # The private interface: one end of a veth pair, with no rxe device yet.
    setup = ("ip link add vprov0 type veth peer name vprov1 && ip addr add 10.78.0.1/24 dev vprov0 && "
             "ip link set vprov0 up && ip link set vprov1 up")
    teardown = "rdma link delete rxe_prov 2>/dev/null; ip link delete vprov0 2>/dev/null; true"
    try:
        rc, out = rxe.run(setup, timeout=30)
        assert rc == 0, out
        guest_build()
        rc, out = rxe.run("%s --guest --build-dir %s --ip 10.78.0.1 --rxe rxe_prov" % (PROVISION, GUEST_BUILD),
                          timeout=300)
    finally:
        rxe.run(teardown, timeout=30)
    assert rc == 0, out
    assert "packages: every one scripts/deps.sh lists is installed" in out, out
    assert "rdma: created rxe_prov on vprov0" in out, out
    assert re.search(r"build: %s in %s \(\d+ s\)" % (" ".join(GUEST_TARGETS), GUEST_BUILD), out), out
    assert "check: two ranks on rxe_prov" in out and "verified (0 mismatches)" in out, out
    assert out.rstrip().endswith("provision: done"), out
    # Nothing the guest cannot do was tried.
    assert "apt-get" not in out and "emunic-rxe.service" not in out, out


def test_provision_two_nodes_between_guests(guest_pair):
    """The two-node checks between the two guests as the Vagrantfile has
    them: node 0 joins them in the background, node 1 runs them in the
    foreground, both provisioned at once (as vagrant-libvirt does; VirtualBox
    goes one machine after the other, which the background join is for).
    Both sides' logs end with two-node: ok."""
    a, b = guest_pair.guests
    ip = guest_pair.IPS[0]
    args = "%s --guest --build-dir %s --nodes 2 --server %s:7731" % (PROVISION, GUEST_BUILD, ip)
    log = os.path.join(GUEST_BUILD, "two-node-0.log")
    # A pid file from an earlier run names a process of another guest's boot.
    for stale in (log, os.path.join(GUEST_BUILD, "two-node-0.pid")):
        if os.path.exists(stale):
            os.remove(stale)
    guest_build()       # both guests find it up to date
    ja = a.submit(args + " --node 0 --background", timeout=600)
    jb = b.submit(args + " --node 1", timeout=600)
    (rc, out), (rcb, outb) = a.wait(ja), b.wait(jb)
    assert rc == 0, out
    assert "rdma: rxe0 present on eth0" in out, out
    assert "two-node: node 0 joins the checks in the background, node 0 at %s:7731" % ip in out, out
    # Node 0's side ends right after node 1's: its log is in the shared dir.
    # Read before judging node 1: when a job fails there, node 0's ranks are
    # often the ones that failed first, and only its log says why.
    deadline = time.monotonic() + 60
    while not re.search(r"^two-node: (ok|FAILED)", read(log), re.M) and time.monotonic() < deadline:
        time.sleep(0.5)
    text = read(log)
    both = "node 1:\n%s\nnode 0 (%s):\n%s" % (outb, log, text)
    assert rcb == 0, both
    assert "two-node: node 1 of 2" in outb and "two-node: ok" in outb, both
    assert "started ranks 1..1 of 2" in outb and "started ranks 2..3 of 4" in outb, both
    assert text.rstrip().endswith("two-node: ok"), text
    assert "started ranks 0..0 of 2" in text and "started ranks 0..1 of 4" in text, text
    assert "verified (0 mismatches)" in text and "emunic-allreduce: inflight: PASS" in text, text
