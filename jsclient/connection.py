"""Connection: the socket, its reader and flusher threads, and the core NATS operations.

Threads (all daemons, named):

* ``jsclient-reader`` alone reads the socket and owns the :class:`Parser`.  It
  routes messages into subscription queues and request waiters, answers
  PINGs, matches PONGs to ``flush`` calls.  It never runs user code and never
  waits on a user: a full subscription queue drops and counts.
* ``jsclient-flusher`` sends the write buffer.  ``publish`` only appends
  encoded frames, so many frames leave in one ``sendall``.  When the buffer
  passes ``max_pending_size`` the publishing thread sends it itself (that is
  the back-pressure), and ``request``/``flush`` send at once for latency.
* ``jsclient-events`` runs user callbacks (error, closed, ...) in order and
  resolves futures (``request_async``), so no user code ever runs on the
  reader: a future's done-callbacks run here.
* ``jsclient-timer`` (:mod:`jsclient.scheduler`) expires deadlines.

Locks, always taken in this order when nested:

1. ``_send_lock`` serialises socket writes, so buffers leave in the order
   they were filled even when a user thread sends inline;
2. ``_write_lock`` guards the write buffer, the PONG waiters, the state and
   the outgoing counters.  Held only for appends, never during I/O.

``_sub_lock`` (never nested with the two above) guards creating and removing
subscriptions; the reader looks subscriptions up in a dict without it, which
is atomic.  Request waiters live in a dict keyed by token, also read by the
reader without a lock.

The reader and flusher hold only a weak reference to the connection, so a
connection dropped without ``close()`` can be collected; a finalizer then
closes its socket and the threads end.
"""

from __future__ import annotations

import builtins
import contextlib
import enum
import functools
import itertools
import logging
import queue
import secrets
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ._version import __version__
from .errors import (
    ConnectionClosedError,
    Error,
    InvalidArgumentError,
    MaxPayloadError,
    NoRespondersError,
    NoServersError,
    ProtocolError,
    ServerError,
    SubscriptionClosedError,
    TimeoutError,
    server_error,
)
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
    encode_connect,
    encode_sub,
    encode_unsub,
)
from .scheduler import Scheduler
from .subscription import MsgCallback, Subscription

if TYPE_CHECKING:
    from .jetstream.context import JetStream

log = logging.getLogger("jsclient")

RECV_SIZE = 256 * 1024
_PREFIX_CACHE_MAX = 4096

ErrorCallback = Callable[[Exception], None]
EventCallback = Callable[[], None]


class State(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
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


class _AsyncReply:
    """An async request in flight: its future, its subject (for error texts) and
    an optional decoder that turns the reply into the future's result (it runs
    on the events thread and may raise)."""

    __slots__ = ("decode", "future", "subject")

    def __init__(self, future: Future[Any], subject: str, decode: Callable[[Msg], Any] | None) -> None:
        self.future = future
        self.subject = subject
        self.decode = decode


class _Socket:
    """The current socket, shared with the finalizer so it can close it."""

    __slots__ = ("kick", "sock")

    def __init__(self, kick: threading.Event) -> None:
        self.sock: socket.socket | None = None
        self.kick = kick

    def shutdown(self) -> None:
        sock = self.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.kick.set()


def connect(
    servers: str | list[str] | tuple[str, ...] | None = None,
    *,
    options: Options | None = None,
    error_cb: ErrorCallback | None = None,
    closed_cb: EventCallback | None = None,
    **kwargs: Any,
) -> Connection:
    """Open a connection (see :class:`jsclient.Options` for every keyword)."""
    if options is None:
        options = Options.build(servers, **kwargs)
    elif servers is not None or kwargs:
        options = options.replace(
            **({"servers": (servers,) if isinstance(servers, str) else tuple(servers)} if servers else {}),
            **kwargs,
        )
    conn = Connection(options, error_cb=error_cb, closed_cb=closed_cb)
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
    ) -> None:
        if error_cb is not None and not callable(error_cb):
            raise InvalidArgumentError("error_cb must be callable")
        if closed_cb is not None and not callable(closed_cb):
            raise InvalidArgumentError("closed_cb must be callable")
        self.options = options
        self._error_cb = error_cb
        self._closed_cb = closed_cb
        self._state = State.CONNECTING
        self._send_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._sub_lock = threading.Lock()
        self._wbuf = bytearray()
        self._kick = threading.Event()
        self._flusher_idle = False
        self._io = _Socket(self._kick)
        self._pongs: deque[_Waiter | None] = deque()
        self._subs: dict[int, Subscription] = {}
        self._sids = itertools.count(1)
        # subject -> (payload size, b"PUB <subject> <size>\r\n") of its last plain publish;
        # a subject is in here only once it has been validated.
        self._pub_headers: dict[str, tuple[int, bytes]] = {}
        self._accepting = False  # publishes allowed (guarded by _write_lock)
        self._max_pending = options.max_pending_size
        self._info: dict[str, Any] = {}
        self._max_payload = 1024 * 1024
        self._connected_url: str | None = None
        self._last_error: Exception | None = None
        # Requests: one wildcard inbox, a token per request.
        self._resp_lock = threading.Lock()
        self._resp_sid = 0
        self._resp_prefix = ""
        self._resp_waiters: dict[str, _Waiter | _AsyncReply] = {}
        self._resp_tokens = itertools.count(1)
        self._nuid = secrets.token_hex(8)
        self._inbox_seq = itertools.count(1)
        # Counters: "in" written by the reader only, "out" under _write_lock.
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self._events: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._reader: threading.Thread | None = None
        self._flusher: threading.Thread | None = None
        self._events_thread: threading.Thread | None = None
        self._closed_event = threading.Event()
        self._timers = Scheduler()
        self._watchdog_scheduler: Scheduler | None = None
        weakref.finalize(self, _Socket.shutdown, self._io)

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
        errors: list[str] = []
        for url in self.options.servers:
            try:
                self._open(url)
                break
            except ServerError:
                raise
            except (OSError, ProtocolError, TimeoutError) as exc:
                errors.append(f"{mask_url(url)}: {exc}")
        else:
            raise NoServersError("could not connect to any server: " + "; ".join(errors))
        with self._write_lock:
            self._state = State.CONNECTED
            self._accepting = True
        ref = weakref.ref(self)
        self._events_thread = threading.Thread(
            target=_events_main, args=(self._events,), name="jsclient-events", daemon=True
        )
        self._reader = threading.Thread(
            target=_reader_main, args=(ref, self._io, Parser(msg_class=Msg)), name="jsclient-reader", daemon=True
        )
        self._flusher = threading.Thread(
            target=_flusher_main, args=(ref, self._kick), name="jsclient-flusher", daemon=True
        )
        self._events_thread.start()
        self._reader.start()
        self._flusher.start()

    def _open(self, url: str) -> None:
        """Dial, read INFO, send CONNECT + PING and wait for PONG (or -ERR)."""
        parts = urlsplit(url)
        timeout = self.options.connect_timeout
        sock = socket.create_connection((parts.hostname, parts.port or 4222), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            parser = Parser()
            info = self._read_until(sock, parser, Info, timeout)
            assert isinstance(info, Info)
            self._apply_info(info.data)
            sock.sendall(encode_connect(self._connect_payload(parts)) + PING)
            self._read_until(sock, parser, Pong, timeout)
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self._io.sock = sock
        self._connected_url = url

    def _read_until(self, sock: socket.socket, parser: Parser, kind: type, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"server did not complete the handshake within {timeout} s")
            sock.settimeout(remaining)
            try:
                data = sock.recv(65536)
            except builtins.TimeoutError:
                continue
            if not data:
                raise ProtocolError("server closed the connection during the handshake")
            for ev in parser.feed(data):
                if isinstance(ev, Err):
                    raise server_error(ev.text)
                if isinstance(ev, kind):
                    if parser.buffered:
                        raise ProtocolError("unexpected data after handshake")
                    return ev

    def _connect_payload(self, parts: Any) -> dict[str, Any]:
        opts = self.options
        payload: dict[str, Any] = {
            "verbose": opts.verbose,
            "pedantic": opts.pedantic,
            "lang": "python3-jsclient",
            "version": __version__,
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "echo": opts.echo,
        }
        if opts.name:
            payload["name"] = opts.name
        user, password, token = opts.user, opts.password, opts.token
        if parts.username and not (user or token):
            if parts.password is not None:
                user, password = unquote(parts.username), unquote(parts.password)
            else:
                token = unquote(parts.username)
        if user:
            payload["user"] = user
            payload["pass"] = password or ""
        elif token:
            payload["auth_token"] = token
        return payload

    def _apply_info(self, info: dict[str, Any]) -> None:
        self._info = info
        max_payload = info.get("max_payload")
        if isinstance(max_payload, int) and max_payload > 0 and max_payload != self._max_payload:
            self._max_payload = max_payload
            self._pub_headers.clear()  # cached PUB lines were checked against the old limit

    # -- writing -------------------------------------------------------------
    def _append(self, frame: bytes, flush_now: bool = False, payload_size: int = -1) -> None:
        """Queue a frame; ``flush_now`` sends it from this thread unless a send is under way.

        A message (``payload_size`` >= 0) needs the connection to accept
        publishes; a control frame (SUB, UNSUB, PONG) only that it is open.
        """
        with self._write_lock:
            if not self._accepting and (payload_size >= 0 or self._state is State.CLOSED):
                raise ConnectionClosedError(self._closed_reason())
            if payload_size >= 0:
                self.out_msgs += 1
                self.out_bytes += payload_size
            buf = self._wbuf
            buf += frame
            big = len(buf) >= self._max_pending
            if not flush_now and self._flusher_idle:
                self._flusher_idle = False
                self._kick.set()
        if big:
            self._send_pending()
        elif flush_now:
            self._send_soon()

    def _send_soon(self) -> None:
        """Send now if nobody is sending; otherwise leave it to the flusher (it coalesces)."""
        if self._send_lock.acquire(blocking=False):
            try:
                with self._write_lock:
                    data = self._wbuf
                    if not data:
                        return
                    self._wbuf = bytearray()
                self._sendall(data)
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
                data = self._wbuf
                if not data:
                    return
                self._wbuf = bytearray()
            self._sendall(data)

    def _sendall(self, data: bytearray) -> None:
        sock = self._io.sock
        try:
            if sock is None:
                raise OSError("not connected")
            sock.sendall(data)
        except OSError as exc:
            with self._write_lock:
                # Unsent as far as we know: keep it ahead of newer frames.
                self._wbuf[:0] = data
            self._connection_lost(exc)

    def _closed_reason(self) -> str:
        if self._state is State.DRAINING_PUBS:
            return "connection is draining and takes no new messages"
        if self._last_error is not None:
            return f"connection closed: {self._last_error}"
        return "connection closed"

    def _pub_header(self, subject: str, size: int) -> bytes:
        """Validate (once per subject) and cache the PUB line for this size."""
        cache = self._pub_headers
        if subject not in cache:
            check_publish_subject(subject)
            if len(cache) >= _PREFIX_CACHE_MAX:
                cache.clear()
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
            lock = self._write_lock
            lock.acquire()
            try:
                if not self._accepting:
                    raise ConnectionClosedError(self._closed_reason())
                buf = self._wbuf
                buf += header
                buf += payload
                buf += b"\r\n"
                self.out_msgs += 1
                self.out_bytes += n
                if self._flusher_idle:
                    self._flusher_idle = False
                    self._kick.set()
                if len(buf) < self._max_pending:
                    return
            finally:
                lock.release()
            self._send_pending()
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
            check_publish_subject(subject)
            self._pub_headers[subject] = (-1, b"")  # validated; no PUB line cached yet
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

    def _publish_raw(self, subject: str, payload: bytes) -> None:
        """Publish to a server-made subject (acks, flow control): no validation, no caching."""
        n = len(payload)
        self._append(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), n, payload), False, n)

    def flush(self, timeout: float = 2.0) -> None:
        """Return once the server has processed everything sent before this call."""
        _check_timeout(timeout)
        waiter = _Waiter()
        with self._write_lock:
            if self._state is State.CLOSED:
                raise ConnectionClosedError(self._closed_reason())
            self._pongs.append(waiter)
            self._wbuf += PING
        self._send_pending()
        if not waiter.wait(timeout):
            raise TimeoutError(f"flush: no PONG from the server within {timeout} s")
        if waiter.error is not None:
            raise waiter.error

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
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise InvalidArgumentError(f"{name} must be a positive int, not {value!r}")
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
        if self._state is not State.CONNECTED:
            raise ConnectionClosedError(
                self._closed_reason() if self.is_closed else "connection is draining; no new subscriptions"
            )
        with self._sub_lock:
            sid = next(self._sids)
            sub = Subscription(
                self, sid, subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit
            )
            self._subs[sid] = sub
        frame = encode_sub(subject, sid, queue)
        if max_msgs:
            frame += encode_unsub(sid, max_msgs)
        try:
            self._append(frame)
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
            if isinstance(max_msgs, bool) or not isinstance(max_msgs, int) or max_msgs <= 0:
                raise InvalidArgumentError(f"max_msgs must be a positive int, not {max_msgs!r}")
            if sub.is_closed:
                raise SubscriptionClosedError(f"subscription on {sub.subject!r} has already ended")
            sub.max_msgs = max_msgs
            if sub.received >= max_msgs:
                self._unsubscribe(sub, None)
                return
            self._append(encode_unsub(sub.sid, max_msgs))
            return
        if sub.is_closed and sub.sid not in self._subs:
            return
        self._remove_sub(sub, SubscriptionClosedError, discard=True)
        if not self.is_closed:
            with contextlib.suppress(ConnectionClosedError):
                self._append(encode_unsub(sub.sid))

    def _drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        timeout = self.options.drain_timeout if timeout is None else timeout
        _check_timeout(timeout)
        deadline = time.monotonic() + timeout
        if sub.sid in self._subs:
            self._append(encode_unsub(sub.sid))
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
        prefix = self._ensure_resp_mux()
        token = str(next(self._resp_tokens))
        waiter = _Waiter()
        self._resp_waiters[token] = waiter
        try:
            self._publish_full(subject, payload, prefix + token, headers, True)
            if not waiter.wait(timeout):
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
        return self._request_async(subject, payload, timeout, headers, None)

    def _request_async(
        self,
        subject: str,
        payload: bytes,
        timeout: float,
        headers: HeadersInput | None,
        decode: Callable[[Msg], Any] | None,
    ) -> Future[Any]:
        _check_timeout(timeout)
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        prefix = self._ensure_resp_mux()
        token = str(next(self._resp_tokens))
        fut: Future[Any] = Future()
        self._resp_waiters[token] = _AsyncReply(fut, subject, decode)
        try:
            self._publish_full(subject, payload, prefix + token, headers, True)
        except BaseException:
            self._resp_waiters.pop(token, None)
            raise
        self._timers.call_later(timeout, lambda: self._expire_request(token, subject, timeout))
        return fut

    def _expire_request(self, token: str, subject: str, timeout: float) -> None:
        """Timer thread: a request_async deadline passed."""
        pending = self._resp_waiters.pop(token, None)
        if isinstance(pending, _AsyncReply):
            error = TimeoutError(f"request to {subject!r}: no response within {timeout} s")
            self._events.put(lambda: _settle(pending.future, error=error))

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
    def _handle_events(self, events: list[Any]) -> None:
        """Route parsed events.  Runs on the reader thread only."""
        subs = self._subs
        touched: set[Subscription] = set()
        resp_sid = self._resp_sid
        settled: list[tuple[_AsyncReply, Msg]] = []
        n_in = 0
        bytes_in = 0
        for ev in events:
            if ev.__class__ is Msg:
                n_in += 1
                bytes_in += len(ev.data)
                ev._conn = self
                sid = ev.sid
                if sid == resp_sid:
                    self._handle_response(ev, settled)
                    continue
                sub = subs.get(sid)
                if sub is None:
                    continue
                sub._deliver(ev)
                touched.add(sub)
                if sub.max_msgs and sub.received >= sub.max_msgs:
                    with self._sub_lock:
                        subs.pop(sid, None)
                    sub._mark_closed(SubscriptionClosedError, discard=False)
            elif ev.__class__ is Ping:
                self._append_quiet(PONG)
            elif ev.__class__ is Pong:
                with self._write_lock:
                    waiter = self._pongs.popleft() if self._pongs else None
                if waiter is not None:
                    waiter.fill()
            elif ev.__class__ is Info:
                self._apply_info(ev.data)
            elif ev.__class__ is Err:
                err = server_error(ev.text)
                self._last_error = err
                self._report_error(err)
        self.in_msgs += n_in
        self.in_bytes += bytes_in
        if settled:
            self._events.put(lambda: _settle_replies(settled))
        for sub in touched:
            slow = sub._after_batch()
            if slow is not None:
                self._report_error(slow)

    def _handle_response(self, msg: Msg, settled: list[tuple[_AsyncReply, Msg]]) -> None:
        token = msg.subject[len(self._resp_prefix) :]
        waiter = self._resp_waiters.pop(token, None)
        if waiter is None:
            return
        if isinstance(waiter, _Waiter):
            waiter.fill(msg)
        else:
            settled.append((waiter, msg))

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

    def _connection_lost(self, exc: Exception) -> None:
        """The socket failed (reader or writer).  Close with the error."""
        if self._state is State.CLOSED:
            return
        if self._last_error is None or not isinstance(self._last_error, ServerError):
            self._last_error = exc
        self._close(error=exc)

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
                raise ConnectionClosedError("connection is already draining")
            self._state = State.DRAINING_SUBS
        failure: Exception | None = None
        try:
            subs = [s for s in list(self._subs.values()) if s.sid != self._resp_sid]
            for sub in subs:
                self._append(encode_unsub(sub.sid))
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
        if error is None and was_connected:
            # Best effort: what publish() accepted should leave.
            try:
                with self._send_lock:
                    data, self._wbuf = self._wbuf, bytearray()
                    sock = self._io.sock
                    if data and sock is not None:
                        sock.settimeout(1.0)
                        sock.sendall(data)
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
        for token in list(self._resp_waiters):
            pending = self._resp_waiters.pop(token, None)
            if isinstance(pending, _Waiter):
                pending.fill(error=closed)
            elif pending is not None:
                self._events.put(functools.partial(_settle, pending.future, error=closed))
        with self._sub_lock:
            subs = list(self._subs.values())
            self._subs.clear()
        for sub in subs:
            sub._mark_closed(ConnectionClosedError, discard=False)
        if error is not None:
            self._report_error(error)
        closed_cb = self._closed_cb
        if closed_cb is not None:
            self._events.put(closed_cb)
        self._events.put(None)  # the events thread ends after the callbacks before it
        self._closed_event.set()
        if error is None:
            # A user's close(): let the threads finish.  (On a lost connection
            # this may run on one of them, possibly holding the send lock.)
            current = threading.current_thread()
            for thread in (self._reader, self._flusher):
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


def _reader_main(ref: weakref.ReferenceType[Connection], io: _Socket, parser: Parser) -> None:
    sock = io.sock
    assert sock is not None
    feed = parser.feed
    while True:
        try:
            data = sock.recv(RECV_SIZE)
        except OSError as exc:
            error: Exception = exc
            data = b""
        else:
            error = ConnectionResetError("server closed the connection")
        conn = ref()
        if conn is None:
            return
        if not data:
            if conn._state is not State.CLOSED:
                conn._connection_lost(error)
            return
        try:
            conn._handle_events(feed(data))
        except ProtocolError as exc:
            conn._connection_lost(exc)
            return
        except Exception as exc:
            log.exception("jsclient reader: unexpected error")
            conn._connection_lost(exc)
            return
        del conn


def _flusher_main(ref: weakref.ReferenceType[Connection], kick: threading.Event) -> None:
    while True:
        conn = ref()
        if conn is None:
            return
        with conn._send_lock:
            with conn._write_lock:
                data = conn._wbuf
                if data:
                    conn._wbuf = bytearray()
                elif conn._state is State.CLOSED:
                    return
                else:
                    conn._flusher_idle = True
                    kick.clear()
            if data:
                conn._sendall(data)
                continue
        del conn
        kick.wait()


def _events_main(events: queue.SimpleQueue[Callable[[], None] | None]) -> None:
    while True:
        fn = events.get()
        if fn is None:
            return
        try:
            fn()
        except Exception:
            log.exception("jsclient: exception in a user callback")


def _settle(fut: Future[Any], result: Any = None, error: BaseException | None = None) -> None:
    """Resolve a future unless the user cancelled it.  Events thread only."""
    with contextlib.suppress(InvalidStateError):  # cancelled by the user
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)


def _settle_replies(settled: list[tuple[_AsyncReply, Msg]]) -> None:
    for pending, msg in settled:
        if pending.decode is not None:
            try:
                result = pending.decode(msg)
            except Exception as exc:  # noqa: BLE001 - the decoder's verdict goes to the future
                _settle(pending.future, error=exc)
            else:
                _settle(pending.future, result)
        elif not msg.data and status_of(msg.header) == 503:
            _settle(pending.future, error=NoRespondersError(f"no responders for request to {pending.subject!r}"))
        else:
            _settle(pending.future, msg)


def _check_timeout(timeout: Any) -> None:
    if type(timeout) is float and timeout > 0:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidArgumentError(f"timeout must be a positive number of seconds, not {timeout!r}")
