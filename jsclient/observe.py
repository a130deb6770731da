"""Two seams inside jsclient for one observer: rare events (which the OpenTelemetry metrics read), and the calls
of user code with messages (which the instrumentation's callback and handler spans wrap).

A lost link, a JetStream API error, a heartbeat alarm and an ordered
consumer's reset happen deep in the core and the JetStream layer, where no
public method marks them.  Each place that decides one reads the
module-level :data:`listener` once and, when it is set, tells it.  It is
None unless :mod:`jsclient.instrumentation` is switched on, so the cost when
off is one global read per event, and no event is per message: ordinary
deliveries never come here.

Threads: a listener is never called by the reader thread or under a lock of
jsclient's.  A lost link is told on the connection's events thread
(``jsclient-events``, after the disconnected callback's place in its
queue); an API error on the thread that made the call; a heartbeat alarm on
the ``jsclient-watchdog`` thread, before the alarm is acted on; an ordered
consumer's reset on the thread that recreates the consumer.  A listener
must be quick and must not raise (an exception would reach the thread that
told it).

The second seam, :data:`dispatch`, is where user code is called with
messages: a callback subscription's round, a JetStream callback, a service
handler.  It is read once per round of a subscription's queued messages
(``Subscription._dispatch_round``, on its dispatcher thread), once per
message on the two JetStream callback threads that take one message at a
time (``jsclient-ordered``, ``jsclient-consume``), and once per round of an
endpoint's hand-over (a service handler's run on a worker thread takes the
handler the round chose).  When set, it returns the code to call instead,
which may wrap the user's (a span around it); so subscriptions made before
it was set are observed, and once it is None again each callback is the
user's own at the next round.  Its methods run on those threads, and must
not raise.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .errors import ProtocolError, StaleConnectionError

if TYPE_CHECKING:
    from .connection import Connection
    from .message import Msg
    from .micro import Endpoint, Request, Service
    from .subscription import Subscription, SubscriptionOwner

__all__ = ["ConsumerKind", "DisconnectReason", "Dispatch", "Listener", "dispatch", "listener", "reason_of"]


class DisconnectReason(enum.Enum):
    """Why a connection lost its link to the server (its value is the metrics' attribute value)."""

    #: The server ended the stream (EOF, a WebSocket close): it shut down, restarted, or dropped the client.
    SERVER_CLOSED = "server_closed"
    #: Reading or writing the socket failed (reset, broken pipe, a TLS error).
    IO_ERROR = "io_error"
    #: The server sent bytes that are not NATS protocol.
    PROTOCOL_ERROR = "protocol_error"
    #: ``max_outstanding_pings`` PINGs went unanswered.
    STALE_CONNECTION = "stale_connection"
    #: The server announced lame duck mode, and the client moved to another one.
    LAME_DUCK = "lame_duck"
    #: ``Connection.force_reconnect()`` asked for it.
    FORCED = "forced"
    #: An unexpected error in the client's own reading (logged with its traceback).
    CLIENT_ERROR = "client_error"


class ConsumerKind(enum.Enum):
    """Which kind of JetStream reader an event belongs to (its value is the metrics' attribute value)."""

    #: A push subscription (``js.subscribe``).
    PUSH = "push"
    #: A pull subscription's ``fetch`` or ``messages``, and a handle's ``consume``.
    PULL = "pull"
    #: An ordered push subscription (``js.subscribe(..., ordered=True)``).
    ORDERED_PUSH = "ordered_push"
    #: ADR-37's ordered pull consumer (``stream.ordered_consumer()``).
    ORDERED_PULL = "ordered_pull"


def reason_of(exc: BaseException) -> DisconnectReason:
    """The reason a lost link's error stands for, when the place that lost it did not say.

    An ``OSError`` the operating system raised carries an ``errno``; a
    ``ConnectionResetError`` without one is jsclient's own way of saying the
    server ended the stream (the reader's EOF, a WebSocket's close frame).
    """
    if isinstance(exc, StaleConnectionError):
        return DisconnectReason.STALE_CONNECTION
    if isinstance(exc, ProtocolError):
        return DisconnectReason.PROTOCOL_ERROR
    if isinstance(exc, ConnectionResetError) and exc.errno is None:
        return DisconnectReason.SERVER_CLOSED
    if isinstance(exc, OSError):
        return DisconnectReason.IO_ERROR
    return DisconnectReason.CLIENT_ERROR


class Listener(Protocol):
    """What an observer of these events implements (see the module docstring for the threads)."""

    def disconnected(self, reason: DisconnectReason) -> None:
        """A connection lost its link (it then reconnects, or closes if it may not)."""

    def api_error(self, code: int, err_code: int) -> None:
        """A JetStream API request (``$JS.API.>``) was answered with an error: its ``code`` (HTTP-like, such as
        404) and ``err_code`` (JetStream's, such as 10059 for a stream not found)."""

    def heartbeat_alarm(self, kind: ConsumerKind) -> None:
        """A JetStream reader heard nothing (no message, no heartbeat) for its alarm time."""

    def ordered_reset(self, kind: ConsumerKind) -> None:
        """An ordered consumer drops its consumer to recreate it after the last message handed out."""


#: The observer told of each event, or None (the default: nothing is told, nothing is paid).  Set and
#: cleared by :mod:`jsclient.instrumentation`; read once per event.
listener: Listener | None = None


class Dispatch(Protocol):
    """What an observer of the places that call user code with messages implements (see the module docstring).

    Each method is given the user's code and returns what to call in its place (the same, or a wrapper).
    """

    def callback(
        self, owner: SubscriptionOwner, sub: Subscription, callback: Callable[[Msg], None]
    ) -> Callable[[Msg], None]:
        """A core subscription's callback, for one round of its queued messages (on its dispatcher thread);
        ``owner`` is the connection it belongs to."""

    def delivery(
        self, conn: Connection | None, pattern: str, callback: Callable[[Msg], None]
    ) -> Callable[[Msg], None]:
        """A JetStream callback (``js.subscribe``, ordered or not, and ``Consumer.consume``) on the thread that
        runs it; ``pattern`` is the subscription's subject filter (else its stream), ``conn`` its connection
        where it is known."""

    def handler(
        self, service: Service, endpoint: Endpoint, handler: Callable[[Request], None]
    ) -> Callable[[Request], None]:
        """A service endpoint's handler, for the requests one round of its subscription hands to the workers
        (it runs on a worker thread)."""


#: The observer of user code's calls, or None (the default: each callback and handler is called as given).
#: Set and cleared by :mod:`jsclient.instrumentation`; read once per round (see the module docstring).
dispatch: Dispatch | None = None
