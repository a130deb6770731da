"""The router without a socket or a thread: parser events in, deliveries out (h11-style).

Each test feeds wire bytes through a real Parser into a Router whose sink
records what it was handed, and looks at the routing tables.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, cast

import pytest

import jsclient
from jsclient.core.router import Router
from jsclient.core.state import Waiter
from jsclient.futures import ReplyFuture, ReplyKind, settle_lock
from jsclient.message import Msg
from jsclient.protocol import Parser
from jsclient.subscription import Subscription

PREFIX = "_INBOX.mux."
MUX_SID = 1


class Sink:
    """Records what the router hands on."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def answer_ping(self) -> None:
        self.calls.append(("ping", None))

    def pong(self) -> None:
        self.calls.append(("pong", None))

    def info_update(self, data: dict[str, Any]) -> None:
        self.calls.append(("info", data))

    def server_error(self, err: jsclient.ServerError) -> None:
        self.calls.append(("err", err))

    def report_error(self, exc: Exception) -> None:
        self.calls.append(("report", exc))

    def late_reply(self, msg: Msg) -> None:
        self.calls.append(("late", msg))


CONN = cast(jsclient.Connection, object())  # only stored on each message, never called


def make_router() -> tuple[Router, Sink, Callable[[bytes], bool]]:
    sink = Sink()
    router = Router(sink, CONN)
    router.set_mux(MUX_SID, PREFIX)
    parser = Parser(msg_class=Msg)  # as the handshake makes it
    return router, sink, lambda wire: router.route(parser.feed(wire))


def add_sub(router: Router, sid: int, subject: str, *, max_msgs: int | None = None, limit: int = 100) -> Subscription:
    sub = Subscription(CONN, sid, subject, None, None, max_msgs, limit, 1 << 20)
    router.subs[sid] = sub
    return sub


def future(subject: str = "svc", kind: ReplyKind | None = None) -> ReplyFuture[Any]:
    events: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
    return ReplyFuture(events, subject, kind or ReplyKind(), 5.0)


def test_messages_go_to_their_subscription_in_order_and_are_counted() -> None:
    router, sink, feed = make_router()
    a, b = add_sub(router, 7, "a"), add_sub(router, 8, "b")
    assert feed(b"MSG a 7 2\r\nhi\r\nMSG b 8 r.1 1\r\nx\r\nMSG a 7 3\r\nyou\r\nMSG gone 99 1\r\nz\r\n") is False
    assert [m.data for m in a._queue] == [b"hi", b"you"]
    assert [(m.data, m.reply) for m in b._queue] == [(b"x", "r.1")]
    assert all(m._conn is CONN for m in [*a._queue, *b._queue])
    assert (router.in_msgs, router.in_bytes) == (4, 7)  # the message for an unknown sid is counted, then dropped
    assert sink.calls == []


def test_a_reply_fills_its_request_waiter_and_says_so() -> None:
    router, _, feed = make_router()
    waiter, other = Waiter(), Waiter()
    router.waiters.update({"12": waiter, "13": other})
    assert feed(b"MSG _INBOX.mux.12 1 4\r\npong\r\n") is True
    assert waiter.wait(0) and waiter.msg is not None and waiter.msg.data == b"pong"
    assert "12" not in router.waiters and not other.lock.acquire(blocking=False)  # the other still waits
    assert feed(b"MSG _INBOX.mux.99 1 1\r\nx\r\n") is False  # nobody waits for token 99 (timed out): dropped


def test_replies_settle_futures_decoded_or_as_no_responders() -> None:
    router, _, feed = make_router()
    settled: list[int] = []
    plain = future()
    decoded = future("js", ReplyKind(decode=lambda msg, subject: (subject, msg.data.upper()), on_settle=settled.append))
    failing = future("bad", ReplyKind(decode=lambda msg, subject: 1 / 0))
    nobody = future("empty")
    router.waiters.update({"1": plain, "2": decoded, "3": failing, "4": nobody})
    feed(
        b"MSG _INBOX.mux.1 1 2\r\nok\r\nMSG _INBOX.mux.2 1 3\r\nack\r\nMSG _INBOX.mux.3 1 1\r\n?\r\n"
        b"HMSG _INBOX.mux.4 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
    )
    assert cast(Msg, plain.result(0)).data == b"ok"
    assert decoded.result(0) == ("js", b"ACK") and settled == [1]  # on_settle: once per kind, with the count
    assert isinstance(failing.exception(0), ZeroDivisionError)
    with pytest.raises(jsclient.NoRespondersError, match="'empty'"):
        nobody.result(0)
    assert not router.waiters


def test_the_futures_lock_is_not_held_across_a_subscription_delivery_or_after_routing() -> None:
    router, _, feed = make_router()
    sub = add_sub(router, 5, "s")
    seen: list[bool] = []
    real = sub._deliver

    def deliver(msg: Msg) -> None:
        seen.append(_held_elsewhere())
        real(msg)

    sub._deliver = deliver  # type: ignore[method-assign]
    router.waiters.update({"1": future(), "2": future()})
    feed(b"MSG _INBOX.mux.1 1 1\r\na\r\nMSG s 5 1\r\nb\r\nMSG _INBOX.mux.2 1 1\r\nc\r\n")
    assert seen == [False] and not _held_elsewhere()


def _held_elsewhere() -> bool:
    """Whether this thread holds the futures' (reentrant) lock: another thread could not take it."""
    result: list[bool] = []

    def probe() -> None:
        lock = settle_lock()
        got = lock.acquire(timeout=0.05)
        if got:
            lock.release()
        result.append(got)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return not result[0]


def test_control_events_go_to_the_sink() -> None:
    _, sink, feed = make_router()
    feed(b"PING\r\nPONG\r\n+OK\r\nINFO {\"ldm\":true}\r\n-ERR 'Permissions Violation for Publish to \"x\"'\r\n")
    kinds = [kind for kind, _ in sink.calls]
    assert kinds == ["ping", "pong", "info", "err"]
    assert sink.calls[2][1] == {"ldm": True}
    assert isinstance(sink.calls[3][1], jsclient.ServerError) and "Permissions Violation" in str(sink.calls[3][1])


def test_a_subscription_reaching_max_msgs_leaves_the_table_and_ends_after_its_messages() -> None:
    router, _, feed = make_router()
    sub = add_sub(router, 3, "m", max_msgs=2)
    feed(b"MSG m 3 1\r\n1\r\nMSG m 3 1\r\n2\r\nMSG m 3 1\r\n3\r\n")
    assert 3 not in router.subs
    assert [sub.next_msg(0.1).data, sub.next_msg(0.1).data] == [b"1", b"2"]
    with pytest.raises(jsclient.SubscriptionClosedError):
        sub.next_msg(0.1)


def test_a_full_subscription_drops_counts_and_is_reported_once() -> None:
    router, sink, feed = make_router()
    sub = add_sub(router, 4, "full", limit=2)
    feed(b"MSG full 4 1\r\na\r\n" * 5)
    feed(b"MSG full 4 1\r\nb\r\n")
    assert sub.pending_msgs == 2 and sub.dropped == 4
    reports = [exc for kind, exc in sink.calls if kind == "report"]
    assert len(reports) == 1 and isinstance(reports[0], jsclient.SlowConsumerError)


def test_others_expect_counts_what_a_request_caller_does_not_read_itself() -> None:
    router, _, _ = make_router()
    add_sub(router, MUX_SID, PREFIX + "*")  # the request inbox itself
    assert not router.others_expect()
    router.waiters["1"] = Waiter()
    assert not router.others_expect(own_waiters=1) and router.others_expect(own_waiters=0)
    add_sub(router, 9, "user")
    assert router.others_expect(own_waiters=1)


def test_take_all_empties_both_tables() -> None:
    router, _, _ = make_router()
    add_sub(router, 2, "x")
    router.waiters.update({"1": Waiter(), "2": future()})
    subs, pending = router.take_all()
    assert len(subs) == 1 and len(pending) == 2 and not router.subs and not router.waiters


def test_a_reply_for_a_request_that_already_ended_is_counted_and_handed_to_the_sink() -> None:
    """A second answer (or one after the timeout) finds no waiter: it is counted, and the sink logs it."""
    router, sink, feed = make_router()
    waiter = Waiter()
    router.waiters["t1"] = waiter
    assert feed(b"MSG " + PREFIX.encode() + b"t1 %d 2\r\nok\r\n" % MUX_SID) is True
    assert router.late_replies == 0 and sink.calls == []
    assert feed(b"MSG " + PREFIX.encode() + b"t1 %d 4\r\nlate\r\n" % MUX_SID) is False
    assert router.late_replies == 1
    assert [(what, m.data) for what, m in sink.calls] == [("late", b"late")]
