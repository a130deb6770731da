"""The read side of one transport: the token whose holder reads the socket, what that holder owns, and the
machine that says who holds it.

The reader thread (:mod:`.reader`) and a caller reading its own reply
(:mod:`.fastpath`) both read through it, and the current link
(:class:`.state.Link`) holds it.  It is written apart from all three so
that none of them imports another for it.

Who reads is :class:`ReadState`, moved by :class:`ReadEvent` as
:data:`READ_TRANSITIONS` says.  The state is not a field of its own: it is
what ``parked`` (written by the reader thread alone), the ``token`` (held
by a caller, or not) and ``wake`` (set by anyone, cleared by the reader
alone, and counted only while it is parked) say together, and each event is
a step its party takes on them with no lock held: one field would need a
lock around the reader's return and a caller's take, on every request.
``tests/test_machines.py`` drives each step against the table.
"""

from __future__ import annotations

import enum
import select
import threading
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..transport import PlainTransport

if TYPE_CHECKING:
    from ..protocol import Parser
    from ..transport import Transport

#: After this many misses (polls without the reply, see HITS_TO_RETURN), a poll is tried once in
#: 2**MAX_SPIN_BACKOFF waits.
MAX_SPIN_BACKOFF = 10
#: A poll that misses costs ``spin_wait`` of CPU, and one that catches its reply saves a sleep and a wake-up,
#: which cost far less: after a miss, every wait polls again only once this many polls in a row have caught
#: their reply.  Replies that come back in bursts a round trip apart (async requests to a distant server) give
#: a hit or two and then a miss at every burst, and so back off.
HITS_TO_RETURN = 8


class SpinBackoff:
    """Whether the token's holder polls before it sleeps (why: docs/guides/internals.rst, Polling)."""

    __slots__ = ("hits", "misses", "skip")

    def __init__(self) -> None:
        self.misses = 0  # polls that ended without the reply, since polling last paid (HITS_TO_RETURN hits)
        self.hits = 0  # polls in a row that caught their reply, since the last miss
        self.skip = 0  # waits left that sleep at once

    def until(self, now: float, spin: float) -> float:
        """When this wait stops polling and sleeps; 0 sleeps at once."""
        if not spin:
            return 0.0
        if self.skip:
            self.skip -= 1
            return 0.0
        return now + spin

    def hit(self) -> None:
        """A poll caught its reply (counted only while there are misses): the next wait polls too, and once
        HITS_TO_RETURN have in a row, the misses are forgotten."""
        self.hits += 1
        if self.hits >= HITS_TO_RETURN:
            self.misses = self.hits = 0

    def missed(self) -> None:
        self.hits = 0
        self.misses = min(self.misses + 1, MAX_SPIN_BACKOFF)
        self.skip = 1 << self.misses


class ReadState(enum.Enum):
    """Who reads the socket, the reader thread or a request() caller, and whether the reader is wanted back."""

    READING = enum.auto()  # the reader reads, or waits for the token; callers wait the plain way
    READING_LENT = enum.auto()  # a caller took the token as the reader came back (which waits for it) or left
    PARKED = enum.auto()  # the reader waits on ``wake``: a request() caller may try the token
    PARKED_LENT = enum.auto()  # a caller holds the token, and reads and routes for everyone
    RECALLED = enum.auto()  # parked and woken: the reader comes back at its next look
    RECALLED_LENT = enum.auto()  # woken while a caller holds the token: the reader comes back and waits for it


class ReadEvent(enum.Enum):
    """A step of the protocol, by the party named."""

    #: The reader thread, holding nothing, after a read that answered a request() caller while nothing else
    #: expected messages (plain sockets only): ``wake`` cleared, then ``parked`` set (:func:`.fastpath.park`).
    PARK = enum.auto()
    #: A request() caller that saw ``parked`` got the token, tried and never waited for
    #: (:func:`.fastpath.await_reply`).
    TAKE = enum.auto()
    #: That caller releases it: answered, out of time, or its link lost.
    GIVE_BACK = enum.auto()
    #: ``wake`` set by whoever needs the reader back: :meth:`.reader.Reader.unpark` (a subscription, an async
    #: request), a caller giving the token back while others expect messages, ``Link.shutdown``.
    WAKE = enum.auto()
    #: The reader leaves park (``parked`` cleared, then ``wake``): woken, the token free while others expect
    #: messages, no caller took it between two looks LINGER apart, or the link changed.
    RETURN = enum.auto()


_R, _E = ReadState, ReadEvent

#: (state, event) -> next state.  A pair not listed never happens: the reader parks only from reading and
#: returns only from parked, the token's lock lets one caller hold it, and only its holder gives it back.
READ_TRANSITIONS: Mapping[tuple[ReadState, ReadEvent], ReadState] = types.MappingProxyType(
    {
        (_R.READING, _E.PARK): _R.PARKED,
        (_R.READING_LENT, _E.PARK): _R.PARKED_LENT,
        (_R.READING, _E.TAKE): _R.READING_LENT,  # it saw the reader parked just before it came back (or left)
        (_R.PARKED, _E.TAKE): _R.PARKED_LENT,
        (_R.RECALLED, _E.TAKE): _R.RECALLED_LENT,  # before the woken reader is back: it reads meanwhile
        (_R.READING_LENT, _E.GIVE_BACK): _R.READING,
        (_R.PARKED_LENT, _E.GIVE_BACK): _R.PARKED,
        (_R.RECALLED_LENT, _E.GIVE_BACK): _R.RECALLED,
        (_R.READING, _E.WAKE): _R.READING,  # it reads anyway: its next park drops the wake
        (_R.READING_LENT, _E.WAKE): _R.READING_LENT,
        (_R.PARKED, _E.WAKE): _R.RECALLED,
        (_R.PARKED_LENT, _E.WAKE): _R.RECALLED_LENT,
        (_R.RECALLED, _E.WAKE): _R.RECALLED,
        (_R.RECALLED_LENT, _E.WAKE): _R.RECALLED_LENT,
        (_R.PARKED, _E.RETURN): _R.READING,
        (_R.PARKED_LENT, _E.RETURN): _R.READING_LENT,  # the link changed (the wake of its shutdown follows)
        (_R.RECALLED, _E.RETURN): _R.READING,
        (_R.RECALLED_LENT, _E.RETURN): _R.READING_LENT,
    }
)


#: The most the reader thread reads per recv (routed FEED_CHUNK at a time).
RECV_SIZE = 256 * 1024


class ReadSide:
    """One transport's receiving end: its parser and buffer, and the token to use them.

    Whoever holds ``token`` reads the socket and routes what arrives: the
    reader thread, or a caller reading its own reply (who, when: the module
    docstring).  ``sock`` (None on TLS and WebSocket), ``poller``,
    ``last_used`` and ``spin`` serve that fast path (:mod:`.fastpath`).
    """

    __slots__ = (
        "buffer", "gen", "last_used", "parked", "parser", "poller", "sock", "spin", "token", "transport", "view",
        "wake",
    )  # fmt: skip

    def __init__(self, transport: Transport, parser: Parser, gen: int) -> None:
        self.transport = transport
        self.parser = parser
        self.gen = gen
        self.buffer = bytearray(RECV_SIZE)
        self.view = memoryview(self.buffer)
        self.token = threading.Lock()
        self.wake = threading.Event()
        self.parked = False  # the reader thread's own: PARK sets it, RETURN clears it
        self.last_used = 0.0  # monotonic time a caller last took the token (written as it TAKEs)
        self.sock = transport.sock if type(transport) is PlainTransport else None
        self.poller = select.poll()
        if self.sock is not None:
            self.poller.register(self.sock, select.POLLIN)
        self.spin = SpinBackoff()
