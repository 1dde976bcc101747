#!/usr/bin/python3
"""Boot the emunic test guest under QEMU and run commands inside it.

The guest mounts the host's root read-only and the work tree read-write at
its host path, so binaries built on the host run unchanged inside.  Commands
travel through a spool directory in the work tree (see agent.sh).

As a program:  guest.py [--two] [--timeout S] -- COMMAND [ARG...]
               guest.py --info

The accelerator (KVM or TCG) is chosen on evidence by accel.py.  QEMU never
outlives its owner: it gets SIGKILL from the kernel when the thread that
started it dies (PR_SET_PDEATHSIG), whatever killed it, and as a program
guest.py shuts its guests down on SIGTERM, SIGINT and SIGHUP.
"""
import argparse
import ctypes
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

import accel as accellib

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.dirname(HERE)
BUILD = os.path.join(WORK, "build", "guest")


class GuestError(RuntimeError):
    pass


_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1
_live = set()           # guests whose QEMU may be running, for the signal handlers
_choice = None          # the accelerator, decided once per process


def spawn_owned(cmd, **kw):
    """Popen(cmd) in a new session (so a terminal's ^C reaches only its owner,
    who then shuts it down), killed by the kernel if its owner dies first."""
    owner = os.getpid()

    def die_with_owner():
        if _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != owner:
            os._exit(127)       # the owner is already gone (or prctl failed): do not start
    return subprocess.Popen(cmd, preexec_fn=die_with_owner, start_new_session=True, **kw)


def accel_choice():
    """The accelerator for every guest of this process (accel.py decides;
    a KVM probe boot needs the image, so it is built first)."""
    global _choice
    if _choice is None:
        build_image()
        probe = lambda: accellib.probe_boot(  # noqa: E731
            "qemu-system-x86_64", kernel(),
            os.path.join(BUILD, "initramfs.cpio.gz"), spawn=spawn_owned)
        try:
            _choice = accellib.choose(cache_path=os.path.join(BUILD, "accel-cache.json"),
                                      probe=probe)
        except accellib.AccelError as e:
            raise GuestError(str(e))
    return _choice


def accel_line(c):
    """How the guest runs, for the first line of a run: accelerator, CPU, why."""
    return "%s (-cpu %s; %s)" % (c.name(), c.cpu, c.reason)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kernel():
    """The kernel a guest boots: vmlinux (uncompressed, its PVH entry) where
    build.sh could make one, since decompressing the bzImage took 4-6 s of
    every boot under TCG; else vmlinuz."""
    elf = os.path.join(BUILD, "vmlinux")
    return elf if os.path.exists(elf) else os.path.join(BUILD, "vmlinuz")


def build_image():
    r = subprocess.run([os.path.join(HERE, "build.sh"), BUILD])
    if r.returncode != 0:
        raise GuestError("building the guest image failed (guest-images/build.sh)")


class Guest:
    """One QEMU guest with rxe0 on its virtio-net NIC."""

    def __init__(self, name="emunic-guest0", ip="10.0.2.15/24", net="user",
                 mac="52:54:00:12:34:56", mem_mb=3072, smp=2, boot_timeout=180):
        self.name, self.ip, self.net, self.mac = name, ip, net, mac
        self.mem_mb, self.smp, self.boot_timeout = mem_mb, smp, boot_timeout
        self.proc = None
        self.spool = None
        self.boot_seconds = None
        self.accel = None
        self.info = {}
        self.seq = 0
        self.bell = None

    # -- life cycle -------------------------------------------------------
    def qemu_cmd(self):
        if self.net == "user":
            netdev = "user,id=n0,restrict=on"
        else:
            netdev = "socket,id=n0," + self.net      # listen=... or connect=...
        # tsc=reliable: under TCG the kernel finds the vCPUs' TSCs
        # "unsynchronized" (they are QEMU's one host-derived counter) and
        # falls back to the HPET, which has no vDSO: every clock_gettime
        # became a system call plus an emulated MMIO read (~22 a barrier
        # in the engine), a cost no real machine has.  KVM guests use
        # kvm-clock either way.
        append = " ".join([
            "console=ttyS0", "loglevel=4", "panic=-1", "oops=panic", "tsc=reliable",
            "emunic.work=" + WORK, "emunic.spool=" + self.spool,
            "emunic.ip=" + self.ip, "emunic.host=" + self.name])
        return (["qemu-system-x86_64"] + self.accel.qemu_args() + [
            "-smp", str(self.smp), "-m", str(self.mem_mb),
            "-nodefaults", "-no-reboot", "-display", "none", "-monitor", "none",
            "-serial", "file:" + os.path.join(self.spool, "console.log"),
            # ttyS1: the agent's doorbell (agent.sh), a FIFO pair in the spool.
            "-chardev", "pipe,id=bell,path=" + os.path.join(self.spool, "bell"),
            "-serial", "chardev:bell",
            "-kernel", kernel(),
            "-initrd", os.path.join(BUILD, "initramfs.cpio.gz"),
            "-append", append,
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", "local,path=%s,mount_tag=work,security_model=none,multidevs=remap" % WORK,
            "-netdev", netdev, "-device", "virtio-net-pci,netdev=n0,mac=" + self.mac])

    def start(self):
        if shutil.which("qemu-system-x86_64") is None:
            raise GuestError("qemu-system-x86_64 is missing (make deps installs qemu-system-x86)")
        if any(c.isspace() for c in WORK):
            raise GuestError("the work tree path %r has white space; the guest cannot mount it" % WORK)
        self.accel = accel_choice()
        self.spool = os.path.join(BUILD, "spool-%d-%s" % (os.getpid(), self.name))
        shutil.rmtree(self.spool, ignore_errors=True)
        os.makedirs(self.spool)
        # QEMU reads bell.in (what the guest's ttyS1 receives) and writes
        # bell.out; the agent's tty does not echo, so bell.out stays empty.
        for end in ("in", "out"):
            os.mkfifo(os.path.join(self.spool, "bell." + end))
        self.bell = os.open(os.path.join(self.spool, "bell.in"), os.O_RDWR | os.O_NONBLOCK)
        self.t0 = time.monotonic()
        try:
            with open(os.path.join(self.spool, "qemu.log"), "w") as log:
                self.proc = spawn_owned(self.qemu_cmd(), stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT)
        except BaseException:
            self.close_bell()
            raise
        _live.add(self)

    def wait_ready(self):
        ready = os.path.join(self.spool, "ready")
        deadline = self.t0 + self.boot_timeout
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                self.kill()
                raise GuestError("%s: QEMU exited with status %s during boot\n%s"
                                 % (self.name, self.proc.returncode, self.logs()))
            if time.monotonic() > deadline:
                self.kill()
                raise GuestError("%s: no ready signal after %ds; guest killed\n%s"
                                 % (self.name, self.boot_timeout, self.logs()))
            time.sleep(0.05)
        self.boot_seconds = time.monotonic() - self.t0
        with open(ready) as f:
            self.info = dict(l.strip().split("=", 1) for l in f if "=" in l)
        if "ACTIVE" not in self.info.get("state", ""):
            self.kill()
            raise GuestError("%s: rxe0 is not ACTIVE (%s)\n%s"
                             % (self.name, self.info.get("state"), self.logs()))

    def boot(self):
        self.start()
        self.wait_ready()
        return self

    def logs(self, lines=30):
        out = []
        for f in ("console.log", "qemu.log"):
            p = os.path.join(self.spool or "", f)
            if os.path.exists(p):
                with open(p, errors="replace") as fh:
                    tail = fh.read().splitlines()[-lines:]
                out.append("--- %s (last %d lines) ---\n%s" % (f, lines, "\n".join(tail)))
        return "\n".join(out)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        _live.discard(self)
        self.close_bell()

    def close_bell(self):
        if self.bell is not None:
            os.close(self.bell)
            self.bell = None

    def shutdown(self, timeout=10):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            open(os.path.join(self.spool, "shutdown"), "w").close()
            self.ring()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        _live.discard(self)
        shutil.rmtree(self.spool, ignore_errors=True)
        self.proc = None
        self.close_bell()

    # -- jobs -------------------------------------------------------------
    def submit(self, cmd, timeout=600, cwd=None, env=None):
        """Start COMMAND (a shell string) in the guest; returns a job id."""
        if self.proc is None or self.proc.poll() is not None:
            raise GuestError("%s is not running" % self.name)
        self.seq += 1
        jid = "j%d" % self.seq
        p = lambda ext: os.path.join(self.spool, jid + "." + ext)
        with open(p("cwd"), "w") as f:
            f.write(cwd or WORK)
        with open(p("timeout"), "w") as f:
            f.write(str(int(timeout)))
        script = "".join("export %s=%s\n" % (k, shlex.quote(str(v))) for k, v in (env or {}).items())
        with open(p("tmp"), "w") as f:
            f.write(script + cmd + "\n")
        os.rename(p("tmp"), p("job"))
        self.ring()
        return jid, timeout

    def ring(self):
        """Wakes the agent (agent.sh's nap); a full pipe means it has rings
        enough to look, and without a bell it looks within 1 s anyway."""
        try:
            os.write(self.bell, b"\n")
        except (OSError, TypeError):
            pass

    def wait(self, job, stream=None):
        """Wait for a job; returns (status, output).  Streams output if asked.
        The output returned is the file read whole once the job is done, not
        what was streamed: see read_landed."""
        jid, timeout = job
        p = lambda ext: os.path.join(self.spool, jid + "." + ext)
        deadline = time.monotonic() + timeout + 30      # the guest's own timeout fires first
        pos = 0

        def pump(final=False):
            nonlocal pos
            if not stream:
                return
            data, pos = read_landed(p("out"), pos, final)
            if data:
                stream.write(data.decode(errors="replace"))
                stream.flush()

        while not done(p("rc")):
            pump()
            if self.proc.poll() is not None:
                raise GuestError("%s died while running job %s\n%s" % (self.name, jid, self.logs()))
            if time.monotonic() > deadline:
                self.kill()
                raise GuestError("%s: job %s did not finish within %ds; guest killed\n%s"
                                 % (self.name, jid, timeout, self.logs()))
            time.sleep(0.02)
        pump(final=True)
        out, _ = read_landed(p("out"), 0, True)
        with open(p("rc")) as f:
            rc = int(f.read().strip() or 255)
        for ext in ("cwd", "timeout", "job", "out", "rc"):
            try:
                os.unlink(p(ext))
            except FileNotFoundError:
                pass
        return rc, out.decode(errors="replace")

    def run(self, cmd, timeout=600, cwd=None, env=None, stream=None):
        return self.wait(self.submit(cmd, timeout, cwd, env), stream)


def read_landed(path, pos, final):
    """What a job's output file holds from pos on, and the position after it.
    QEMU's 9p server runs a guest's writes in parallel and may land a later
    one first: until the earlier lands, the file has a hole of zeros before
    it, and reading past that would lose the earlier write for good (seen:
    result lines of a job whose two streams shared the file went missing).
    So while the job runs, only what precedes the first zero byte counts;
    once it is done (final: its processes have exited, every write landed),
    everything does."""
    try:
        with open(path, "rb") as f:
            f.seek(pos)
            data = f.read()
    except FileNotFoundError:
        return b"", pos
    if not final and b"\0" in data:
        data = data[:data.index(b"\0")]
    return data, pos + len(data)


def done(rc_path):
    """A job's status is written in one write ending in a newline (agent.sh);
    until that has landed the file may be missing or empty."""
    try:
        with open(rc_path) as f:
            return f.read().endswith("\n")
    except FileNotFoundError:
        return False


class GuestPair:
    """Two guests joined by a QEMU socket netdev, 10.77.0.1 and 10.77.0.2."""
    IPS = ("10.77.0.1", "10.77.0.2")

    def __init__(self, **kw):
        port = free_port()
        self.guests = [
            Guest("emunic-guest1", self.IPS[0] + "/24", "listen=127.0.0.1:%d" % port,
                  "52:54:00:12:35:01", **kw),
            Guest("emunic-guest2", self.IPS[1] + "/24", "connect=127.0.0.1:%d" % port,
                  "52:54:00:12:35:02", **kw)]

    def boot(self):
        try:
            for g in self.guests:
                g.start()
                time.sleep(0.5)            # the listening side first
            for g in self.guests:
                g.wait_ready()
        except Exception:
            self.shutdown()
            raise
        return self

    def shutdown(self):
        for g in self.guests:
            g.shutdown()


def stop_all_on(signum, _frame):
    """SIGTERM/SIGINT/SIGHUP: stop every guest of this process, then exit
    128 + signum as a shell would report it."""
    for g in list(_live):
        g.kill()
        shutil.rmtree(g.spool or "", ignore_errors=True)
    print("guest: %s: guests stopped" % signal.Signals(signum).name, file=sys.stderr)
    os._exit(128 + signum)


def boot_line(g, extra=""):
    return "guest: %s booted in %.1f s under %s%s" % (g.name, g.boot_seconds, accel_line(g.accel), extra)


def info(boot_timeout):
    """--info: the accelerator decision, then one real boot to time it."""
    c = accel_choice()
    print("accelerator: %s\ncpu model:   %s\nwhy:         %s" % (c.name(), c.cpu, c.reason))
    print("probe cache: %s" % os.path.join(BUILD, "accel-cache.json"))
    g = Guest(boot_timeout=boot_timeout).boot()
    try:
        rc, out = g.run("uname -r", timeout=30)
        print("boot:        %.1f s to rxe0 %s (guest uptime %s s, kernel %s)" % (
            g.boot_seconds, g.info.get("state"), g.info.get("uptime"), out.strip()))
    finally:
        g.shutdown()
    return rc


def said_timeout(rc, name, timeout):
    """The guest's agent ends a job at its limit as timeout(1) would, status 124; the
    command's own time limit (emunic-run -t) exits 124 too, so both are named."""
    if rc == 124:
        print("guest.py: %s: exit 124: a time limit ran out (guest.py --timeout %d s, or the command's "
              "own, e.g. emunic-run -t)" % (name, timeout), file=sys.stderr)


def run_two(shell, cwd, a):
    pair = GuestPair(boot_timeout=a.boot_timeout)
    try:
        pair.boot()
        for g in pair.guests:
            print(boot_line(g, ", rxe0 %s, %s" % (g.info.get("state"), g.info.get("ip"))),
                  file=sys.stderr)
        env = {"EMUNIC_GUEST_IPS": " ".join(GuestPair.IPS)}
        jobs = [g.submit(shell, a.timeout, cwd, dict(env, EMUNIC_GUEST=i))
                for i, g in enumerate(pair.guests)]
        rcs = []
        for g, j in zip(pair.guests, jobs):
            r, out = g.wait(j)
            sys.stdout.write("".join("[%s] %s\n" % (g.name, l) for l in out.splitlines()))
            said_timeout(r, g.name, a.timeout)
            rcs.append(r)
        return max(rcs)
    finally:
        pair.shutdown()


def run_one(shell, cwd, a):
    g = Guest(boot_timeout=a.boot_timeout)
    try:
        g.boot()
        print(boot_line(g, ", guest uptime %s s, rxe0 %s" % (g.info.get("uptime"), g.info.get("state"))),
              file=sys.stderr)
        rc, _ = g.run(shell, a.timeout, cwd, stream=sys.stdout)
        said_timeout(rc, g.name, a.timeout)
        return rc
    finally:
        g.shutdown()


def main():
    ap = argparse.ArgumentParser(
        description="Boot the emunic guest (rdma_rxe on virtio-net) and run COMMAND in it; "
                    "exits with COMMAND's status (125: the guest itself failed; 128+N: killed "
                    "by signal N, guests stopped).  With --two, two guests joined by a socket "
                    "netdev run COMMAND each, with EMUNIC_GUEST=0|1 and EMUNIC_GUEST_IPS set.  "
                    "EMUNIC_ACCEL=auto|kvm|tcg chooses the accelerator (auto: KVM only on "
                    "evidence, see guest-images/accel.py).")
    ap.add_argument("--two", action="store_true", help="boot two guests joined by a socket netdev")
    ap.add_argument("--info", action="store_true",
                    help="print the accelerator, its CPU model and why, then boot once and "
                         "print the boot time")
    ap.add_argument("--timeout", type=int, default=600, help="seconds COMMAND may run (default 600)")
    ap.add_argument("--boot-timeout", type=int, default=180, help="seconds the boot may take (default 180)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd and not a.info:
        ap.error("no COMMAND given")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop_all_on)
    shell = " ".join(shlex.quote(c) for c in cmd)
    cwd = os.getcwd()
    if not (cwd + "/").startswith(WORK + "/") and cwd.startswith(("/tmp", "/run")):
        cwd = WORK        # the guest has its own /tmp and /run
    try:
        build_image()
        if a.info:
            return info(a.boot_timeout)
        return (run_two if a.two else run_one)(shell, cwd, a)
    except GuestError as e:
        print("guest: error: %s" % e, file=sys.stderr)
        return 125


if __name__ == "__main__":
    sys.exit(main())
