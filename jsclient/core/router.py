"""The router: parser events in, deliveries out.  No socket, no thread, no clock.

:meth:`Router.route` hands each event of one read to its destination (a
subscription's queue, a waiter, a future, a PING's waiter, or the
:class:`RouterSink`): the plain path, which the fast path's shortcuts give
the same result as (docs/guides/internals.rst, "The fast path of a request").  How a
reply settles a future (:func:`settle_reply`) is written here, so that
:mod:`.requests` imports it and the two do not import each other.

Threads: ``route`` runs on whichever thread holds the read side's token
(the reader, or a caller reading its own reply): one at a time, so
``in_msgs``/``in_bytes`` need no lock.  Other threads add and remove
entries of ``subs`` (under ``sub_lock``) and ``waiters`` (no lock: dict
operations are atomic, and a waiter is listed before its request is sent;
whoever pops an entry settles it).  The reader thread only ever makes
messages: a caller's :class:`~jsclient.protocol.ReplyShape` reader runs on
that caller's thread.

Locks (their order: :mod:`jsclient.core`): ``sub_lock`` guards changes to
``subs``.  The futures' lock (:func:`jsclient.futures.settle_lock`)
is held through a run of async replies and released before anything else
is routed; only decoding replies, stores and wake-ups happen under it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import NoRespondersError, ServerError, SubscriptionClosedError, server_error
from ..futures import ReplyFuture, ReplyKind, settle_lock
from ..headers import status_of
from ..message import Attached, Msg
from ..protocol import Err, Info, Ping, Pong
from .state import Waiter

if TYPE_CHECKING:
    from ..subscription import Subscription


class RouterSink(Protocol):
    """What the router hands on that is not a delivery (the session implements it)."""

    def answer_ping(self) -> None:
        """The server PINGed: queue a PONG."""

    def pong(self) -> None:
        """A PONG arrived: it answers the oldest PING."""

    def info_update(self, data: dict[str, Any]) -> None:
        """The server sent INFO (cluster changes, lame duck mode)."""

    def server_error(self, err: ServerError) -> None:
        """The server sent -ERR."""

    def report_error(self, exc: Exception) -> None:
        """An error for the error callback (a slow consumer)."""

    def late_reply(self, msg: Msg) -> None:
        """A reply came for a request that had already ended (timed out, or answered by another responder)."""


class Router:
    """The routing tables of one connection (per process) and the code that routes."""

    def __init__(self, sink: RouterSink, conn: Attached | None) -> None:
        self._sink = sink
        self.conn = conn  # set on every message, for respond() and acks
        self.subs: dict[int, Subscription] = {}
        self.sub_lock = threading.Lock()
        #: Request waiters and futures by token (the last token of the reply subject).
        self.waiters: dict[str, Waiter | ReplyFuture[Any]] = {}
        #: The request inbox's sid and the length of its prefix (where the token starts).
        self.resp_sid = 0
        self.prefix = ""
        self.mux = b""
        self.token_at = 0
        # Written only by the holder of the read token.
        self.in_msgs = 0
        self.in_bytes = 0
        #: Replies on the inbox whose request had already ended: it timed out, or a second responder
        #: answered it (in a cluster, a deposed stream leader and the new one can both answer a publish).
        self.late_replies = 0

    def set_mux(self, sid: int, prefix: str) -> None:
        """Route messages on subscription ``sid`` by the token after ``prefix``."""
        self.prefix = prefix
        self.mux = prefix.encode()  # for the start of a reply's control line (protocol.REPLY_LINE)
        self.token_at = len(prefix)
        self.resp_sid = sid

    def others_expect(self, own_waiters: int = 0) -> bool:
        """Something expects messages that a caller owning ``own_waiters`` request waiters will not read."""
        return len(self.waiters) > own_waiters or len(self.subs) > (self.resp_sid != 0)

    def route(self, events: Sequence[Any]) -> bool:
        """Route parsed events; True when one answered a request() caller."""
        answered = False
        subs = self.subs
        touched: set[Subscription] = set()
        settled: list[ReplyKind] = []  # kinds of the futures settled here, one entry per future
        resp_sid = self.resp_sid
        waiters = self.waiters
        token_at = self.token_at
        conn = self.conn
        n_in = 0
        bytes_in = 0
        held = None  # the futures' lock, held through a run of async replies (taken once, not per reply)
        try:
            for ev in events:
                if ev.__class__ is Msg:
                    n_in += 1
                    bytes_in += len(ev.data)
                    ev._conn = conn
                    sid = ev.sid
                    if sid == resp_sid:
                        waiter = waiters.pop(ev.subject[token_at:], None)
                        if waiter is None:
                            self.late_replies += 1
                            self._sink.late_reply(ev)
                            continue
                        if isinstance(waiter, Waiter):
                            waiter.fill(ev)
                            answered = True
                        else:
                            if held is None:
                                held = settle_lock()
                                held.acquire()
                            settle_reply(waiter, ev)
                            settled.append(waiter.kind)
                        continue
                    if held is not None:
                        held.release()  # it is a leaf lock: subscriptions have their own
                        held = None
                    sub = subs.get(sid)
                    if sub is None:
                        continue
                    sub._deliver(ev)
                    touched.add(sub)
                    if sub.max_msgs and sub.received >= sub.max_msgs:
                        with self.sub_lock:
                            subs.pop(sid, None)
                        sub._mark_closed(SubscriptionClosedError, discard=False)
                    continue
                if held is not None:
                    held.release()
                    held = None
                cls = ev.__class__
                if cls is Ping:
                    self._sink.answer_ping()
                elif cls is Pong:
                    self._sink.pong()
                elif cls is Info:
                    self._sink.info_update(ev.data)
                elif cls is Err:
                    self._sink.server_error(server_error(ev.text))
        finally:
            if held is not None:
                held.release()
        self.in_msgs += n_in
        self.in_bytes += bytes_in
        if settled:
            count_settled(settled)
        for sub in touched:
            slow = sub._after_batch()
            if slow is not None:
                self._sink.report_error(slow)
        return answered

    def take_all(self) -> tuple[list[Subscription], list[Waiter | ReplyFuture[Any]]]:
        """Closing: empty both tables and return what was in them."""
        with self.sub_lock:
            subs = list(self.subs.values())
            self.subs.clear()
        pending: list[Waiter | ReplyFuture[Any]] = []
        for token in list(self.waiters):
            entry = self.waiters.pop(token, None)
            if entry is not None:
                pending.append(entry)
        return subs, pending


def count_settled(kinds: list[ReplyKind]) -> None:
    """Tell each kind's on_settle hook how many of its futures just settled: once per kind, not per future."""
    for kind, n in Counter(kinds).items():
        if kind.on_settle is not None:
            kind.on_settle(n)


def no_responders(msg: Msg) -> bool:
    """Whether ``msg`` is the server's answer that nobody listens on a request's subject: a 503 status,
    no payload (the request mux, ``request_async``'s futures and request-many all read it so)."""
    return not msg.data and status_of(msg.header) == 503


def settle_reply(fut: ReplyFuture[Any], msg: Msg) -> None:
    """Holding settle_lock(): resolve an async request with its reply (decoded, or as no-responders)."""
    kind = fut.kind
    decode = kind.decode
    if decode is not None:
        read = kind.read
        if read is not None:
            result = read(msg.data)
            if result is not None:
                fut.settle_locked(result, None)
                return
        try:
            result = decode(msg, fut.subject)
        except Exception as exc:  # noqa: BLE001 - the decoder's verdict goes to the future
            fut.settle_locked(None, exc)
        else:
            fut.settle_locked(result, None)
    elif no_responders(msg):
        fut.settle_locked(None, NoRespondersError(f"no responders for request to {fut.subject!r}"))
    else:
        fut.settle_locked(msg, None)
