"""The loss soak: two guests, one rank each, netem dropping packets both
ways, SOAK_ROUNDS rounds of 100 messages each way (0-4 KiB, every byte
checked, each receive matched to its message by tag and order, none left
over).  Now and then rxe answers a retransmitted RDMA WRITE with immediate
with a NAK (IBV_WC_REM_INV_REQ_ERR at the sender) and the connection fails;
the progress core reconnects and resends what the peer did not get
(emunic/cm/reconnect.c), so every message still arrives exactly once.
`make test` runs 20 rounds (4,000 messages), `make soak` 250 (50,000)."""
import os
import re

from conftest import BIN

RUN = BIN + "/emunic-run"
# `make soak` runs 250 rounds (50,000 messages).
SOAK_ROUNDS = int(os.environ.get("EMUNIC_SOAK_ROUNDS", "20"))
SOAK_LOSS = os.environ.get("EMUNIC_SOAK_LOSS", "2%")


def test_loss_soak_delivers_every_message_once(guest_pair):
    a, b = guest_pair.guests
    n = 2 * 100 * SOAK_ROUNDS
    cmd = ("%s -c -f 'loss:p=%s' -n 2 --nodes 2 --node {node} --server %s:7713 -t 1500 "
           "%s/emunic-rndv sizes --count 100 --max 4096 --rounds %d"
           % (RUN, SOAK_LOSS, guest_pair.IPS[0], BIN, SOAK_ROUNDS))
    jobs = [g.submit(cmd.format(node=i), timeout=1600) for i, g in enumerate((a, b))]
    (rca, outa), (rcb, outb) = a.wait(jobs[0]), b.wait(jobs[1])
    assert rca == 0 and rcb == 0, outa + outb
    assert "emunic-rndv: sizes: PASS" in outa, outa
    assert "round %d of %d: %d messages delivered byte-exact" % (SOAK_ROUNDS, SOAK_ROUNDS, n) in outa, outa
    for out in (outa, outb):
        assert "reconnection(s), nothing left over" in out, out
    # What the run survived, for `make soak PYTEST_ARGS=-s`.
    print("".join(l + "\n" for l in (outa + outb).splitlines()
                  if "reconnection(s)" in l or "hw_counters" in l or "netem" in l or " +" in l))
    for out in (outa, outb):
        assert re.search(r"netem on eth0: loss %s" % re.escape(SOAK_LOSS.rstrip("%")), out), out
    # The loss was real: rxe saw sequence gaps and retransmitted.
    moved = re.findall(r"(rcvd_seq_err|completer_retry_err|out_of_seq_request|duplicate_request) \+(\d+)",
                       outa + outb)
    assert sum(int(v) for _, v in moved) > 0, outa + outb
    # And it is gone afterwards.
    for g in (a, b):
        rc, q = g.run("tc qdisc show dev eth0", timeout=30)
        assert "netem" not in q, q
