"""The fast path of a request: its caller reads its own reply.  Every speed trick of the request path is here,
or named here, with the invariants it rests on.

The reference is the plain path, which works on its own and which every
trick falls back to: a caller lists a :class:`~jsclient.core.state.Waiter`
under its token (:mod:`.requests`), its frame goes through the write buffer
(:mod:`.writer`), the ``jsclient-reader`` thread reads the socket and routes
each message (:meth:`.router.Router.route`), the reply fills the waiter and
the caller wakes.  The fast path does the same work on the caller's thread
when nobody else needs the reader: the reader steps aside (:func:`park`),
the caller takes the read token and reads the socket itself
(:func:`await_reply`), and the one frame that is its reply is taken whole
(:func:`take_own`, :func:`take_shaped`) instead of parsed and routed.  Also
here: the reader's step for a read that was one reply (:func:`route_one`),
and the polling that spares a wake-up (:class:`.readside.SpinBackoff`,
:func:`spin_poll`, :func:`poll_before_recv`).  The frame going straight to
the socket, :meth:`.writer.Writer.send_frame`, stays a Writer method because
it is the writer's locks that make it safe; its invariant is stated below.

**The read token** (``ReadSide.token``, :mod:`.readside`, one per
transport).  Who holds it, when the reader parks and who wakes whom is the
read side's machine, :data:`.readside.READ_TRANSITIONS`; the code below
marks each step with its event.  The holder alone reads the socket, feeds
the parser, routes (exactly as the reader would:
:meth:`.reader.Reader.take_read`) and updates the side's ``spin`` and the
router's ``in_msgs``/``in_bytes``; that is why none of those has a lock.  A
caller only tries the token, with nothing held, and only on a plain socket
(``sock`` is None for TLS and WebSocket, whose records need the
transport's buffering): it never queues behind the reader, and the token
never nests with ``mux_lock`` or ``_reopen_lock`` (the order:
:mod:`jsclient.core`).  The locks taken under the token are the plain
path's: routing may take ``sub_lock``, the futures' ``settle_lock`` and a
subscription's ``_cond``, answering a PING ``write_lock`` (and
``send_lock`` when the buffer is full), and a loss may close the
connection, which the lock order allows under the token.  A caller whose
link is lost stops reading and waits on its waiter: whoever reconnects or
closes answers it.

**Each waiter settles once.**  A caller lists its entry in
``Router.waiters`` before its request is sent, and whoever pops it
(``dict.pop`` is atomic) settles it: the router
(:meth:`.router.Router.route`, :func:`route_one`), the caller itself (its
reply, or giving up on a timeout), or closing.  ``Waiter.lock`` is held
from the waiter's creation until ``fill`` releases it, waking its caller;
a caller that pops its own entry (:func:`take_own`, :func:`take_shaped`)
sets ``msg`` and leaves the lock held, since nobody waits.  A pop that
finds the entry gone (closing took it) leaves the reply alone: closing
fills that waiter.  Either way the lock is held again when request() puts
the waiter back among its spares.

**The frame straight to the socket** (:meth:`.writer.Writer.send_frame`).
A request() caller sends its frame from its own thread, at once, rather
than handing it to the flusher: the reply can come no sooner than the
request leaves.  The frame skips the buffer only when its thread got
``send_lock`` (tried, never waited for) and, under ``write_lock``, found
the buffer empty: no earlier frame is buffered, and no other thread is
part-way through sending earlier bytes, so nothing is overtaken.
Otherwise the frame is appended behind what is buffered, and sent after
it by this thread or the flusher.  A failed send puts the frame back at
the front of the buffer, as any failed send does.

**Polling.**  Waking a sleeping thread when its reply arrives can take
longer than the server took to answer, so a caller alone on the socket
(its waiter the only one listed) polls for up to ``spin_wait`` before it
sleeps in ``poll``, and the reader does the same while async requests are
out and it did not just answer a request() caller.  A poll that ends
without its reply makes the next waits sleep at once, twice as many at
each such miss (up to 2**MAX_SPIN_BACKOFF), until polls catch their
replies several times in a row (:class:`.readside.SpinBackoff`), so a
slow or distant server costs little CPU.  With one CPU nobody polls.  Polling
changes when a reply is noticed, never what is read.

**Why the result is the plain path's.**  Each shortcut takes a read only
when it is exactly one whole frame of the expected kind with nothing
buffered in the parser (:meth:`~jsclient.protocol.Parser.feed_one`,
:meth:`~jsclient.protocol.Parser.feed_reply`,
:meth:`~jsclient.protocol.Parser.feed_shaped` say None otherwise), and
otherwise :meth:`.reader.Reader.take_read` routes the same bytes the
plain way.  :func:`take_own` makes the message ``feed`` and ``route``
would (subject, sid, header block, payload, connection) and counts it the
same; :func:`route_one` is ``route`` of one message.  A caller that asked
with a :class:`~jsclient.protocol.ReplyShape` gets what the shape's reader
made of the frame, or the message when the reader routed it or the shape's
reader did not know it, which the shape's decoder then makes the same value
of (KV get, direct get, JetStream publish).
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
