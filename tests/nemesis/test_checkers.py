"""The checkers on hand-written histories, good and bad (no server): a checker that passes everything proves nothing."""

from __future__ import annotations

import random
import time

import pytest

import jsclient
from tests.nemesis.faults import KINDS, generate
from tests.nemesis.history import SLACK, Call, classify, late, unexplained
from tests.nemesis.linearizable import Op, check
from tests.nemesis.workloads import cas_histories, check_publishes


def cas(process: str, start: float, end: float | None, expect: int, new: int | None, status: str = "ok") -> Op:
    return Op(process, "cas", start, end, status, expect, new)


def read(process: str, start: float, end: float, saw: int) -> Op:
    return Op(process, "read", start, end, "ok", None, saw)


# -- linearizability: known-good histories --------------------------------------------------------------
@pytest.mark.parametrize(
    "history",
    [
        pytest.param([], id="empty"),
        pytest.param([cas("a", 0, 1, 1, 2), cas("b", 2, 3, 2, 3)], id="sequential-chain"),
        pytest.param([cas("a", 0, 3, 1, 2), cas("b", 1, 2, 2, 3)], id="overlapping-chain-second-ends-first"),
        pytest.param([cas("a", 0, 1, 1, 2), cas("b", 2, 3, 1, 5, "fail")], id="stale-cas-fails"),
        pytest.param([cas("a", 0, 4, 1, 2), cas("b", 1, 2, 1, 3, "fail")], id="fail-while-a-cas-lands"),
        pytest.param([cas("a", 0, None, 1, 2, "unknown"), cas("b", 5, 6, 2, 3)], id="unknown-took-effect"),
        pytest.param([cas("a", 0, None, 1, 2, "unknown"), cas("b", 5, 6, 1, 3)], id="unknown-never-happened"),
        pytest.param([cas("a", 0, None, 1, 2, "ok"), read("b", 1, 2, 1), read("c", 3, 4, 2)],
                     id="applied-at-an-unknown-moment"),
        pytest.param([Op("a", "write", 0, 1, "ok", None, 5), read("b", 2, 3, 5)], id="read-after-write"),
        pytest.param([read("a", 0, 1, 1), Op("b", "read", 2, None, "unknown")], id="unanswered-read-ignored"),
    ],
)
def test_linearizable_histories_pass(history: list[Op]) -> None:
    verdict = check(history, initial=1)
    assert verdict.ok, verdict.explain()
    assert all(op in verdict.order for op in history if op.status != "unknown")  # every answered one placed


# -- linearizability: known-bad histories ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("history", "stuck"),
    [
        pytest.param([cas("a", 0, 2, 1, 2), cas("b", 1, 3, 1, 3)], "cas 1 -> 3", id="lost-update"),
        pytest.param([cas("a", 0, 1, 1, 2), cas("b", 2, 3, 1, 3)], "cas 1 -> 3", id="cas-on-a-revision-gone"),
        pytest.param([cas("a", 0, 1, 1, 2, "fail")], "cas 1 -> 2 fail", id="fail-with-the-right-revision"),
        pytest.param([cas("a", 0, 1, 2, 3), cas("b", 2, None, 1, 2, "unknown")], "cas 2 -> 3",
                     id="effect-before-its-cause-started"),
        pytest.param([Op("a", "write", 0, 1, "ok", None, 5), read("b", 2, 3, 1)], "read -> 1", id="stale-read"),
        pytest.param([cas("a", 0, None, 1, 2, "ok"), read("b", 1, 2, 2), read("c", 3, 4, 1)], "read -> 1",
                     id="read-goes-back-in-time"),
    ],
)
def test_non_linearizable_histories_fail_and_say_where(history: list[Op], stuck: str) -> None:
    verdict = check(history, initial=1)
    assert not verdict.ok
    assert any(stuck in str(op) for op in verdict.stuck), verdict.explain()
    assert "not linearizable" in verdict.explain()


def simulated(seed: int, processes: int = 4, per_process: int = 1500) -> list[Op]:
    """A linearizable history of many CAS callers: each op takes effect at a point inside its interval."""
    rng = random.Random(seed)
    revision, history, clock = 1, [], [0.0] * processes
    events = sorted((rng.random() * processes * per_process, p) for p in range(processes) for _ in range(per_process))
    for point, p in events:
        start = max(clock[p], point - rng.random())
        if start > point:
            continue
        end = point + rng.random()
        clock[p] = end
        expect = revision if rng.random() < 0.7 else revision - 1
        if expect == revision:
            revision += 1
            history.append(cas(f"p{p}", start, end, expect, revision))
        else:
            history.append(cas(f"p{p}", start, end, expect, None, "fail"))
    return history


def test_a_long_many_caller_history_is_checked_whole_and_a_single_lost_update_in_it_is_found() -> None:
    """Histories as long as a soak's (thousands of operations per key) are checked in a second or two."""
    history = simulated(7)
    assert len(history) > 3000
    started = time.monotonic()
    assert check(history, initial=1).ok
    spent = time.monotonic() - started
    ok = [i for i, op in enumerate(history) if op.status == "ok"]
    broken = list(history)
    victim = history[ok[len(ok) // 2]]
    broken.append(cas("intruder", victim.start, victim.end, victim.expect or 0, 10**9))  # the same revision, twice
    verdict = check(broken, initial=1)
    assert not verdict.ok, "a second successful CAS from the same revision went unnoticed"
    print(f"{len(history)} operations checked in {spent:.2f}s")


# -- the publish checker ----------------------------------------------------------------------------------
def publish(key: str, status: str, seq: int | None = None, error: str = "") -> Call:
    return Call("pub", "publish", key, 0.0, 0.1, 2.0, status, key, None, seq, error)


def test_publish_checker_accepts_what_the_guarantees_allow() -> None:
    calls = [
        publish("m1", "ok", 1),
        publish("m2", "unknown"), publish("m2", "ok", 2),  # retried with the same id: stored once
        publish("m3", "unknown"),  # stored once
        publish("m4", "unknown"),  # not stored at all
        publish("m5", "rejected"),  # refused, not stored
        publish("m6", "ok", 5), publish("m6", "ok", 5),  # a duplicate's ack names the original's sequence
    ]
    problems, summary = check_publishes(calls, {"m1": [1], "m2": [2], "m3": [3], "m6": [5]})
    assert problems == []
    assert summary == {"acked": 3, "unknown, stored": 1, "unknown, not stored": 1, "refused": 1}


@pytest.mark.parametrize(
    ("calls", "stored", "says"),
    [
        pytest.param([publish("m1", "ok", 1)], {}, "acked (seq 1) but not stored", id="acked-lost"),
        pytest.param([publish("m1", "unknown"), publish("m1", "ok", 1)], {"m1": [1, 2]}, "stored 2 times",
                     id="duplicate"),
        pytest.param([publish("m1", "rejected", error="NoStreamResponseError")], {"m1": [1]},
                     "though every attempt was refused", id="refused-but-stored"),
        pytest.param([], {"x": [1]}, "never published", id="stored-from-nowhere"),
        pytest.param([publish("m1", "ok", 7)], {"m1": [3]}, "acked with seq 7 but stored at [3]",
                     id="ack-names-another-sequence"),
    ],
)
def test_publish_checker_reports_each_violation(calls: list[Call], stored: dict[str, list[int]], says: str) -> None:
    problems, _ = check_publishes(calls, stored)
    assert any(says in p for p in problems), problems


# -- the KV history builder ----------------------------------------------------------------------------------
def update(process: str, value: str, expect: int, status: str, result: int | None = None,
           start: float = 0.0, end: float = 1.0) -> Call:
    return Call(process, "kv.update", "k", start, end, 2.0, status, value, expect, result)


def test_the_log_settles_unknown_updates_and_contradictions_are_reported() -> None:
    calls = [
        update("a", "a-0", 1, "ok", 2, 0, 1),
        update("b", "b-0", 2, "unknown", None, 2, 3),  # in the log: it took effect
        update("c", "c-0", 2, "unknown", None, 2, 3),  # not in the log: it never did
        update("a", "a-1", 3, "fail", None, 4, 5),
    ]
    log = {"k": [(1, "init"), (2, "a-0"), (4, "b-0")]}
    histories, problems, summary = cas_histories(calls, log, {"k": (1, "init")})
    assert problems == []
    assert summary == {"ok": 1, "fail": 1, "conflict": 0, "unknown, applied": 1, "unknown, not applied": 1,
                       "refused": 0}
    assert [(op.expect, op.value, op.end) for op in histories["k"]] == [(1, 2, 1), (2, 4, None), (3, None, 5)]
    assert check(histories["k"], initial=1).ok

    conflict = update("d", "d-0", 2, "conflict", None, 4, 5)  # refused while another CAS was in process
    histories, problems, _ = cas_histories([*calls, conflict], log, {"k": (1, "init")})
    assert problems == [] and len(histories["k"]) == 3  # no claim about the register: not in the history

    bad = [update("a", "a-0", 1, "ok", 2), update("b", "b-0", 1, "rejected"), update("c", "c-0", 1, "fail")]
    _, problems, _ = cas_histories(bad, {"k": [(1, "init"), (3, "b-0"), (5, "c-0"), (6, "zz")]}, {"k": (1, "init")})
    assert any("acked as revision 2, but the log has it at None" in p for p in problems), problems
    assert any("was refused" in p for p in problems), problems
    assert any("failed (wrong revision) but is stored" in p for p in problems), problems
    assert any("'zz' stored but never written" in p for p in problems), problems


# -- deadlines and outcomes ----------------------------------------------------------------------------------
def test_late_calls_are_those_past_budget_plus_slack_or_never_back() -> None:
    on_time = Call("p", "publish", "a", 10.0, 10.0 + 2.0 + SLACK - 0.01, 2.0)
    too_late = Call("p", "publish", "b", 10.0, 10.0 + 2.0 + SLACK + 0.01, 2.0)
    never = Call("p", "publish", "c", 10.0, None, 2.0)
    assert late([on_time, too_late, never]) == [too_late, never]


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (jsclient.TimeoutError("t"), "unknown"),
        (jsclient.ConnectionLostError("l"), "unknown"),
        (jsclient.NoStreamResponseError("n"), "rejected"),
        (jsclient.ConnectionClosedError("c"), "rejected"),
        (jsclient.ConnectionClosedError("c", outcome=jsclient.RequestOutcome.UNKNOWN), "unknown"),
        (jsclient.KeyWrongRevisionError("not at revision 7: wrong last sequence: 9", err_code=10071), "fail"),
        (jsclient.KeyWrongRevisionError("not at revision 7: wrong last sequence", err_code=10164), "conflict"),
        (jsclient.KeyWrongRevisionError("in a cluster", err_code=10164, outcome=jsclient.RequestOutcome.UNKNOWN),
         "unknown"),
        (jsclient.KeyWrongRevisionError("in a cluster", err_code=10071, outcome=jsclient.RequestOutcome.UNKNOWN),
         "unknown"),
        (jsclient.JetStreamAPIError(503, 10008, "unavailable"), "rejected"),
        (jsclient.errors.api_error(409, 10158, "duplicate message id is in process"), "unknown"),
        (jsclient.Error("says nothing of its outcome"), "unclassified"),
        (KeyError("not jsclient's"), "crash"),
    ],
)
def test_classify_reads_the_errors_outcome(exc: BaseException, status: str) -> None:
    assert classify(exc) == status
    call = Call("p", "publish", "x", 0.0, 0.1, 1.0, status)
    assert (unexplained([call]) == [call]) == (status in ("crash", "unclassified"))


# -- the schedule -----------------------------------------------------------------------------------------
def test_a_seed_gives_the_same_schedule_and_every_kind_comes_before_any_repeats() -> None:
    first = generate(1234, 2 * len(KINDS))
    assert first == generate(1234, 2 * len(KINDS))
    assert first != generate(1235, 2 * len(KINDS))
    assert sorted(step.kind for step in first[: len(KINDS)]) == sorted(KINDS)
    assert sorted(step.kind for step in first[len(KINDS):]) == sorted(KINDS)
    assert all(step.leader for step in first if step.kind == "stepdown")
    mixed = generate(99, 40, overlap=0.5)
    assert any(step.also for step in mixed) and all(also.kind.startswith("client-") for s in mixed for also in s.also)


def test_a_cas_refused_while_a_lost_one_was_in_process_is_no_claim_about_the_key() -> None:
    """As seen under a partition of the bucket's leader (seed 20250142): an update reached the partitioned
    leader and was never committed; meanwhile the leader refused the next update of the key with a bare
    "wrong last sequence" (another was in process), although the key stayed at the expected revision; later
    an update from that revision succeeded.  Read as a definite ``fail``, no linearization exists; read as
    the conflict it is (nothing applied, nothing claimed), the history is fine."""
    calls = [
        update("child", "child-870", 4022, "unknown", None, 0.0, 2.0),  # lost with the partitioned leader
        update("kv-0", "kv-0-858", 4022, "conflict", None, 2.0, 2.1),
        update("kv-1", "kv-1-1010", 4022, "ok", 4025, 3.0, 3.1),
    ]
    log = {"k": [(4022, "init"), (4025, "kv-1-1010")]}
    histories, problems, summary = cas_histories(calls, log, {"k": (4022, "init")})
    assert problems == [] and summary["conflict"] == 1 and summary["unknown, not applied"] == 1
    assert check(histories["k"], initial=4022).ok
    as_fail = [*histories["k"], cas("kv-0", 2.0, 2.1, 4022, None, "fail")]
    assert not check(as_fail, initial=4022).ok
