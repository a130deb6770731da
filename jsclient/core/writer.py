"""The writer: the write buffer, who sends it, and the ``jsclient-flusher`` thread.

Threads:

* any **publishing thread** appends encoded frames (:meth:`Writer.append`,
  :meth:`Writer.queue_message`).  When the buffer passes
  ``max_pending_size`` it sends the buffer itself (that is the
  back-pressure), and ``request``/``flush`` send at once for latency
  (:meth:`Writer.send_soon`; a request() frame may skip the buffer,
  :meth:`Writer.send_frame`, whose invariant is in
  docs/guides/internals.rst);
* ``jsclient-flusher`` (:func:`flusher_main`) sends the rest, so many frames
  leave in one ``sendall``.  While async requests keep coming it polls
  instead of being woken for each: a thread blocking on one of their
  futures sends the buffer itself, and otherwise the flusher does within
  DEFERRED_SEND.

Locks (their order: :mod:`jsclient.core`): ``send_lock`` serialises socket
writes, so buffers leave in the order they were filled even when a user
thread sends inline; ``write_lock`` guards ``buf``, ``pings``, ``pongs``,
the connection's state (``state``, ``accepting``, ``threshold``, moved only
by :func:`jsclient.core.state.apply`), the flusher's state (``flusher``),
``unsent_requests`` and the outgoing counters, and is held only for
appends, never during I/O.

A failed send puts its bytes back at the front of the buffer and asks the
session what the loss means (decided under ``write_lock``); what is then to
be done (close, or start reconnecting) runs on the same thread once
``send_lock`` is released, so nothing of closing happens under it.

Who wakes whom is the flusher's machine, :data:`FLUSHER_TRANSITIONS`: an
append moves it by APPEND or DEFER, its own looks by SEND or SLEEP, always
under ``write_lock``, and an append that takes it from asleep (IDLE,
POLLING, POLLING_DEFERRED) to awake sets ``kick``.  Most of these steps run
once per message, so the code writes each out as identity checks on the
state rather than looking the table up (a lookup hashes two enum members
in Python); ``tests/test_machines.py`` drives every pair against the table.

A message needs ``accepting``; while reconnecting, messages are buffered up
to ``reconnect_buf_size`` and SUB/UNSUB frames are skipped (the
resubscription carries them).
"""

from __future__ import annotations

import enum
import threading
import types
import weakref
from collections import deque
from collections.abc import Callable, Mapping

from ..errors import Error, ReconnectBufferFullError
from ..options import Options
from ..protocol import PING
from .state import Link, State, Waiter, start

#: What a failed send leaves to do once ``send_lock`` is released (see the module docstring).
AfterLoss = Callable[[], None]

#: Async requests do not wake the flusher while it polls: their sender usually
#: sends them itself when it waits on a future (so a wake-up per batch would
#: mostly find nothing to send), and otherwise the flusher sends them within
#: this many seconds.
DEFERRED_SEND = 0.001
#: A poll that finds the buffer already sent (the waiting threads send first)
#: makes the flusher poll half as often, down to once in this many seconds.
DEFERRED_SEND_MAX = 0.004


class FlusherState(enum.Enum):
    """Where the flusher is, as an append sees it: whether it must be woken, and whether it polls next."""

    SENDING = enum.auto()  # awake: it looks at the buffer again before it sleeps, so no append need wake it
    SENDING_DEFERRED = enum.auto()  # awake, and an async request came since its last look: it polls next
    IDLE = enum.auto()  # asleep until kicked
    POLLING = enum.auto()  # asleep for at most DEFERRED_SEND: an async request leaves it asleep, a message wakes it
    POLLING_DEFERRED = enum.auto()  # polling, and an async request came since its last look: it polls again


class FlusherEvent(enum.Enum):
    """What moves the flusher: an append (publishing threads) or one of its own looks at the buffer."""

    APPEND = enum.auto()  # a frame for the flusher to send (not one its caller sends itself)
    DEFER = enum.auto()  # an async request: its sender usually sends it itself, see DEFERRED_SEND
    SEND = enum.auto()  # the flusher's look found bytes: it sends them and looks again
    SLEEP = enum.auto()  # its look found none: it sleeps until kicked, or polls


SENDING, SENDING_DEFERRED = FlusherState.SENDING, FlusherState.SENDING_DEFERRED
IDLE, POLLING, POLLING_DEFERRED = FlusherState.IDLE, FlusherState.POLLING, FlusherState.POLLING_DEFERRED
APPEND, DEFER, SEND, SLEEP = FlusherEvent.APPEND, FlusherEvent.DEFER, FlusherEvent.SEND, FlusherEvent.SLEEP

#: (state, event) -> next state, under ``write_lock``.  Every pair is listed: appends cannot know where the
#: flusher is, and it looks in any state (Link.shutdown and a new link kick it without a transition).
FLUSHER_TRANSITIONS: Mapping[tuple[FlusherState, FlusherEvent], FlusherState] = types.MappingProxyType(
    {
        # An append wakes a sleeping flusher; one that owes a poll still does.
        (SENDING, APPEND): SENDING,
        (SENDING_DEFERRED, APPEND): SENDING_DEFERRED,
        (IDLE, APPEND): SENDING,
        (POLLING, APPEND): SENDING,
        (POLLING_DEFERRED, APPEND): SENDING_DEFERRED,
        # An async request leaves a polling flusher asleep.  An idle one is woken: the first async request
        # after a quiet spell leaves now, and only one more while it is awake makes it poll.
        (SENDING, DEFER): SENDING_DEFERRED,
        (SENDING_DEFERRED, DEFER): SENDING_DEFERRED,
        (IDLE, DEFER): SENDING,
        (POLLING, DEFER): POLLING_DEFERRED,
        (POLLING_DEFERRED, DEFER): POLLING_DEFERRED,
        # A look that found bytes: awake, a poll still owed if one was.
        (SENDING, SEND): SENDING,
        (SENDING_DEFERRED, SEND): SENDING_DEFERRED,
        (IDLE, SEND): SENDING,
        (POLLING, SEND): SENDING,
        (POLLING_DEFERRED, SEND): SENDING_DEFERRED,
        # A look that found none: it polls if an async request came since the last one, else sleeps.
        (SENDING, SLEEP): IDLE,
        (SENDING_DEFERRED, SLEEP): POLLING,
        (IDLE, SLEEP): IDLE,
        (POLLING, SLEEP): IDLE,
        (POLLING_DEFERRED, SLEEP): POLLING,
    }
)


class Writer:
    """One process's write buffer for one connection (a forked child makes a new one)."""

    # The connection's state and what follows from it (set by jsclient.core.state only).
    state: State
    accepting: bool  # publishes allowed
    threshold: int  # the publish fast path appends only below it; 0 sends every message the general way

    def __init__(
        self,
        options: Options,
        link: Link,
        lost: Callable[[Exception, int], AfterLoss | None],
        refusal: Callable[[], Error],
    ) -> None:
        self.send_lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.buf = bytearray()
        self.kick = link.kick
        self.link = link
        self._lost = lost  # the transport of a generation failed: the session decides, we run what it returns
        self._refusal = refusal  # the error for a message refused now (closed, draining, forked)
        self._reconnect_buf_size = options.reconnect_buf_size
        self.flusher = SENDING  # it starts with a look
        self.unsent_requests = 0  # async requests in buf (see requests.SEND_SHARE)
        self.pings = 0  # PINGs in buf (unsent)
        self.pongs: deque[Waiter | None] = deque()  # one per PING sent or buffered, in order
        self.max_pending = options.max_pending_size
        start(self)
        self.out_msgs = 0
        self.out_bytes = 0

    def start_flusher(self) -> threading.Thread:
        # The thread holds the writer weakly, so a dropped connection can be collected.
        thread = threading.Thread(
            target=flusher_main, args=(weakref.ref(self), self.kick), name="jsclient-flusher", daemon=True
        )
        thread.start()
        return thread

    # -- appending -------------------------------------------------------------
    def append(
        self,
        frame: bytes | memoryview,
        *,
        send_now: bool = False,
        payload_size: int = -1,
        subscription: bool = False,
        messages: int = 1,
    ) -> None:
        """Queue a frame; ``send_now`` sends it from this thread unless a send is under way.

        A message (``payload_size`` >= 0) needs the connection to accept
        publishes; a control frame only that it is open.
        """
        with self.write_lock:
            if not self.accepting and (payload_size >= 0 or self.state is State.CLOSED):
                raise self._refusal()
            buf = self.buf
            if self.state is State.RECONNECTING:
                if subscription:
                    return
                if payload_size >= 0 and len(buf) + len(frame) > self._reconnect_buf_size:
                    raise ReconnectBufferFullError(
                        f"reconnecting: the {len(frame)}-byte message does not fit in the reconnect buffer "
                        f"({len(buf)} of {self._reconnect_buf_size} bytes used); it was not sent"
                    )
                if payload_size >= 0:
                    self.out_msgs += messages
                    self.out_bytes += payload_size
                buf += frame
                return
            if payload_size >= 0:
                self.out_msgs += messages
                self.out_bytes += payload_size
            buf += frame
            big = len(buf) >= self.max_pending
            if self.flusher is not SENDING and not send_now and self.flusher is not SENDING_DEFERRED:
                self._wake_flusher()  # APPEND
        if big:
            self.send_pending()
        elif send_now:
            self.send_soon()

    def queue_message(self, head: bytes, payload: bytes, n: int, *, defer: bool = False) -> bool:
        """The common case of :meth:`append` for a message: connected and below back-pressure.

        Returns False (queueing nothing) otherwise; the caller then takes the
        general path.  ``defer`` (async requests): a polling flusher is not
        woken, see DEFERRED_SEND.
        """
        lock = self.write_lock
        lock.acquire()
        try:
            buf = self.buf
            if not self.accepting or len(buf) >= self.threshold:
                return False
            buf += head
            buf += payload
            buf += b"\r\n"
            self.out_msgs += 1
            self.out_bytes += n
            if defer:
                self.unsent_requests += 1
                flusher = self.flusher  # DEFER
                if flusher is not POLLING_DEFERRED and flusher is not SENDING_DEFERRED:
                    if flusher is IDLE:
                        self._wake_flusher()
                    else:
                        self.flusher = SENDING_DEFERRED if flusher is SENDING else POLLING_DEFERRED
            elif self.flusher is not SENDING and self.flusher is not SENDING_DEFERRED:
                self._wake_flusher()  # APPEND
            return True
        finally:
            lock.release()

    def send_frame(self, frame: bytes, n: int) -> bool:
        """A whole frame its caller waits on (a request's, ``n`` its payload size): queued and sent at once.

        With nothing buffered and nobody sending, the frame goes to the
        socket from here without passing through the buffer: the request()
        fast path's send (why that keeps the wire order:
        docs/guides/internals.rst).  It is a Writer method because the
        writer's two locks make it safe.  False (nothing queued) as
        :meth:`queue_message`.
        """
        # Tried, never waited for: while another thread sends, the frame joins the buffer behind what is there
        # and leaves with it.  Positional False, plain acquire/release and no call of sendall below: this runs
        # once per request().
        if not self.send_lock.acquire(False):
            with self.write_lock:
                if not self.accepting or len(self.buf) >= self.threshold:
                    return False
                self.buf += frame
                self.out_msgs += 1
                self.out_bytes += n
            self.send_soon()  # someone is sending: the flusher sends this after them
            return True
        try:
            lock = self.write_lock
            lock.acquire()
            try:
                buf = self.buf
                if not self.accepting or len(buf) >= self.threshold:
                    return False
                self.out_msgs += 1
                self.out_bytes += n
                link = self.link
                alone = None if buf else link.transport  # nothing ahead of the frame: it leaves by itself
                if alone is None:
                    buf += frame
                    taken = self.take_buffer()
                    if taken is None:
                        return True  # offline: it leaves with the buffer once reconnected
                    data, pings = taken
                gen = link.gen
            finally:
                lock.release()
            if alone is None:
                then = self.sendall(data, pings)  # after what was buffered before it
            else:
                try:
                    alone.sendall(frame)  # straight to the socket: nothing was buffered ahead of it
                    return True
                except OSError as exc:
                    then = self._unsent(frame, 0, exc, gen)
        finally:
            self.send_lock.release()
        if then is not None:
            then()
        return True

    def queue_ping(self, waiter: Waiter | None) -> bool:
        """Buffer a PING whose PONG fills ``waiter``; False when closed.

        ``waiter`` None is the stale-connection check: buffered only while
        connected, and it kicks the flusher (nobody waits to send it).
        """
        with self.write_lock:
            if self.state is State.CLOSED or (waiter is None and self.state is not State.CONNECTED):
                return False
            self.pongs.append(waiter)
            self.buf += PING
            self.pings += 1
            if waiter is None and self.flusher is not SENDING and self.flusher is not SENDING_DEFERRED:
                self._wake_flusher()  # APPEND
            return True

    def _wake_flusher(self) -> None:
        """Under write_lock, the flusher asleep: an APPEND (or a DEFER while IDLE) wakes it, a poll still
        owed if one was."""
        self.flusher = SENDING_DEFERRED if self.flusher is POLLING_DEFERRED else SENDING
        self.kick.set()

    def pong_arrived(self) -> Waiter | None:
        """Reader: the oldest PING was answered; its waiter (None for a liveness ping or none left)."""
        with self.write_lock:
            return self.pongs.popleft() if self.pongs else None

    # -- sending ---------------------------------------------------------------
    def take_buffer(self) -> tuple[bytearray | bytes, int] | None:
        """Under write_lock: the bytes to send now and the PINGs in them (None: nothing, or offline)."""
        data = self.buf
        if not data or self.link.transport is None:
            return None
        self.buf = bytearray()
        self.unsent_requests = 0
        pings, self.pings = self.pings, 0
        return data, pings

    def send_soon(self) -> None:
        """Send now if nobody is sending; otherwise leave it to the flusher (it coalesces)."""
        if self.send_lock.acquire(False):
            then = None
            try:
                with self.write_lock:
                    taken = self.take_buffer()
                if taken is not None:
                    then = self.sendall(*taken)
            finally:
                self.send_lock.release()
            if then is not None:
                then()
        else:
            with self.write_lock:
                if self.flusher is not SENDING and self.flusher is not SENDING_DEFERRED:
                    self._wake_flusher()  # APPEND

    def send_pending(self) -> None:
        """Send whatever is buffered, now, on the calling thread."""
        then = None
        with self.send_lock:
            with self.write_lock:
                taken = self.take_buffer()
            if taken is not None:
                then = self.sendall(*taken)
        if then is not None:
            then()

    def sendall(self, data: bytearray | bytes, pings: int) -> AfterLoss | None:
        """Under send_lock.  On failure the bytes go back to the front of the buffer, and what the loss
        leaves to do is returned: the caller runs it once it has released send_lock."""
        link = self.link
        transport, gen = link.transport, link.gen
        try:
            if transport is None:
                raise OSError("not connected")
            transport.sendall(data)
        except OSError as exc:
            return self._unsent(data, pings, exc, gen)
        return None

    def _unsent(self, data: bytearray | bytes, pings: int, exc: OSError, gen: int) -> AfterLoss | None:
        """Under send_lock, a send failed: unsent as far as we know, ``data`` goes back ahead of newer frames.

        Returns what the session decided is to be done about the loss (None: already handled).
        """
        with self.write_lock:
            self.buf[:0] = data
            self.pings += pings
        return self._lost(exc, gen)

    def send_last(self) -> None:
        """Closing: send what publish() accepted, best effort, within a second."""
        try:
            with self.send_lock:
                data, self.buf = self.buf, bytearray()
                transport = self.link.transport
                if data and transport is not None:
                    transport.settimeout(1.0)
                    transport.sendall(data)
        except OSError:
            pass


def flusher_main(ref: weakref.ReferenceType[Writer], kick: threading.Event) -> None:
    """``jsclient-flusher``: send the buffer whenever kicked (or polled, see DEFERRED_SEND) until closed."""
    poll_every = DEFERRED_SEND
    sent = False
    while True:
        writer = ref()
        if writer is None:
            return
        then = None
        with writer.send_lock:
            with writer.write_lock:
                if writer.state is State.CLOSED:
                    return
                taken = writer.take_buffer()
                if taken is None:
                    # SLEEP: it polls if an async request came since its last look.  A poll that found nothing
                    # means the async requests' senders send them: look half as often.
                    if not sent:
                        poll_every = min(2 * poll_every, DEFERRED_SEND_MAX)
                    sent = False
                    flusher = writer.flusher
                    if flusher is SENDING_DEFERRED or flusher is POLLING_DEFERRED:
                        writer.flusher = POLLING
                        poll: float | None = poll_every
                    else:
                        writer.flusher = IDLE
                        poll = None
                    kick.clear()
                else:
                    # SEND: a change only when it was asleep (its poll ran out, or a kick without a transition).
                    if writer.flusher is not SENDING and writer.flusher is not SENDING_DEFERRED:
                        writer.flusher = SENDING_DEFERRED if writer.flusher is POLLING_DEFERRED else SENDING
                    sent = True
                    poll_every = DEFERRED_SEND
            if taken is not None:
                then = writer.sendall(*taken)
        if taken is not None:
            if then is not None:
                then()  # a failed send: the loss is acted on with send_lock released
            continue
        del writer
        kick.wait(poll)
