"""Request-many (ADR-47): one request, every reply that comes, as an iterator.

Runs on the caller's thread.  The replies come to a subscription on an inbox
of its own (not the shared reply mux, whose waiters take one reply), so the
server drops the interest as soon as the iteration ends; with ``max_messages`` the
subscription is also told to end itself after that many.  Nothing here is
shared between threads, so nothing is locked.

The end is never an error: the total ``timeout``, a ``stall`` after the first
reply, ``max_messages``, the ``sentinel`` or ``stop()`` end the iteration, and a
status in place of a reply (503: nobody answered) ends it too, raising
NoRespondersError only when it comes first, as ``request`` would.  A
connection closed under the replies raises ConnectionClosedError with the
request's ``outcome`` UNKNOWN (it had left) and what closed it as ``failure``.  Only the
time spent waiting counts against the timeouts, not the caller's own work
between replies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from .checks import seconds, whole
from .core.router import no_responders
from .errors import (
    ConnectionClosedError,
    ForkedConnectionError,
    InvalidArgumentError,
    NoRespondersError,
    RequestFailure,
    RequestOutcome,
    SubscriptionClosedError,
    TimeoutError,
)
from .headers import Headers, HeadersInput, status_of
from .payload import as_bytes
from .protocol import check_publish_subject

if TYPE_CHECKING:
    from .message import Msg
    from .subscription import Subscription

#: A sentinel: True continues, False ends the iteration (that reply is not yielded).
Sentinel = Callable[["Msg"], bool]


def standard_sentinel(msg: Msg) -> bool:
    """ADR-47's standard sentinel: a reply with an empty payload ends the replies."""
    return bool(msg.data)


class Replies:
    """The replies of one request; iterate it, and ``stop()`` (or leave a ``with``) to end early.

    Made by :meth:`Connection.request_many`, which says when the replies end.  Iterating raises
    NoRespondersError when the first answer says nobody listens, and ConnectionClosedError (``outcome``
    UNKNOWN) when the connection closes under the replies; every other end simply ends the iteration.
    """

    def __init__(
        self,
        sub: Subscription,
        timeout: float,
        stall: float | None,
        max_msgs: int | None,
        sentinel: Sentinel | None,
        closed_by: Callable[[], RequestFailure] = lambda: RequestFailure.CLOSED,
    ) -> None:
        """Made by :meth:`Connection.request_many` (its arguments checked there); not called directly.

        Args:
            sub: The subscription on the request's own inbox.
            timeout: Seconds of waiting in all.
            stall: Seconds to wait for each reply after the first, or None.
            max_msgs: The replies after which the iteration ends, or None.
            sentinel: Called with each reply; False ends the replies.  None: no sentinel.
            closed_by: Says what closed the connection, asked when that happens.

        Raises:
            : Nothing.
        """
        self._sub = sub
        self._closed_by = closed_by  # what closed the connection, asked when it happens
        self._left = timeout  # waiting time left in the total
        self._stall = stall
        self._max = max_msgs
        self._sentinel = sentinel
        self.count = 0  #: replies yielded so far

    def __iter__(self) -> Iterator[Msg]:
        try:
            while self._max is None or self.count < self._max:
                msg = self._next()
                if msg is None:
                    return
                if self._sentinel is not None and not self._sentinel(msg):
                    return
                self.count += 1
                yield msg
        finally:
            self.stop()

    def _next(self) -> Msg | None:
        """The next reply, or None when the waiting is over."""
        wait = self._left if self.count == 0 or self._stall is None else min(self._stall, self._left)
        if wait <= 0:
            return None
        started = time.monotonic()
        try:
            msg = self._sub.take(wait)  # the port: a gap where replies were dropped is passed (error_cb hears of it)
        except (TimeoutError, SubscriptionClosedError):
            return None
        except ForkedConnectionError:
            raise
        except ConnectionClosedError as exc:
            # The subscription says only "closed"; the request had left, so the outcome is not known.
            raise ConnectionClosedError(str(exc), outcome=RequestOutcome.UNKNOWN, failure=self._closed_by()) from None
        finally:
            self._left -= time.monotonic() - started
        if no_responders(msg):
            if self.count == 0:
                raise NoRespondersError(f"no responders on {msg.subject!r}")
            return None
        if not msg.data and status_of(msg.header) is not None:
            return None  # a status in place of a reply ends the replies
        return msg

    def stop(self) -> None:
        """End the replies: the inbox's interest goes now.

        Raises:
            : Nothing; stopping ended replies does nothing.
        """
        if not self._sub.is_closed:
            self._sub.unsubscribe()

    @property
    def closed(self) -> bool:
        """Whether the inbox takes no further replies (those already received are still given)."""
        return self._sub.is_closed

    def __enter__(self) -> Replies:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Asking(Protocol):
    """What :func:`request_many` uses of the connection (a :class:`~jsclient.Connection`): public calls only,
    named here so that this module, which the connection imports, does not import it back."""

    def new_inbox(self) -> str: ...

    def subscribe(self, subject: str) -> Subscription: ...

    def publish(
        self, subject: str, payload: bytes = b"", reply: str | None = None, headers: HeadersInput | None = None
    ) -> None: ...


def request_many(
    conn: Asking,
    subject: str,
    payload: bytes,
    *,
    timeout: float,
    stall: float | None,
    max_messages: int | None,
    sentinel: Sentinel | bool | None,
    headers: HeadersInput | None,
    closed_by: Callable[[], RequestFailure],
) -> Replies:
    """Check everything, subscribe, then send the request: see :meth:`Connection.request_many`.

    ``closed_by`` says what closed the connection, asked when that happens.
    """
    check_publish_subject(subject)
    total = seconds("timeout", timeout)
    wait_after_first = None if stall is None else seconds("stall", stall)
    if wait_after_first is not None and wait_after_first >= total:
        wait_after_first = None  # ADR-47: a stall as long as the total is no stall
    if max_messages is not None:
        whole("max_messages", max_messages)
    chosen: Any = sentinel
    if chosen is True:
        chosen = standard_sentinel
    elif chosen is False or chosen is None:
        chosen = None
    elif not callable(chosen):
        raise InvalidArgumentError(f"sentinel must be True (an empty reply ends), a callable or None, not {sentinel!r}")
    data = as_bytes(payload)
    checked = Headers(headers) if headers is not None else None  # bad input is named before the SUB goes out
    inbox = conn.new_inbox()
    sub = conn.subscribe(inbox)
    if max_messages is not None:
        sub.unsubscribe(max_messages + 1)  # +1: a sentinel or a status may come after the last reply
    try:
        conn.publish(subject, data, reply=inbox, headers=checked)
    except BaseException:
        sub.unsubscribe()
        raise
    return Replies(sub, total, wait_after_first, max_messages, chosen, closed_by=closed_by)
