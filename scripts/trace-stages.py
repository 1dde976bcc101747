#!/usr/bin/python3
"""Where an offloaded barrier's time goes, from a timeline trace.

usage: trace-stages.py [--skip N] TRACE.json

TRACE.json is what `emunic-run -n N --trace TRACE.json PROGRAM` joined, for
a program that runs one management-queue task list after another on every
rank, e.g. `emunic-barrier --impl mq --skew-us 0`.  The ranks share one
machine, so their CLOCK_MONOTONIC stamps compare.

A rank's iteration runs from the app posting a list's first task to it
posting the next list's first task, and is cut into stages that add up to
it exactly:

  post        the list's first task posted -> its first work request handed
              to verbs (or enable run): the app's post, and the hand-over to
              whoever runs the engine
  peer late   from there, until the peer handed the send this rank waits
              for to verbs (it had not started the round yet)
  wire        that send handed to verbs on the peer -> its arrival polled
              here: rxe's processing (on loopback, inside the sender's
              ibv_post_send) and the poll that found it
  completion  the arrival polled -> the WAIT it satisfies (the engine)
  wake-up     the list's last WAIT satisfied -> the app's next list (the
              waiter woken, returned, and its loop until it posts again)

A round with a WAIT but no arrival before it counts as completion.  The
peer's send is matched by order: this rank's k-th arrival from peer p is
p's k-th send to this rank in the same iteration.

Prints, per stage, its mean and median per iteration and its share of all
the iterations' time (the means add up to the mean iteration; a few slow
iterations weigh in the mean, not the median), and which thread satisfied
the WAITs (app: a waiter running the engine; core: the progress core).
--skip N leaves out each rank's first N iterations (default 20: warm-up).
Exit 0; 1 when the file is not a trace or holds no complete iteration on
every rank; 2 on a usage error.
"""
import json
import statistics
import sys
from collections import defaultdict

def load(path):
    with open(path) as f:
        doc = json.load(f)
    threads = {}
    for e in doc["traceEvents"]:
        if e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    ranks = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "i" and e.get("cat") == "thread":
            who = threads.get((e["pid"], e["tid"]), "?")
            ranks[e["pid"]].append((float(e["ts"]), e["name"], e["args"], who))
    for evs in ranks.values():
        evs.sort(key=lambda x: x[0])
    return ranks


def iterations(evs):
    """Splits a rank's events at each list's first task (index 0)."""
    its, cur = [], None
    for ev in evs:
        ts, name, args, _ = ev
        if name == "task posted" and args.get("index") == 0:
            if cur:
                its.append(cur)
            cur = [ev]
        elif cur is not None:
            cur.append(ev)
    if cur:
        its.append(cur)
    return its


STAGES = ("post", "peer late", "wire", "completion", "wake-up")


def sends_to(it, rank):
    return [ev[0] for ev in it if ev[1] == "WR posted" and ev[2].get("op") in ("SEND", "WRITE_IMM")
            and ev[2].get("peer") == rank]


def one(it, end, rank, peer_its):
    """The stages of one iteration (a list of events), ending at `end`."""
    st = dict.fromkeys(STAGES, 0.0)
    t0 = it[0][0]
    first = next((ev for ev in it if ev[1] in ("WR posted", "enabled")), None)
    cursor = first[0] if first else t0
    st["post"] = cursor - t0
    got = defaultdict(int)          # arrivals from each peer so far
    last_arrival = None
    for ev in it:
        if ev[0] < cursor:
            continue
        if ev[1] == "completion" and ev[2].get("op") == "RECV":
            last_arrival = ev
        elif ev[1] == "WAIT satisfied":
            if last_arrival is None:
                st["completion"] += ev[0] - cursor
            else:
                p = last_arrival[2].get("peer")
                sent = sends_to(peer_its.get(p, []), rank)
                k = got[p]
                got[p] += 1
                span = last_arrival[0] - cursor
                late = min(max(sent[k] - cursor, 0.0), span) if k < len(sent) else 0.0
                st["peer late"] += late
                st["wire"] += span - late
                st["completion"] += ev[0] - last_arrival[0]
            cursor = ev[0]
            last_arrival = None
    st["wake-up"] = end - cursor
    return st


def breakdown(ranks, skip):
    """Per rank and iteration, (its length, its stages), in us; and who ran
    the engine when a WAIT was satisfied (app or core)."""
    its = {r: iterations(evs)[skip:] for r, evs in ranks.items()}
    n = min((len(v) for v in its.values()), default=0) - 1   # the last one has no end
    rows, who = [], defaultdict(int)
    for r, mine in its.items():
        for i in range(max(n, 0)):
            it, end = mine[i], mine[i + 1][0][0]
            for ev in it:
                if ev[1] == "WAIT satisfied":
                    who[ev[3]] += 1
            st = one(it, end, r, {q: its[q][i] for q in its if q != r})
            rows.append((end - it[0][0], st))
    return rows, who


def main(argv):
    skip = 20
    args = list(argv)
    if args[:1] == ["--skip"] and len(args) >= 2 and args[1].isdigit():
        skip = int(args[1])
        args = args[2:]
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    try:
        ranks = load(args[0])
    except (OSError, ValueError, KeyError) as e:
        print("trace-stages: %s: not a trace emunic-run wrote: %s" % (args[0], e))
        return 1
    rows, who = breakdown(ranks, skip)
    if not rows:
        print("trace-stages: %s: no complete task-list iteration on every rank" % args[0])
        return 1
    total = sum(t for t, _ in rows)
    print("trace-stages: %s: %d ranks, %d iterations a rank (the first %d left out)"
          % (args[0], len(ranks), len(rows) // len(ranks), skip))
    print("  %-12s %10s %10s %8s" % ("stage", "mean us", "median us", "share"))
    for s in STAGES:
        v = [st[s] for _, st in rows]
        print("  %-12s %10.1f %10.1f %7.0f%%" % (s, statistics.mean(v), statistics.median(v),
                                              100 * sum(v) / total if total else 0))
    v = [t for t, _ in rows]
    print("  %-12s %10.1f %10.1f %7.0f%%" % ("iteration", statistics.mean(v), statistics.median(v), 100))
    print("  WAITs satisfied by: %s" % ", ".join("%s %d" % (k, c) for k, c in sorted(who.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
