"""CoreAPI: what JetStream, messages and subscriptions may use of a connection beyond its public API.

They reach it as ``conn.core`` (the current :class:`~jsclient.core.session.Session`;
a forked child gets a new one, so hold the connection, not its core).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, overload

from ..futures import ReplyKind
from ..headers import HeadersInput
from ..protocol import R, ReplyShape
from ..scheduler import Scheduler

if TYPE_CHECKING:
    from ..message import Msg
    from ..subscription import Subscription


class CoreAPI(Protocol):
    timers: Scheduler

    @property
    def watchdog(self) -> Scheduler:
        """The heartbeat watchdog's scheduler (its own thread, started on first use)."""

    def publish_message(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: HeadersInput | None = None,
        send_now: bool = False,
    ) -> None:
        """Publish with everything checked; ``send_now`` for latency (a waiting requester)."""

    def publish_control(self, subject: str, payload: bytes) -> None:
        """Publish to a server-made subject (acks, flow control): no validation, no caching."""

    @overload
    def request(self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None) -> Msg:
        """request() with ``timeout`` already checked (the hot paths of KV reads)."""

    @overload
    def request(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, shape: ReplyShape[R]
    ) -> R | Msg:
        """The same, a reply of ``shape`` read in one match when this caller reads it itself."""

    def request_async(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, kind: ReplyKind
    ) -> Future[Any]:
        """request_async with ``timeout`` already checked; ``kind`` says how the reply settles."""

    def send_pending(self) -> None:
        """Send what is buffered now, on this thread."""

    def report_error(self, exc: Exception) -> None:
        """Hand an error to the error callback on the events thread."""

    def add_reconnect_hook(self, hook: Callable[[], None]) -> int:
        """Run ``hook`` (quick, non-blocking) on the reconnect thread after each reconnect."""

    def remove_reconnect_hook(self, key: int) -> None: ...

    def unsubscribe(self, sub: Subscription, max_msgs: int | None) -> None: ...

    def drain_subscription(self, sub: Subscription, timeout: float) -> None: ...
