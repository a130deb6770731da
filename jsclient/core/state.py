"""What every core module shares: the connection's state machine, the one-shot waiter, and the current link.

No threads of its own.  The connection's state lives on the writer (its
``state``, with the two fields derived from it, ``accepting`` and
``threshold``) and changes only through :func:`apply`: :data:`TRANSITIONS`
says, as data, which :class:`Event` takes which :class:`State` where, and
anything not in it is refused with :class:`TransitionError`, a bug in
jsclient, never the user's doing.  The table is tested without sockets
(``tests/test_state.py``), and a test there fails if anything else assigns
those fields.  Callers decide whether an event applies (close() of a closed
connection is a no-op, drain() of a reconnecting one an error for the user)
and only then apply it, holding the writer's ``write_lock``.  The core's
two other machines, the flusher's (:mod:`.writer`) and the read side's
(:mod:`.readside`), are tables too.

A :class:`Waiter` is filled by one thread (the reader, or whoever fails it)
and waited on by one other (or answered by its own caller without a wake-up:
:mod:`.fastpath`); the :class:`Link`'s fields are swapped under
the write lock and read without it (a reference read is atomic).  Locks and
their order: see :mod:`jsclient.core`.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import Error
from ..message import Msg

if TYPE_CHECKING:
    from ..transport import Transport
    from .readside import ReadSide


class State(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    DRAINING_SUBS = "draining_subs"
    DRAINING_PUBS = "draining_pubs"
    CLOSED = "closed"


class Event(enum.Enum):
    """What can happen to a connection: the state machine's inputs."""

    CONNECT = "connect"  # the first link is up
    CONNECT_FAILED = "connect_failed"  # no server took the first connect; retry_on_failed_connect goes on trying
    LOST = "lost"  # the link broke and reconnecting is allowed (a loss without it is CLOSE)
    RECONNECT = "reconnect"  # a new link after a loss
    DRAIN = "drain"  # drain(): the subscriptions stop first
    SUBS_DRAINED = "subs_drained"  # drain(): the subscriptions are done, so publishing stops
    CLOSE = "close"  # close(), the end of a drain, a loss without reconnect, reconnecting given up
    FORKED = "forked"  # a forked child's session: it refuses everything from the start (see .fork)


#: (state, event) -> next state.  A pair not listed is an illegal transition; CLOSED has none out.
TRANSITIONS: Mapping[tuple[State, Event], State] = types.MappingProxyType(
    {
        (State.CONNECTING, Event.CONNECT): State.CONNECTED,
        (State.CONNECTING, Event.CONNECT_FAILED): State.RECONNECTING,
        (State.CONNECTING, Event.FORKED): State.CLOSED,
        (State.CONNECTED, Event.LOST): State.RECONNECTING,
        (State.RECONNECTING, Event.RECONNECT): State.CONNECTED,
        (State.CONNECTED, Event.DRAIN): State.DRAINING_SUBS,
        (State.DRAINING_SUBS, Event.SUBS_DRAINED): State.DRAINING_PUBS,
        **{(state, Event.CLOSE): State.CLOSED for state in State if state is not State.CLOSED},
    }
)

#: The states that take new messages (the writer's ``accepting``): not before the first link, not once a
#: drain has stopped publishing, not closed.  While reconnecting they wait in the buffer.
ACCEPTING = frozenset({State.CONNECTED, State.RECONNECTING, State.DRAINING_SUBS})
#: The states in which every message takes the writer's general path (its ``threshold`` is 0), which keeps
#: the buffer within ``reconnect_buf_size``; in the others the fast path appends below ``max_pending_size``.
BOUNDED = frozenset({State.RECONNECTING})


class TransitionError(RuntimeError):
    """An event the state machine does not allow in the current state: a bug in jsclient, not a user error."""

    def __init__(self, state: State, event: Event) -> None:
        super().__init__(
            f"jsclient internal error: the connection state machine has no {event.name} transition from "
            f"{state.name} (see jsclient.core.state.TRANSITIONS)"
        )
        self.source = state
        self.event = event


class Stateful(Protocol):
    """What holds the state (the writer): the state, the two fields made from it, and the buffer limit."""

    state: State
    accepting: bool
    threshold: int
    max_pending: int


def next_state(state: State, event: Event) -> State:
    """Where ``event`` takes ``state``; TransitionError if nowhere."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise TransitionError(state, event) from None


def allowed(state: State, event: Event) -> bool:
    return (state, event) in TRANSITIONS


def start(holder: Stateful) -> None:
    """A new holder begins CONNECTING."""
    _enter(holder, State.CONNECTING)


def apply(holder: Stateful, event: Event) -> State:
    """Move ``holder`` by ``event``, under the writer's ``write_lock``; if illegal, TransitionError and no change."""
    state = next_state(holder.state, event)
    _enter(holder, state)
    return state


def _enter(holder: Stateful, state: State) -> None:
    """The one place the state and what follows from it are set."""
    holder.state = state
    holder.accepting = state in ACCEPTING
    holder.threshold = 0 if state in BOUNDED else holder.max_pending


class Waiter:
    """A slot a reader fills once and a user thread waits on (a lock is the cheapest event); request() reuses it."""

    __slots__ = ("error", "lock", "msg")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        #: The reply: a Msg, or what the reader of the caller's ReplyShape made of it (see fastpath.take_shaped).
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
            reading.wake.set()  # WAKE (.readside.READ_TRANSITIONS)
        self.kick.set()

    def disown(self) -> None:
        """In a forked child: close this process's descriptor only (a shutdown would end the parent's link)."""
        transport = self.transport
        self.transport = self.reading = None
        if transport is not None:
            with contextlib.suppress(OSError):
                transport.close()
