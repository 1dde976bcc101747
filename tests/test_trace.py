"""Timeline traces (emunic-run --trace FILE, EMUNIC_TRACE): Chrome/Perfetto
trace-event JSON, one process a rank, a track a thread and a queue.  On rxe:
the JSON of a 2-rank barrier and of a triggered chain, parsed, with its
events in the order the rules imply (the ranks share one clock); a fault
and the reconnection after it; no file when off; a path that cannot be
written is named and the job still does its work."""
import json
import re
import subprocess

from conftest import BIN, ROOT

RUN = BIN + "/emunic-run"


def traced(rxe, n, args, path, opts="", timeout=60):
    """Runs a job with --trace path in the guest; returns (rc, output, doc),
    doc the parsed JSON (None when no file)."""
    rc, out = rxe.run("rm -f {p} {p}.rank*; {run} -n {n} -t {t} {o} --trace {p} {a} 2>&1; echo \"### rc=$?\"; "
                      "ls {p}.rank* 2>/dev/null; echo '### json'; cat {p} 2>/dev/null"
                      .format(p=path, run=RUN, n=n, t=timeout, o=opts, a=args), timeout=timeout + 30)
    head, _, body = out.partition("### json\n")
    m = re.search(r"### rc=(\d+)", head)
    assert m, out
    return int(m.group(1)), head, json.loads(body) if body.strip() else None


def queue_events(doc, pid, name, **args):
    """The events `name` on pid's queue tracks whose args match, in time order."""
    ev = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["cat"] == "queue" and e["pid"] == pid
          and e["name"] == name and all(e["args"].get(k) == v for k, v in args.items())]
    return sorted(ev, key=lambda e: e["ts"])


def track_names(doc, pid):
    return {e["args"]["name"] for e in doc["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid}


def test_barrier_order(rxe):
    rounds = 4
    rc, out, doc = traced(rxe, 2, BIN + "/emunic-barrier --impl mq --rounds %d" % rounds, "/tmp/tl-bar.json")
    assert rc == 0 and " 0 violations" in out, out
    assert ".rank" not in out, "the ranks' parts were not merged and removed:\n" + out
    assert doc["displayTimeUnit"] == "ns", doc.keys()
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert procs == {0: "rank 0", 1: "rank 1"}, procs
    send_wr = {}
    for r in (0, 1):
        names = track_names(doc, r)
        assert {"app", "core"} <= names, names
        assert any(re.fullmatch(r"mq \d+", n) for n in names), names
        assert any(re.fullmatch(r"qp \d+ -> peer %d" % (1 - r), n) for n in names), names
        send_wr[r] = queue_events(doc, r, "WR posted", op="SEND")
        assert len(send_wr[r]) >= rounds, send_wr[r]
    for r in (0, 1):
        # The barrier's list, round k: RECV SEND SEND_EN WAIT (barrier.c).
        posted = queue_events(doc, r, "task posted", op="SEND")
        enabled = queue_events(doc, r, "enabled", op="SEND_EN")
        done = queue_events(doc, r, "completion", op="SEND", status=0)
        recvs = queue_events(doc, r, "completion", op="RECV", status=0)
        waits = queue_events(doc, r, "WAIT satisfied", status=0)
        for seq in (posted, enabled, done, recvs, waits):
            assert len(seq) >= rounds, (r, seq)
        for k in range(rounds):
            chain = [posted[k], enabled[k], send_wr[r][k], done[k]]
            assert [e["ts"] for e in chain] == sorted(e["ts"] for e in chain), (r, k, chain)
            # The k-th WAIT counts the k-th arrival: after the peer's k-th
            # SEND went to verbs and this rank's receive completed.
            assert send_wr[1 - r][k]["ts"] <= waits[k]["ts"], (r, k, send_wr[1 - r][k], waits[k])
            assert recvs[k]["ts"] <= waits[k]["ts"], (r, k, recvs[k], waits[k])
            assert waits[k]["args"]["target"] == waits[0]["args"]["target"] + k, waits[k]


def test_triggered_chain_order(rxe):
    rc, out, doc = traced(rxe, 2, BIN + "/emunic-trigtest chain", "/tmp/tl-chain.json")
    assert rc == 0 and "emunic-trigtest: chain: PASS" in out, out
    fired = {e["args"]["user"]: e for e in queue_events(doc, 0, "trigger fired")}
    assert set(range(100)) <= set(fired), sorted(fired)
    wr_op = {0: "FETCH_ADD", 1: "WRITE_IMM"}    # chain op i: fetch_add, put, ct_inc by i % 3
    for i in range(99):
        # Op i fires on c[i-1]; its completion counts on c[i], which op i+1 fires on.
        ct = fired[i + 1]["args"]["ct"]
        change = queue_events(doc, 0, "counter change", ct=ct, success=1)
        assert change, (i, ct)
        steps = [fired[i]]
        if i % 3 in wr_op:
            steps.append(queue_events(doc, 0, "WR posted", wr_id=i, op=wr_op[i % 3])[0])
            steps.append(queue_events(doc, 0, "completion", wr_id=i, op=wr_op[i % 3], status=0)[0])
        steps += [change[0], fired[i + 1]]
        assert [e["ts"] for e in steps] == sorted(e["ts"] for e in steps), (i, steps)
    # A put's arrival is counted at the target (rank 1's counter).
    assert queue_events(doc, 1, "counter change"), "no counter change on rank 1"


def test_fault_and_reconnection(rxe):
    rc, out, doc = traced(rxe, 2, BIN + "/emunic-faulttest eager --timeout-ms 8000", "/tmp/tl-fault.json",
                          opts="-f 'wc:status=REM_ACCESS_ERR,rank=0,op=1'")
    assert rc == 0 and "fault injected (wc rule 1)" in out, out
    faults = queue_events(doc, 0, "fault injected", what="completion status (wc)")
    assert len(faults) == 1 and faults[0]["args"]["status"] == 10, faults   # IBV_WC_REM_ACCESS_ERR
    again = [e for r in (0, 1) for e in queue_events(doc, r, "reconnected")]
    assert again and all(e["ts"] > faults[0]["ts"] for e in again), (faults, again)
    assert queue_events(doc, 0, "reconnecting"), out


def test_off_writes_nothing_and_one_rank_writes_file(rxe):
    rc, out = rxe.run("rm -rf /tmp/tl-off && mkdir /tmp/tl-off && cd /tmp/tl-off && "
                      "env -u EMUNIC_TRACE %s -n 2 -t 60 %s/emunic-barrier --impl mq --rounds 3 2>&1; "
                      "echo \"### rc=$?\"; ls -A /tmp/tl-off; echo '### end'" % (RUN, BIN), timeout=90)
    assert "### rc=0" in out and " 0 violations" in out, out
    assert out.split("### rc=0\n")[1] == "### end\n", "files written with tracing off:\n" + out
    # A job of one rank: the rank writes FILE itself (EMUNIC_TRACE alone).
    rc, out = rxe.run("rm -f /tmp/tl-one.json; EMUNIC_TRACE=/tmp/tl-one.json %s -n 1 %s/emunic-barrier --impl mq "
                      "--rounds 3 2>&1; echo '### json'; cat /tmp/tl-one.json" % (RUN, BIN), timeout=60)
    doc = json.loads(out.split("### json\n")[1])
    assert {"rank 0"} == {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}, out


def test_unwritable_path_is_named_and_the_job_runs(rxe):
    rc, out, doc = traced(rxe, 2, BIN + "/emunic-barrier --impl mq --rounds 3", "/nonexistent-dir/t.json")
    assert rc == 0 and " 0 violations" in out, out
    for r in (0, 1):
        assert ("emunic: rank %d: trace: cannot write /nonexistent-dir/t.json.rank%d (EMUNIC_TRACE): No such "
                "file or directory; running untraced" % (r, r)) in out, out
    assert "no rank wrote its part of /nonexistent-dir/t.json" in out, out
    assert doc is None, out


def test_parts_left_by_another_launcher_are_joined(rxe):
    """Under Open MPI's mpirun (a PMIx launcher, no emunic-run) each rank
    leaves FILE.rankN; emunic-run -n N --join-trace FILE joins them into one
    document, and says which part is missing when one is (exit 1)."""
    p = "/tmp/tl-pmix.json"
    rc, out = rxe.run("rm -f {p} {p}.rank*; OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 "
                      "timeout 90 mpirun --allow-run-as-root --oversubscribe -np 2 -x EMUNIC_TRACE={p} "
                      "{b}/emunic-barrier --impl mq --rounds 3 && ls {p}.rank* && cp {p}.rank1 /tmp/tl-keep && "
                      "{run} -n 2 --join-trace {p}; echo \"### rc=$?\"; ls {p}.rank* 2>&1; echo '### json'; cat {p}"
                      .format(p=p, b=BIN, run=RUN), timeout=120)
    head, _, body = out.partition("### json\n")
    assert "### rc=0" in head and "%s.rank0\n%s.rank1\n" % (p, p) in head, out
    assert "No such file" in head.split("### rc=0")[1], "the parts stay after the join:\n" + out
    doc = json.loads(body)
    assert {e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name"} == {0, 1}, out
    assert len(queue_events(doc, 0, "WR posted", op="SEND")) >= 3, out
    # Rank 0's part missing: rank 1's is joined, rank 0's named, exit 1.
    rc, out = rxe.run("rm -f {p}; mv /tmp/tl-keep {p}.rank1; {run} -n 2 --join-trace {p}"
                      .format(p=p, run=RUN), timeout=30)
    assert rc == 1 and "%s.rank0" % p in out, out


def test_a_failed_job_is_traced_and_old_parts_are_not_joined(rxe):
    """A job whose ranks fail (an injected error ends the barrier) still gets
    its trace joined, with the fault in it: the trace a failure is most
    wanted for.  A part an earlier job left (FILE.rank1 here) is removed
    before the ranks start, never joined as this job's."""
    p = "/tmp/tl-fail.json"
    rc, out = rxe.run("rm -f {p} {p}.rank*; echo '{{\"traceEvents\":[' > {p}.rank1; "
                      "{run} -n 2 -t 60 -f 'wc:status=REM_ACCESS_ERR,rank=0,op=2' --trace {p} "
                      "{b}/emunic-barrier --impl mq --rounds 5 2>&1; echo \"### rc=$?\"; ls {p}.rank* 2>&1; "
                      "echo '### json'; cat {p}".format(p=p, run=RUN, b=BIN), timeout=90)
    head, _, body = out.partition("### json\n")
    assert not re.search(r"### rc=0\b", head), out
    assert "not a whole trace file" not in head, "an earlier job's part was joined:\n" + out
    doc = json.loads(body)
    ranks = {e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    # Both: the rank that did not fail first ends on its own in the 10 s
    # emunic-run gives a traced job's ranks, writing its part, instead of
    # being killed.  (The
    # fault stays early: rank 1 fails in its WAIT, not in a bootstrap call.)
    assert ranks == {0, 1}, out
    assert queue_events(doc, 0, "fault injected"), out


def test_each_node_joins_its_own_ranks(guest_pair):
    """Across nodes each node's emunic-run joins its ranks into FILE.nodeI:
    with a shared file system, one FILE would be written by every node."""
    a, b = guest_pair.guests
    p = "/tmp/tl-nodes.json"
    cmd = ("rm -f {p}*; {run} -n 2 --nodes 2 --node {{node}} --server {ip}:7713 -t 90 --trace {p} "
           "{b}/emunic-mqtest held; echo \"### rc=$?\"; ls {p}*; echo '### json'; cat {p}.node{{node}}"
           .format(p=p, run=RUN, ip=guest_pair.IPS[0], b=BIN))
    jobs = [g.submit(cmd.format(node=i), timeout=150) for i, g in enumerate((a, b))]
    for i, (g, j) in enumerate(zip((a, b), jobs)):
        rc, out = g.wait(j)
        head, _, body = out.partition("### json\n")
        assert "### rc=0" in head and head.split("### rc=0\n")[1] == "%s.node%d\n" % (p, i), out
        doc = json.loads(body)
        assert {e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name"} == {i}, out


def stages_cmd():
    return "/usr/bin/python3 %s/scripts/trace-stages.py" % ROOT


def test_stages_of_a_traced_barrier(rxe):
    """scripts/trace-stages.py cuts each rank's iterations of a 4-rank
    barrier (two rounds a list) into post, peer late, wire, completion and
    wake-up: every stage present, none negative, and their means adding up
    to the mean iteration (they partition it)."""
    path = "/tmp/tl-stages.json"
    rc, out, doc = traced(rxe, 4, BIN + "/emunic-barrier --impl mq --rounds 60 --skew-us 0", path, timeout=90)
    assert rc == 0 and " 0 violations" in out, out
    rc, out = rxe.run("%s --skip 5 %s" % (stages_cmd(), path), timeout=120)
    assert rc == 0, out
    assert re.search(r"4 ranks, 5\d iterations a rank \(the first 5 left out\)", out), out
    mean = {}
    for name in ("post", "peer late", "wire", "completion", "wake-up", "iteration"):
        m = re.search(r"^  %s\s+(-?[\d.]+)\s+(-?[\d.]+)\s+(\d+)%%$" % re.escape(name), out, re.M)
        assert m, (name, out)
        mean[name] = float(m.group(1))
        assert mean[name] >= 0, (name, out)
    parts = sum(v for k, v in mean.items() if k != "iteration")
    assert abs(parts - mean["iteration"]) <= 0.1 * 6, out      # rounding of six printed means
    assert mean["wire"] > 0, out
    assert re.search(r"WAITs satisfied by: .*\d", out), out


def test_stages_usage_and_an_empty_trace(tmp_path):
    cmd = stages_cmd().split()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode == 2 and b"usage: trace-stages.py" in p.stdout, p.stdout
    empty = tmp_path / "t.json"
    empty.write_text('{"traceEvents":[\n{"name":"process_name","ph":"M","pid":0,"tid":0,'
                     '"args":{"name":"rank 0"}}\n],"displayTimeUnit":"ns"}\n')
    p = subprocess.run(cmd + [str(empty)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode == 1 and b"no complete task-list iteration" in p.stdout, p.stdout
