"""A session's subscriptions: subscribe, unsubscribe, drain one, and the SUB frames a new link needs.

The table itself is the router's (``Router.subs``, by sid), where the
reader finds each message's subscription.  Threads: callers subscribe,
unsubscribe and drain (:meth:`Subscriptions.subscribe`, ...); the
reconnect thread asks for :meth:`Subscriptions.resubscribe_frames` under
the writer's ``write_lock``; the reader removes a subscription that
reached ``max_msgs`` (:mod:`.router`); closing empties the table
(``Router.take_all``).  The router's ``sub_lock`` guards changes to the
table and the sid counter (its place in the lock order:
:mod:`jsclient.core`); readers of the table copy it (atomic) instead.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..checks import whole
from ..errors import ConnectionClosedError, Error, RequestFailure, SubscriptionClosedError, TimeoutError
from ..protocol import PubEncoder, encode_sub, encode_unsub
from ..subscription import MsgCallback, Subscription, SubscriptionOwner
from .state import State

if TYPE_CHECKING:
    from .reader import Reader
    from .router import Router
    from .writer import Writer


class Subscriptions:
    """One session's subscribing calls (the session binds them as its own: see :mod:`.session`)."""

    def __init__(
        self,
        conn: SubscriptionOwner,
        *,
        router: Router,
        writer: Writer,
        reader: Reader,
        encoder: PubEncoder,
        flush: Callable[[float], None],
        refusal: Callable[[], Error],
    ) -> None:
        self._conn = conn
        self._router = router
        self._writer = writer
        self._reader = reader
        self._encoder = encoder
        self._flush = flush  # PING/PONG: after it, every message sent before an UNSUB is queued
        self._refusal = refusal  # the error for a call refused now (closed, forked)
        self._sids = itertools.count(1)

    def subscribe(
        self,
        subject: str,
        queue: str | None,
        cb: MsgCallback | None,
        max_msgs: int | None,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> Subscription:
        state = self._writer.state
        if state is not State.CONNECTED and state is not State.RECONNECTING:
            if state is State.CLOSED:
                raise self._refusal()
            raise ConnectionClosedError("connection is draining; no new subscriptions", failure=RequestFailure.DRAINED)
        router = self._router
        with router.sub_lock:
            sid = next(self._sids)
            sub = Subscription(self._conn, sid, subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit)
            router.subs[sid] = sub
        self._reader.unpark()
        frame = encode_sub(subject, sid, queue)
        if max_msgs:
            frame += encode_unsub(sid, max_msgs)
        try:
            self._writer.append(frame, subscription=True)
        except Error:
            self.remove(sub, ConnectionClosedError, discard=True)
            raise
        return sub

    def subscribe_inbox(self, subject: str) -> int:
        """The request mux's wildcard inbox; returns its sid."""
        sid = self.subscribe(subject, None, None, None, 1, 1).sid
        self._encoder.own_inbox = subject[:-1]
        return sid

    def remove(self, sub: Subscription, reason: type[Error], *, discard: bool) -> None:
        """Take ``sub`` out of the table and end it (``discard``: drop what it holds)."""
        with self._router.sub_lock:
            self._router.subs.pop(sub.sid, None)
        sub._mark_closed(reason, discard)

    def unsubscribe(self, sub: Subscription, max_msgs: int | None) -> None:
        if max_msgs is not None:
            whole("max_messages", max_msgs)
            if sub.is_closed:
                raise SubscriptionClosedError(f"subscription on {sub.subject!r} has already ended")
            sub.max_msgs = max_msgs
            if sub.received >= max_msgs:
                self.unsubscribe(sub, None)
                return
            self._writer.append(encode_unsub(sub.sid, max_msgs), subscription=True)
            return
        if sub.is_closed and sub.sid not in self._router.subs:
            return
        self.remove(sub, SubscriptionClosedError, discard=True)
        if self._writer.state is not State.CLOSED:
            with contextlib.suppress(ConnectionClosedError):
                self._writer.append(encode_unsub(sub.sid), subscription=True)

    def stop_receiving(self, sub: Subscription, timeout: float) -> None:
        """UNSUB, and once the server's PONG is back every message it sent before is queued; the queue stays."""
        if sub.sid in self._router.subs:
            self._writer.append(encode_unsub(sub.sid), subscription=True)
            self._flush(timeout)
            self.remove(sub, SubscriptionClosedError, discard=False)

    def drain_subscription(self, sub: Subscription, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self.stop_receiving(sub, timeout)
        if not sub._wait_drained(deadline):
            raise TimeoutError(
                f"drain: subscription on {sub.subject!r} still had {sub.pending_msgs} message(s) after {timeout} s"
            )

    def user_subscriptions(self) -> list[Subscription]:
        """Live subscriptions, the request inbox left out."""
        resp_sid = self._router.resp_sid
        return [sub for sub in list(self._router.subs.values()) if sub.sid != resp_sid]

    def resubscribe_frames(self) -> bytes:
        """A new link after a loss: SUB (and UNSUB for what is left of max_msgs) for every live subscription."""
        frames = []
        for sub in list(self._router.subs.values()):
            frames.append(encode_sub(sub.subject, sub.sid, sub.queue))
            if sub.max_msgs:
                left = sub.max_msgs - sub.received
                if left > 0:
                    frames.append(encode_unsub(sub.sid, left))
        return b"".join(frames)
