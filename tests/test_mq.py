"""Management-queue conformance on rxe: one check per rule of DESIGN.md
("Management queues"), each run by two ranks through the progress core."""
import re

import pytest

from conftest import BIN, MEMCHECK, SANBIN, run_ctest

CHECKS = {
    "held": "a held send does not execute before its enable",
    "enable_n": "SEND_EN(3) releases exactly three; n = 0 releases all posted so far",
    "enable_too_many": "enabling more than posted is EINVAL and changes nothing",
    "wait_nth": "WAIT completes at the n-th completion and not one before",
    "wait_base": "the wait base advances on WAIT_EN_LAST",
    "consumed": "completions consumed by a WAIT are not returned to the app's poll",
    "consumed_after": "the same when the completions arrived before the WAIT was posted",
    "signal_once": "SIGNAL produces exactly one MQ completion (emunic_mq_pending sees it, then not)",
    "no_interleave": "two task lists posted together are not interleaved",
    "rnr": "a receive not yet enabled makes the sender see RNR (rnr_retry 0)",
    "invalid": "invalid lists are rejected and leave the MQ usable",
    "close_inflight": "closing the device with work in flight cancels it and returns",
    "disconnect": "emunic_qp_disconnect fails the QP for good (its held send flushes; one still waiting for "
                  "its peer fails at once) and tells the peer, "
                  "whose QP fails at once; the pair's other QP carries on; NULL is EINVAL, a second call "
                  "changes nothing",
    "disconnect_connecting": "emunic_qp_disconnect while the connection is being made does not cut the attempt "
                             "short: the QP ends once it is up (the peer holds the request 1.5 s), and the "
                             "peer's QP, up with it, fails",
    "wait_error": "a failed completion counted by an unsignaled WAIT surfaces on the MQ with its status",
    "wait_before_failure": "a WAIT met by the successes before a failure succeeds; one counting it fails",
    "wait_next": "a list posted EMUNIC_POST_WAIT_NEXT whose wait never comes still runs (the core); "
                 "unknown post flags are EINVAL",
    "quiet_handover": "a blocking post/wait loop does not set the progress core's timer each round",
    "start_away": "a start whose app never waits or polls still moves within the lazy hand-over (< 0.5 s)",
    "lazy_start": "a nonblocking start's WAIT is left to the app's wait where the core shares its CPUs",
    "post_lists": "emunic_mq_post_lists posts its lists to their MQs as one unit: a refused one (EINVAL, "
                  "ENOSPC for an MQ's room over its lists) posts nothing of any; a valid pair runs",
    "pair_key": "QPs made with a pair key connect to the peer's QP of the same key, whatever the order "
                "(7, none, 9 on one rank, none, 9, 7 on the other; the unkeyed pair by order); a key in use "
                "is EEXIST, free again once its QP is destroyed; 2^30 or with ON_DEMAND EINVAL",
    "prepared": "a prepared list (emunic_mq_prepare) is refused at prepare only by checks that do not depend "
                "on earlier posts; each start posts it with its wr_ids moved; a start that enables more than "
                "was posted, or whose MR was destroyed, is EINVAL and posts nothing",
    "prepared_rules": "a prepared start's counter rules, worked out at prepare, agree with whole posts of the "
                      "same counters: enables of all and of a count, one needing a send posted outside the "
                      "list (refused when none is left), WAIT groups with and without WAIT_EN_LAST after a "
                      "carried count; every send arrives once, every WAIT completes",
}


def test_list_longer_than_the_limit_is_refused_whole(rxe):
    """A list longer than the device's list_tasks (here EMUNIC_LIST_TASKS=4)
    is -E2BIG with a line that says why, and none of it is posted."""
    out = run_ctest(rxe, "EMUNIC_LIST_TASKS=4 %s/emunic-run -n 2 -t 60 %s/emunic-mqtest list_limit" % (BIN, BIN),
                    timeout=90)
    assert "emunic-mqtest: list_limit: PASS" in out, out
    assert "a task list of 5 tasks is longer than the device's limit of 4" in out, out


@pytest.mark.parametrize("value,why", [
    ("abc", "EMUNIC_LIST_TASKS='abc' is not a task count from 1 to 4096"),
    ("0", "EMUNIC_LIST_TASKS='0' is not a task count from 1 to 4096"),
    ("-3", "EMUNIC_LIST_TASKS='-3' is not a task count from 1 to 4096"),
    ("5000", "a task-list limit of 5000 is more than the command ring's 4096 entries"),
])
def test_a_bad_list_limit_fails_the_open_by_name(rxe, value, why):
    rc, out = rxe.run("EMUNIC_LIST_TASKS=%s %s/emunic-run -n 2 -t 60 %s/emunic-mqtest held" % (value, BIN, BIN),
                      timeout=90)
    assert rc != 0, out
    assert why in out and "emunic_dev_open: Invalid argument" in out, out


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_mq_rule(rxe, check):
    out = run_ctest(rxe, "%s/emunic-run -n 2 -t 60 %s/emunic-mqtest %s" % (BIN, BIN, check), timeout=90,
                    what=CHECKS[check])
    assert "emunic-mqtest: %s: PASS" % check in out, out
    if check == "prepared":     # each refused start says which task and why, its wr_id as moved
        assert re.search(r"task 0 of the list \(SEND_EN, wr_id 1006\): enables more work requests than were "
                         r"posted; nothing was posted", out), out
        assert re.search(r"task 0 of the list \(SEND, wr_id 54\): its memory region was destroyed since the list "
                         r"was prepared; nothing was posted", out), out
        assert "task 0 of the list (RECV_EN, wr_id 1001): the QP was not created MANAGED_RECV" in out, out
    if check == "prepared_rules":   # the enable with nothing left, by name, each round (wr_id moved by k << 16)
        assert len(re.findall(r"task 0 of the list \(SEND_EN, wr_id \d+\): enables more work requests than were "
                              r"posted; nothing was posted", out)) == 12, out


@pytest.mark.parametrize("check", ["prepared", "prepared_rules"])
def test_prepared_starts_match_the_rules_task_by_task(rxe, check):
    """The sanitizer build compiles EMUNIC_CHECK_RULES: each start the
    precomputed rules take is also run through the rules task by task
    (post.c), and any target or verdict they differ on aborts the rank
    with "EMUNIC_CHECK_RULES" (a WAIT base that ignored a carried count
    did, in a deliberate mutation, where the plain build still passed)."""
    out = run_ctest(rxe, "%s/emunic-run -n 2 -t 120 %s/emunic-mqtest %s" % (BIN, SANBIN, check), timeout=180)
    assert "emunic-mqtest: %s: PASS" % check in out, out
    assert "EMUNIC_CHECK_RULES" not in out, out


def test_a_pinned_core_is_handed_a_start_s_wait(rxe):
    """With the core pinned (EMUNIC_CPU: a CPU of its own), a nonblocking
    start hands its WAIT over to it (the hand-over timer), as lazy_start
    without a pinned core must not."""
    out = run_ctest(rxe, "EMUNIC_CPU=1 %s/emunic-run -n 2 -t 60 %s/emunic-mqtest lazy_start" % (BIN, BIN),
                    timeout=90)
    assert "emunic-mqtest: lazy_start: PASS" in out, out
    assert "core on a CPU of its own" in out and "shared CPUs" not in out, out


def test_rnr_names_the_failure(rxe):
    out = run_ctest(rxe, "%s/emunic-run -n 2 -t 60 %s/emunic-mqtest rnr" % (BIN, BIN), timeout=90)
    assert "rank 0: peer 1 qp" in out and "SEND (wr_id 0) failed: RNR retry counter exceeded" in out, out


def test_invalid_lists_say_why(rxe):
    out = run_ctest(rxe, "%s/emunic-run -n 2 -t 60 %s/emunic-mqtest invalid" % (BIN, BIN), timeout=90)
    for why in ("unknown opcode", "empty task list", "the QP was not created MANAGED_SEND",
                "its CQ is not a live CQ of this device"):
        assert why in out, why
    # The destroyed CQ and the other device's CQ are each rejected.
    assert out.count("its CQ is not a live CQ of this device") >= 4, out


def test_post_lists_say_which_list(rxe):
    """A refusal of emunic_mq_post_lists names the list and the task in it."""
    out = run_ctest(rxe, "%s/emunic-run -n 2 -t 60 %s/emunic-mqtest post_lists" % (BIN, BIN), timeout=90)
    assert re.search(r"mq 0x[0-9a-f]+ \(lists\[1\] of 2\): task 0 of the list \(SEND_EN, wr_id 1001\): "
                     r"enables more work requests than were posted; nothing was posted", out), out
    assert re.search(r"\(lists\[1\] of 2\): task 0 of the list \(UNKNOWN, wr_id 0\): unknown opcode", out), out


def test_close_with_work_in_flight(rxe):
    out = run_ctest(rxe, "%s/emunic-run -n 2 -t 200 %s %s/emunic-mqtest close_inflight" % (BIN, MEMCHECK, BIN),
                    timeout=260)
    assert "rank 0: device rxe0 closing: peer 1 qp" in out and "2 unfinished work request(s) canceled" in out, out
    assert "unfinished task(s) canceled (first: WAIT)" in out, out
    # A region left registered goes with the device, before its PD.
    assert "deallocating its protection domain failed" not in out, out


@pytest.mark.parametrize("idle", ["spin", "sleep"])
def test_both_idle_policies(rxe, idle):
    run_ctest(rxe, "EMUNIC_IDLE=%s %s/emunic-run -n 2 -t 60 %s/emunic-mqtest enable_n" % (idle, BIN, BIN),
              timeout=90)


def test_progress_cores_pinned_apart(rxe):
    """EMUNIC_CPU=0,1: local rank i's progress core takes CPU i."""
    out = run_ctest(rxe, "EMUNIC_CPU=0,1 EMUNIC_DEBUG=1 %s/emunic-run -n 2 -t 60 %s/emunic-mqtest held"
                    % (BIN, BIN), timeout=90)
    assert "rank 0: debug: device rxe0: progress core started" in out and "cpu 0)" in out, out
    assert "rank 1: debug: device rxe0: progress core started" in out and "cpu 1)" in out, out
    assert "cannot pin" not in out, out


def test_a_bound_rank_keeps_its_core_among_its_cpus(rxe):
    """A rank bound to some CPUs (as Slurm's task/affinity binds) pins its
    core only among them: bound to CPU 0 alone, it does not pin at all,
    where unbound on the guest's 2 CPUs it takes CPU 1."""
    out = run_ctest(rxe, "EMUNIC_DEBUG=1 %s/emunic-run -n 1 -t 60 %s/emunic-barrier --impl mq --rounds 2; "
                    "EMUNIC_DEBUG=1 taskset -c 0 %s/emunic-run -n 1 -t 60 %s/emunic-barrier --impl mq --rounds 2"
                    % (BIN, BIN, BIN, BIN), timeout=90)
    started = re.findall(r"progress core started \(\w+, cpu (-?\d+)\)", out)
    assert started == ["1", "-1"], out


def test_core_runs_at_real_time_priority(rxe):
    """Where SCHED_FIFO is allowed (root in the guest) the core takes it."""
    out = run_ctest(rxe, "EMUNIC_DEBUG=1 %s/emunic-run -n 2 -t 60 %s/emunic-mqtest held" % (BIN, BIN), timeout=90)
    assert out.count("progress core at real-time priority (SCHED_FIFO") == 2, out
    assert "real-time priority not permitted" not in out, out


@pytest.mark.parametrize("check", ["held", "consumed", "signal_once"])
def test_real_time_not_permitted_falls_back(rxe, check):
    """Without CAP_SYS_NICE and with RLIMIT_RTPRIO 0, SCHED_FIFO fails: one
    notice a rank, the core runs at normal priority, the rules still hold."""
    out = run_ctest(rxe, "ulimit -r 0; EMUNIC_DEBUG=1 setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice "
                    "%s/emunic-run -n 2 -t 60 %s/emunic-mqtest %s" % (BIN, BIN, check), timeout=90)
    assert "emunic-mqtest: %s: PASS" % check in out, out
    assert out.count("progress core: real-time priority not permitted (SCHED_FIFO: Operation not permitted); "
                     "running at normal priority") == 2, out
    assert "progress core at real-time priority" not in out, out
