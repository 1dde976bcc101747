"""Which QEMU accelerator runs the emunic guest on this host, chosen on evidence.

An openable /dev/kvm proves nothing: a paravirtual KVM (kvm_pvm, no vmx/svm in
the CPU flags) opens fine and then cannot run an ordinary guest (QEMU aborts
on MSR 0x10a with -cpu max or host, and hangs silently with qemu64).  So KVM is
chosen only when every rule below holds, the last one being a short boot of the
real guest kernel that must reach userspace; anything less means TCG.

  1. EMUNIC_ACCEL is auto (default), kvm or tcg; tcg skips everything.
  2. /dev/kvm exists and opens read-write.
  3. No PVM module is loaded (/sys/module/kvm_pvm).
  4. kvm_intel or kvm_amd is loaded, or the CPU flags have vmx or svm.
  5. A probe boot under KVM reaches userspace within PROBE_TIMEOUT_S.

Rule 5's result is cached per host boot (keyed by boot_id and the QEMU
binary's identity), so the probe is paid at most once per host boot.  Under
auto a failed rule means TCG and one line saying why; under kvm it is an
AccelError, never a silent fallback.

The CPU model matches the accelerator, here and only here (CPU_MODEL).
"""
import json
import os
import subprocess
import time

MODES = ("auto", "kvm", "tcg")

# -cpu per accelerator.  KVM: "host" passes the real CPU through (max adds
# nothing a guest kernel needs and has tripped MSR checks on odd KVMs).  TCG:
# x86-64-v2 (qemu64 plus SSSE3, SSE4.1/4.2, POPCNT), what every x86 server of
# the last fifteen years has.  Not "max": its AVX2/AVX-512 code paths (glibc
# picks them) and 5-level paging (LA57, so every TLB miss walks five levels)
# made the same guest work 25-50% slower under QEMU 7.2's TCG (README, "The
# guest's accelerator", has the figures); emunic needs none of them.
CPU_MODEL = {"kvm": "host", "tcg": "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt"}
ACCEL_ARGS = {"kvm": ["-accel", "kvm"], "tcg": ["-accel", "tcg,thread=multi"]}
PVM_MODULES = ("kvm_pvm",)
HW_MODULES = ("kvm_intel", "kvm_amd")
HW_FLAGS = ("vmx", "svm")
PROBE_TIMEOUT_S = 20
PROBE_MARK = "emunic-probe: userspace reached"


class AccelError(RuntimeError):
    """EMUNIC_ACCEL asked for something this host cannot give."""


class Choice:
    """The accelerator, its CPU model, and why it was chosen."""

    def __init__(self, accel, reason, probe_s=None, cached=False):
        self.accel, self.reason = accel, reason
        self.cpu = CPU_MODEL[accel]
        self.probe_s, self.cached = probe_s, cached

    def qemu_args(self):
        return ACCEL_ARGS[self.accel] + ["-cpu", self.cpu]

    def name(self):
        return self.accel.upper()

    def __repr__(self):
        return "Choice(%s, %r)" % (self.accel, self.reason)


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def cpu_flags(root="/"):
    flags = set()
    for line in _read(os.path.join(root, "proc/cpuinfo")).splitlines():
        key, _, val = line.partition(":")
        if key.strip() == "flags":
            flags.update(val.split())
    return flags


def kvm_evidence(root="/"):
    """Rules 2-4: None when KVM may work, else why it cannot."""
    dev = os.path.join(root, "dev/kvm")
    if not os.path.exists(dev):
        return "no /dev/kvm"
    try:
        os.close(os.open(dev, os.O_RDWR))
    except OSError as e:
        return "/dev/kvm does not open (%s)" % e.strerror
    mods = os.path.join(root, "sys/module")
    pvm = [m for m in PVM_MODULES if os.path.isdir(os.path.join(mods, m))]
    if pvm:
        return "/dev/kvm is %s (paravirtual)" % pvm[0]
    hw = [m for m in HW_MODULES if os.path.isdir(os.path.join(mods, m))]
    flags = cpu_flags(root) & set(HW_FLAGS)
    if not hw and not flags:
        return ("/dev/kvm has no hardware behind it (neither %s loaded, no %s CPU flag)"
                % (" nor ".join(HW_MODULES), "/".join(HW_FLAGS)))
    return None


def qemu_identity(qemu):
    """What makes a cached probe stale besides a reboot: the QEMU binary."""
    path = qemu if os.path.isabs(qemu) else _which(qemu)
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return "%s (missing)" % qemu
    return "%s %d %d %d" % (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns)


def _which(prog):
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, prog)
        if os.access(p, os.X_OK):
            return p
    return None


def cache_key(root, qemu):
    return {"boot_id": _read(os.path.join(root, "proc/sys/kernel/random/boot_id")).strip(),
            "qemu": qemu_identity(qemu)}


def cache_load(path, key):
    """The cached probe result for this boot and QEMU, or None."""
    try:
        with open(path) as f:
            c = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(c, dict) or c.get("key") != key or not isinstance(c.get("ok"), bool):
        return None
    return c


def cache_store(path, key, ok, detail, seconds):
    tmp = "%s.%d" % (path, os.getpid())
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"key": key, "ok": ok, "detail": detail, "seconds": seconds}, f)
        os.rename(tmp, path)
    except OSError:
        pass                                # no cache: the next run probes again


def probe_boot(qemu, kernel, initrd, accel="kvm", spawn=subprocess.Popen,
               timeout=PROBE_TIMEOUT_S):
    """Rule 5: boot the guest kernel with emunic.probe=1 (its /init prints
    PROBE_MARK and powers off).  Returns (ok, detail, seconds).  accel is kvm
    but for the test that proves the probe itself works (under TCG)."""
    cmd = [qemu] + ACCEL_ARGS[accel] + [
        "-cpu", CPU_MODEL[accel], "-smp", "1", "-m", "256",
        "-nodefaults", "-no-reboot", "-display", "none", "-monitor", "none",
        "-serial", "stdio", "-kernel", kernel, "-initrd", initrd,
        "-append", "console=ttyS0 loglevel=1 panic=-1 emunic.probe=1"]
    t0 = time.monotonic()
    try:
        p = spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                  stderr=subprocess.STDOUT)
    except OSError as e:
        return False, "cannot start %s (%s)" % (qemu, e.strerror), 0.0
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return False, "probe boot did not reach userspace in %d s" % timeout, \
            time.monotonic() - t0
    secs = time.monotonic() - t0
    text = out.decode(errors="replace")
    if PROBE_MARK in text:
        return True, "probe boot reached userspace in %.1f s" % secs, secs
    last = [l for l in text.splitlines() if l.strip()][-1:] or ["no output"]
    return False, "probe boot failed (QEMU status %s: %s)" % (p.returncode, last[0].strip()), secs


def choose(env=None, root="/", cache_path=None, qemu="qemu-system-x86_64", probe=None):
    """Decide the accelerator.  probe() -> (ok, detail, seconds) runs rule 5;
    it is called only when rules 1-4 allow KVM and no cached result applies."""
    env = os.environ if env is None else env
    mode = env.get("EMUNIC_ACCEL", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise AccelError("EMUNIC_ACCEL=%s: expected one of %s" % (env.get("EMUNIC_ACCEL"),
                                                                   ", ".join(MODES)))
    if mode == "tcg":
        return Choice("tcg", "EMUNIC_ACCEL=tcg")
    why = kvm_evidence(root)
    if why is None:
        key = cache_key(root, qemu)
        hit = cache_load(cache_path, key) if cache_path else None
        if hit is not None:
            ok, detail, secs, cached = hit["ok"], hit["detail"], hit.get("seconds"), True
        else:
            if probe is None:
                raise AccelError("KVM looks usable but no probe was given")
            ok, detail, secs = probe()
            cached = False
            if cache_path:
                cache_store(cache_path, key, ok, detail, secs)
        if ok:
            return Choice("kvm", detail + (" (cached for this host boot)" if cached else ""),
                          secs, cached)
        why = detail
    if mode == "kvm":
        raise AccelError("EMUNIC_ACCEL=kvm but KVM cannot run the guest here: %s" % why)
    return Choice("tcg", "KVM: %s, using TCG" % why)
