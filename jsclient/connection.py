"""Connection: the socket, its reader and flusher threads, and the core NATS operations.

Threads (all daemons, named):

* ``jsclient-reader`` reads the socket and owns the :class:`Parser`.  It
  routes messages into subscription queues and request waiters, answers
  PINGs, matches PONGs to ``flush`` calls.  It never runs user code and never
  waits on a user: a full subscription queue drops and counts.  A thread
  blocked in ``request()`` or ``flush()`` may take the read side's token and
  do the same routing itself to read its own reply (see :class:`_ReadSide`):
  one thread at a time, the same non-blocking code.  Such a caller polls
  the socket for up to ``spin_wait`` before it sleeps, backing off when
  replies take longer (:class:`SpinBackoff`); so does the reader itself
  while async requests are out.
* ``jsclient-flusher`` sends the write buffer.  ``publish`` only appends
  encoded frames, so many frames leave in one ``sendall``.  When the buffer
  passes ``max_pending_size`` the publishing thread sends it itself (that is
  the back-pressure), and ``request``/``flush`` send at once for latency.
  While async requests keep coming the flusher polls instead of being woken
  for each: a thread blocking on one of their futures sends the buffer
  itself, and otherwise the flusher does within ``DEFERRED_SEND``.
* ``jsclient-events`` runs user callbacks (error, closed, ...) in order, so
  no user code ever runs on the reader.  The reader resolves
  ``request_async`` futures itself (a thread hop per reply costs more than
  the reply), but their done-callbacks are user code and are passed here.
* ``jsclient-timer`` (:mod:`jsclient.scheduler`) expires deadlines and sends
  the stale-connection PINGs.
* ``jsclient-reconnect`` exists while a lost connection is being restored:
  it dials the server pool with backoff, resubscribes, then sends what was
  buffered.  Each socket has a generation number, so a loss seen by several
  threads (reader, writer, ping timer) is acted on once.

Locks, always taken in this order when nested:

1. ``_send_lock`` serialises socket writes, so buffers leave in the order
   they were filled even when a user thread sends inline;
2. ``_write_lock`` guards the write buffer, the PONG waiters, the state and
   the outgoing counters.  Held only for appends, never during I/O.

Above both sits the read side's token (one thread at a time reads and
parses): it is taken with nothing else held, and its holder may take the
two above while routing (a PONG, a lost connection), never the reverse.

The futures' lock (:func:`jsclient.futures.settle_lock`) is held by the
reader through a run of async replies and released before anything else
is routed; only decoding replies, stores and wake-ups happen under it.

``_sub_lock`` (never nested with the two above) guards creating and removing
subscriptions; the reader looks subscriptions up in a dict without it, which
is atomic.  Request waiters live in a dict keyed by token, also read by the
reader without a lock.

The reader and flusher hold only a weak reference to the connection, so a
connection dropped without ``close()`` can be collected; a finalizer then
closes its socket and the threads end.

After ``os.fork()`` a child process never writes into the parent's socket: a
fork hook disowns the socket and fresh locks replace any the parent's threads
held; the child raises ForkedConnectionError on use, or reconnects with
``reconnect_after_fork=True``.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import itertools
import logging
import math
import os
import queue
import random
import secrets
import select
import ssl
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tenacity import (
    RetryError,
    Retrying,
    retry_if_result,
    stop_after_attempt,
    stop_never,
    wait_exponential,
    wait_random,
)

from .checks import seconds, whole
from .errors import (
    AuthorizationError,
    ConnectionClosedError,
    ConnectionLostError,
    Error,
    ForkedConnectionError,
    InvalidArgumentError,
    MaxPayloadError,
    NoRespondersError,
    NoServersError,
    ProtocolError,
    ReconnectBufferFullError,
    ServerError,
    StaleConnectionError,
    SubscriptionClosedError,
    TimeoutError,
    TLSError,
    server_error,
)
from .futures import ReplyFuture, ReplyKind, settle_lock
from .handshake import open_link
from .headers import HeadersInput, status_of
from .headers import encode as encode_headers
from .message import Msg
from .options import Options, mask_url
from .payload import as_bytes as _as_bytes
from .protocol import (
    PING,
    PONG,
    Err,
    Info,
    Parser,
    Ping,
    Pong,
    check_publish_subject,
    check_queue_name,
    check_subscribe_subject,
    encode_sub,
    encode_unsub,
)
from .scheduler import Scheduler
from .subscription import MsgCallback, Subscription
from .transport import PlainTransport, Transport

if TYPE_CHECKING:
    from .jetstream.context import JetStream

log = logging.getLogger("jsclient")

RECV_SIZE = 256 * 1024
FEED_CHUNK = 16 * 1024
#: Async requests do not wake the flusher while it polls: their sender usually
#: sends them itself when it waits on a future (a wake-up per batch costs more
#: than the batch), and otherwise the flusher sends them within this many seconds.
DEFERRED_SEND = 0.001
#: A poll that finds the buffer already sent (the waiting threads send first)
#: makes the flusher poll half as often, down to once in this many seconds.
DEFERRED_SEND_MAX = 0.004
#: An async request is sent at once, not left for a waiter or the flusher,
#: when the async requests still in the buffer are at least 1/SEND_SHARE of
#: all requests outstanding: while the server has plenty to answer they
#: gather into one write, and when it is about to run dry they leave now.
#: A lone request goes at once.  Alternating 0 (never) with 2, 3 and 4 in one
#: process: 3 gave +11% at 16 requests in flight and +7% for publish_async.
SEND_SHARE = 3
#: While async requests are out, their deadlines are swept at least this often
#: (seconds), and sooner when one is due sooner.
SWEEP_EVERY = 0.5
#: After the reader hands a reply to a thread in request(), it leaves the
#: socket to request() callers (who read their own replies, see _ReadSide)
#: for as long as one comes back within this many seconds.
LINGER = 0.002
#: After this many spins in a row without the reply, a spin is tried once in
#: 2**MAX_SPIN_BACKOFF waits (see SpinBackoff).
MAX_SPIN_BACKOFF = 10
_PREFIX_CACHE_MAX = 4096

ErrorCallback = Callable[[Exception], None]
EventCallback = Callable[[], None]


class State(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    DRAINING_SUBS = "draining_subs"
    DRAINING_PUBS = "draining_pubs"
    CLOSED = "closed"


class _Waiter:
    """A one-shot slot a reader fills and a user thread waits on (a lock is the cheapest event)."""

    __slots__ = ("error", "lock", "msg")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.msg: Msg | None = None
        self.error: Error | None = None

    def wait(self, timeout: float | None) -> bool:
        return self.lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0))

    def fill(self, msg: Msg | None = None, error: Error | None = None) -> None:
        self.msg = msg
        self.error = error
        self.lock.release()


class SpinBackoff:
    """Whether a caller reading its own reply polls before it sleeps (see _ReadSide).

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

    def ended(self, hit: bool) -> None:
        if hit:
            self.misses = 0
        else:
            self.misses = min(self.misses + 1, MAX_SPIN_BACKOFF)
            self.skip = 1 << self.misses


class _ReadSide:
    """One transport's receiving end: its parser and buffer, and the token to use them.

    Whoever holds ``token`` reads the socket and routes what arrives: the
    reader thread, or a thread waiting in ``request()`` or ``flush()`` on a
    plain socket.  Such a caller reads its own reply, which spares the
    hand-off from the reader (a wake-up and a context switch, a good part of
    a round trip on loopback).  Routing never blocks and runs no user code,
    so a caller only runs what the reader would have.

    Having answered such a caller, the reader gives the token up and parks
    while callers keep coming back within LINGER, unless anything else
    expects messages (subscriptions, async requests): see
    :meth:`Connection._needs_reader`.  Whoever starts to expect messages
    while it is parked wakes it through ``wake``.

    A caller alone on the socket polls it for ``spin_wait`` before it
    sleeps, as :class:`SpinBackoff` allows: on a virtual machine, waking a
    halted CPU for the reply can take longer than the server took to
    answer.  The reader polls the same way while async requests are out
    (see _poll_before_recv).  ``spin``, like the parser, belongs to
    whoever holds ``token``.
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
        self.last_used = 0.0  # monotonic time a caller last gave the token back
        # Callers read only plain sockets: TLS records need the transport's own buffering.
        self.sock = transport.sock if type(transport) is PlainTransport else None
        self.poller = select.poll()
        if self.sock is not None:
            self.poller.register(self.sock, select.POLLIN)
        self.spin = SpinBackoff()


class _Link:
    """The current transport, its read side and generation, shared with the finalizer so it can close it."""

    __slots__ = ("gen", "kick", "reading", "transport")

    def __init__(self, kick: threading.Event) -> None:
        self.transport: Transport | None = None
        self.reading: _ReadSide | None = None
        self.gen = 0
        self.kick = kick

    def shutdown(self) -> None:
        transport, reading = self.transport, self.reading
        self.transport = self.reading = None
        if transport is not None:
            transport.shutdown()
            transport.close()
        if reading is not None:
            reading.wake.set()
        self.kick.set()


#: Live connections, so a fork hook can disown their sockets in the child.
_LIVE: weakref.WeakSet[Connection] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for conn in list(_LIVE):
        conn._disown_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def connect(
    servers: str | list[str] | tuple[str, ...] | None = None,
    *,
    options: Options | None = None,
    error_cb: ErrorCallback | None = None,
    closed_cb: EventCallback | None = None,
    disconnected_cb: EventCallback | None = None,
    reconnected_cb: EventCallback | None = None,
    tls_context: ssl.SSLContext | None = None,
    **kwargs: Any,
) -> Connection:
    """Open a connection (see :class:`jsclient.Options` for every keyword).

    Callbacks run on the connection's events thread.  ``tls_context`` is an
    ``ssl.SSLContext`` to use for TLS (it is not part of the picklable options).
    """
    if options is None:
        options = Options.build(servers, **kwargs)
    elif servers is not None or kwargs:
        options = options.replace(
            **({"servers": (servers,) if isinstance(servers, str) else tuple(servers)} if servers else {}),
            **kwargs,
        )
    conn = Connection(
        options,
        error_cb=error_cb,
        closed_cb=closed_cb,
        disconnected_cb=disconnected_cb,
        reconnected_cb=reconnected_cb,
        tls_context=tls_context,
    )
    conn._connect()
    return conn


class Connection:
    """A NATS connection.  Create it with :func:`jsclient.connect`."""

    def __init__(
        self,
        options: Options,
        *,
        error_cb: ErrorCallback | None = None,
        closed_cb: EventCallback | None = None,
        disconnected_cb: EventCallback | None = None,
        reconnected_cb: EventCallback | None = None,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        for name, cb in (
            ("error_cb", error_cb),
            ("closed_cb", closed_cb),
            ("disconnected_cb", disconnected_cb),
            ("reconnected_cb", reconnected_cb),
        ):
            if cb is not None and not callable(cb):
                raise InvalidArgumentError(f"{name} must be callable")
        if tls_context is not None and not isinstance(tls_context, ssl.SSLContext):
            raise InvalidArgumentError(f"tls_context must be an ssl.SSLContext, not {type(tls_context).__name__}")
        self.options = options
        # With one CPU, polling would only keep a server on this machine from answering.
        self._spin = options.spin_wait if (os.cpu_count() or 1) > 1 else 0.0
        self._error_cb = error_cb
        self._closed_cb = closed_cb
        self._disconnected_cb = disconnected_cb
        self._reconnected_cb = reconnected_cb
        self._tls_context = tls_context
        self._pid = os.getpid()
        self._forked = False
        urls = list(options.servers)
        if not options.no_randomize:
            random.shuffle(urls)
        self._pool: list[str] = urls  # the server pool: given URLs, then discovered ones
        self._reconnect_thread: threading.Thread | None = None
        self._reconnect_hooks: dict[int, Callable[[], None]] = {}
        self._hook_ids = itertools.count(1)
        self.reconnects = 0
        self._pings_out = 0
        self._wbuf_pings = 0  # PINGs in _wbuf (unsent), guarded by _write_lock
        self._state = State.CONNECTING
        self._send_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._sub_lock = threading.Lock()
        self._wbuf = bytearray()
        self._kick = threading.Event()
        self._flusher_idle = False  # asleep: an append must kick it (or, if polling, may leave it a moment)
        self._flusher_polling = False  # asleep for at most DEFERRED_SEND
        self._deferred = False  # a deferred append happened since the flusher last looked
        self._unsent_requests = 0  # async requests in _wbuf, guarded by _write_lock (see SEND_SHARE)
        self._plain_kind = ReplyKind(before_wait=self._send_pending)  # request_async's futures
        self._io = _Link(self._kick)
        self._pongs: deque[_Waiter | None] = deque()
        self._subs: dict[int, Subscription] = {}
        self._sids = itertools.count(1)
        # subject -> (payload size, b"PUB <subject> <size>\r\n") of its last plain publish;
        # a subject is in here only once it has been validated.
        self._pub_headers: dict[str, tuple[int, bytes]] = {}
        # subject -> b"PUB <subject> <reply inbox prefix>" for requests: validated subjects only.
        self._request_heads: dict[str, bytes] = {}
        self._accepting = False  # publishes allowed (guarded by _write_lock)
        self._max_pending = options.max_pending_size
        # The publish fast path appends only below this; 0 sends every publish to
        # the slow path (while reconnecting, to enforce reconnect_buf_size).
        self._threshold = options.max_pending_size
        self._info: dict[str, Any] = {}
        self._max_payload = 1024 * 1024
        self._connected_url: str | None = None
        self._last_error: Exception | None = None
        # Requests: one wildcard inbox, a token per request.
        self._resp_lock = threading.Lock()
        self._resp_sid = 0
        self._resp_prefix = ""
        self._resp_waiters: dict[str, _Waiter | ReplyFuture[Any]] = {}
        self._resp_tokens = itertools.count(1)
        self._nuid = secrets.token_hex(8)
        self._inbox_seq = itertools.count(1)
        # Counters: "in" written by the holder of the read token, "out" under _write_lock.
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self._events: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._reader: threading.Thread | None = None
        self._flusher: threading.Thread | None = None
        self._events_thread: threading.Thread | None = None
        self._closed_event = threading.Event()
        self._timers = Scheduler()
        self._watchdog_scheduler: Scheduler | None = None
        self._deadline_lock = threading.Lock()  # guards _sweeping (see _sweep_deadlines)
        self._sweeping = False
        # The finalizer holds a box, not the queue: a forked child puts a new queue in it.
        self._events_box: list[queue.SimpleQueue[Callable[[], object] | None]] = [self._events]
        weakref.finalize(self, _finalize, self._io, self._timers, self._events_box)

    # -- properties ----------------------------------------------------------
    def __repr__(self) -> str:
        url = mask_url(self._connected_url) if self._connected_url else "-"
        return f"<jsclient.Connection {url} {self._state.value}>"

    @property
    def state(self) -> State:
        return self._state

    @property
    def is_connected(self) -> bool:
        return self._state is State.CONNECTED

    @property
    def is_closed(self) -> bool:
        return self._state is State.CLOSED

    @property
    def is_draining(self) -> bool:
        return self._state in (State.DRAINING_SUBS, State.DRAINING_PUBS)

    @property
    def connected_url(self) -> str | None:
        return mask_url(self._connected_url) if self._connected_url else None

    @property
    def server_info(self) -> dict[str, Any]:
        return dict(self._info)

    @property
    def max_payload(self) -> int:
        return self._max_payload

    @property
    def num_subscriptions(self) -> int:
        """Live subscriptions, the internal request inbox not counted."""
        return sum(1 for sid in list(self._subs) if sid != self._resp_sid)

    @property
    def last_error(self) -> Exception | None:
        return self._last_error

    def stats(self) -> dict[str, int]:
        return {
            "in_msgs": self.in_msgs,
            "in_bytes": self.in_bytes,
            "out_msgs": self.out_msgs,
            "out_bytes": self.out_bytes,
        }

    # -- connecting ----------------------------------------------------------
    def _connect(self) -> None:
        """The first connection: try each server once; auth errors are final at once."""
        errors: list[str] = []
        for url in list(self._pool):
            try:
                link = self._open(url)
                break
            except (ServerError, TLSError):
                raise  # credentials or certificates: retrying another server will not help
            except (OSError, ProtocolError, TimeoutError) as exc:
                errors.append(f"{mask_url(url)}: {exc}")
        else:
            raise NoServersError("could not connect to any server: " + "; ".join(errors))
        self._events_thread = threading.Thread(
            target=_events_main, args=(self._events,), name="jsclient-events", daemon=True
        )
        self._events_thread.start()
        self._flusher = threading.Thread(
            target=_flusher_main, args=(weakref.ref(self), self._kick), name="jsclient-flusher", daemon=True
        )
        self._activate(link, url)
        self._flusher.start()
        _LIVE.add(self)
        self._schedule_ping()

    def _schedule_ping(self) -> None:
        # Only a weak reference sits in the timer heap, so a dropped connection can go.
        self._timers.call_later(self.options.ping_interval, functools.partial(_ping_main, weakref.ref(self)))

    def _open(self, url: str) -> tuple[Transport, Parser, list[Any]]:
        return open_link(url, self.options, self._tls_context, self._apply_info)

    def _activate(self, link: tuple[Transport, Parser, list[Any]], url: str) -> None:
        """Make a handshaken transport current: resubscribe, send the buffer, start its reader."""
        transport, parser, rest = link
        with self._send_lock:
            with self._write_lock:
                if self._state is State.CLOSED:
                    transport.close()
                    return
                reconnect = self._state is State.RECONNECTING
                self._io.transport = transport
                self._io.gen += 1
                gen = self._io.gen
                frames = self._resubscribe_frames() if reconnect else b""
                data = frames + self._wbuf
                self._wbuf = bytearray()
                self._unsent_requests = 0
                self._wbuf_pings = 0
                self._pings_out = 0
                self._state = State.CONNECTED
                self._accepting = True
                self._threshold = self._max_pending
                self._connected_url = url
            if data:
                self._sendall(data)
        if rest:
            self._handle_events(rest)
        side = self._io.reading = _ReadSide(transport, parser, gen)
        self._reader = threading.Thread(
            target=_reader_main,
            args=(weakref.ref(self), side),
            name="jsclient-reader",
            daemon=True,
        )
        self._reader.start()
        self._kick.set()

    def _resubscribe_frames(self) -> bytes:
        """SUB (and UNSUB for what is left of max_msgs) for every live subscription."""
        frames = []
        for sub in list(self._subs.values()):
            frames.append(encode_sub(sub.subject, sub.sid, sub.queue))
            if sub.max_msgs:
                left = sub.max_msgs - sub.received
                if left > 0:
                    frames.append(encode_unsub(sub.sid, left))
        return b"".join(frames)

    def _apply_info(self, info: dict[str, Any]) -> None:
        self._info = info
        max_payload = info.get("max_payload")
        if isinstance(max_payload, int) and max_payload > 0 and max_payload != self._max_payload:
            self._max_payload = max_payload
            self._pub_headers.clear()  # cached PUB lines were checked against the old limit
        urls = info.get("connect_urls")
        if urls and not self.options.ignore_discovered_servers:
            self._discover(urls)

    def _discover(self, urls: list[str]) -> None:
        """Add cluster members announced in INFO to the pool (shuffled unless no_randomize)."""
        scheme = "tls" if self._connected_url and self._connected_url.startswith("tls://") else "nats"
        known = {urlsplit(url).netloc.rpartition("@")[2] for url in self._pool}
        fresh = [f"{scheme}://{u}" for u in urls if isinstance(u, str) and u not in known]
        if not fresh:
            return
        if not self.options.no_randomize:
            random.shuffle(fresh)
        self._pool.extend(fresh)

    def _lame_duck(self) -> None:
        """The server announced it is leaving: move to another one before it drops us."""
        if len(self._pool) > 1 and self._state is State.CONNECTED:
            log.info("jsclient: server entered lame duck mode; reconnecting elsewhere")
            self._connection_lost(ConnectionResetError("server entered lame duck mode"), self._io.gen)

    # -- writing -------------------------------------------------------------
    def _append(
        self,
        frame: bytes,
        flush_now: bool = False,
        payload_size: int = -1,
        subscription: bool = False,
        *,
        messages: int = 1,
    ) -> None:
        """Queue a frame; ``flush_now`` sends it from this thread unless a send is under way.

        A message (``payload_size`` >= 0) needs the connection to accept
        publishes; a control frame only that it is open.  While reconnecting,
        messages are buffered up to ``reconnect_buf_size`` (then this raises),
        SUB/UNSUB frames are skipped (the resubscription at reconnect carries
        them) and nothing is sent.
        """
        with self._write_lock:
            if not self._accepting and (payload_size >= 0 or self._state is State.CLOSED):
                raise self._not_accepting_error()
            buf = self._wbuf
            if self._state is State.RECONNECTING:
                if subscription:
                    return
                if payload_size >= 0 and len(buf) + len(frame) > self.options.reconnect_buf_size:
                    raise ReconnectBufferFullError(
                        f"reconnecting: the {len(frame)}-byte message does not fit in the reconnect buffer "
                        f"({len(buf)} of {self.options.reconnect_buf_size} bytes used); it was not sent"
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
            big = len(buf) >= self._max_pending
            if not flush_now and self._flusher_idle:
                self._flusher_idle = False
                self._kick.set()
        if big:
            self._send_pending()
        elif flush_now:
            self._send_soon()

    def _queue_message(self, head: bytes, payload: bytes, n: int, defer: bool = False, sending: bool = False) -> bool:
        """The common case of :meth:`_append` for a message: connected and below back-pressure.

        Returns False (queueing nothing) otherwise; the caller then takes the
        general path.  ``defer`` (async requests): a polling flusher is not
        woken, see DEFERRED_SEND.  ``sending``: the caller sends right after,
        so the flusher is not woken at all.
        """
        lock = self._write_lock
        lock.acquire()
        try:
            buf = self._wbuf
            if not self._accepting or len(buf) >= self._threshold:
                return False
            buf += head
            buf += payload
            buf += b"\r\n"
            self.out_msgs += 1
            self.out_bytes += n
            if defer:
                self._unsent_requests += 1
            if sending:
                pass
            elif defer and (self._flusher_polling or not self._flusher_idle):
                self._deferred = True
            elif self._flusher_idle:
                self._flusher_idle = False
                self._kick.set()
            return True
        finally:
            lock.release()

    def _take_buffer(self) -> tuple[bytearray, int] | None:
        """Under _write_lock: the bytes to send now and the PINGs in them (None: nothing, or offline)."""
        data = self._wbuf
        if not data or self._io.transport is None:
            return None
        self._wbuf = bytearray()
        self._unsent_requests = 0
        pings, self._wbuf_pings = self._wbuf_pings, 0
        return data, pings

    def _send_soon(self) -> None:
        """Send now if nobody is sending; otherwise leave it to the flusher (it coalesces)."""
        if self._send_lock.acquire(blocking=False):
            try:
                with self._write_lock:
                    taken = self._take_buffer()
                if taken is not None:
                    self._sendall(*taken)
            finally:
                self._send_lock.release()
        else:
            with self._write_lock:
                self._flusher_idle = False
            self._kick.set()

    def _send_pending(self) -> None:
        """Send whatever is buffered, now, on the calling thread."""
        with self._send_lock:
            with self._write_lock:
                taken = self._take_buffer()
            if taken is not None:
                self._sendall(*taken)

    def _sendall(self, data: bytearray | bytes, pings: int = 0) -> None:
        """Under _send_lock.  On failure the bytes go back to the front of the buffer."""
        link = self._io
        transport, gen = link.transport, link.gen
        try:
            if transport is None:
                raise OSError("not connected")
            transport.sendall(data)
        except OSError as exc:
            with self._write_lock:
                # Unsent as far as we know: keep it ahead of newer frames.
                self._wbuf[:0] = data
                self._wbuf_pings += pings
            self._connection_lost(exc, gen)

    def _not_accepting_error(self) -> Error:
        if self._forked:
            return ForkedConnectionError(
                f"this connection was made in process {self._pid}; a forked child ({os.getpid()}) cannot use "
                "it: connect again in the child, or pass reconnect_after_fork=True"
            )
        return ConnectionClosedError(self._closed_reason())

    def _closed_reason(self) -> str:
        if self._state is State.DRAINING_PUBS:
            return "connection is draining and takes no new messages"
        if self._last_error is not None:
            return f"connection closed: {self._last_error}"
        return "connection closed"

    def _check_subject_once(self, subject: str) -> None:
        """Validate a subject not seen lately and remember it, in a cache of at most _PREFIX_CACHE_MAX subjects
        (every request has a reply subject of its own: a responder must not keep one entry per request)."""
        cache = self._pub_headers
        if subject not in cache:
            check_publish_subject(subject)
            if len(cache) >= _PREFIX_CACHE_MAX:
                cache.clear()
            cache[subject] = (-1, b"")  # validated; no PUB line cached yet

    def _pub_header(self, subject: str, size: int) -> bytes:
        """Validate (once per subject) and cache the PUB line for this size."""
        cache = self._pub_headers
        self._check_subject_once(subject)
        if size > self._max_payload:
            raise MaxPayloadError(
                f"payload of {size} bytes exceeds the server's max_payload of {self._max_payload} bytes"
            )
        header = b"PUB %s %d\r\n" % (subject.encode(), size)
        cache[subject] = (size, header)
        return header

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str | None = None,
        headers: HeadersInput | None = None,
    ) -> None:
        """Queue one message for sending (returns before the server has it; see flush)."""
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        if reply is None and headers is None:
            n = len(payload)
            try:
                entry = self._pub_headers.get(subject)
            except TypeError:  # unhashable: let the check name the problem
                entry = None
            header = entry[1] if entry is not None and entry[0] == n else self._pub_header(subject, n)
            if self._queue_message(header, payload, n):
                return
            if self._forked and self.options.reconnect_after_fork:
                self._reopen_after_fork()
            self._append(header + payload + b"\r\n", False, n)
            return
        self._publish_full(subject, payload, reply, headers, False)

    def _publish_full(
        self,
        subject: str,
        payload: bytes,
        reply: str | None,
        headers: HeadersInput | None,
        flush_now: bool,
    ) -> None:
        if subject not in self._pub_headers:
            self._check_subject_once(subject)
        if reply is not None and reply not in self._pub_headers and not reply.startswith(self._resp_prefix or "\0"):
            check_publish_subject(reply, "reply subject")
        header = encode_headers(headers) if headers is not None else b""
        n = len(payload)
        if n + len(header) > self._max_payload:
            raise MaxPayloadError(
                f"message of {n + len(header)} bytes (headers included) exceeds the server's "
                f"max_payload of {self._max_payload} bytes"
            )
        subj = subject.encode()
        rep = b" " + reply.encode() if reply else b""
        if header:
            hl = len(header)
            frame = b"HPUB %s%s %d %d\r\n%s%s\r\n" % (subj, rep, hl, hl + n, header, payload)
        else:
            frame = b"PUB %s%s %d\r\n%s\r\n" % (subj, rep, n, payload)
        self._append(frame, flush_now, n)

    def publish_encoded(self, frames: bytes, *, messages: int, payload_bytes: int) -> None:
        """Queue ``messages`` PUB/HPUB frames encoded by the caller (``jsclient.protocol.encode_*``).

        For batch publishers (atomic batches, the Spark sink) that validate
        subjects once and encode thousands of frames without a call per
        message.  Nothing here checks the frames: a malformed one makes the
        server close the connection.
        """
        self._append(frames, False, payload_bytes, messages=messages)

    def _publish_raw(self, subject: str, payload: bytes) -> None:
        """Publish to a server-made subject (acks, flow control): no validation, no caching."""
        n = len(payload)
        self._append(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), n, payload), False, n)

    def flush(self, timeout: float = 2.0) -> None:
        """Return once the server has processed everything sent before this call.

        While reconnecting, the PING waits in the buffer and the wait goes on
        within ``timeout``; if the connection breaks after the PING left,
        ConnectionLostError says the server may not have seen everything.
        """
        _check_timeout(timeout)
        self._check_fork()
        waiter = _Waiter()
        with self._write_lock:
            if self._state is State.CLOSED:
                raise self._not_accepting_error()
            self._pongs.append(waiter)
            self._wbuf += PING
            self._wbuf_pings += 1
        self._send_pending()
        if not self._await_reply(waiter, timeout):
            raise TimeoutError(f"flush: no PONG from the server within {timeout} s")
        if waiter.error is not None:
            raise waiter.error

    def _check_fork(self) -> None:
        if self._forked:
            if not self.options.reconnect_after_fork:
                raise self._not_accepting_error()
            self._reopen_after_fork()

    # -- subscribing -------------------------------------------------------
    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        cb: MsgCallback | None = None,
        *,
        max_msgs: int | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Subscription:
        """Subscribe; with ``cb`` messages go to it on the subscription's own thread."""
        check_subscribe_subject(subject)
        if queue is not None:
            check_queue_name(queue)
        if cb is not None and not callable(cb):
            raise InvalidArgumentError("cb must be callable")
        for name, value in (
            ("max_msgs", max_msgs),
            ("pending_msgs_limit", pending_msgs_limit),
            ("pending_bytes_limit", pending_bytes_limit),
        ):
            if value is not None:
                whole(name, value)
        return self._subscribe(
            subject,
            queue,
            cb,
            max_msgs,
            pending_msgs_limit or self.options.pending_msgs_limit,
            pending_bytes_limit or self.options.pending_bytes_limit,
        )

    def _subscribe(
        self,
        subject: str,
        queue: str | None,
        cb: MsgCallback | None,
        max_msgs: int | None,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> Subscription:
        self._check_fork()
        if self._state is not State.CONNECTED and self._state is not State.RECONNECTING:
            if self._state is State.CLOSED:
                raise self._not_accepting_error()
            raise ConnectionClosedError("connection is draining; no new subscriptions")
        with self._sub_lock:
            sid = next(self._sids)
            sub = Subscription(
                self, sid, subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit
            )
            self._subs[sid] = sub
        self._unpark()
        frame = encode_sub(subject, sid, queue)
        if max_msgs:
            frame += encode_unsub(sid, max_msgs)
        try:
            self._append(frame, subscription=True)
        except Error:
            self._remove_sub(sub, ConnectionClosedError, discard=True)
            raise
        return sub

    def _remove_sub(self, sub: Subscription, reason: type[Error], discard: bool) -> None:
        with self._sub_lock:
            self._subs.pop(sub.sid, None)
        sub._mark_closed(reason, discard)

    def _unsubscribe(self, sub: Subscription, max_msgs: int | None) -> None:
        if max_msgs is not None:
            whole("max_msgs", max_msgs)
            if sub.is_closed:
                raise SubscriptionClosedError(f"subscription on {sub.subject!r} has already ended")
            sub.max_msgs = max_msgs
            if sub.received >= max_msgs:
                self._unsubscribe(sub, None)
                return
            self._append(encode_unsub(sub.sid, max_msgs), subscription=True)
            return
        if sub.is_closed and sub.sid not in self._subs:
            return
        self._remove_sub(sub, SubscriptionClosedError, discard=True)
        if not self.is_closed:
            with contextlib.suppress(ConnectionClosedError):
                self._append(encode_unsub(sub.sid), subscription=True)

    def _drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        timeout = self.options.drain_timeout if timeout is None else timeout
        _check_timeout(timeout)
        deadline = time.monotonic() + timeout
        if sub.sid in self._subs:
            self._append(encode_unsub(sub.sid), subscription=True)
            # After the PONG, every message sent before the UNSUB is in the queue.
            self.flush(max(0.001, deadline - time.monotonic()))
            self._remove_sub(sub, SubscriptionClosedError, discard=False)
        if not sub._wait_drained(deadline):
            raise TimeoutError(
                f"drain: subscription on {sub.subject!r} still had {sub.pending_msgs} message(s) "
                f"after {timeout} s"
            )

    # -- request/reply -----------------------------------------------------
    def new_inbox(self) -> str:
        """A unique subject under the inbox prefix."""
        return f"{self.options.inbox_prefix}.{self._nuid}{next(self._inbox_seq):x}"

    def _ensure_resp_mux(self) -> str:
        prefix = self._resp_prefix
        if prefix:
            return prefix
        with self._resp_lock:
            if not self._resp_prefix:
                inbox = f"{self.options.inbox_prefix}.{secrets.token_hex(11)}"
                sub = self._subscribe(inbox + ".*", None, None, None, 1, 1)
                self._resp_sid = sub.sid
                self._resp_prefix = inbox + "."
            return self._resp_prefix

    def request(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float = 2.0,
        headers: HeadersInput | None = None,
    ) -> Msg:
        """Publish with a reply inbox and wait for the first response.

        Raises NoRespondersError when nobody is subscribed, TimeoutError when
        no answer comes within ``timeout``.  Safe from many threads at once.
        """
        _check_timeout(timeout)
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        if not self._resp_prefix:
            self._ensure_resp_mux()
        token = str(next(self._resp_tokens))
        waiter = _Waiter()
        self._resp_waiters[token] = waiter
        try:
            self._queue_request(subject, payload, token, headers, False)
            if not self._await_reply(waiter, timeout, listed=1):
                raise TimeoutError(f"request to {subject!r}: no response within {timeout} s")
        finally:
            self._resp_waiters.pop(token, None)
        if waiter.error is not None:
            raise waiter.error
        msg = waiter.msg
        assert msg is not None
        if not msg.data and status_of(msg.header) == 503:
            raise NoRespondersError(f"no responders for request to {subject!r}")
        return msg

    def _await_reply(self, waiter: _Waiter, timeout: float, listed: int = 0) -> bool:
        """Wait until ``waiter`` is filled, reading the socket for it when nobody else is (see _ReadSide).

        ``listed``: 1 when ``waiter`` is among the request waiters, which
        then are not somebody else's.
        """
        side = self._io.reading
        # Only while the reader stepped aside: with it reading anyway, taking turns would cost more than it saves.
        if side is None or side.sock is None or not side.parked or not side.token.acquire(blocking=False):
            return waiter.wait(timeout)
        now = time.monotonic()
        deadline = now + timeout
        # Spin only alone: other callers' replies wake threads that need this core.
        spin_until = side.spin.until(now, self._spin) if len(self._resp_waiters) <= listed else 0.0
        try:
            recv_into = side.sock.recv_into
            poll = side.poller.poll
            while not waiter.lock.acquire(blocking=False):
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    return waiter.lock.acquire(blocking=False)
                if self._io.reading is not side:
                    break  # the connection was lost: whoever reconnects answers the waiter
                if spin_until and now >= spin_until:
                    side.spin.ended(hit=False)
                    spin_until = 0.0
                if spin_until:
                    if not poll(0.0):
                        os.sched_yield()  # threads that can run on this core go first, and may take the GIL
                        continue
                # In slices: should the socket be closed under us, poll wakes anyway (or by the slice's end).
                elif not poll(min(remaining, 0.1) * 1000.0):
                    continue
                answered = self._take_read(side, *_recv(recv_into, side.buffer))
                if answered is None:
                    break
                if answered and spin_until and waiter.lock.locked():
                    spin_until = 0.0  # another caller's reply: leave it the core
            else:
                if spin_until:
                    side.spin.ended(hit=True)
                return True
        finally:
            side.last_used = time.monotonic()
            side.token.release()
            if side.parked and self._needs_reader(listed):
                side.wake.set()
        return waiter.wait(deadline - time.monotonic())

    def _needs_reader(self, own_waiters: int = 0) -> bool:
        """Something expects messages that the caller (owning ``own_waiters`` request waiters) will not read."""
        return len(self._resp_waiters) > own_waiters or len(self._subs) > (self._resp_sid != 0)

    def _unpark(self) -> None:
        """Bring a parked reader back now: something starts to expect messages."""
        side = self._io.reading
        if side is not None and side.parked:
            side.wake.set()

    def _take_read(self, side: _ReadSide, n: int, error: Exception | None) -> bool | None:
        """Under the side's token: route ``n`` bytes just read into its buffer.

        Returns whether a request() caller got its reply, or None when the
        read failed (the loss is handled).
        """
        if not n:
            self._connection_lost(error or ConnectionResetError("server closed the connection"), side.gen)
            return None
        try:
            if n <= FEED_CHUNK:
                return self._handle_events(side.parser.feed(side.view[:n]))
            answered = False
            feed = side.parser.feed
            view = side.view
            for start in range(0, n, FEED_CHUNK):
                if self._handle_events(feed(view[start : min(n, start + FEED_CHUNK)])):
                    answered = True
            return answered
        except ProtocolError as exc:
            self._report_error(exc)
            failure: Exception = exc
        except Exception as exc:
            log.exception("jsclient reader: unexpected error")
            failure = exc
        self._connection_lost(failure, side.gen)
        return None

    def request_async(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float = 2.0,
        headers: HeadersInput | None = None,
    ) -> Future[Msg]:
        """Like :meth:`request` without waiting: a Future resolved with the reply.

        Every future resolves: with the reply, NoRespondersError, TimeoutError
        after ``timeout``, or ConnectionClosedError.  Its done-callbacks run on
        the connection's events thread, never on the reader.
        """
        _check_timeout(timeout)
        return self._request_async(subject, payload, timeout, headers, self._plain_kind)

    def _request_async(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, kind: ReplyKind
    ) -> Future[Any]:
        """request_async for the library: ``timeout`` already checked, ``kind`` says how the reply settles."""
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        if not self._resp_prefix:
            self._ensure_resp_mux()
        token = str(next(self._resp_tokens))
        fut: ReplyFuture[Any] = ReplyFuture(self._events, subject, kind, timeout)
        self._resp_waiters[token] = fut
        try:
            # Not sent here: the waiter or the flusher sends many async requests in one write.
            self._queue_request(subject, payload, token, headers, True)
        except BaseException:
            self._resp_waiters.pop(token, None)
            raise
        self._unpark()  # this reply is for no request() caller to read
        if SEND_SHARE * self._unsent_requests >= len(self._resp_waiters):
            self._send_soon()  # the server is about to run out of requests to answer
        if not self._sweeping:  # checked after the future is listed: see _sweep_deadlines
            self._start_sweeping(timeout)
        return fut

    def _queue_request(
        self, subject: str, payload: bytes, token: str, headers: HeadersInput | None, defer: bool
    ) -> None:
        """Queue a request for reply ``token``; send it now unless ``defer``.

        A subject validated before has its PUB line's start cached, so the
        common case is one format and one append.
        """
        n = len(payload)
        head = self._request_heads.get(subject) if type(subject) is str and headers is None else None
        if (
            head is not None
            and n <= self._max_payload
            and self._queue_message(b"%s%s %d\r\n" % (head, token.encode(), n), payload, n, defer, not defer)
        ):
            if not defer:
                self._send_soon()
            return
        prefix = self._resp_prefix
        self._publish_full(subject, payload, prefix + token, headers, not defer)  # validates, or raises
        if head is None and headers is None and prefix:
            if len(self._request_heads) >= _PREFIX_CACHE_MAX:
                self._request_heads.clear()
            self._request_heads[subject] = b"PUB %s %s" % (subject.encode(), prefix.encode())

    def _start_sweeping(self, timeout: float) -> None:
        with self._deadline_lock:
            if not self._sweeping:
                self._sweeping = True
                self._timers.call_later(min(timeout, SWEEP_EVERY), self._sweep_deadlines)

    def _sweep_deadlines(self) -> None:
        """Timer thread: fail the async requests whose deadline passed; come back while any are out.

        It looks at every request in flight (in a copy: the reader pops
        replies meanwhile), at most every SWEEP_EVERY unless one is due
        sooner, so a request costs the sweeper nothing once answered.
        """
        now = time.monotonic()
        waiting = self._resp_waiters
        expired: list[tuple[ReplyFuture[Any], BaseException]] = []
        next_due: float | None = None
        for token, pending in waiting.copy().items():  # copy() runs no Python code, so no thread cuts in
            if not isinstance(pending, ReplyFuture):
                continue  # a request() caller keeps its own time
            due = pending.due
            if due > now:
                if next_due is None or due < next_due:
                    next_due = due
            elif waiting.pop(token, None) is pending:  # else its reply came in just now
                error = TimeoutError(f"request to {pending.subject!r}: no response within {pending.timeout} s")
                expired.append((pending, error))
        if expired:
            _fail_all(expired)
        with self._deadline_lock:
            if next_due is None:
                # Stop, then look again: a request lists its future before it checks
                # _sweeping, so it either is seen here or sees False and starts a sweep.
                self._sweeping = False
                if not any(isinstance(pending, ReplyFuture) for pending in waiting.copy().values()):
                    return
                self._sweeping = True
        delay = 0.02 if next_due is None else max(0.02, min(next_due - time.monotonic(), SWEEP_EVERY))
        self._timers.call_later(delay, self._sweep_deadlines)

    @property
    def _watchdog(self) -> Scheduler:
        """The heartbeat watchdog's scheduler (its own thread, started on first use)."""
        with self._sub_lock:
            if self._watchdog_scheduler is None:
                self._watchdog_scheduler = Scheduler("jsclient-watchdog")
            return self._watchdog_scheduler

    # -- JetStream -------------------------------------------------------------
    def jetstream(
        self,
        prefix: str = "$JS.API",
        domain: str | None = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
    ) -> JetStream:
        """A JetStream context on this connection (cheap: make as many as you like)."""
        from .jetstream.context import JetStream

        return JetStream(
            self, prefix=prefix, domain=domain, timeout=timeout, publish_async_max_pending=publish_async_max_pending
        )

    # -- reader-thread side ------------------------------------------------
    def _handle_events(self, events: list[Any]) -> bool:
        """Route parsed events; True when one answered a request() caller.

        Runs on whichever thread holds the read side's token (see _ReadSide).
        """
        answered = False
        subs = self._subs
        touched: set[Subscription] = set()
        settled: list[ReplyKind] = []  # kinds of the futures settled here, one entry per future
        resp_sid = self._resp_sid
        resp_waiters = self._resp_waiters
        token_at = len(self._resp_prefix)
        n_in = 0
        bytes_in = 0
        held = None  # the futures' lock, held through a run of async replies (taken once, not per reply)
        try:
            for ev in events:
                if ev.__class__ is Msg:
                    n_in += 1
                    bytes_in += len(ev.data)
                    ev._conn = self
                    sid = ev.sid
                    if sid == resp_sid:
                        waiter = resp_waiters.pop(ev.subject[token_at:], None)
                        if waiter is None:
                            continue
                        if isinstance(waiter, _Waiter):
                            waiter.fill(ev)
                            answered = True
                        else:
                            if held is None:
                                held = settle_lock()
                                held.acquire()
                            _settle_reply(waiter, ev)
                            settled.append(waiter.kind)
                        continue
                    if held is not None:
                        held.release()  # it is a leaf lock: subscriptions have their own
                        held = None
                    sub = subs.get(sid)
                    if sub is None:
                        continue
                    sub._deliver(ev)
                    touched.add(sub)
                    if sub.max_msgs and sub.received >= sub.max_msgs:
                        with self._sub_lock:
                            subs.pop(sid, None)
                        sub._mark_closed(SubscriptionClosedError, discard=False)
                    continue
                if held is not None:
                    held.release()
                    held = None
                if ev.__class__ is Ping:
                    self._append_quiet(PONG)
                elif ev.__class__ is Pong:
                    self._pings_out = 0
                    with self._write_lock:
                        waiter = self._pongs.popleft() if self._pongs else None
                    if waiter is not None:
                        waiter.fill()
                elif ev.__class__ is Info:
                    self._apply_info(ev.data)
                    if ev.data.get("ldm"):
                        self._lame_duck()
                elif ev.__class__ is Err:
                    err = server_error(ev.text)
                    self._last_error = err
                    self._report_error(err)
        finally:
            if held is not None:
                held.release()
        self.in_msgs += n_in
        self.in_bytes += bytes_in
        if settled:
            _count_settled(settled)
        for sub in touched:
            slow = sub._after_batch()
            if slow is not None:
                self._report_error(slow)
        return answered

    def _append_quiet(self, frame: bytes) -> None:
        with contextlib.suppress(ConnectionClosedError):
            self._append(frame)

    def _report_error(self, exc: Exception) -> None:
        """Hand an error to the error callback on the events thread."""
        cb = self._error_cb
        if cb is None:
            log.warning("jsclient: %s", exc)
            return
        self._events.put(lambda: cb(exc))

    def _connection_lost(self, exc: Exception, gen: int) -> None:
        """The transport of generation ``gen`` failed (reader, writer or ping timer).

        Reconnects when allowed, else closes.  Acts once per generation.
        """
        with self._write_lock:
            if self._state is State.CLOSED or gen != self._io.gen or self._io.transport is None:
                return
            if self._last_error is None or not isinstance(self._last_error, ServerError):
                self._last_error = exc
            reconnect = self.options.allow_reconnect and self._state is State.CONNECTED and not self._forked
            transport, self._io.transport = self._io.transport, None
            self._io.reading = None
            if reconnect:
                self._state = State.RECONNECTING
                self._threshold = 0
                # PINGs that already left will get no PONG; those still buffered will.
                sent = len(self._pongs) - self._wbuf_pings
                orphans = [self._pongs.popleft() for _ in range(max(0, sent))]
        transport.shutdown()
        transport.close()
        if not reconnect:
            self._close(error=exc)
            return
        lost = ConnectionLostError(f"connection lost before the server answered: {exc}")
        for waiter in orphans:
            if waiter is not None:
                waiter.fill(error=lost)
        self._report_error(exc)
        if self._disconnected_cb is not None:
            self._events.put(self._disconnected_cb)
        self._reconnect_thread = threading.Thread(
            target=self._reconnect_loop, name="jsclient-reconnect", daemon=True
        )
        self._reconnect_thread.start()

    def _reconnect_loop(self) -> None:
        """Dial the pool with backoff and jitter until a server takes us, or give up and close."""
        opts = self.options
        attempts = opts.max_reconnect_attempts
        rounds = Retrying(
            stop=stop_never if attempts < 0 else stop_after_attempt(attempts + 1),
            wait=wait_exponential(multiplier=0.05, max=opts.reconnect_time_wait)
            + wait_random(0, opts.reconnect_jitter),
            retry=retry_if_result(lambda done: not done),
        )
        try:
            rounds(self._reconnect_round)
        except RetryError:
            self._close(error=NoServersError(f"could not reconnect after {opts.max_reconnect_attempts} rounds"))

    def _reconnect_round(self) -> bool:
        """One pass over the pool (the server just lost goes last).  True when connected or closed."""
        if self._now() is not State.RECONNECTING:
            return True
        current = self._connected_url
        order = [url for url in self._pool if url != current] + [url for url in self._pool if url == current]
        auth_failures = 0
        for url in order:
            if self._now() is not State.RECONNECTING:
                return True
            try:
                link = self._open(url)
            except AuthorizationError as exc:
                auth_failures += 1
                self._last_error = exc
                self._report_error(exc)
                continue
            except (OSError, ProtocolError, TimeoutError, ServerError, TLSError) as exc:
                log.debug("jsclient: reconnect to %s failed: %s", mask_url(url), exc)
                continue
            self._activate(link, url)
            if self._now() is not State.CONNECTED:
                return True
            self.reconnects += 1
            if self._reconnected_cb is not None:
                self._events.put(self._reconnected_cb)
            for hook in list(self._reconnect_hooks.values()):
                hook()
            return True
        if auth_failures == len(order):
            # Every server rejects our credentials: retrying would only storm them.
            self._close(error=self._last_error or AuthorizationError("authorization violation"))
            return True
        return False

    def _now(self) -> State:
        """The state as of now (other threads change it; a call keeps type checkers from assuming)."""
        return self._state

    def _add_reconnect_hook(self, hook: Callable[[], None]) -> int:
        """Internal: run ``hook`` (quick, non-blocking) on the reconnect thread after each reconnect."""
        key = next(self._hook_ids)
        self._reconnect_hooks[key] = hook
        return key

    def _remove_reconnect_hook(self, key: int) -> None:
        self._reconnect_hooks.pop(key, None)

    def _ping_tick(self) -> None:
        """Timer thread: PING the server; too many unanswered PINGs means the link is stale."""
        if self._state is State.CLOSED:
            return
        if self._state is State.CONNECTED:
            if self._pings_out >= self.options.max_outstanding_pings:
                self._connection_lost(
                    StaleConnectionError(f"stale connection: {self._pings_out} PINGs without a PONG"),
                    self._io.gen,
                )
            else:
                self._pings_out += 1
                with self._write_lock:
                    if self._state is State.CONNECTED:
                        self._pongs.append(None)
                        self._wbuf += PING
                        self._wbuf_pings += 1
                        if self._flusher_idle:
                            self._flusher_idle = False
                            self._kick.set()
        self._schedule_ping()

    # -- fork ----------------------------------------------------------------
    def _disown_after_fork(self) -> None:
        """In a forked child (the only thread there): never touch the parent's socket again."""
        self._forked = True
        self._send_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._sub_lock = threading.Lock()
        self._resp_lock = threading.Lock()
        # The parent's timer thread did not come along: its sweep is not running here, whatever the flag
        # said at the fork (and its lock may have been held by that thread).
        self._deadline_lock = threading.Lock()
        self._sweeping = False
        self._accepting = False
        transport, self._io.transport = self._io.transport, None
        self._io.reading = None
        if transport is not None:
            with contextlib.suppress(OSError):
                transport.close()  # closes the child's descriptor only; no shutdown
        self._wbuf = bytearray()  # the parent's unsent bytes are the parent's to send
        self._unsent_requests = 0
        self._pongs.clear()
        self._wbuf_pings = 0
        self._resp_waiters.clear()
        self._resp_prefix = ""
        self._request_heads.clear()
        self._resp_sid = 0
        self._timers = Scheduler()
        self._watchdog_scheduler = None
        self._events = queue.SimpleQueue()
        self._events_box[0] = self._events
        self._kick = threading.Event()
        self._io.kick = self._kick
        subs, self._subs = list(self._subs.values()), {}
        for sub in subs:
            sub._after_fork()

    def _reopen_after_fork(self) -> None:
        """reconnect_after_fork=True: the child gets a fresh connection of its own."""
        with self._sub_lock:
            if not self._forked:
                return
            self._forked = False
            self._pid = os.getpid()
            self._state = State.CONNECTING
            self._connect()

    # -- ending ------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> None:
        """Stop every subscription, deliver what they hold, send what is buffered, close."""
        timeout = self.options.drain_timeout if timeout is None else timeout
        _check_timeout(timeout)
        deadline = time.monotonic() + timeout
        with self._write_lock:
            if self._state is not State.CONNECTED:
                if self._state is State.CLOSED:
                    raise ConnectionClosedError(self._closed_reason())
                if self._state is State.RECONNECTING:
                    raise ConnectionClosedError("connection is reconnecting; drain once it is connected, or close it")
                raise ConnectionClosedError("connection is already draining")
            self._state = State.DRAINING_SUBS
        failure: Exception | None = None
        try:
            subs = [s for s in list(self._subs.values()) if s.sid != self._resp_sid]
            for sub in subs:
                self._append(encode_unsub(sub.sid), subscription=True)
            self.flush(max(0.001, deadline - time.monotonic()))
            for sub in subs:
                self._remove_sub(sub, SubscriptionClosedError, discard=False)
            for sub in subs:
                if not sub._wait_drained(deadline):
                    failure = TimeoutError(
                        f"drain: subscription on {sub.subject!r} still had {sub.pending_msgs} "
                        f"message(s) after {timeout} s"
                    )
                    break
            with self._write_lock:
                if self._state is State.DRAINING_SUBS:
                    self._state = State.DRAINING_PUBS
                    self._accepting = False
            self.flush(max(0.001, deadline - time.monotonic()))
        except Error as exc:
            failure = exc
        self._close()
        if failure is not None:
            self._report_error(failure)
            raise failure

    def close(self) -> None:
        """Send what is buffered (best effort) and close.  Idempotent."""
        self._close()

    def _close(self, error: Exception | None = None) -> None:
        with self._write_lock:
            if self._state is State.CLOSED:
                return
            was_connected = self._state is not State.CONNECTING
            self._state = State.CLOSED
            self._accepting = False
            pongs = list(self._pongs)
            self._pongs.clear()
        if error is None and was_connected and not self._forked:
            # Best effort: what publish() accepted should leave.
            try:
                with self._send_lock:
                    data, self._wbuf = self._wbuf, bytearray()
                    transport = self._io.transport
                    if data and transport is not None:
                        transport.settimeout(1.0)
                        transport.sendall(data)
            except OSError:
                pass
        self._io.shutdown()
        closed = ConnectionClosedError(self._closed_reason())
        for waiter in pongs:
            if waiter is not None:
                waiter.fill(error=closed)
        self._timers.close()
        if self._watchdog_scheduler is not None:
            self._watchdog_scheduler.close()
        unanswered: list[tuple[ReplyFuture[Any], BaseException]] = []
        for token in list(self._resp_waiters):
            pending = self._resp_waiters.pop(token, None)
            if isinstance(pending, _Waiter):
                pending.fill(error=closed)
            elif pending is not None:
                unanswered.append((pending, closed))
        _fail_all(unanswered)
        with self._sub_lock:
            subs = list(self._subs.values())
            self._subs.clear()
        for sub in subs:
            sub._mark_closed(ConnectionClosedError, discard=False)
        if error is not None:
            self._report_error(error)
        _LIVE.discard(self)
        closed_cb = self._closed_cb
        if closed_cb is not None:
            self._events.put(closed_cb)
        self._events.put(None)  # the events thread ends after the callbacks before it
        self._closed_event.set()
        if error is None:
            # A user's close(): let the threads finish.  (On a lost connection
            # this may run on one of them, possibly holding the send lock.)
            current = threading.current_thread()
            for thread in (self._reader, self._flusher, self._reconnect_thread):
                if thread is not None and thread is not current and thread.is_alive():
                    thread.join(2.0)

    def wait_closed(self, timeout: float | None = None) -> bool:
        return self._closed_event.wait(timeout)

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- thread bodies (module level: they hold only a weak reference) -----------


def _reader_main(ref: weakref.ReferenceType[Connection], side: _ReadSide) -> None:
    token = side.token
    recv_into = side.transport.recv_into
    buffer = side.buffer
    answered: bool | None = False
    while True:
        with token:
            conn = ref()
            if conn is None or conn._io.reading is not side:
                return
            # While requests are out (in practice async ones: a lone request() caller reads for itself), but
            # not after answering a request() caller: with threads waking for their replies, a polling reader
            # would be one more thread taking the GIL in turns (-20% for 16 such threads).
            spin = conn._spin if not answered and conn._resp_waiters and side.sock is not None else 0.0
            del conn  # no strong reference while blocked in recv: the connection stays collectable
            if spin:
                _poll_before_recv(side, spin)
            n, error = _recv(recv_into, buffer)
            conn = ref()
            if conn is None:
                return
            answered = conn._take_read(side, n, error)
            if answered is None or conn._io.reading is not side:
                return
            park = answered and side.sock is not None and not conn._needs_reader()
            del conn
        if park:
            _park(ref, side)


def _poll_before_recv(side: _ReadSide, spin: float) -> None:
    """Reader, holding the token, while async requests are out: poll up to ``spin`` before recv sleeps.

    Their replies come back in waves, and between two waves the reader would
    sleep and then be woken, which on a virtual machine costs more than the
    wait (the same reason request() callers poll).  Each poll first yields
    the core to any thread that can run, such as the one sending requests.
    """
    until = side.spin.until(time.monotonic(), spin)
    if not until:
        return
    poll = side.poller.poll
    while not poll(0):
        if time.monotonic() >= until:
            side.spin.ended(hit=False)
            return
        os.sched_yield()
    side.spin.ended(hit=True)


def _recv(recv_into: Callable[[bytearray], int], buffer: bytearray) -> tuple[int, Exception | None]:
    try:
        return recv_into(buffer), None
    except (OSError, ssl.SSLError) as exc:
        return 0, exc


def _park(ref: weakref.ReferenceType[Connection], side: _ReadSide) -> None:
    """Leave the socket to request() callers while one comes back within LINGER (see _ReadSide)."""
    wake = side.wake
    side.parked = True  # before the check: whoever starts to need the reader from now on wakes it
    try:
        while True:
            conn = ref()
            if conn is None or conn._io.reading is not side:
                return
            # While a caller holds the token it reads for everyone; else others may be waiting.
            if not side.token.locked() and conn._needs_reader():
                return
            del conn
            if wake.wait(LINGER):
                return
            if not side.token.locked() and time.monotonic() - side.last_used >= LINGER:
                return
    finally:
        side.parked = False
        if wake.is_set():
            wake.clear()


def _flusher_main(ref: weakref.ReferenceType[Connection], kick: threading.Event) -> None:
    poll_every = DEFERRED_SEND
    sent = False
    while True:
        conn = ref()
        if conn is None:
            return
        if conn._kick is not kick:
            return  # a forked child's copy
        with conn._send_lock:
            with conn._write_lock:
                if conn._state is State.CLOSED:
                    return
                taken = conn._take_buffer()
                if taken is None:
                    # Poll while async requests keep coming, else sleep until kicked.  A poll
                    # that found nothing means their senders send them: look half as often.
                    if not sent:
                        poll_every = min(2 * poll_every, DEFERRED_SEND_MAX)
                    sent = False
                    poll = poll_every if conn._deferred else None
                    conn._deferred = False
                    conn._flusher_idle = True
                    conn._flusher_polling = poll is not None
                    kick.clear()
                else:
                    conn._flusher_idle = conn._flusher_polling = False
                    sent = True
                    poll_every = DEFERRED_SEND
            if taken is not None:
                conn._sendall(*taken)
                continue
        del conn
        kick.wait(poll)


def _finalize(
    link: _Link, timers: Scheduler, events_box: list[queue.SimpleQueue[Callable[[], object] | None]]
) -> None:
    """A connection was collected without close(): end its socket, its timer and its events thread."""
    link.shutdown()
    timers.close()
    events_box[0].put(None)  # after the callbacks already queued


def _ping_main(ref: weakref.ReferenceType[Connection]) -> None:
    conn = ref()
    if conn is not None:
        conn._ping_tick()


def _events_main(events: queue.SimpleQueue[Callable[[], object] | None]) -> None:
    while True:
        fn = events.get()
        if fn is None:
            return
        try:
            fn()
        except Exception:
            log.exception("jsclient: exception in a user callback")


def _count_settled(kinds: list[ReplyKind]) -> None:
    """Tell each kind's on_settle hook how many of its futures just settled: once per kind, not per future."""
    for kind, n in Counter(kinds).items():  # counted in C
        if kind.on_settle is not None:
            kind.on_settle(n)


def _settle_reply(fut: ReplyFuture[Any], msg: Msg) -> None:
    """Reader thread, holding settle_lock(): resolve an async request with its reply (decoded, or as no-responders)."""
    decode = fut.kind.decode
    if decode is not None:
        try:
            result = decode(msg, fut.subject)
        except Exception as exc:  # noqa: BLE001 - the decoder's verdict goes to the future
            fut.settle_locked(None, exc)
        else:
            fut.settle_locked(result, None)
    elif not msg.data and status_of(msg.header) == 503:
        fut.settle_locked(None, NoRespondersError(f"no responders for request to {fut.subject!r}"))
    else:
        fut.settle_locked(msg, None)


def _fail_all(failed: list[tuple[ReplyFuture[Any], BaseException]]) -> None:
    with settle_lock():
        for fut, error in failed:
            fut.settle_locked(None, error)
    _count_settled([fut.kind for fut, _ in failed])


_HUGE = 1 << 53  # an int timeout past this is left to seconds(), which names the problem


def _check_timeout(timeout: Any) -> None:
    """seconds() for the hot paths: a positive finite float or int (not a bool) passes with two tests."""
    kind = type(timeout)
    if not ((kind is float and 0 < timeout < math.inf) or (kind is int and 0 < timeout < _HUGE)):
        seconds("timeout", timeout)
