"""shim/mlx5: ConnectX cross-channel in the hardware's own encoding (issue 20
part 4).  No ConnectX here: the encoders are checked byte by byte against
layouts written out by hand (host, also under ASan/UBSan), and on rxe the
capability query must say no, so auto picks the emulated backend and a
forced mlx5 fails naming the device."""
import subprocess

import pytest

from conftest import BIN, SANBIN


@pytest.mark.parametrize("bindir", [BIN, SANBIN])
def test_encoders_byte_exact_on_the_host(bindir):
    p = subprocess.run(["%s/emunic-mlx5enc" % bindir], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 0 and "emunic-mlx5enc: PASS" in out, out


def test_probe_without_the_device_skips():
    """No verbs device of that name (on any machine): the probe skips, 77."""
    p = subprocess.run(["%s/emunic-mlx5enc" % BIN, "--probe", "no-such-dev0"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 77 and "no verbs device named no-such-dev0: skip" in out, out


def _section(out, tag):
    return out.split("== %s ==" % tag)[1].split("== ")[0]


def test_rxe_is_never_given_the_mlx5_backend(rxe):
    """One guest call: unset (auto), forced mlx5, and a malformed value."""
    probe = "%s/emunic-mlx5enc --probe rxe0" % BIN
    cmd = ("echo '== auto =='; %s; echo rc=$?; "
           "echo '== mlx5 =='; EMUNIC_BACKEND=mlx5 %s; echo rc=$?; "
           "echo '== bad =='; EMUNIC_BACKEND=fast %s; echo rc=$?; echo '== end =='") % (probe, probe, probe)
    rc, out = rxe.run(cmd, timeout=60)
    assert rc == 0, out
    auto = _section(out, "auto")
    assert "rxe0: mlx5dv_is_supported 0, cross_channel 0 (rxe0: not an mlx5 device)" in auto, out
    assert "backend emulated: EMUNIC_BACKEND=auto: emulated (rxe0: not an mlx5 device)" in auto, out
    assert "rc=0" in auto, out
    forced = _section(out, "mlx5")
    assert ("error -95 (Operation not supported): EMUNIC_BACKEND=mlx5 but rxe0 has no native "
            "cross-channel: rxe0: not an mlx5 device") in forced, out
    assert "rc=1" in forced, out
    bad = _section(out, "bad")
    assert "error -22 (Invalid argument): EMUNIC_BACKEND='fast': accepted values are auto, emulated, mlx5" \
        in bad, out
    assert "rc=1" in bad, out


def test_forced_mlx5_fails_the_device_open_on_rxe(rxe):
    """The device interface chooses at every device open: EMUNIC_BACKEND=mlx5
    on rxe fails the open (the rank exits 3, could not run), naming the
    device and why; auto and emulated run the same program on rxe."""
    prog = "%s/emunic-run -n 2 %s/emunic-datapath" % (BIN, BIN)
    rc, out = rxe.run("EMUNIC_BACKEND=mlx5 " + prog, timeout=120)
    assert rc != 0, out
    assert "device rxe0: EMUNIC_BACKEND=mlx5 but rxe0 has no native cross-channel: rxe0: not an mlx5 device" \
        in out, out
    assert "exited with status 3" in out, out
    for env in ("EMUNIC_BACKEND=emulated", "EMUNIC_BACKEND=auto"):
        rc, out = rxe.run("%s %s" % (env, prog), timeout=120)
        assert rc == 0, (env, out)
