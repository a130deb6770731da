"""The reader: the ``jsclient-reader`` thread, reading through a transport's :mod:`.readside`.

``jsclient-reader`` (:func:`reader_main`) reads the socket and hands what
it parsed to the router (:mod:`jsclient.core.router`).  It never runs user
code and never waits on a user.  This is the plain path.  A thread blocked
in ``request()`` or ``flush()`` may instead take the read side's token and
read and route for itself, while the reader steps aside: that fast path
and the reader's part in it (parking, polling) are in
:mod:`jsclient.core.fastpath` (the invariants it rests on:
docs/guides/internals.rst), and who holds the token when is the machine in
:mod:`jsclient.core.readside`.

Locks (their order: :mod:`jsclient.core`): the read side's ``token``, one
per transport; the parser, the receive buffer and ``spin`` belong to its
holder.

The thread holds the Reader only weakly while blocked in ``recv``, so a
connection dropped without ``close()`` can be collected.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import weakref
from collections.abc import Callable

from ..errors import ProtocolError
from ..protocol import Parser
from ..transport import Transport
from .fastpath import FEED_CHUNK, LINGER, park, poll_before_recv, route_one
from .readside import ReadSide
from .router import Router
from .state import Link

log = logging.getLogger("jsclient")


class Reader:
    """Reading for one connection (per process): its thread, and callers that read for themselves."""

    def __init__(
        self,
        link: Link,
        router: Router,
        *,
        lost: Callable[[Exception, int], None],
        report_error: Callable[[Exception], None],
        spin: float,
    ) -> None:
        self.link = link
        self.router = router
        self._lost = lost
        self._report_error = report_error
        # With one CPU, polling would only keep a server on this machine from answering.
        self.spin = spin if (os.cpu_count() or 1) > 1 else 0.0

    def start(self, transport: Transport, parser: Parser, gen: int) -> threading.Thread:
        side = self.link.reading = ReadSide(transport, parser, gen)
        thread = threading.Thread(
            target=reader_main, args=(weakref.ref(self), side), name="jsclient-reader", daemon=True
        )
        thread.start()
        return thread

    def unpark(self) -> None:
        """Bring a parked reader back now (see :func:`.fastpath.park`): something starts to expect messages."""
        side = self.link.reading
        if side is not None and side.parked:
            side.wake.set()  # WAKE

    def take_read(self, side: ReadSide, data: bytes | memoryview, error: Exception | None) -> bool | None:
        """Under the side's token: route the bytes just read (empty: the read failed with ``error``).

        Returns whether a request() caller got its reply, or None when the
        read failed (the loss is handled).  Both the reader thread and a
        caller reading for itself route through here; a read that is one
        whole message takes :func:`.fastpath.route_one`.
        """
        n = len(data)
        if not n:
            if isinstance(error, ProtocolError):  # bad WebSocket framing: reported, as a parser error is
                self._report_error(error)
            self._lost(error or ConnectionResetError("server closed the connection"), side.gen)
            return None
        route = self.router.route
        try:
            if n <= FEED_CHUNK:
                parser = side.parser
                one = parser.feed_one(data)
                return route(parser.feed(data)) if one is None else route_one(self.router, one)
            answered = False
            feed = side.parser.feed
            for start in range(0, n, FEED_CHUNK):
                if route(feed(data[start : min(n, start + FEED_CHUNK)])):
                    answered = True
            return answered
        except ProtocolError as exc:
            self._report_error(exc)
            failure: Exception = exc
        except Exception as exc:
            log.exception("jsclient reader: unexpected error")
            failure = exc
        self._lost(failure, side.gen)
        return None


def reader_main(ref: weakref.ReferenceType[Reader], side: ReadSide) -> None:
    """``jsclient-reader``: read and route until this side's transport is no longer current."""
    token = side.token
    recv_into = side.transport.recv_into
    buffer = side.buffer
    answered: bool | None = False
    while True:
        with token:
            reader = ref()
            if reader is None or reader.link.reading is not side:
                return
            # While requests are out (in practice async ones: a lone request() caller reads for itself), but
            # not after answering a request() caller: with threads waking for their replies, a polling reader
            # would be one more thread taking the GIL in turns with them.
            spin = reader.spin if not answered and reader.router.waiters and side.sock is not None else 0.0
            del reader  # no strong reference while blocked in recv: the connection stays collectable
            if spin:
                poll_before_recv(side, spin)
            n, error = recv(recv_into, buffer)
            reader = ref()
            if reader is None:
                return
            answered = reader.take_read(side, side.view[:n], error)
            if answered is None or reader.link.reading is not side:
                return
            parking = answered and side.sock is not None and not reader.router.others_expect()
            del reader
        if parking:
            # This module's LINGER, looked up now: a measurement keeps the reader parked by setting
            # ``jsclient.core.reader.LINGER`` (benchmarks.instructions does).
            park(ref, side, LINGER)


def recv(recv_into: Callable[[bytearray], int], buffer: bytearray) -> tuple[int, Exception | None]:
    try:
        return recv_into(buffer), None
    except (OSError, ssl.SSLError, ProtocolError) as exc:
        return 0, exc
