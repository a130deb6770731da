"""The reader: the ``jsclient-reader`` thread, the read side's token, callers reading their own replies.

Threads:

* ``jsclient-reader`` (:func:`reader_main`) reads the socket and hands
  what it parsed to the router (:mod:`jsclient.core.router`).  It never runs
  user code and never waits on a user.
* A thread blocked in ``request()`` or ``flush()`` may take the read side's
  token and do the same reading and routing itself, for its own reply
  (:meth:`Reader.await_reply`): one thread at a time, the same non-blocking
  code.  Having answered such a caller, the reader parks (:func:`park`)
  while callers keep coming back within LINGER, unless anything else expects
  messages; whoever starts to expect messages wakes it
  (:meth:`Reader.unpark`).
* A caller alone on the socket polls it for ``spin_wait`` before it sleeps,
  as :class:`SpinBackoff` allows; so does the reader while async requests
  are out (:func:`poll_before_recv`).

Locks (their order: :mod:`jsclient.core`): the read side's ``token``, one
per transport; the parser, the receive buffer and ``spin`` belong to its
holder.

The thread holds the Reader only weakly while blocked in ``recv``, so a
connection dropped without ``close()`` can be collected.
"""

from __future__ import annotations

import logging
import os
import select
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import ProtocolError
from ..protocol import REPLY_LINE, Parser, ReplyShape
from ..transport import PlainTransport, Transport
from .router import Router
from .state import Link, Waiter

log = logging.getLogger("jsclient")

RECV_SIZE = 256 * 1024
FEED_CHUNK = 16 * 1024
#: After the reader hands a reply to a thread in request(), it leaves the
#: socket to request() callers (who read their own replies) for as long as
#: one comes back between two of its looks, this many seconds apart.  Each
#: look costs the callers' core a wake-up and a turn of the GIL (at 2 ms, one
#: in about ten calls of a one-in-flight request loop); while nothing else
#: expects messages, only the server's PINGs and INFOs wait for the reader.
LINGER = 0.02
#: A caller polling for its reply yields the core once in this many empty polls:
#: often enough for other threads, and the reply is seen sooner than when
#: every poll yields (on a virtual machine a yield is a slow system call).
YIELD_EVERY = 8
#: After this many spins in a row without the reply, a spin is tried once in
#: 2**MAX_SPIN_BACKOFF waits (see SpinBackoff).
MAX_SPIN_BACKOFF = 10


class SpinBackoff:
    """Whether a caller reading its own reply polls before it sleeps.

    A spin that ends without the reply makes the next waits sleep at once,
    twice as many each time it happens in a row (up to 2**MAX_SPIN_BACKOFF):
    a slow or distant server costs almost no CPU, and a spin that catches
    its reply starts the count again.
    """

    __slots__ = ("misses", "skip")

    def __init__(self) -> None:
        self.misses = 0  # spins in a row that ended without the reply
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
        """A spin caught its reply: the next wait spins again (a method of its own: no argument to parse)."""
        self.misses = 0

    def missed(self) -> None:
        self.misses = min(self.misses + 1, MAX_SPIN_BACKOFF)
        self.skip = 1 << self.misses


class ReadSide:
    """One transport's receiving end: its parser and buffer, and the token to use them.

    Whoever holds ``token`` reads the socket and routes what arrives: the
    reader thread, or a caller reading its own reply, which spares the
    hand-off from the reader (a wake-up and a context switch, a good part
    of a round trip on loopback).  Callers read only plain sockets (``sock``
    is None on TLS: records need the transport's own buffering).  On a
    virtual machine, waking a halted CPU for the reply can take longer than
    the server took to answer; hence the polling.
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

    def await_reply(
        self, waiter: Waiter, timeout: float, token: str = "", number: int = 0, shape: ReplyShape[Any] | None = None
    ) -> bool:
        """Wait until ``waiter`` is filled, reading the socket for it when nobody else is.

        ``token``: the request() caller's (``number`` as text), its waiter
        listed under it: a read that is exactly that reply is taken here
        (the waiter's ``msg`` set, its lock left alone) without parsing it
        whole or routing it; one of ``shape`` is read in one match, and the
        shape's reader makes of it what the caller returns.
        """
        side = self.link.reading
        # Only while the reader stepped aside: with it reading anyway, taking turns would cost more than it saves.
        # (acquire(False), not blocking=False: a keyword costs a C argument parse, here on every request.)
        if side is None or side.sock is None or not side.parked or not side.token.acquire(False):
            return waiter.wait(timeout)
        listed = 1 if token else 0
        # Taken, so the reader stays parked (it looks at the token first): stamped now rather than
        # at the end, which is one clock reading less between the reply's arrival and the return.
        now = side.last_used = time.monotonic()
        deadline = now + timeout
        # Spin only alone: other callers' replies wake threads that need this core.
        spin_until = side.spin.until(now, self.spin) if len(self.router.waiters) <= listed else 0.0
        # The start of the reply's control line, built only by a caller that reads for itself.
        line = REPLY_LINE % (self.router.mux, number, self.router.resp_sid) if token else b""
        shaped = line if shape is None else shape.line + line
        try:
            # recv, not recv_into the side's buffer: the bytes object a reply is parsed from comes
            # without a view and a copy (FEED_CHUNK at a time: a flood still goes through in slices).
            recv = side.sock.recv
            poll = side.poller.poll
            while not waiter.lock.acquire(False):
                if spin_until:
                    if not spin_poll(poll, spin_until, YIELD_EVERY):
                        side.spin.missed()
                        spin_until = 0.0
                        continue
                # In slices: should the socket be closed under us, poll wakes anyway (or by the slice's end).
                elif not poll(max(0.0, min(deadline - time.monotonic(), 0.1)) * 1000.0):
                    if time.monotonic() >= deadline:
                        return waiter.lock.acquire(False)
                    if self.link.reading is not side:
                        break  # the connection was lost: whoever reconnects answers the waiter
                    continue
                try:
                    data = recv(FEED_CHUNK)
                except (OSError, ssl.SSLError) as exc:
                    answered = self.take_read(side, b"", exc)
                else:
                    if line and data:
                        if shape is not None:
                            groups = side.parser.feed_shaped(data, shaped, shape)
                            if groups is not None and self.router.take_shaped(token, groups, waiter, shape):
                                if spin_until and side.spin.misses:  # no call when the count is at 0 already
                                    side.spin.hit()
                                listed = 0  # its waiter is no longer listed
                                return True
                        frame = side.parser.feed_reply(data, line)
                        if frame is not None and self.router.take_own(token, frame, waiter):
                            if spin_until and side.spin.misses:
                                side.spin.hit()
                            listed = 0  # its waiter is no longer listed
                            return True
                    answered = self.take_read(side, data, None)
                if answered is None:
                    break
                if answered and spin_until and waiter.lock.locked():
                    spin_until = 0.0  # another caller's reply: leave it the core
                if time.monotonic() >= deadline:  # a socket that keeps bringing others' messages
                    return waiter.lock.acquire(False)
            else:
                if spin_until and side.spin.misses:
                    side.spin.hit()
                return True
        finally:
            side.token.release()
            if side.parked and self.router.others_expect(listed):
                side.wake.set()
        return waiter.wait(deadline - time.monotonic())

    def unpark(self) -> None:
        """Bring a parked reader back now: something starts to expect messages."""
        side = self.link.reading
        if side is not None and side.parked:
            side.wake.set()

    def take_read(self, side: ReadSide, data: bytes | memoryview, error: Exception | None) -> bool | None:
        """Under the side's token: route the bytes just read (empty: the read failed with ``error``).

        Returns whether a request() caller got its reply, or None when the
        read failed (the loss is handled).
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
                return route(parser.feed(data)) if one is None else self.router.route_one(one)
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
            # would be one more thread taking the GIL in turns (-20% for 16 such threads).
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
            park(ref, side)


def poll_before_recv(side: ReadSide, spin: float) -> None:
    """Reader, holding the token, while async requests are out: poll up to ``spin`` before recv sleeps.

    Their replies come back in waves, and between two waves the reader would
    sleep and then be woken, which on a virtual machine costs more than the
    wait (the same reason request() callers poll).  Each poll first yields
    the core to any thread that can run, such as the one sending requests.
    """
    until = side.spin.until(time.monotonic(), spin)
    if until:
        if spin_poll(side.poller.poll, until, 1):
            side.spin.hit()
        else:
            side.spin.missed()


def spin_poll(poll: Callable[[float], list[tuple[int, int]]], until: float, yield_every: int) -> bool:
    """Poll until the socket is readable (True) or the clock reaches ``until`` (False).

    Every ``yield_every`` empty polls it looks at the clock and yields the
    core (threads that can run on it go first, and may take the GIL); in
    between, the reply is seen within one poll of its arrival.
    """
    empty = 0
    while not poll(0.0):
        empty += 1
        if not empty % yield_every:
            if time.monotonic() >= until:
                return False
            os.sched_yield()
    return True


def recv(recv_into: Callable[[bytearray], int], buffer: bytearray) -> tuple[int, Exception | None]:
    try:
        return recv_into(buffer), None
    except (OSError, ssl.SSLError, ProtocolError) as exc:
        return 0, exc


def park(ref: weakref.ReferenceType[Reader], side: ReadSide) -> None:
    """Leave the socket to request() callers while one comes back between two looks LINGER apart."""
    wake = side.wake
    side.parked = True  # before the check: whoever starts to need the reader from now on wakes it
    try:
        while True:
            reader = ref()
            if reader is None or reader.link.reading is not side:
                return
            # While a caller holds the token it reads for everyone; else others may be waiting.
            if not side.token.locked() and reader.router.others_expect():
                return
            del reader
            looked = time.monotonic()
            if wake.wait(LINGER):
                return
            if not side.token.locked() and side.last_used < looked:
                return  # no caller came back since the last look
    finally:
        side.parked = False
        if wake.is_set():
            wake.clear()
