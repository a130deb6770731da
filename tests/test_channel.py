"""The consumption engine and its policies without a server: a fake delivery port fed real wire frames.

The fake port stands in for a core subscription (the reader thread's side:
arrival hook, queue, interrupt); a fake connection answers each pull request
with frames the test scripts, the way test_router feeds the router.  What a
real server sends is covered by test_pull, test_push and test_ordered; here
each status, heartbeat, gap and interrupt is put exactly where the test wants it.
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
from collections.abc import Callable
from typing import Any, cast

import pytest

import jsclient
from jsclient import errors
from jsclient.jetstream import manager
from jsclient.jetstream.channel import Channel, Wake
from jsclient.jetstream.manager import MessageManager, StrictOrder, Verdict
from jsclient.jetstream.pull import MessageStream, PullSubscription
from jsclient.message import Msg
from jsclient.subscription import Gaps

from .test_manager import Core, message, status


class FakePort:
    """A DeliveryPort: ``deliver`` is the reader thread's side (hook, then queue)."""

    def __init__(self) -> None:
        self.queue: collections.deque[Msg] = collections.deque()
        self.received = 0
        self.dropped = 0
        self.arrival_hook: Callable[[Msg], bool] | None = None
        self.closed = False
        self.receiving = True
        self._interrupt: errors.Error | None = None
        self._cond = threading.Condition()

    def deliver(self, msg: Msg) -> None:
        self.received += 1
        if self.arrival_hook is not None and self.arrival_hook(msg):
            return
        with self._cond:
            self.queue.append(msg)
            self._cond.notify_all()

    @property
    def pending_msgs(self) -> int:
        return len(self.queue)

    @property
    def pending_bytes(self) -> int:
        return sum(len(m.data) for m in self.queue)

    @property
    def is_closed(self) -> bool:
        return self.closed or not self.receiving

    def take(self, timeout: float | None, gaps: Gaps = Gaps.PASS) -> Msg:  # this port drops nothing
        with self._cond:
            if not self.queue and self._interrupt is None and not self.closed and self.receiving:
                self._cond.wait(0.05 if timeout is None else min(timeout, 0.05))
            if self.queue:
                return self.queue.popleft()
            if self._interrupt is not None:
                error, self._interrupt = self._interrupt, None
                raise error
            if self.closed or not self.receiving:
                raise errors.SubscriptionClosedError("closed")
            raise errors.TimeoutError("nothing")

    def interrupt(self, reason: errors.Error) -> None:
        with self._cond:
            self._interrupt = reason
            self._cond.notify_all()

    def unsubscribe(self, max_msgs: int | None = None) -> None:
        self.closed = True
        self.queue.clear()

    def drain(self, timeout: float | None = None) -> None:
        self.receiving = False

    def stop_receiving(self, timeout: float | None = None) -> None:
        self.receiving = False


class PullCore(Core):
    """CoreAPI as a pull subscription uses it; each pull request goes to ``answer``."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.answer: Callable[[str, dict[str, Any]], None] = lambda reply, body: None

    def publish_message(self, subject: str, payload: bytes, *, reply: str | None = None, **_: Any) -> None:
        body = json.loads(payload)
        self.requests.append(body)
        assert reply is not None
        self.answer(reply, body)

    def add_reconnect_hook(self, hook: Callable[[], None]) -> int:
        return 1

    def remove_reconnect_hook(self, key: int) -> None:
        pass


class FakeConn:
    options = jsclient.Options()  # the drain's default comes from it

    def __init__(self) -> None:
        self.core = PullCore()
        self.port = FakePort()
        self._inboxes = itertools.count(1)

    def new_inbox(self) -> str:
        return f"_INBOX.{next(self._inboxes)}"

    def subscribe(self, subject: str, **_: Any) -> FakePort:
        return self.port


class FakeJS:
    prefix = "$JS.API"

    def __init__(self) -> None:
        self.conn = FakeConn()


def pull_sub() -> tuple[PullSubscription, FakeConn]:
    js = FakeJS()
    return PullSubscription(cast(Any, js), "S", "C", None, created=False), js.conn


def to(reply: str, msg: Msg) -> Msg:
    """``msg`` as the server sends it for the pull request answered at ``reply`` (statuses come to it)."""
    msg.subject = reply
    return msg


# -- the engine ------------------------------------------------------------------------------


def test_a_step_is_a_message_or_a_status_with_its_error_and_heartbeats_never_come_out() -> None:
    core, port = Core(), FakePort()
    channel = Channel(cast(Any, port), MessageManager(cast(Any, core)), manager.CONSUME)
    for msg in (status(b"100 Idle Heartbeat"), status(b"100 FlowControl Request", "$JS.FC.1"), message(1),
                status(b"404 No Messages"), status(b"503"), status(b"409 Consumer Deleted")):
        port.deliver(msg)
    steps = [channel.step(1) for _ in range(4)]
    assert [s.verdict for s in steps] == [Verdict.MESSAGE, Verdict.END, Verdict.WARNING, Verdict.ERROR]
    assert steps[0].msg is not None and steps[0].msg.metadata.sequence.consumer == 1
    assert steps[1].status.code == 404 and steps[1].error is None
    assert isinstance(steps[2].error, errors.NoRespondersStatusError)
    assert isinstance(steps[3].error, errors.ConsumerDeletedError)
    assert core.controls == ["$JS.FC.1"]  # flow control answered on the way
    assert channel.step(0).verdict is Verdict.TIMED_OUT


def test_each_workflow_table_decides_the_same_status_differently() -> None:
    deleted = status(b"409 Consumer Deleted")
    outcomes = {}
    for name, table in (("push", manager.PUSH), ("ordered", manager.ORDERED), ("fetch", manager.FETCH)):
        port = FakePort()
        port.deliver(deleted)
        outcomes[name] = Channel(cast(Any, port), MessageManager(cast(Any, Core())), table).step(1).verdict
    assert outcomes == {"push": Verdict.ERROR, "ordered": Verdict.RESET, "fetch": Verdict.ERROR}


def test_a_wake_comes_after_what_is_queued_and_once() -> None:
    port = FakePort()
    channel = Channel(cast(Any, port), MessageManager(cast(Any, Core())), manager.PUSH)
    port.deliver(message(1))
    channel.wake(Wake.SILENT, 7)
    assert channel.step(1).verdict is Verdict.MESSAGE
    woken = channel.step(1)
    assert (woken.verdict, woken.wake, woken.serial) == (Verdict.WOKEN, Wake.SILENT, 7)
    assert channel.step(0).verdict is Verdict.TIMED_OUT
    port.closed = True
    with pytest.raises(errors.SubscriptionClosedError):
        channel.step(1)


def test_ordered_drops_everything_after_a_gap_and_wakes_the_taker_to_reset() -> None:
    """The reader-side policy of both ordered readers: StrictOrder as the port's arrival hook."""
    port = FakePort()
    channel: Channel

    def gap() -> None:
        channel.wake(Wake.RESET)

    order = StrictOrder(cast(Any, Core()), on_gap=gap)
    channel = Channel(cast(Any, port), order, manager.ORDERED)
    port.arrival_hook = order.arrive
    for n in (1, 2, 4, 5):
        port.deliver(message(n, 10 + n))
    assert [channel.step(1).msg.metadata.sequence.consumer for _ in range(2)] == [1, 2]  # type: ignore[union-attr]
    step = channel.step(1)
    assert (step.verdict, step.wake) == (Verdict.WOKEN, Wake.RESET)
    assert order.stream_seq == 12  # where the next consumer starts after
    beat = status(b"100 Idle Heartbeat", extra=b"Nats-Last-Consumer: 3\r\n")
    port.deliver(beat)  # a heartbeat past the last accepted: a gap too
    assert channel.step(1).wake is Wake.RESET


# -- the fetch policy ----------------------------------------------------------------------------


def test_fetch_ends_with_its_own_request_and_ignores_an_older_ones_end() -> None:
    psub, conn = pull_sub()

    def answer(reply: str, body: dict[str, Any]) -> None:
        if body.get("no_wait"):
            conn.port.deliver(to(reply, status(b"404 No Messages")))
            return
        conn.port.deliver(to("_INBOX.1.1", status(b"408 Request Timeout")))  # the no-wait one's, late
        conn.port.deliver(to(reply, message(1)))
        conn.port.deliver(to(reply, status(b"100 Idle Heartbeat")))
        conn.port.deliver(to(reply, message(2)))
        conn.port.deliver(to(reply, status(b"408 Request Timeout")))

    conn.core.answer = answer
    got = psub.fetch(10, timeout=2)
    assert [m.metadata.sequence.consumer for m in got] == [1, 2]
    assert [bool(r.get("no_wait")) for r in conn.core.requests] == [True, False]


def test_an_error_after_messages_is_raised_by_the_next_fetch_and_nothing_is_lost() -> None:
    psub, conn = pull_sub()

    def answer(reply: str, body: dict[str, Any]) -> None:
        conn.port.deliver(to(reply, message(1)))
        conn.port.deliver(to(reply, status(b"409 Consumer Deleted")))

    conn.core.answer = answer
    assert [m.metadata.sequence.consumer for m in psub.fetch(5, timeout=2)] == [1]
    with pytest.raises(errors.ConsumerDeletedError):
        psub.fetch(5, timeout=2)


def test_a_leadership_change_ends_a_fetch_and_no_responders_raises() -> None:
    psub, conn = pull_sub()
    conn.core.answer = lambda reply, body: conn.port.deliver(to(reply, status(b"409 Leadership Change")))
    assert psub.fetch(5, timeout=2, no_wait=True) == []
    conn.core.answer = lambda reply, body: conn.port.deliver(to(reply, status(b"503")))
    with pytest.raises(errors.NoRespondersStatusError):
        psub.fetch(5, timeout=2)


def test_a_fetch_whose_heartbeats_stop_raises_heartbeats_missed() -> None:
    psub, conn = pull_sub()
    channel = psub._inbox.channel

    def answer(reply: str, body: dict[str, Any]) -> None:
        if not body.get("no_wait"):
            channel.wake(Wake.SILENT, 1)  # the watchdog's alarm for this call (serial 1)
        else:
            conn.port.deliver(to(reply, status(b"404 No Messages")))

    conn.core.answer = answer
    with pytest.raises(errors.HeartbeatsMissedError):
        psub.fetch(5, timeout=3, heartbeat=1)


def test_a_reconnect_ends_a_fetch_with_what_came() -> None:
    psub, conn = pull_sub()

    def answer(reply: str, body: dict[str, Any]) -> None:
        conn.port.deliver(to(reply, message(1)))
        psub._inbox.on_reconnect()

    conn.core.answer = answer
    assert [m.metadata.sequence.consumer for m in psub.fetch(5, timeout=2)] == [1]


def test_a_wrong_pin_is_forgotten_and_asked_again_without_it() -> None:
    js = FakeJS()
    conn = js.conn
    psub = PullSubscription(cast(Any, js), "S", "C", None, created=False, group={"group": "G"})
    psub._inbox.pin_id = "old"

    def answer(reply: str, body: dict[str, Any]) -> None:
        if body.get("id") == "old":
            conn.port.deliver(to(reply, status(b"423 Nats-Wrong-Pin-Id")))
        else:
            conn.port.deliver(to(reply, message(1)))

    conn.core.answer = answer
    assert len(psub.fetch(1, timeout=2)) == 1
    assert [r.get("id") for r in conn.core.requests] == ["old", None]


# -- the messages() policy -------------------------------------------------------------------------


def stream_of(psub: PullSubscription, **options: Any) -> MessageStream:
    count = options.pop("batch", 4)
    return psub.messages(max_messages=count, expires=options.pop("expires", 30), threshold=0.5, **options)


def test_consume_reports_a_passing_trouble_and_asks_again() -> None:
    psub, conn = pull_sub()
    answers = iter([status(b"503"), message(1)])
    conn.core.answer = lambda reply, body: conn.port.deliver(to(reply, next(answers)))
    stream = stream_of(psub)
    msg = next(iter(stream))
    stream.stop()
    assert msg.metadata.sequence.consumer == 1
    assert [type(e) for e in conn.core.errors] == [errors.NoRespondersStatusError]
    assert len(conn.core.requests) == 2


def test_consume_ends_on_a_deleted_consumer() -> None:
    psub, conn = pull_sub()
    conn.core.answer = lambda reply, body: conn.port.deliver(to(reply, status(b"409 Consumer Deleted")))
    with pytest.raises(errors.ConsumerDeletedError):
        next(iter(stream_of(psub)))


def test_consume_asks_again_for_what_an_expired_request_did_not_deliver() -> None:
    psub, conn = pull_sub()
    sent = itertools.count(1)

    def answer(reply: str, body: dict[str, Any]) -> None:
        n = next(sent)
        if n == 1:  # the first request expires with all 4 undelivered: asked again in full
            conn.port.deliver(to(reply, status(b"408 Request Timeout", extra=b"Nats-Pending-Messages: 4\r\n")))
        else:
            conn.port.deliver(to(reply, message(n)))

    conn.core.answer = answer
    stream = stream_of(psub)
    next(iter(stream))
    stream.stop()
    assert [r["batch"] for r in conn.core.requests] == [4, 4]


def test_a_silent_consume_forgets_its_requests_and_asks_again() -> None:
    psub, conn = pull_sub()
    channel = psub._inbox.channel
    sent = itertools.count(1)

    def answer(reply: str, body: dict[str, Any]) -> None:
        if next(sent) == 1:
            channel.wake(Wake.SILENT)  # the watchdog: nothing came for the alarm time
        else:
            conn.port.deliver(to(reply, message(1)))

    conn.core.answer = answer
    stream = stream_of(psub)
    assert next(iter(stream)).metadata.sequence.consumer == 1
    stream.stop()
    assert [r["batch"] for r in conn.core.requests] == [4, 4]


def test_drain_hands_out_what_is_queued_then_ends() -> None:
    psub, conn = pull_sub()
    for n in (1, 2, 3):
        conn.port.deliver(message(n))
    psub.drain()
    assert [m.metadata.sequence.consumer for m in psub.fetch(2, timeout=1)] == [1, 2]
    assert [m.metadata.sequence.consumer for m in psub.fetch(2, timeout=1)] == [3]
    with pytest.raises(errors.SubscriptionClosedError):
        psub.fetch(2, timeout=1)
    assert conn.core.requests == []  # nothing asked for after the drain
