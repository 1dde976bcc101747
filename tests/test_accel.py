"""The accelerator probe's decision table (guest-images/accel.py), on fake
/dev, /sys/module and /proc roots: no real KVM needed.  The last tests run the
real probe boot under TCG to show the probe can tell a boot that reached
userspace from one that did not, and check the kernel guests boot."""
import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

import accel
import guest as guestlib

QEMU = "/bin/true"      # any binary: only its identity enters the cache key
BOOT = "0f6a4bcb-1111-4aaa-8bbb-000000000001"


def make_root(tmp_path, modules=(), flags=(), kvm="file", boot_id=BOOT):
    root = tmp_path / "root"
    (root / "sys/module").mkdir(parents=True)
    for m in modules:
        (root / "sys/module" / m).mkdir()
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    (root / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")
    (root / "proc/cpuinfo").write_text(
        "processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor %s\n\n"
        "processor\t: 1\nflags\t\t: fpu vme sse2 hypervisor %s\n" % (" ".join(flags), " ".join(flags)))
    (root / "dev").mkdir()
    if kvm == "file":
        (root / "dev/kvm").write_text("")
    elif kvm == "unopenable":
        (root / "dev/kvm").mkdir()       # exists, open(O_RDWR) fails (EISDIR; EACCES for users)
    return str(root)


class Probe:
    def __init__(self, ok=True):
        self.ok, self.calls = ok, 0

    def __call__(self):
        self.calls += 1
        return (self.ok, "probe boot reached userspace in 1.0 s" if self.ok
                else "probe boot failed (QEMU status -6: failed to set MSR 0x10a)", 1.0)


def choose(root, tmp_path, mode=None, probe=None):
    env = {} if mode is None else {"EMUNIC_ACCEL": mode}
    return accel.choose(env=env, root=root, cache_path=str(tmp_path / "cache.json"),
                        qemu=QEMU, probe=probe)


REAL_INTEL = dict(modules=("kvm", "kvm_intel"), flags=("vmx",))
REAL_AMD_FLAGS_ONLY = dict(modules=("kvm",), flags=("svm",))
PVM = dict(modules=("kvm", "kvm_pvm"))
NESTED_NO_FLAGS = dict(modules=("kvm",))


@pytest.mark.parametrize("host", [REAL_INTEL, REAL_AMD_FLAGS_ONLY], ids=["kvm_intel+vmx", "svm-flag"])
def test_real_kvm_is_chosen_after_a_probe_boot_then_cached(tmp_path, host):
    root = make_root(tmp_path, **host)
    p = Probe()
    c = choose(root, tmp_path, probe=p)
    assert (c.accel, c.cpu, p.calls, c.cached) == ("kvm", "host", 1, False)
    assert c.qemu_args() == ["-accel", "kvm", "-cpu", "host"]
    c = choose(root, tmp_path, probe=p)
    assert (c.accel, p.calls, c.cached) == ("kvm", 1, True), "the probe runs once per host boot"
    assert "cached" in c.reason


@pytest.mark.parametrize("host,why", [
    (PVM, "KVM: /dev/kvm is kvm_pvm (paravirtual), using TCG"),
    (NESTED_NO_FLAGS, "KVM: /dev/kvm has no hardware behind it"),
    (dict(REAL_INTEL, kvm=None), "KVM: no /dev/kvm, using TCG"),
    (dict(REAL_INTEL, kvm="unopenable"), "KVM: /dev/kvm does not open ("),
    (dict(modules=("kvm", "kvm_intel", "kvm_pvm"), flags=("vmx",)), "kvm_pvm (paravirtual)"),
], ids=["pvm", "nested-without-flags", "no-dev-kvm", "dev-kvm-unopenable", "intel+pvm"])
def test_no_evidence_means_tcg_without_a_probe(tmp_path, host, why):
    p = Probe()
    c = choose(make_root(tmp_path, **host), tmp_path, probe=p)
    assert (c.accel, c.cpu, p.calls) == ("tcg", "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt", 0)
    assert c.qemu_args() == ["-accel", "tcg,thread=multi", "-cpu", "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt"]
    assert why in c.reason
    assert c.reason.endswith(", using TCG") and "\n" not in c.reason   # one line saying why


def test_failed_probe_means_tcg_and_says_why(tmp_path):
    p = Probe(ok=False)
    c = choose(make_root(tmp_path, **REAL_INTEL), tmp_path, probe=p)
    assert c.accel == "tcg" and p.calls == 1
    assert c.reason == "KVM: probe boot failed (QEMU status -6: failed to set MSR 0x10a), using TCG"
    c = choose(make_root(tmp_path / "again", **REAL_INTEL), tmp_path, probe=p)
    assert c.accel == "tcg" and p.calls == 1, "a failed probe is cached too"


def test_forced_tcg_skips_kvm_even_where_it_works(tmp_path):
    p = Probe()
    c = choose(make_root(tmp_path, **REAL_INTEL), tmp_path, mode="tcg", probe=p)
    assert (c.accel, c.reason, p.calls) == ("tcg", "EMUNIC_ACCEL=tcg", 0)


@pytest.mark.parametrize("host,probe_ok,msg", [
    (PVM, True, "kvm_pvm (paravirtual)"),
    (dict(REAL_INTEL, kvm=None), True, "no /dev/kvm"),
    (REAL_INTEL, False, "probe boot failed"),
], ids=["pvm", "no-dev-kvm", "probe-fails"])
def test_forced_kvm_fails_fast_where_kvm_is_unusable(tmp_path, host, probe_ok, msg):
    with pytest.raises(accel.AccelError) as e:
        choose(make_root(tmp_path, **host), tmp_path, mode="kvm", probe=Probe(probe_ok))
    assert str(e.value).startswith("EMUNIC_ACCEL=kvm but KVM cannot run the guest here: ")
    assert msg in str(e.value)


def test_forced_kvm_where_it_works(tmp_path):
    c = choose(make_root(tmp_path, **REAL_INTEL), tmp_path, mode="KVM", probe=Probe())
    assert c.accel == "kvm"


def test_bad_accel_value_is_an_error(tmp_path):
    with pytest.raises(accel.AccelError) as e:
        choose(make_root(tmp_path, **REAL_INTEL), tmp_path, mode="hvf", probe=Probe())
    assert str(e.value) == "EMUNIC_ACCEL=hvf: expected one of auto, kvm, tcg"


def test_stale_cache_from_another_boot_is_ignored(tmp_path):
    p = Probe(ok=False)
    choose(make_root(tmp_path / "a", **REAL_INTEL), tmp_path, probe=p)
    assert p.calls == 1
    with open(tmp_path / "cache.json") as f:
        assert json.load(f)["key"]["boot_id"] == BOOT
    # The host rebooted: the cached failure no longer applies, the probe runs again.
    other = make_root(tmp_path / "b", boot_id="0f6a4bcb-2222-4aaa-8bbb-000000000002", **REAL_INTEL)
    p.ok = True
    c = choose(other, tmp_path, probe=p)
    assert (c.accel, p.calls, c.cached) == ("kvm", 2, False)
    with open(tmp_path / "cache.json") as f:
        assert json.load(f)["key"]["boot_id"].endswith("0002")


def test_cache_of_another_qemu_or_garbage_is_ignored(tmp_path):
    root = make_root(tmp_path, **REAL_INTEL)
    p = Probe()
    choose(root, tmp_path, probe=p)
    accel.choose(env={}, root=root, cache_path=str(tmp_path / "cache.json"),
                 qemu="/bin/false", probe=p)
    assert p.calls == 2, "a different QEMU binary is probed again"
    (tmp_path / "cache.json").write_text("{not json")
    choose(root, tmp_path, probe=p)
    assert p.calls == 3


def test_probe_boot_tells_userspace_from_a_failed_boot(tmp_path):
    """The real probe under TCG (the only accelerator CI has): the guest's
    /init reports userspace; a kernel that is not one does not."""
    guestlib.build_image()
    kernel = guestlib.kernel()
    initrd = os.path.join(guestlib.BUILD, "initramfs.cpio.gz")
    ok, detail, secs = accel.probe_boot("qemu-system-x86_64", kernel, initrd, accel="tcg",
                                        spawn=guestlib.spawn_owned, timeout=90)
    assert ok, detail
    assert detail.startswith("probe boot reached userspace in")
    bogus = tmp_path / "vmlinuz"
    bogus.write_bytes(b"\0" * 4096)
    ok, detail, _ = accel.probe_boot("qemu-system-x86_64", str(bogus), initrd, accel="tcg",
                                     spawn=guestlib.spawn_owned, timeout=30)
    assert not ok
    assert detail.startswith("probe boot failed (QEMU status 1")


EXTRACT = os.path.join(os.path.dirname(accel.__file__), "extract-vmlinux.sh")


def test_guests_boot_the_uncompressed_kernel_and_fall_back_to_the_bzimage(tmp_path, monkeypatch):
    """build.sh leaves an uncompressed vmlinux with a PVH entry beside
    Debian's vmlinuz (decompressing the bzImage took 4-6 s of each TCG
    boot), and guests boot it; a bzImage with no XZ payload, a truncated
    one, or one whose payload is no PVH ELF gives no vmlinux, a line saying
    so, exit 0, and guests boot the bzImage."""
    guestlib.build_image()
    elf = os.path.join(guestlib.BUILD, "vmlinux")
    assert guestlib.kernel() == elf
    with open(elf, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    notes = subprocess.run(["readelf", "-n", elf], stdout=subprocess.PIPE).stdout.decode()
    assert "(0x00000012)" in notes, "no XEN_ELFNOTE_PHYS32_ENTRY in %s" % elf
    with open(os.path.join(guestlib.BUILD, "vmlinuz"), "rb") as f:
        bzimage = f.read()
    out = tmp_path / "vmlinux"
    not_elf = subprocess.run(["xz", "-c"], input=b"not an ELF" * 100, stdout=subprocess.PIPE).stdout
    for body, says in ((b"\0" * 4096, "has no XZ payload"),
                       (bzimage[:len(bzimage) * 9 // 10], "holds no whole XZ stream of an ELF with a PVH entry"),
                       (b"MZ" + not_elf, "holds no whole XZ stream of an ELF with a PVH entry")):
        out.write_bytes(b"stale")
        bz = tmp_path / "bzImage"
        bz.write_bytes(body)
        p = subprocess.run([EXTRACT, str(bz), str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert p.returncode == 0, p.stdout
        assert says in p.stdout.decode(), p.stdout
        assert not out.exists() and not (tmp_path / "vmlinux.tmp").exists()
    p = subprocess.run([EXTRACT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode != 0 and b"usage: extract-vmlinux.sh BZIMAGE VMLINUX" in p.stdout
    # What a guest's QEMU is given: vmlinux, else vmlinuz.
    g = guestlib.Guest()
    g.accel, g.spool = accel.Choice("tcg", "test"), str(tmp_path)
    assert g.qemu_cmd()[g.qemu_cmd().index("-kernel") + 1] == elf
    monkeypatch.setattr(guestlib, "BUILD", str(tmp_path))
    assert guestlib.kernel() == str(tmp_path / "vmlinuz")
    assert g.qemu_cmd()[g.qemu_cmd().index("-kernel") + 1] == str(tmp_path / "vmlinuz")


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:         # another file system, or links not allowed
        shutil.copy2(src, dst)


def test_a_fresh_build_takes_what_is_slow_to_make_from_the_cache(tmp_path):
    """build.sh keeps what is slow to make in $EMUNIC_CACHE as well: the
    .deb (a 70 MB download), its kernel version (~5 s to list), siw.ko (~30
    s to build) and the image.  A build into a directory whose image files
    are hard links into the cache (as a build from the cache leaves them)
    takes the first three from the cache, fetching and building nothing,
    and makes new image files, never writing through the links; the next
    build takes that image, the same bytes; a build that has it all fills an
    empty cache.  One image build in all (~10 s)."""
    guestlib.build_image()
    src = guestlib.BUILD
    with open(os.path.join(src, ".built-from")) as f:
        deb = f.read().split()[0]       # the .deb the image was built from
    siw = os.path.join(src, "siw", "siw.ko")
    if not os.path.exists(siw):
        pytest.skip("this machine built no siw.ko (see guest-images/build.sh)")
    if not os.path.exists(os.path.join(src, "vmlinux")):
        pytest.skip("this machine made no vmlinux (no xz or readelf): build.sh caches no image")
    with open(os.path.join(src, "siw", ".built-from")) as f:
        kver, ver = f.read().split()
    files = ("vmlinuz", "vmlinux", "initramfs.cpio.gz")
    try:
        cache = tmp_path / "cache"
        old = cache / ("image-" + "0" * 16)    # an older image, by another name
        old.mkdir(parents=True)
        inputs = [deb, deb + ".kver", "siw-%s-%s.ko" % (kver, ver)]
        for f, name in zip((os.path.join(src, deb), os.path.join(src, deb + ".kver"), siw), inputs):
            _link_or_copy(f, cache / name)
        (tmp_path / "a").mkdir()
        for f in files:
            _link_or_copy(os.path.join(src, f), old / f)
            _link_or_copy(old / f, tmp_path / "a" / f)
        linked = os.stat(tmp_path / "a" / "vmlinuz").st_ino == os.stat(old / "vmlinuz").st_ino
        before = {f: os.stat(old / f).st_mtime_ns for f in files}
        build = os.path.join(os.path.dirname(accel.__file__), "build.sh")

        def run(out, cache_dir):
            p = subprocess.run([build, str(out)], env=dict(os.environ, EMUNIC_CACHE=str(cache_dir)),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
            said = p.stdout.decode()
            assert p.returncode == 0, said
            assert "downloading" not in said and "built siw.ko" not in said, said
            return said

        def image(out):
            got = {}
            for f in files + ("siw/siw.ko",):
                with open(out / f, "rb") as fh:
                    got[f] = fh.read()
            return got

        said = run(tmp_path / "a", cache)
        assert "from the cache %s" % cache in said and "siw.ko for %s from the cache" % kver in said, said
        assert "guest: built %s" % (tmp_path / "a") in said, said
        # New files, not the old ones rewritten through their links.
        assert {f: os.stat(old / f).st_mtime_ns for f in files} == before
        if linked:
            assert os.stat(tmp_path / "a" / "vmlinuz").st_ino != os.stat(old / "vmlinuz").st_ino
        images = sorted(n for n in os.listdir(cache) if n.startswith("image-") and n != old.name)
        assert len(images) == 1, os.listdir(cache)
        said = run(tmp_path / "b", cache)
        assert "the image (kernel %s) from the cache %s" % (kver, cache) in said, said
        assert image(tmp_path / "a") == image(tmp_path / "b")
        # The other way: a build that has it all puts it into an empty cache.
        run(tmp_path / "a", tmp_path / "cache2")
        assert sorted(os.listdir(tmp_path / "cache2")) == sorted(inputs + images)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)    # ~300 MB of images


def test_without_apt_lists_a_build_takes_the_kernel_from_the_cache_or_says_what_to_run(tmp_path):
    """Before 'apt-get update' apt-cache resolves no linux-image-amd64:
    build.sh then takes a .deb it has, here or in the cache, and with none
    says to run apt-get update (it used to exit silently: its ls failed
    under pipefail before the message)."""
    guestlib.build_image()
    src = guestlib.BUILD
    with open(os.path.join(src, ".built-from")) as f:
        built_from = f.read()
    deb = built_from.split()[0]
    if not os.path.exists(os.path.join(src, "vmlinux")):
        pytest.skip("this machine made no vmlinux (no xz or readelf): build.sh caches no image")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-cache").write_text("#!/bin/sh\nexit 100\n")     # as without lists: no answer
    (fake / "apt-cache").chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (fake, os.environ["PATH"]))
    build = os.path.join(os.path.dirname(accel.__file__), "build.sh")
    try:
        cache = tmp_path / "cache"
        cache.mkdir()
        for name in (deb, deb + ".kver"):
            _link_or_copy(os.path.join(src, name), cache / name)
        siw = os.path.join(src, "siw", "siw.ko")
        if os.path.exists(siw):
            with open(os.path.join(src, "siw", ".built-from")) as f:
                _link_or_copy(siw, cache / ("siw-%s-%s.ko" % tuple(f.read().split())))
        # The image too, under build.sh's key, so that no image is built.
        image = cache / ("image-" + hashlib.sha1(built_from.encode()).hexdigest()[:16])
        image.mkdir()
        for name in ("vmlinuz", "vmlinux", "initramfs.cpio.gz"):
            _link_or_copy(os.path.join(src, name), image / name)
        p = subprocess.run([build, str(tmp_path / "none")], env=dict(env, EMUNIC_CACHE=""),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        said = p.stdout.decode()
        assert p.returncode == 1, said
        assert "cannot resolve linux-image-amd64; run 'apt-get update'" in said, said
        p = subprocess.run([build, str(tmp_path / "out")], env=dict(env, EMUNIC_CACHE=str(cache)),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        said = p.stdout.decode()
        assert p.returncode == 0, said
        assert "no apt lists; %s from the cache %s" % (deb, cache) in said, said
        assert "the image (kernel " in said and "built " not in said, said
        assert os.path.exists(tmp_path / "out" / "vmlinuz") and os.path.exists(tmp_path / "out" / "initramfs.cpio.gz")
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_the_cache_keeps_three_images_and_two_kernels_whatever_its_path(tmp_path):
    """A new image in the cache prunes it: the three images used last, the
    two newest kernels' .deb (with its version) and siw.ko, and temp
    entries a killed build left over an hour ago.  With a space in the
    cache's path (a home directory "John Doe"), nothing outside it goes."""
    guestlib.build_image()
    src = guestlib.BUILD
    with open(os.path.join(src, ".built-from")) as f:
        deb = f.read().split()[0]
    if not os.path.exists(os.path.join(src, "vmlinux")):
        pytest.skip("this machine made no vmlinux (no xz or readelf): build.sh caches no image")
    try:
        base = tmp_path / "my cache"
        cache = base / "emunic"
        cache.mkdir(parents=True)
        (tmp_path / "my").mkdir()          # what a split "my cache/..." would name
        (tmp_path / "my" / "keep").write_text("not the cache's")
        old = time.time() - 7200
        for i in range(5):                 # image-0..4, 4 the newest
            d = cache / ("image-%016d" % i)
            d.mkdir()
            (d / "vmlinuz").write_text("x")
            os.utime(d, (old + i, old + i))
        for i, name in enumerate(["linux-image-1.0-amd64_1.0-1_amd64.deb", "linux-image-2.0-amd64_2.0-1_amd64.deb",
                                  "linux-image-3.0-amd64_3.0-1_amd64.deb"]):
            for f in (name, name + ".kver"):
                (cache / f).write_text("x")
                os.utime(cache / f, (old + i, old + i))
        for i in range(3):
            (cache / ("siw-%d.0-amd64-%d.ko" % (i, i))).write_text("x")
            os.utime(cache / ("siw-%d.0-amd64-%d.ko" % (i, i)), (old + i, old + i))
        (cache / "image-left.tmp.123").mkdir()
        os.utime(cache / "image-left.tmp.123", (old, old))
        (cache / "image-fresh.tmp.456").mkdir()    # a build under way
        # A tree whose image is built and stamped, not yet in this cache:
        # the build puts it there, then prunes.
        out = tmp_path / "out"
        (out / "siw").mkdir(parents=True)
        for f in ("vmlinuz", "vmlinux", "initramfs.cpio.gz", ".built-from", deb, deb + ".kver"):
            _link_or_copy(os.path.join(src, f), out / f)
        for f in os.listdir(os.path.join(src, "siw")):
            _link_or_copy(os.path.join(src, "siw", f), out / "siw" / f)
        build = os.path.join(os.path.dirname(accel.__file__), "build.sh")
        p = subprocess.run([build, str(out)], env=dict(os.environ, EMUNIC_CACHE=str(cache)),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        said = p.stdout.decode()
        assert p.returncode == 0, said
        left = sorted(os.listdir(cache))
        images = [n for n in left if n.startswith("image-") and ".tmp." not in n]
        assert len(images) == 3 and "image-%016d" % 4 in images and "image-%016d" % 3 in images, left
        assert "image-left.tmp.123" not in left and "image-fresh.tmp.456" in left, left
        debs = [n for n in left if n.endswith("_amd64.deb")]
        # the newest fake one, and the machine's own (newer: put by this
        # build where apt resolved it) or the next fake one
        assert len(debs) == 2 and "linux-image-3.0-amd64_3.0-1_amd64.deb" in debs, left
        assert all(n[:-len(".kver")] in debs for n in left if n.endswith(".kver")), left
        assert len([n for n in left if n.startswith("siw-")]) == 2, left
        assert (tmp_path / "my" / "keep").read_text() == "not the cache's"
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)
