"""The engine's ownership token (DESIGN.md, "Data flow"): two application
threads and the progress core take it in turn, 10,000 rounds a thread, with
no lost wake-up, no deadlock, and triggers firing in threshold order."""
import pytest

from conftest import BIN, run_ctest

MODES = {
    "assist": "",                      # waiters run the engine (the default)
    "sleep-at-once": "EMUNIC_ASSIST_US=0",  # every wake-up is the core's hand-over
    "spin-core": "EMUNIC_IDLE=spin",   # a core that never sleeps
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_token_handover_stress(rxe, mode):
    out = run_ctest(rxe, "%s %s/emunic-run -n 1 -t 400 %s/emunic-tokenstress 10000" % (MODES[mode], BIN, BIN),
                    timeout=450)
    assert "emunic-tokenstress: PASS: 2 threads x 10000 rounds (30000 waits each" in out, out


def test_token_stress_usage(rxe):
    out = run_ctest(rxe, "%s/emunic-tokenstress --help" % BIN, timeout=30)
    assert "usage: emunic-run -n 1 emunic-tokenstress [ROUNDS]" in out, out
    rc, out = rxe.run("%s/emunic-tokenstress 1 2" % BIN, timeout=30)
    assert rc == 2 and "usage:" in out, out
