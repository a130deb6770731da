"""The workloads the nemesis runs against, each recording every call in a History, and their checkers.

* :class:`PublishWorkload`: js.publish and js.publish_async with a message id each into an R3 stream
  whose duplicate window outlasts the test.  An attempt with an unknown (or not-delivered) outcome is
  sent again with the same id, as users do; every attempt is recorded.  :func:`check_publishes` then
  compares the attempts with the stream read back.
* :class:`ConsumeWorkload`: a pull consumer and the two ordered consumers reading that stream meanwhile;
  :func:`check_consumed` checks what each took against the stream read back (no gap, and for the
  ordered ones no duplicate and stream order).
* :class:`CasWorkload`: kv.get then kv.update(key, value, last=revision) on a few keys, from threads (and
  a child process, :mod:`tests.nemesis.kv_child`).  :func:`cas_histories` turns the calls and the
  bucket's full log into one register history per key for :mod:`tests.nemesis.linearizable`.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import jsclient
from jsclient.jetstream.context import PUBLISH_RETRY

from .history import SLACK, Call, History, classify, describe
from .linearizable import Op

#: How every workload connection behaves: through the client links only, reconnecting for ever, and
#: noticing a silent (half-open) link within about three seconds (two unanswered pings a second apart).
CLIENT_OPTIONS: dict[str, Any] = {
    "ignore_discovered_servers": True,
    "max_reconnect_attempts": -1,
    "reconnect_time_wait": 0.2,
    "ping_interval": 1.0,
    "max_outstanding_pings": 2,
    "connect_timeout": 1.0,
}


def retry_backoff(retries: int) -> float:
    """The most a publish's no-responders retries wait between tries (PUBLISH_RETRY's own delays)."""
    return sum(PUBLISH_RETRY.delay(k) for k in range(1, retries + 1))


def timed(
    history: History, call: Call, result: Callable[[Any], int | None], fn: Callable[..., Any], *args: Any,
    **kwargs: Any,
) -> Any:
    """Run ``fn(*args, **kwargs)`` as ``call``: its end, status and ``result(out)`` (or error) filled in and
    recorded.  What it returned, or the exception it raised."""
    try:
        out = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every failure is data; classify() flags the unexpected
        call.end = time.monotonic()
        call.status, call.error = classify(exc), describe(exc)
        history.add(call)
        return exc
    call.end = time.monotonic()
    call.status, call.result = "ok", result(out)
    history.add(call)
    return out


def _seq(ack: Any) -> int:
    return int(ack.seq)


def _nothing(_: Any) -> None:
    return None


def _same(revision: Any) -> int:
    return int(revision)


class PublishWorkload:
    """Publishers with message ids; ``threads()`` gives the sync and async ones, which run until ``stop``."""

    def __init__(
        self,
        js: jsclient.JetStream,
        history: History,
        stop: threading.Event,
        *,
        subject: str = "pub",
        timeout: float = 2.0,
        attempts: int = 4,
        retries: int = 2,
        batch: int = 20,
        pace: float = 0.005,
        async_pace: float = 0.02,
    ) -> None:
        self.js = js
        self.history = history
        self.stop = stop
        self.subject = subject
        self.timeout = timeout
        self.attempts = attempts
        self.retries = retries
        self.batch = batch
        self.pace = pace
        self.async_pace = async_pace
        self._lock = threading.Lock()
        #: js.publish: its timeout, plus the backoff of the retries it makes itself when no stream answers.
        self.sync_budget = timeout + retry_backoff(PUBLISH_RETRY.attempts - 1 if PUBLISH_RETRY.attempts else 0)
        #: publish_async with retry_on_no_responders=retries: each try has the timeout, plus the backoff.
        self.async_budget = (retries + 1) * timeout + retry_backoff(retries)

    def threads(self, sync: int = 2, asynchronous: int = 1) -> list[threading.Thread]:
        made = [threading.Thread(target=self._sync, args=(t,), name=f"pub-sync-{t}") for t in range(sync)]
        made += [
            threading.Thread(target=self._async, args=(t,), name=f"pub-async-{t}") for t in range(asynchronous)
        ]
        return made

    def _sync(self, t: int) -> None:
        process = f"pub-sync-{t}"
        i = 0
        while not self.stop.is_set():
            msg_id = f"s{t}-{i}"
            i += 1
            for _ in range(self.attempts):
                call = Call(process, "publish", msg_id, time.monotonic(), None, self.sync_budget, value=msg_id)
                timed(self.history, call, _seq, self.js.publish, f"{self.subject}.{process}", msg_id.encode(),
                      msg_id=msg_id, timeout=self.timeout)
                if call.status in ("ok", "crash"):
                    break
                time.sleep(0.05)
            time.sleep(self.pace)

    def _async(self, t: int) -> None:
        process = f"pub-async-{t}"
        i = 0
        while not self.stop.is_set():
            tries = dict.fromkeys((f"a{t}-{i + k}" for k in range(self.batch)), 0)
            i += self.batch
            todo = list(tries)
            while todo:
                out = []
                for msg_id in todo:
                    tries[msg_id] += 1
                    out.append(self._submit(process, msg_id))
                todo = []
                for call, settled in out:
                    wait = call.start + self.async_budget + SLACK + 5.0 - time.monotonic()
                    if not settled.wait(max(0.0, wait)):
                        self._abandon(call)
                    if call.status not in ("ok", "crash") and tries[call.key] < self.attempts:
                        todo.append(call.key)
            time.sleep(self.async_pace)

    def _submit(self, process: str, msg_id: str) -> tuple[Call, threading.Event]:
        """One publish_async: its future's resolution is one call, the (possibly blocking) submission another."""
        settled = threading.Event()
        start = time.monotonic()
        call = Call(process, "publish_async", msg_id, start, None, self.async_budget, value=msg_id)
        submit = Call(process, "publish_async.submit", msg_id, start, None, self.timeout)
        future = timed(
            self.history, submit, _nothing, self.js.publish_async, f"{self.subject}.{process}", msg_id.encode(),
            msg_id=msg_id, timeout=self.timeout, retry_on_no_responders=self.retries,
        )
        if not isinstance(future, Future):
            call.end, call.status, call.error = submit.end, submit.status, submit.error
            self.history.add(call)
            settled.set()
            return call, settled

        def resolved(done: Future[Any]) -> None:  # jsclient's events thread (or here, if already done)
            with self._lock:
                call.end = time.monotonic()
                if call.status:  # given up on already (and recorded): its end now shows how late it was
                    return
            error = done.exception()
            if error is None:
                call.status, call.result = "ok", done.result().seq
            else:
                call.status, call.error = classify(error), describe(error)
            self.history.add(call)
            settled.set()

        future.add_done_callback(resolved)
        return call, settled

    def _abandon(self, call: Call) -> None:
        """A future that did not resolve long after its budget: recorded as it is (unknown, no end yet)."""
        with self._lock:
            if call.status:
                return
            call.status, call.error = "unknown", "the future had not resolved when its publisher gave up on it"
            call.end = None
        self.history.add(call)


def check_publishes(calls: list[Call], stored: dict[str, list[int]]) -> tuple[list[str], dict[str, int]]:
    """Violations of "acked: stored exactly once; unknown: at most once; refused: never; nothing else",
    and a summary of the message ids by how they ended."""
    attempts: dict[str, list[Call]] = {}
    for c in calls:
        if c.op in ("publish", "publish_async"):
            attempts.setdefault(c.key, []).append(c)
    problems = []
    for msg_id, seqs in sorted(stored.items()):
        if msg_id not in attempts:
            problems.append(f"{msg_id} stored at {seqs} but never published")
        elif len(seqs) > 1:
            problems.append(f"{msg_id} stored {len(seqs)} times, at {seqs}")
    summary = {"acked": 0, "unknown, stored": 0, "unknown, not stored": 0, "refused": 0}
    for msg_id, tried in sorted(attempts.items()):
        seqs = stored.get(msg_id, [])
        acked = [c for c in tried if c.status == "ok"]
        if acked:
            summary["acked"] += 1
            if not seqs:
                problems.append(f"{msg_id} acked (seq {acked[0].result}) but not stored")
            problems += [f"{msg_id} acked with seq {c.result} but stored at {seqs}" for c in acked if
                         seqs and c.result not in seqs]
        elif all(c.status == "rejected" for c in tried):
            summary["refused"] += 1
            if seqs:
                errors = "; ".join(c.error for c in tried)
                problems.append(f"{msg_id} stored at {seqs} though every attempt was refused: {errors}")
        else:
            summary["unknown, stored" if seqs else "unknown, not stored"] += 1
    return problems, summary


class CasWorkload:
    """Read a key's revision, then update it with a value never used before, expecting that revision."""

    def __init__(
        self, kv: jsclient.KeyValue, keys: list[str], history: History, stop: threading.Event, *,
        process: str, seed: int, budget: float, pace: float = 0.01,
    ) -> None:
        self.kv = kv
        self.keys = keys
        self.history = history
        self.stop = stop
        self.process = process
        self.rng = random.Random(seed)
        self.budget = budget
        self.pace = pace

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            key = self.rng.choice(self.keys)
            read = Call(self.process, "kv.get", key, time.monotonic(), None, self.budget)
            entry = timed(self.history, read, _same, self._revision, key)
            if read.status == "ok":
                value = f"{self.process}-{n}"
                n += 1
                update = Call(self.process, "kv.update", key, time.monotonic(), None, self.budget, value=value,
                              expect=entry)
                timed(self.history, update, _same, self.kv.update, key, value.encode(), last=entry)
            time.sleep(self.pace)

    def _revision(self, key: str) -> int:
        """The revision a reader sees (not checked: a direct get may be served by a lagging replica)."""
        try:
            return self.kv.get(key).revision
        except jsclient.KeyNotFoundError:  # a replica that has not caught up yet
            return 0


def cas_histories(
    calls: list[Call], log: dict[str, list[tuple[int, str]]], initial: dict[str, tuple[int, str]]
) -> tuple[dict[str, list[Op]], list[str], dict[str, int]]:
    """One register history per key, with every update's fate settled by the bucket's full log.

    ``log[key]``: (revision, value) of every stored revision, oldest first;
    ``initial[key]``: the revision and value the key was created with.  An
    update with no answer that is in the log took effect (``ok``, end
    unknown); one that is not never did, and is left out.  Also returns
    what the log itself contradicts (an acked update missing or elsewhere,
    a refused one stored, a value stored twice or never written) and a
    summary of how the updates ended.
    """
    problems: list[str] = []
    where: dict[str, tuple[str, int]] = {}
    for key, entries in log.items():
        for rev, value in entries:
            if value in where:
                problems.append(f"value {value!r} stored twice: {where[value]} and {(key, rev)}")
            where[value] = (key, rev)
    written = {c.value for c in calls if c.op == "kv.update"} | {v for _, v in initial.values()}
    problems += [f"{key}@{rev}: {value!r} stored but never written" for value, (key, rev) in where.items()
                 if value not in written]
    histories: dict[str, list[Op]] = {key: [] for key in initial}
    summary = {"ok": 0, "fail": 0, "conflict": 0, "unknown, applied": 0, "unknown, not applied": 0, "refused": 0}
    for c in calls:
        if c.op != "kv.update":
            continue
        stored = where.get(c.value)
        label = c.value
        if c.status == "ok":
            summary["ok"] += 1
            if stored != (c.key, c.result):
                problems.append(f"{c.process}: update of {c.key} to {c.value!r} acked as revision {c.result}, "
                                f"but the log has it at {stored}")
            histories[c.key].append(Op(c.process, "cas", c.start, c.end, "ok", c.expect, c.result, label))
        elif c.status == "fail":
            summary["fail"] += 1
            if stored is not None:
                problems.append(f"{c.process}: update of {c.key} to {c.value!r} failed (wrong revision) "
                                f"but is stored at {stored}")
            histories[c.key].append(Op(c.process, "cas", c.start, c.end, "fail", c.expect, None, label))
        elif c.status in ("rejected", "conflict"):  # not applied; a conflict says nothing of the key either
            summary["refused" if c.status == "rejected" else "conflict"] += 1
            if stored is not None:
                problems.append(f"{c.process}: update of {c.key} to {c.value!r} was refused ({c.error}) "
                                f"but is stored at {stored}")
        elif stored is not None:  # unknown (or unexplained, flagged elsewhere) and in the log: it happened
            summary["unknown, applied"] += 1
            histories[c.key].append(Op(c.process, "cas", c.start, None, "ok", c.expect, stored[1], label))
        else:
            summary["unknown, not applied"] += 1
    return histories, problems, summary


def read_stream(js: jsclient.JetStream, stream: str, subject: str, timeout: float = 10.0) -> list[jsclient.Msg]:
    """Every message of ``stream`` (nothing is publishing any more), with an ordered consumer."""
    count = js.stream_info(stream).state.messages
    sub = js.subscribe(subject, stream=stream, ordered=True)
    try:
        return [sub.next_msg(timeout=timeout) for _ in range(count)]
    finally:
        sub.unsubscribe()


class ConsumeWorkload:
    """One consumer of the published stream, taking until ``stop``; every take is a recorded call.

    ``kind``: ``pull`` (a durable R3 pull consumer, explicit acks: at least once), ``ordered`` (the push
    ordered subscription) or ``handles`` (ADR-37's pull-based ordered consumer): both ordered ones must
    give every stored message once, in stream order.  :func:`check_consumed` compares what each took with
    the stream read back.
    """

    KINDS = ("pull", "ordered", "handles")

    def __init__(
        self, js: jsclient.JetStream, history: History, stop: threading.Event, kind: str, *,
        stream: str = "PUB", subject: str = "pub.>", timeout: float = 2.0,
    ) -> None:
        assert kind in self.KINDS, kind
        self.js = js
        self.history = history
        self.stop = stop
        self.kind = kind
        self.stream = stream
        self.subject = subject
        self.timeout = timeout
        self.process = f"consume-{kind}"
        #: (stream sequence, times the server says it delivered it) of every message taken, in order.
        self.taken: list[tuple[int, int]] = []
        self._close: Callable[[], None] = lambda: None

    def thread(self) -> threading.Thread:
        return threading.Thread(target=self.run, name=self.process, daemon=True)

    def run(self) -> None:
        take = self._taker()
        try:
            while not self.stop.is_set():
                call = Call(self.process, "consume", self.kind, time.monotonic(), None, self.timeout)
                got = timed(self.history, call, len, take)
                if isinstance(got, list):
                    for msg in got:
                        meta = msg.metadata
                        self.taken.append((meta.sequence.stream, meta.num_delivered))
                        if self.kind == "pull":
                            msg.ack()
                elif isinstance(got, Exception):
                    time.sleep(0.05)  # a failed take (a fault): the next one tries again
        finally:
            self._close()

    def _taker(self) -> Callable[[], list[jsclient.Msg]]:
        if self.kind == "pull":
            durable = retrying("pull_subscribe", lambda: self.js.pull_subscribe(
                self.subject, "NEMPULL", stream=self.stream, config=jsclient.ConsumerConfig(ack_wait=4.0)))
            self._close = durable.unsubscribe
            return lambda: durable.fetch(50, timeout=self.timeout)
        if self.kind == "ordered":
            sub = retrying(
                "ordered subscribe", lambda: self.js.subscribe(self.subject, stream=self.stream, ordered=True)
            )
            self._close = sub.unsubscribe
            return lambda: [sub.next_msg(timeout=self.timeout)]
        consumer = retrying(
            "ordered consumer", lambda: self.js.stream(self.stream).ordered_consumer(filter_subjects=[self.subject])
        )
        self._close = consumer.close
        return lambda: consumer.fetch(50, timeout=self.timeout)

    def caught_up(self, last: int) -> bool:
        return bool(self.taken) and max(seq for seq, _ in self.taken) >= last


def retrying(what: str, fn: Callable[[], Any], seconds: float = 60.0) -> Any:
    """``fn()`` until the cluster answers it (a JetStream meta leader is elected a few seconds after start)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except jsclient.KeyValueError:
            raise  # a key's refusal is the server's definite answer, not a cluster still starting
        except (jsclient.JetStreamAPIError, jsclient.TimeoutError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster never answered {what} in {seconds} s") from exc
            time.sleep(0.5)


def check_consumed(workload: ConsumeWorkload, stored: list[int]) -> tuple[list[str], str]:
    """What ``workload`` took against the stream's sequences: every stored message taken (no gap); for the
    ordered kinds each once and in order (no duplicate); a pull consumer's repeats only as redeliveries."""
    problems: list[str] = []
    taken = [seq for seq, _ in workload.taken]
    missing = sorted(set(stored) - set(taken))
    if missing:
        problems.append(f"{workload.kind}: {len(missing)} stored messages never taken, first {missing[:10]}")
    unknown = sorted(set(taken) - set(stored))
    if unknown:
        problems.append(f"{workload.kind}: took sequences the stream does not hold: {unknown[:10]}")
    repeats = len(taken) - len(set(taken))
    if workload.kind != "pull":  # a pull consumer may redeliver (an ack lost, a leader change): at least once
        if repeats:
            problems.append(f"{workload.kind}: {repeats} messages taken more than once")
        out_of_order = [(a, b) for a, b in itertools.pairwise(taken) if b <= a]
        if out_of_order:
            problems.append(f"{workload.kind}: out of stream order at {out_of_order[:5]}")
    return problems, f"{len(taken)} taken ({repeats} again) of {len(stored)} stored"
