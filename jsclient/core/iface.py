"""The internal interfaces between the core and the layers above it.

* :class:`PlainAPI`: the plain calls JetStream, messages and subscriptions
  may use of a connection beyond its public API (publish, request, report
  an error, end a subscription).
* :class:`HotPath`: the mechanics under those that the hot paths use (a
  request whose reply is read in one match, sending the buffer now, the
  core's scheduler threads).  What the first two rest on is stated in
  docs/guides/internals.rst.
* :class:`CoreAPI`: both, which is what the layers hold as ``conn.core``
  (the current :class:`~jsclient.core.session.Session`; a forked child
  gets a new one, so hold the connection, not its core).  One type because
  one object is both, and ``request`` is one overloaded call.
* :class:`SessionOwner`: the other way, the connection as the core holds
  it (a message's and a subscription's owner, and the fork hook), so that
  no core module names :class:`~jsclient.Connection`, even for typing.
* :class:`DeliveryPort`: what JetStream, Spark and services use of a core
  subscription beyond its public API.  :class:`~jsclient.subscription.Subscription`
  implements it; a workflow holds its subscription as a port.

Nothing outside :mod:`jsclient.core` touches an underscore member of another
module's object: what crosses a layer is named here (ruff's SLF001 keeps it so).
Which thread may call what is said on each member.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, overload

from ..errors import Error
from ..futures import ReplyKind
from ..headers import HeadersInput
from ..message import Attached, MessageCore, Msg
from ..protocol import R, ReplyShape
from ..scheduler import Scheduler
from ..subscription import Gaps, SubscriptionCore, SubscriptionOwner
from ..timeouts import DEFAULT, Timeout
from .fork import Forkable


class PlainAPI(MessageCore, SubscriptionCore, Protocol):
    """The plain calls of the core, as the layers above use them (what messages and subscriptions use of
    it is named in their modules, so that they need not name the core)."""

    def request(self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None) -> Msg:
        """request() with ``timeout`` already checked."""

    def request_async(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, kind: ReplyKind
    ) -> Future[Any]:
        """request_async with ``timeout`` already checked; ``kind`` says how the reply settles."""

    def add_reconnect_hook(self, hook: Callable[[], None]) -> int:
        """Run ``hook`` (quick, non-blocking) on the reconnect thread after each reconnect."""

    def remove_reconnect_hook(self, key: int) -> None: ...


class HotPath(Protocol):
    """The mechanics under the plain calls that the layers' hot paths use: a request whose reply is read in
    one match (KV get, direct get, JetStream publish), sending the buffer now (publish_async's window), and
    the core's scheduler threads (publish retries, heartbeat checks), so no layer starts a thread per call."""

    #: The core's timer thread (``jsclient-timer``): delayed work such as a publish's retry, no thread of its own.
    timers: Scheduler

    @property
    def watchdog(self) -> Scheduler:
        """The heartbeat watchdog's scheduler (its own thread, started on first use)."""

    def request(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, shape: ReplyShape[R]
    ) -> R:
        """request() that returns ``shape``'s value or raises: its reader's, in one match, of a reply this
        caller reads itself; otherwise its decoder's, of the message."""

    def send_pending(self) -> None:
        """Send what is buffered now, on this thread (before waiting on what it holds)."""


class CoreAPI(PlainAPI, HotPath, Protocol):
    """``conn.core``: the plain calls and the hot paths' mechanics (``request`` takes a shape or not)."""

    @overload
    def request(self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None) -> Msg:
        """:meth:`PlainAPI.request`."""

    @overload
    def request(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, shape: ReplyShape[R]
    ) -> R:
        """:meth:`HotPath.request`."""


class SessionOwner(Attached, SubscriptionOwner, Forkable, Protocol):
    """The connection a session works for (a :class:`~jsclient.Connection`), as the core holds it: what its
    messages and subscriptions use of it, and the fork hook."""

    @property
    def core(self) -> CoreAPI: ...


class DeliveryPort(Protocol):
    """A core subscription as the workflows above it use it: take, interrupt, an arrival hook, counts.

    One thread takes (the workflow's taking thread); the reader thread
    delivers, runs the hook and writes the counts; any thread may interrupt.
    """

    #: Messages that arrived (kept, dropped, or consumed by the hook); written by the reader thread only.
    received: int
    #: Messages dropped because the pending limits were exceeded; written by the reader thread only.
    dropped: int
    #: Runs on the reader thread for every message before it is queued; True consumes it (never queued).
    #: Quick and never blocking: it holds up every subscription of the connection.
    arrival_hook: Callable[[Msg], bool] | None

    @property
    def pending_msgs(self) -> int:
        """Messages queued, not yet taken."""

    @property
    def pending_bytes(self) -> int:
        """Payload bytes queued, not yet taken."""

    @property
    def is_closed(self) -> bool:
        """No more messages will arrive (what is queued may still be taken)."""

    def take(self, timeout: float | None, gaps: Gaps = Gaps.PASS) -> Msg:
        """The next message, waiting up to ``timeout`` seconds (None: forever); no argument checks.

        Raises :class:`~jsclient.TimeoutError`, the error of an :meth:`interrupt`
        (once, when the queue is empty), or the error that ended the subscription.
        Where messages were dropped over the pending limits, ``gaps`` says
        what happens: passed silently (PASS) or, with SIGNAL,
        :class:`~jsclient.subscription.GapPassed` raised there.
        """

    def interrupt(self, reason: Error) -> None:
        """Have the next take raise ``reason`` once, when the queue is empty, waking a taker now.  Any thread."""

    def unsubscribe(self, max_messages: int | None = None) -> None: ...

    def drain(self, timeout: Timeout = DEFAULT) -> None: ...

    def stop_receiving(self, timeout: Timeout = DEFAULT) -> None:
        """Receive no more; what arrived before stays queued to be taken, then takes raise closed."""
