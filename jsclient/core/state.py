"""What every core module shares: the connection's state, the one-shot waiter, and the current link.

No threads of its own.  ``State`` is guarded by the writer's ``write_lock``
(see :mod:`jsclient.core.writer`); a :class:`Waiter` is filled by one thread
(the reader, or whoever fails it) and waited on by one other; the
:class:`Link`'s fields are swapped under the write lock and read without it
(a reference read is atomic).
"""

from __future__ import annotations

import contextlib
import enum
import threading
from typing import TYPE_CHECKING, Any

from ..errors import Error
from ..message import Msg

if TYPE_CHECKING:
    from ..transport import Transport
    from .reader import ReadSide


class State(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    DRAINING_SUBS = "draining_subs"
    DRAINING_PUBS = "draining_pubs"
    CLOSED = "closed"


class Waiter:
    """A slot a reader fills once and a user thread waits on (a lock is the cheapest event); request() reuses it."""

    __slots__ = ("error", "lock", "msg")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        #: The reply: a Msg, or what the reader of the caller's ReplyShape made of it (see Router.take_shaped).
        self.msg: Any = None
        self.error: Error | None = None

    def wait(self, timeout: float | None) -> bool:
        return self.lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0))

    def fill(self, msg: Msg | None = None, error: Error | None = None) -> None:
        self.msg = msg
        self.error = error
        self.lock.release()


class Link:
    """The current transport, its read side and generation; the finalizer holds it to close the socket.

    ``gen`` grows with every transport, so a loss seen by several threads
    (reader, writer, ping timer) is acted on once.
    """

    __slots__ = ("gen", "kick", "reading", "transport")

    def __init__(self, kick: threading.Event) -> None:
        self.transport: Transport | None = None
        self.reading: ReadSide | None = None
        self.gen = 0
        self.kick = kick  # the flusher's event: set on shutdown so it looks and ends

    def shutdown(self) -> None:
        transport, reading = self.transport, self.reading
        self.transport = self.reading = None
        if transport is not None:
            transport.shutdown()
            transport.close()
        if reading is not None:
            reading.wake.set()
        self.kick.set()

    def disown(self) -> None:
        """In a forked child: close this process's descriptor only (a shutdown would end the parent's link)."""
        transport = self.transport
        self.transport = self.reading = None
        if transport is not None:
            with contextlib.suppress(OSError):
                transport.close()
