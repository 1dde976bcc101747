"""The guest runner itself: hung commands and failed boots end with a clear
error, and no QEMU outlives the process that started it."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import guest as guestlib


def test_hung_command_is_killed_and_guest_survives(rxe):
    t0 = time.monotonic()
    rc, out = rxe.run("echo started; sleep 600", timeout=3)
    assert rc == 124, out          # timeout(1)'s status: the command was killed
    assert "started" in out
    assert time.monotonic() - t0 < 30
    rc, out = rxe.run("echo still-here")
    assert rc == 0 and "still-here" in out


def test_a_job_runs_where_it_was_asked_with_its_bound(rxe):
    """The agent reads a job's directory and time bound from files the host
    writes without a newline: both must reach the job."""
    if rxe.where != "guest":
        pytest.skip("the guest's agent: this host has RDMA, no guest runs")
    for d in ("/tmp", guestlib.WORK + "/tests"):
        rc, out = rxe.g.run("pwd", timeout=30, cwd=d)
        assert rc == 0 and out.strip() == d, (d, out)
    t0 = time.monotonic()
    rc, out = rxe.run("sleep 60", timeout=2)
    assert rc == 124 and time.monotonic() - t0 < 15, out


def test_the_guest_loads_only_its_devices_providers(rxe):
    """agent.sh narrows /etc/libibverbs.d to rxe and siw (every rank loaded
    all 17 providers, ~0.1 s a process under TCG); verbs still finds both
    devices, and a process maps no other provider."""
    if rxe.where != "guest":
        pytest.skip("the guest's agent: this host has RDMA, no guest runs")
    rc, out = rxe.run("ls /etc/libibverbs.d; ibv_devices", timeout=60)
    assert rc == 0, out
    assert sorted(l for l in out.split() if l.endswith(".driver")) == ["rxe.driver", "siw.driver"], out
    assert re.search(r"^\s+rxe0\s", out, re.M), out
    # siw0 only where the image has siw.ko (test_siw.py fails if it has and
    # the guest made none; build.sh says why it built none)
    if os.path.exists(os.path.join(guestlib.BUILD, "siw", "siw.ko")):
        assert re.search(r"^\s+siw0\s", out, re.M), out
    rc, out = rxe.run("LD_DEBUG=files ibv_devices 2>&1", timeout=60)
    loaded = set(re.findall(r"file=\S*?lib([a-z0-9_]+)-rdmav\d+\.so", out))
    assert rc == 0 and loaded == {"rxe", "siw"}, (loaded, out[-2000:])


def test_output_is_not_read_past_a_write_that_has_not_landed(tmp_path):
    """QEMU's 9p server may land a job's later write before an earlier one:
    the file then has a hole of zeros.  A streaming read stops at the hole
    and takes the earlier write once it lands; the final read takes all."""
    f = tmp_path / "job.out"
    f.write_bytes(b"one\n" + b"\0" * 4 + b"three\n")
    data, pos = guestlib.read_landed(str(f), 0, False)
    assert (data, pos) == (b"one\n", 4)
    f.write_bytes(b"one\ntwo\nthree\n")
    data, pos = guestlib.read_landed(str(f), pos, False)
    assert (data, pos) == (b"two\nthree\n", 14)
    assert guestlib.read_landed(str(f), pos, False) == (b"", 14)
    f.write_bytes(b"a\0b")
    assert guestlib.read_landed(str(f), 0, True) == (b"a\0b", 3)
    assert guestlib.read_landed(str(tmp_path / "none"), 0, True) == (b"", 0)


def test_failed_boot_is_reported(monkeypatch, tmp_path):
    """A guest that cannot boot (no kernel) ends with GuestError, no QEMU left behind."""
    monkeypatch.setattr(guestlib, "BUILD", str(tmp_path))
    g = guestlib.Guest(name="emunic-badboot", boot_timeout=60)
    with pytest.raises(guestlib.GuestError) as e:
        g.boot()
    assert "QEMU exited with status" in str(e.value) or "no ready signal" in str(e.value)
    assert g.proc.poll() is not None


def test_boot_timeout_kills_the_guest(monkeypatch):
    """A boot that does not finish in time is killed, with the console in the message."""
    g = guestlib.Guest(name="emunic-slowboot", boot_timeout=1)
    with pytest.raises(guestlib.GuestError) as e:
        g.boot()
    assert "no ready signal after 1s; guest killed" in str(e.value)
    assert g.proc.poll() is not None
    g.shutdown()


# -- QEMU never outlives its owner ------------------------------------------

GUEST_PY = os.path.join(guestlib.HERE, "guest.py")
OWNER_LIB = """
import sys, time
sys.path.insert(0, %r)
import guest
g = guest.Guest(name="emunic-owner", boot_timeout=300).boot()
print("booted", flush=True)
time.sleep(600)
""" % guestlib.HERE


def qemus_of(owner_pid):
    """PIDs of QEMU processes started by owner_pid (their spool names it)."""
    tag = "spool-%d-" % owner_pid
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmd and tag in cmd:
            pids.append(int(d))
    return pids


def wait_for(cond, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def start_owner(argv, booted_marker):
    """Start an owner process; once its QEMU runs (and, if booted_marker,
    once the guest is up), return it."""
    p = subprocess.Popen(argv, cwd=guestlib.WORK, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    assert wait_for(lambda: qemus_of(p.pid), 60), "no QEMU started by %s" % argv
    if booted_marker:
        for line in p.stdout:
            if booted_marker in line:
                break
        else:
            pytest.fail("the guest of %s never booted" % argv)
    return p


@pytest.mark.parametrize("sig,booted", [
    (signal.SIGTERM, True), (signal.SIGKILL, True),
    (signal.SIGINT, False), (signal.SIGHUP, False)],
    ids=["TERM-running", "KILL-running", "INT-booting", "HUP-booting"])
def test_no_qemu_outlives_guest_py(sig, booted):
    """guest.py killed while its guest boots or runs a job: its QEMU is gone
    within a few seconds (handlers for TERM/INT/HUP, PR_SET_PDEATHSIG for KILL)."""
    p = start_owner([sys.executable, GUEST_PY, "--", "sleep", "600"],
                    "booted in" if booted else None)
    qemu = qemus_of(p.pid)
    p.send_signal(sig)
    rc = p.wait(30)
    assert wait_for(lambda: not qemus_of(p.pid), 5), "QEMU %s outlived guest.py" % qemu
    assert rc == (-signal.SIGKILL if sig == signal.SIGKILL else 128 + sig)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["KILL", "TERM"])
def test_no_qemu_outlives_a_library_owner(sig):
    """A Python program (pytest, say) using guest.Guest, killed with no
    handler of its own: the kernel stops its QEMU."""
    p = start_owner([sys.executable, "-c", OWNER_LIB], "booted" if sig == signal.SIGKILL else None)
    qemu = qemus_of(p.pid)
    p.send_signal(sig)
    assert p.wait(30) == -sig
    assert wait_for(lambda: not qemus_of(p.pid), 5), "QEMU %s outlived its owner" % qemu


def test_first_line_names_accelerator_and_boot_time_and_a_timeout_is_said():
    """The boot line comes first; a command past --timeout is killed, and
    guest.py says so (the status alone, 124, once cut `make demo` short
    without a word)."""
    p = subprocess.run([sys.executable, GUEST_PY, "--timeout", "2", "--", "sh", "-c", "echo started; sleep 60"],
                       cwd=guestlib.WORK, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert p.returncode == 124, p.stderr
    assert "started" in p.stdout
    lines = [l for l in p.stderr.splitlines() if not l.startswith("guest: built ")]
    assert re.match(r"guest: emunic-guest0 booted in \d+\.\d s under "
                    r"(KVM \(-cpu host|TCG \(-cpu qemu64,\+ssse3,\+sse4\.1,\+sse4\.2,\+popcnt); ", lines[0]), lines
    c = guestlib.accel_choice()
    assert c.reason in lines[0]
    assert ("guest.py: emunic-guest0: exit 124: a time limit ran out (guest.py --timeout 2 s, or the "
            "command's own, e.g. emunic-run -t)") in p.stderr


def test_forced_kvm_where_unusable_fails_fast():
    """EMUNIC_ACCEL=kvm on a host without usable KVM: exit 125 at once, no
    silent TCG; on a host with real KVM it boots under KVM."""
    env = dict(os.environ, EMUNIC_ACCEL="kvm")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, GUEST_PY, "--", "true"], cwd=guestlib.WORK, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if guestlib.accel_choice().accel == "kvm":
        assert p.returncode == 0 and "under KVM" in p.stderr, p.stderr
        return
    assert p.returncode == 125, p.stderr
    assert "guest: error: EMUNIC_ACCEL=kvm but KVM cannot run the guest here: " in p.stderr
    assert time.monotonic() - t0 < 60
    assert "booted" not in p.stderr
