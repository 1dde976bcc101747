"""The guest runner itself: hung commands and failed boots end with a clear error."""
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
