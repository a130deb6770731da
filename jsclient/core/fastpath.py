"""The fast path of a request: its caller reads its own reply, sparing the hand-over through the reader thread.

Runs on a ``request()`` or ``flush()`` caller's thread, and on the reader's
for its part (:func:`park`, :func:`poll_before_recv`, :func:`route_one`).
Locks: the read side's ``token``, only tried, with nothing held; under it
the plain path's (``sub_lock``, ``settle_lock``, a subscription's
``_cond``, ``write_lock`` and ``send_lock``); their order:
:mod:`jsclient.core`.  Every shortcut falls back to the plain path and gives
its result; the invariants that make it so: docs/guides/internals.rst, "The fast path of a request".
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..message import Msg
from ..protocol import REPLY_LINE, MsgEvent, OwnFrame, ReplyShape
from .state import Waiter

if TYPE_CHECKING:
    from .readside import ReadSide
    from .router import Router
    from .state import Link

#: The most bytes routed in one go: the reader routes a larger read in slices of this size, and a caller
#: reads at most this much at a time, so its read is routed whole (and is small enough to be one reply).
FEED_CHUNK = 16 * 1024
#: After the reader hands a reply to a thread in request(), it leaves the socket to request() callers for
#: as long as one of them takes the token between two of its looks, this many seconds apart.  Every look
#: wakes a thread on the callers' core; while nothing else expects messages, only the server's PINGs and
#: INFOs wait for the reader meanwhile.
LINGER = 0.02
#: A caller polling for its reply yields the core once in this many empty polls: often enough for other
#: threads to run, rarely enough that the reply is seen soon after it arrives (a yield may be a slow
#: system call on a virtual machine).
YIELD_EVERY = 8


class Reading(Protocol):
    """What the fast path uses of the reader (:class:`.reader.Reader`, which imports this module, so it is
    named here): its link, router and polling budget, and the plain routing of a read."""

    link: Link
    router: Router
    spin: float

    def take_read(self, side: ReadSide, data: bytes | memoryview, error: Exception | None) -> bool | None: ...


def await_reply(
    reader: Reading,
    waiter: Waiter,
    timeout: float,
    token: str = "",
    number: int = 0,
    shape: ReplyShape[Any] | None = None,
) -> bool:
    """Wait until ``waiter`` is answered (True) or ``timeout`` passes (False), reading the socket for it
    when the reader stepped aside.

    ``token``: a request() caller's (``number`` as text), its waiter listed
    under it.  A read that is exactly its reply is taken here, ``msg`` set
    and the lock left held (:func:`take_own`); with ``shape``, one match
    reads it (:func:`take_shaped`).  A flush() waits for a PONG: no token.
    """
    side = reader.link.reading
    # The plain path unless the reader stepped aside: while it reads anyway, taking turns gains nothing.
    # (Positional False: this runs on every request.)
    if side is None or side.sock is None or not side.parked or not side.token.acquire(False):  # TAKE, or not
        return waiter.wait(timeout)
    router = reader.router
    listed = 1 if token else 0  # our own waiters still listed (see Router.others_expect)
    # Stamped as the token is taken, keeping the clock off the way from the reply to the return.
    now = side.last_used = time.monotonic()
    deadline = now + timeout
    # Poll only alone: other callers' replies wake threads that need this core.
    spin_until = side.spin.until(now, reader.spin) if len(router.waiters) <= listed else 0.0
    # The start of the reply's control line (and the shape's, before it).
    line = REPLY_LINE % (router.mux, number, router.resp_sid) if token else b""
    shaped = line if shape is None else shape.line + line
    try:
        # recv, not recv_into the side's buffer: the reply is matched against the bytes object itself.
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
                if reader.link.reading is not side:
                    break  # the link was lost: whoever reconnects or closes answers the waiter
                continue
            try:
                data = recv(FEED_CHUNK)
            except (OSError, ssl.SSLError) as exc:
                answered = reader.take_read(side, b"", exc)
            else:
                if line and data:
                    if shape is not None:
                        groups = side.parser.feed_shaped(data, shaped, shape)
                        if groups is not None and take_shaped(router, token, groups, waiter, shape):
                            if spin_until and side.spin.misses:
                                side.spin.hit()
                            listed = 0  # its waiter is no longer listed
                            return True
                    frame = side.parser.feed_reply(data, line)
                    if frame is not None and take_own(router, token, frame, waiter):
                        if spin_until and side.spin.misses:
                            side.spin.hit()
                        listed = 0  # its waiter is no longer listed
                        return True
                answered = reader.take_read(side, data, None)
            if answered is None:
                break  # the read failed: the loss is handled
            if answered and spin_until and waiter.lock.locked():
                spin_until = 0.0  # another caller's reply: leave it the core
            if time.monotonic() >= deadline:  # a socket that keeps bringing others' messages
                return waiter.lock.acquire(False)
        else:
            # Answered through the plain routing of a read (take_read filled and released it).
            if spin_until and side.spin.misses:
                side.spin.hit()
            return True
    finally:
        side.token.release()  # GIVE_BACK
        if side.parked and router.others_expect(listed):
            side.wake.set()  # WAKE
    return waiter.wait(deadline - time.monotonic())


def route_one(router: Router, msg: MsgEvent) -> bool:
    """:meth:`.router.Router.route` of a read that was one message, with fewer steps when it answers a
    request() caller: that waiter is popped, the message counted, and the waiter filled (woken)."""
    if type(msg) is Msg and msg.sid == router.resp_sid:
        token = msg.subject[router.token_at :]
        waiters = router.waiters
        waiter = waiters.get(token)
        if waiter.__class__ is Waiter and waiters.pop(token, None) is waiter:
            msg._conn = router.conn
            router.in_msgs += 1
            router.in_bytes += len(msg.data)
            waiter.fill(msg)
            return True
    return router.route((msg,))


def take_own(router: Router, token: str, frame: OwnFrame, waiter: Waiter) -> bool:
    """The reply of the request() caller holding ``token``, as that caller read it (see
    :meth:`jsclient.protocol.Parser.feed_reply`): the waiter's ``msg``, its lock left held.

    False when the waiter is no longer listed: closing took it, and fills it.
    """
    if router.waiters.pop(token, None) is not waiter:
        return False
    raw, body, split, stop = frame
    msg = Msg(router.prefix + token, router.resp_sid, None, raw[body:split] if split > body else None, raw[split:stop])
    msg._conn = router.conn
    router.in_msgs += 1
    router.in_bytes += stop - split
    waiter.msg = msg
    return True


def take_shaped(router: Router, token: str, groups: tuple[bytes, ...], waiter: Waiter, shape: ReplyShape[Any]) -> bool:
    """:func:`take_own` of a reply read in one match (see :meth:`jsclient.protocol.Parser.feed_shaped`):
    ``msg`` is what the shape's reader made of it, or the message when the reader did not know it.

    The shape's reader runs here, on its caller's thread, never on the reader thread.
    """
    if router.waiters.pop(token, None) is not waiter:
        return False
    payload = groups[-1]
    router.in_msgs += 1
    router.in_bytes += len(payload)
    value = shape.read(groups)
    if value is None:
        value = Msg(router.prefix + token, router.resp_sid, None, groups[2] if shape.headers else None, payload)
        value._conn = router.conn
    waiter.msg = value
    return True


def park(ref: Callable[[], Reading | None], side: ReadSide, linger: float) -> None:
    """The reader thread, holding nothing: leave the socket to request() callers while one takes the
    token between two looks ``linger`` seconds apart (PARK to RETURN, :data:`.readside.READ_TRANSITIONS`)."""
    wake = side.wake
    # PARK.  A wake from while it read is dropped: its cause is looked at below.  Then ``parked``, before the
    # first look: whoever starts to need the reader from now on wakes it.
    if wake.is_set():
        wake.clear()
    side.parked = True
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
            if wake.wait(linger):
                return
            if not side.token.locked() and side.last_used < looked:
                return  # no caller came back since the last look
    finally:
        side.parked = False  # RETURN
        if wake.is_set():
            wake.clear()


def poll_before_recv(side: ReadSide, spin: float) -> None:
    """The reader, holding the token, while async requests are out: poll up to ``spin`` before recv sleeps.

    Their replies come back in waves, and between two waves the reader would
    sleep and then be woken.  Each poll first yields the core to any thread
    that can run, such as the one sending the requests.
    """
    until = side.spin.until(time.monotonic(), spin)
    if until:
        if spin_poll(side.poller.poll, until, 1):
            side.spin.hit()
        else:
            side.spin.missed()


def spin_poll(poll: Callable[[float], list[tuple[int, int]]], until: float, yield_every: int) -> bool:
    """Poll until the socket is readable (True) or the clock reaches ``until`` (False).

    Every ``yield_every`` empty polls it yields the core (threads that can
    run on it go first, and may take the GIL) and then looks at the clock:
    a thread kept off the core past ``until`` by others finds its time up,
    rather than a reply that came after it and a catch that was not one.  In
    between, the reply is seen within one poll of its arrival.
    """
    empty = 0
    while not poll(0.0):
        empty += 1
        if not empty % yield_every:
            os.sched_yield()
            if time.monotonic() >= until:
                return False
    return True
