"""Subscription: a bounded per-subscription queue, ``next_msg``, iteration, callbacks.

Threads that touch a subscription:

* the connection's **reader thread** appends messages (:meth:`_deliver`,
  after the :attr:`arrival_hook`) and, once per received chunk, wakes
  waiters (:meth:`_after_batch`);
* **user threads** take messages (:meth:`next_msg`, iteration) and call
  :meth:`unsubscribe` / :meth:`drain`;
* with a callback, the subscription's own **dispatcher thread**
  (``jsclient-sub-<sid>``) takes messages and calls the callback, so order is
  kept per subscription and the reader never runs user code.  It runs rounds
  (:meth:`_dispatch_round`: every queued message, then idle) and waits
  between them holding the subscription only weakly;
* the JetStream workflows take and interrupt through the port (below), on
  their own taking thread; an interrupt may come from any thread.

A Subscription is also the :class:`~jsclient.core.iface.DeliveryPort` that
JetStream, Spark and services drive: :meth:`take`, :meth:`interrupt`,
:attr:`arrival_hook` and the counts.  Those names have no underscore because
they cross a layer, but they are internal, not part of the public API.

Locking: the queue is a ``collections.deque`` whose ``append``/``popleft`` are
atomic, so the fast path of ``next_msg`` takes no lock.  ``_cond`` guards the
slow path (waiting), ``_waiters``, ``_busy`` and the pending interrupt; the
reader reads ``_waiters`` without the lock, which is safe because a waiter
registers *before* it checks the queue (the dispatcher counts as one between
rounds).  Byte accounting uses two counters each written by one thread only
(``_bytes_in`` by the reader, ``_bytes_out`` by the taker), so no update is
lost without a lock.

A drop leaves a mark where it happened, so that a reader with ``next_msg``
hears of it (nats.go's ``NextMsg`` answers ``ErrSlowConsumer`` too).  On a
subscription without a callback, the first drop of an episode queues a gap
marker behind the messages kept before it; ``next_msg`` (and iteration)
raises :class:`SlowConsumerError` when it reaches the marker, once, and goes
on with the later messages.  The episode ends there: the next drop queues a
new marker.  The delivery port's :meth:`take` passes a marker silently:
the layers above decide what a lost message means to them (a JetStream
consumer with acks gets it again), and the error callback hears of the
drops in its own episodes (``_slow``: from a drop until a taker finds the
queue empty).  A layer that must act where messages went missing (the
ordered consumer, whose arrival hook accepted them before they were
dropped) asks for ``Gaps.SIGNAL``: :class:`GapPassed` at every marker.
The marker costs the taking hot path nothing: reading its ``data``, which
every take does to count bytes, raises :class:`_AtGap`.  ``_gaps_marked``
(reader) and ``_gaps_passed`` (taker) say whether one is queued.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from enum import Enum
from typing import TYPE_CHECKING, Protocol, cast

from . import observe
from .deprecation import renamed_keywords
from .errors import (
    ConnectionClosedError,
    Error,
    ForkedConnectionError,
    SlowConsumerError,
    SubscriptionClosedError,
    TimeoutError,
)
from .message import Msg
from .timeouts import DEFAULT, Timeout, answer_limit, take_limit

if TYPE_CHECKING:
    from .observe import Dispatch
    from .options import Options

MsgCallback = Callable[[Msg], None]


class Relay:
    """Internal: a subscription callback of jsclient's own that hands each message on to user code that runs
    after it or elsewhere (a JetStream push subscription's callback, a service endpoint's hand-over to a worker).

    The subscription calls ``relay`` with each message, as it would a plain callback.  While
    :data:`jsclient.observe.dispatch` is set, it calls ``observed(dispatch)`` once per round instead and gives that
    round's messages to what it returns: the relay with the user's code as the seam wrapped it.  So the seam sees
    the user's code, never the relay (a plain callback it sees itself).
    """

    __slots__ = ("observed", "relay")

    def __init__(self, relay: MsgCallback, observed: Callable[[Dispatch], MsgCallback]) -> None:
        self.relay = relay
        self.observed = observed

    def __call__(self, msg: Msg) -> None:
        self.relay(msg)


class Gaps(Enum):
    """Internal (the delivery port): what a take does at a gap marker (messages dropped there): raise
    SlowConsumerError, as ``next_msg`` does; pass it, as most layers above the port do (they hear of drops
    through the error callback); or raise :class:`GapPassed` at every marker, for a layer that must act where
    the messages went missing (the ordered consumer recreates its consumer there).  An enum, not a flag:
    ``next_msg`` passes it positionally, for speed."""

    PASS = 0
    REPORT = 1
    SIGNAL = 2


_REPORT = Gaps.REPORT  # bound once: next_msg passes it on every call
_SIGNAL = Gaps.SIGNAL


class GapPassed(Exception):
    """Internal (the delivery port): a take with ``Gaps.SIGNAL`` passed a gap marker: messages were dropped
    here, after those taken so far and before those still queued."""


class _AtGap(Exception):
    """Raised by reading the gap marker's ``data``: how a take finds the marker without a test of its own."""


class _Gap:
    """The marker queued where a subscription dropped messages; not a message."""

    __slots__ = ()

    @property
    def data(self) -> bytes:
        raise _AtGap

    def __repr__(self) -> str:
        return "<gap>"


#: The one gap marker.  It travels in the queue as a Msg: only this module sees it, and every path that takes
#: from a queue that may hold it reads ``data`` (raising :class:`_AtGap`) or compares it with ``is``.
_GAP = cast(Msg, _Gap())


class SubscriptionCore(Protocol):
    """What a subscription uses of its connection's core (:class:`~jsclient.core.iface.CoreAPI` includes it)."""

    def report_error(self, exc: Exception) -> None:
        """Hand an error to the error callback on the events thread."""

    def unsubscribe(self, sub: Subscription, max_msgs: int | None) -> None: ...

    def drain_subscription(self, sub: Subscription, timeout: float) -> None: ...

    def stop_receiving(self, sub: Subscription, timeout: float) -> None: ...


class SubscriptionOwner(Protocol):
    """What a subscription uses of its connection (a :class:`~jsclient.Connection`): its core, and the
    options for ``drain_timeout``.  Named here so that the core, which makes every subscription, need not
    name the layer above it."""

    @property
    def core(self) -> SubscriptionCore: ...

    @property
    def options(self) -> Options: ...


class Subscription:
    """A subscription on one subject (optionally in a queue group)."""

    def __init__(
        self,
        conn: SubscriptionOwner,
        sid: int,
        subject: str,
        queue: str | None,
        cb: MsgCallback | Relay | None,
        max_msgs: int | None,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> None:
        """Made by :meth:`Connection.subscribe`, which registers it; not called directly.

        Args:
            conn: The connection it belongs to.
            sid: Its id on the connection.
            subject: The subject it receives.
            queue: Its queue group, or None.
            cb: The callback each message goes to, on the subscription's own thread; None to take them.
            max_msgs: The messages after which it ends by itself, or None.
            pending_msgs_limit: Messages it holds before it drops new ones.
            pending_bytes_limit: Payload bytes it holds before it drops new ones.

        Raises:
            : Nothing.
        """
        self._conn = conn
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self.max_msgs = max_msgs
        self.pending_msgs_limit = pending_msgs_limit
        self.pending_bytes_limit = pending_bytes_limit
        # A relay's callback is its ``relay``: the same call per message as a plain callback.
        self._observed: Callable[[Dispatch], MsgCallback] | None = None
        if isinstance(cb, Relay):
            self._observed = cb.observed
            cb = cb.relay
        self._cb = cb
        self._queue: deque[Msg] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._waiters = 0
        self._bytes_in = 0  # reader thread only
        self._bytes_out = 0  # taking thread only
        #: Messages that arrived for this subscription (kept or dropped).
        self.received = 0
        #: Messages dropped because the pending limits were exceeded.
        self.dropped = 0
        self._slow = False  # reader: dropping now; reset when the queue empties
        self._slow_reported = False
        self._gaps_marked = 0  # reader only: gap markers queued
        self._gaps_passed = 0  # taker only: gap markers taken (a marker is queued while the two differ)
        self._dropped_told = 0  # taker only: ``dropped`` when next_msg last raised SlowConsumerError
        # Why no more messages will arrive (None while live).
        self._closed: type[Error] | None = None
        self._dispatcher: threading.Thread | None = None
        self._busy = False  # the dispatcher holds a message (guarded by _cond)
        #: Internal (the delivery port), a reader-thread hook of a layer above (JetStream) that sees every
        #: message first and returns True to consume it.  Quick, never blocking.
        self.arrival_hook: Callable[[Msg], bool] | None = None
        # An error the next take raises once the queue is empty (guarded by _cond).
        self._pending_error: Error | None = None
        if cb is not None:
            # The thread holds the subscription weakly and the connection not at all, so a connection
            # dropped without close() (and its subscriptions) can be collected; the thread then ends.
            # Between rounds it waits, and counts as a waiter: the reader wakes it.
            self._waiters = 1
            self._dispatcher = threading.Thread(
                target=_dispatch_main, args=(weakref.WeakMethod(self._dispatch_round), self._queue, self._cond),
                name=f"jsclient-sub-{sid}", daemon=True,
            )
            self._dispatcher.start()
            weakref.finalize(self, _wake, self._cond)

    def __repr__(self) -> str:
        q = f" queue={self.queue!r}" if self.queue else ""
        return f"<Subscription sid={self.sid} subject={self.subject!r}{q} pending={self.pending_msgs}>"

    # -- reader-thread side ------------------------------------------------
    def _deliver(self, msg: Msg) -> None:
        """Queue a message, or drop and count it when over the pending limits."""
        self.received += 1
        hook = self.arrival_hook
        if hook is not None and hook(msg):
            return
        size = len(msg.data)
        q = self._queue
        if (
            len(q) >= self.pending_msgs_limit
            or self._bytes_in - self._bytes_out + size > self.pending_bytes_limit
        ) and self._drop_over_limits(size):
            return
        self._bytes_in += size
        q.append(msg)

    def _drop_over_limits(self, size: int) -> bool:
        """Past the quick test of the limits: drop and count the message (True), and mark the gap if none is marked.

        False when only a queued gap marker made the queue look full: it is no message.
        """
        if (
            len(self._queue) - (self._gaps_marked - self._gaps_passed) < self.pending_msgs_limit
            and self._bytes_in - self._bytes_out + size <= self.pending_bytes_limit
        ):
            return False
        self.dropped += 1
        self._slow = True
        # Looked at after counting the drop: a taker passing the queued marker now either counts this drop in
        # its error (it reads ``dropped`` after counting the marker passed) or has passed it already, and a
        # new marker goes in; so no drop escapes the errors of next_msg.
        if self._cb is None and self._gaps_marked == self._gaps_passed:
            self._gaps_marked += 1  # before the marker goes in: a taker may pass it at once
            self._queue.append(_GAP)
        return True

    def _after_batch(self) -> Error | None:
        """Wake waiters; return a SlowConsumerError to report if this batch started dropping."""
        if self._waiters:
            with self._cond:
                self._cond.notify_all()
        if self._slow and not self._slow_reported:
            self._slow_reported = True
            return SlowConsumerError(self.subject, self.sid, self.dropped)
        return None

    def _mark_closed(self, reason: type[Error], discard: bool) -> None:
        """No more messages will arrive; wake everyone waiting.  Any thread."""
        with self._cond:
            if self._closed is None:
                self._closed = reason
            if discard:
                self._queue.clear()
            self._cond.notify_all()

    def _after_fork(self) -> None:
        """In a forked child: the parent's dispatcher and locks are gone; this subscription ends."""
        self._cond = threading.Condition(threading.Lock())
        self._queue.clear()
        self._gaps_marked = self._gaps_passed = 0
        self._waiters = 0
        self._busy = False
        self._dispatcher = None
        self._closed = ForkedConnectionError

    # -- taking side -------------------------------------------------------
    @property
    def pending_msgs(self) -> int:
        """Messages queued, not yet taken."""
        return max(0, len(self._queue) - (self._gaps_marked - self._gaps_passed))

    @property
    def pending_bytes(self) -> int:
        """Payload bytes queued, not yet taken."""
        return max(0, self._bytes_in - self._bytes_out)

    @property
    def is_closed(self) -> bool:
        """Whether no more messages will arrive (unsubscribed, drained, ``max_messages`` reached, or closed)."""
        return self._closed is not None

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next message; waits up to ``timeout`` seconds (None: no limit; 0: only one already queued).

        Raises :class:`jsclient.TimeoutError` when nothing arrives in time and
        :class:`SubscriptionClosedError` (or ConnectionClosedError) once the
        subscription has ended and its queue is empty.  Where the subscription
        dropped messages over its pending limits, it raises
        :class:`SlowConsumerError` once, after the messages kept before the
        drops; the next call goes on with the messages after them.

        Args:
            timeout: Seconds to wait for a message; ``None``, no limit; ``0``, only one already queued.

        Returns:
            The next message, in the order they arrived.

        Raises:
            InvalidArgumentError: A bad ``timeout``.
            TimeoutError: No message within ``timeout``.
            SlowConsumerError: Messages were dropped here (once per episode of drops; ``missed`` says how many
                since the last one raised, ``dropped`` how many in all).  The subscription goes on.
            SubscriptionClosedError: The subscription ended (unsubscribed, drained, or ``max_messages``
                reached) and nothing is queued.
            ConnectionClosedError: The connection closed and nothing is queued (ForkedConnectionError in a
                forked child).
            Error: The subscription has a callback: its messages go there.
        """
        if self._cb is not None:
            raise Error("next_msg cannot be used on a subscription with a callback")
        return self.take(take_limit(timeout), _REPORT)  # positional: a keyword makes this call slower

    def take(self, timeout: float | None, gaps: Gaps = Gaps.PASS) -> Msg:
        """Internal (the delivery port): :meth:`next_msg` without its checks, for the layers above.

        A gap where messages were dropped is passed silently by default: the
        layers above decide what a lost message means to them (and the error
        callback hears of the drops).

        Args:
            timeout: Seconds to wait, already checked; ``None``, no limit; ``0``, only one already queued.
            gaps: At a gap, raise SlowConsumerError (REPORT, as :meth:`next_msg` does), pass it (PASS), or raise
                the internal GapPassed at every one (SIGNAL; the marker is passed, so the next take goes on with
                the messages after it).

        Returns:
            The next message.

        Raises:
            TimeoutError: No message within ``timeout``.
            SlowConsumerError: With ``Gaps.REPORT``, messages were dropped here.
            SubscriptionClosedError: The subscription ended and nothing is queued.
            ConnectionClosedError: The connection closed and nothing is queued.
            Error: The error an :meth:`interrupt` left, once the queue is empty (raised once).
        """
        try:
            msg = self._queue.popleft()
            self._bytes_out += len(msg.data)  # the gap marker's data raises _AtGap
            return msg
        except IndexError:
            pass
        except _AtGap:
            gap = self._pass_gap()
            if gaps is _SIGNAL:
                raise GapPassed from None
            if gap is not None and gaps is _REPORT:
                raise gap from None
        return self._wait(timeout, gaps)

    def interrupt(self, reason: Error) -> None:
        """Internal (the delivery port): have the next take raise ``reason`` once, when the queue is empty.

        Any thread; a taker waiting now is woken.

        Args:
            reason: The error to raise.

        Raises:
            : Nothing.
        """
        with self._cond:
            self._pending_error = reason
            self._cond.notify_all()

    def _pass_gap(self) -> SlowConsumerError | None:
        """Taking thread, past a gap marker: the error that reports its drops, or None if they were reported.

        The error counts every drop until now, also those after messages kept
        since the marker (one episode, one error).  None when a drop raced an
        earlier report and was counted in it.
        """
        self._gaps_passed += 1
        dropped = self.dropped
        missed = dropped - self._dropped_told
        if not missed:
            return None
        self._dropped_told = dropped
        return SlowConsumerError(self.subject, self.sid, dropped, missed=missed)

    def _wait(self, timeout: float | None, gaps: Gaps) -> Msg:
        """The slow path of a take: wait for a message, passing gap markers (raising for them with REPORT)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._waiters += 1
            try:
                while True:
                    if self._queue:
                        msg = self._queue.popleft()
                        if msg is not _GAP:
                            self._bytes_out += len(msg.data)
                            return msg
                        gap = self._pass_gap()
                        if gaps is _SIGNAL:
                            raise GapPassed
                        if gap is not None and gaps is _REPORT:
                            raise gap
                        continue
                    # The queue has emptied: a later drop is a new slow episode.
                    if self._slow_reported:
                        self._slow = self._slow_reported = False
                    if self._pending_error is not None:
                        error, self._pending_error = self._pending_error, None
                        raise error
                    if self._closed is not None:
                        raise self._closed_error()
                    if deadline is None:
                        self._cond.wait()
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(
                            f"no message on {self.subject!r} within {timeout} s"
                        )
                    self._cond.wait(remaining)
            finally:
                self._waiters -= 1

    def _closed_error(self) -> Error:
        reason = self._closed or SubscriptionClosedError
        if reason is ForkedConnectionError:
            return ForkedConnectionError(f"subscription on {self.subject!r} belongs to the parent process")
        if reason is ConnectionClosedError:
            return ConnectionClosedError(f"connection closed; subscription on {self.subject!r} ended")
        return reason(f"subscription on {self.subject!r} has ended")

    def __iter__(self) -> Iterator[Msg]:
        """Messages until the subscription ends (blocks while none are pending).

        Raises what :meth:`next_msg` raises besides its end, SlowConsumerError
        among them; the same iterator (or a new loop) goes on after it.
        """
        return UntilClosed(self.next_msg)

    def _dispatch_round(self) -> bool:
        """Dispatcher thread: the callback for every queued message, in order; True once the subscription ended.

        Called while the thread counts as a waiter (so the reader woke it);
        returns with the queue empty, ``_busy`` False (a drain may wait for
        that) and, unless it ended, the thread counted as a waiter again:
        it registers before it looks at the queue once more, as every waiter does.

        The dispatch seam (:data:`jsclient.observe.dispatch`) is read once per round, never per message: when
        set, the round's messages go to the callback it returns.
        """
        q = self._queue
        cond = self._cond
        cb = self._cb
        assert cb is not None
        hook = observe.dispatch
        if hook is not None:
            observed = self._observed
            cb = hook.callback(self._conn, self, cb) if observed is None else observed(hook)
        with cond:
            self._waiters -= 1
            self._busy = True
        while True:
            try:
                msg = q.popleft()
            except IndexError:
                with cond:
                    if q:
                        continue  # arrived since
                    self._busy = False
                    cond.notify_all()
                    if self._slow_reported:
                        self._slow = self._slow_reported = False
                    if self._closed is not None:
                        return True
                    self._waiters += 1
                    return False
            self._bytes_out += len(msg.data)
            try:
                cb(msg)
            except Exception as exc:  # noqa: BLE001 - user code; reported, never fatal
                self._conn.core.report_error(exc)

    # -- ending ------------------------------------------------------------
    @renamed_keywords(max_msgs="max_messages")
    def unsubscribe(self, max_messages: int | None = None) -> None:
        """Stop now (discarding what is queued) or, with ``max_messages``, after that many in total.

        Args:
            max_messages: End after this many messages in all (those received so far count); if that many
                have already come, end now.

        Raises:
            InvalidArgumentError: ``max_messages`` is not an int >= 1, or ``max_msgs=`` is given beside it.
            SubscriptionClosedError: With ``max_messages``, the subscription has already ended.
            ForkedConnectionError: Called in a process forked from the one that connected (unless
                ``reconnect_after_fork``).
        """
        self._conn.core.unsubscribe(self, max_messages)

    def drain(self, timeout: Timeout = DEFAULT) -> None:
        """Stop receiving, then wait until every queued message has been taken or handled.

        ``timeout`` defaults to the connection's ``drain_timeout`` option.

        Args:
            timeout: Seconds the drain may take; ``None``, no limit; ``0`` is refused (see :doc:`/conventions`).

        Raises:
            InvalidArgumentError: A bad ``timeout``.
            TimeoutError: The server did not confirm the end in time, or messages were still queued (or the
                callback still busy) when ``timeout`` ran out.
            ConnectionLostError: The link broke before the server confirmed the end.
            ConnectionClosedError: The connection closed while waiting for the server.
            ForkedConnectionError: Called in a process forked from the one that connected (unless
                ``reconnect_after_fork``).
        """
        conn = self._conn
        conn.core.drain_subscription(self, answer_limit(timeout, conn.options.drain_timeout))

    def stop_receiving(self, timeout: Timeout = DEFAULT) -> None:
        """Internal (the delivery port): :meth:`drain` without waiting for the queue to be taken.

        Args:
            timeout: Seconds to wait for the server; ``None``, no limit; left out, ``drain_timeout``.

        Raises:
            InvalidArgumentError: A bad ``timeout``.
            TimeoutError: The server did not confirm the end in time.
            ConnectionLostError: The link broke before the server confirmed the end.
            ConnectionClosedError: The connection closed while waiting for the server.
            ForkedConnectionError: Called in a process forked from the one that connected (unless
                ``reconnect_after_fork``).
        """
        conn = self._conn
        conn.core.stop_receiving(self, answer_limit(timeout, conn.options.drain_timeout))

    def _wait_drained(self, deadline: float) -> bool:
        """Wait until the queue is empty and the callback (if any) has returned."""
        with self._cond:
            while self.pending_msgs or self._busy:  # a gap marker left alone is no message
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                # next_msg takes without the lock, so poll for that case.
                self._cond.wait(min(remaining, 0.01))
            return True


class UntilClosed(Iterator[Msg]):
    """``next_msg(timeout=None)`` until the subscription (or its connection) ends: how every kind iterates.

    An iterator object, not a generator: an error it lets through (a slow
    consumer's SlowConsumerError) would end a generator, and this goes on.
    """

    __slots__ = ("_next_msg",)

    def __init__(self, next_msg: Callable[..., Msg]) -> None:
        self._next_msg = next_msg

    def __next__(self) -> Msg:
        try:
            return self._next_msg(timeout=None)
        except (SubscriptionClosedError, ConnectionClosedError):
            raise StopIteration from None


def _dispatch_main(
    dispatch_round: weakref.WeakMethod[Callable[[], bool]], q: deque[Msg], cond: threading.Condition
) -> None:
    """A callback subscription's own thread: rounds of messages to the callback, in order.

    Holds the subscription only through a weak method, strongly only during
    a round, so a dropped subscription is collected; its finalizer wakes this
    thread to end.  Between rounds it waits here, on the queue alone; a wake
    with nothing queued (an end, an interrupt) gets a round too, which finds
    out whether the subscription ended.
    """
    while True:
        run = dispatch_round()
        if run is None or run():
            return
        del run  # not kept while waiting
        with cond:
            if not q:
                cond.wait()


def _wake(cond: threading.Condition) -> None:
    """A callback subscription was collected: wake its thread so that it ends."""
    with cond:
        cond.notify_all()
