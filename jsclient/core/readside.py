"""The read side of one transport: the token whose holder reads the socket, and what that holder owns.

The reader thread (:mod:`.reader`) and a caller reading its own reply
(:mod:`.fastpath`) both read through it, and the current link
(:class:`.state.Link`) holds it.  It is written apart from all three so
that none of them imports another for it.  Who may change which field, and
when, is in :mod:`.fastpath`.
"""

from __future__ import annotations

import select
import threading
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
    """Whether the token's holder polls before it sleeps (see :mod:`.fastpath`, Polling)."""

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


#: The most the reader thread reads per recv (routed FEED_CHUNK at a time).
RECV_SIZE = 256 * 1024


class ReadSide:
    """One transport's receiving end: its parser and buffer, and the token to use them.

    Whoever holds ``token`` reads the socket and routes what arrives: the
    reader thread, or a caller reading its own reply.  ``sock`` (None on TLS
    and WebSocket), ``poller``, ``parked``, ``wake``, ``last_used`` and
    ``spin`` serve that fast path: who may change which is in
    :mod:`jsclient.core.fastpath`.
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
        self.parked = False
        self.last_used = 0.0  # monotonic time a caller last took the token
        self.sock = transport.sock if type(transport) is PlainTransport else None
        self.poller = select.poll()
        if self.sock is not None:
            self.poller.register(self.sock, select.POLLIN)
        self.spin = SpinBackoff()
