"""The session: one process's life of a connection, and the pieces it is made of.

A :class:`Session` composes the writer (:mod:`.writer`), the reader
(:mod:`.reader`), the router (:mod:`.router`), the request mux
(:mod:`.requests`), the events thread (:mod:`.events`) and a timer
(:mod:`jsclient.scheduler`), and runs the connection's lifecycle: the
handshake (:mod:`jsclient.handshake`), the server pool and discovery,
connection loss, reconnect with backoff, resubscription, stale-connection
PINGs, lame duck mode, drain and close.  It is also the internal interface
(:class:`jsclient.core.iface.CoreAPI`) that JetStream, messages and
subscriptions use.  A forked child gets a new Session (:mod:`.fork`).

Threads running here:

* callers (publish, subscribe, flush, drain, close);
* ``jsclient-reader`` (through the router: PONGs, INFO, -ERR; a lost link);
* ``jsclient-flusher`` (a failed send: :meth:`Session.connection_lost`);
* ``jsclient-timer``: :meth:`Session.ping_tick` and the request sweep;
* ``jsclient-reconnect``: exists while a lost connection is being restored:
  it dials the pool with backoff, resubscribes, then sends what was
  buffered.  It alone runs the user's ``server_selector`` (holding no lock),
  at the start of each round.

The server pool is one list shared by the connection and every session of
it (forks included), changed in place under ``pool_lock``: discovery (the
reader, from INFO) adds to it, ``set_servers`` (a caller) replaces it, and a
reconnect round reads a copy.

Locks, in this order when nested: the read token (:mod:`.reader`); the
writer's ``send_lock`` then ``write_lock`` (:mod:`.writer`; ``write_lock``
also guards the state).  The router's ``sub_lock`` is taken with neither
writer lock held, and the writer's locks are never taken under it.
``pool_lock`` is a leaf.  ``_hooks`` is a dict changed by one call at a
time (atomic).  A loss is acted on once per transport generation, decided
under ``write_lock``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import queue
import random
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tenacity import RetryError

from ..auth import CredentialCallbacks
from ..backoff import Backoff
from ..checks import whole
from ..errors import (
    AuthorizationError,
    ConnectionClosedError,
    ConnectionLostError,
    Error,
    ForkedConnectionError,
    InvalidArgumentError,
    NoServersError,
    ProtocolError,
    RequestFailure,
    RequestOutcome,
    ServerError,
    ServerSelectorError,
    StaleConnectionError,
    SubscriptionClosedError,
    TimeoutError,
    TLSError,
)
from ..futures import ReplyKind
from ..handshake import open_link
from ..headers import HeadersInput
from ..headers import encode as encode_headers
from ..options import Options, mask_url, normalise_url
from ..protocol import PONG, Parser, PubEncoder, encode_pub, encode_sub, encode_unsub
from ..scheduler import Scheduler
from ..subscription import MsgCallback, Subscription
from . import fork
from .events import EventQueue, start_events
from .reader import Reader
from .requests import Requests, fail_pending
from .router import Router
from .state import Link, State, Waiter
from .writer import Writer

if TYPE_CHECKING:
    from ..connection import Connection
    from ..transport import Transport

log = logging.getLogger("jsclient")

ErrorCallback = Callable[[Exception], None]
EventCallback = Callable[[], None]
#: ``server_selector(pool, lost)``: the pool in the order a reconnect round would try it, and the URL just
#: lost (None if none was ever connected); returns the URL of the pool to try first.
ServerSelector = Callable[[list[str], "str | None"], str]


class Callbacks:
    """The user's callbacks, shared by every session of a connection.

    The event callbacks run on the events thread; ``selector`` runs on the
    reconnect thread, which waits for its answer.
    """

    __slots__ = ("closed", "disconnected", "error", "reconnected", "selector")

    def __init__(
        self,
        error: ErrorCallback | None,
        closed: EventCallback | None,
        disconnected: EventCallback | None,
        reconnected: EventCallback | None,
        selector: ServerSelector | None = None,
    ) -> None:
        self.error = error
        self.closed = closed
        self.disconnected = disconnected
        self.reconnected = reconnected
        self.selector = selector


class Session:
    """One process's connection machinery (see the module docstring)."""

    def __init__(
        self,
        conn: Connection,
        options: Options,
        *,
        callbacks: Callbacks,
        pool: list[str],
        encoder: PubEncoder,
        tls_context: ssl.SSLContext | None,
        credentials: CredentialCallbacks | None = None,
        forked_from: int | None = None,
    ) -> None:
        self.conn = conn
        self._credentials = credentials
        self.options = options
        self.callbacks = callbacks
        self.pool = pool  # the server pool: given URLs, then discovered ones (shared across forks)
        self.pool_lock = threading.Lock()
        self.encoder = encoder
        self._tls_context = tls_context
        self.pid = os.getpid()
        #: Set in a forked child: this session refuses everything (see .fork).
        self.forked_from = forked_from
        self.events: EventQueue = queue.SimpleQueue()
        self.timers = Scheduler()
        self._watchdog: Scheduler | None = None
        self.link = Link(threading.Event())
        self.writer = Writer(options, self.link, self.connection_lost, self.refusal)
        self.router = Router(self, conn)
        self.reader = Reader(
            self.link, self.router, lost=self.connection_lost, report_error=self.report_error, spin=options.spin_wait
        )
        self.requests = Requests(
            router=self.router,
            writer=self.writer,
            reader=self.reader,
            encoder=encoder,
            timers=self.timers,
            events=self.events,
            inbox_prefix=options.inbox_prefix,
            subscribe_inbox=self._subscribe_inbox,
            core=self,
        )
        # Bound here, not wrapped: kv.get calls it on every read, and a wrapper is one more frame.
        self.request = self.requests.request
        self._sids = itertools.count(1)
        self._hooks: dict[int, Callable[[], None]] = {}
        self._hook_ids = itertools.count(1)
        self.reconnects = 0
        self.pings_out = 0
        self.info: dict[str, Any] = {}
        self.connected_url: str | None = None
        self.last_error: Exception | None = None
        #: What closed the connection (for the errors of requests refused afterwards).
        self.closed_by = RequestFailure.CLOSED
        self._threads: list[threading.Thread] = []  # reader(s), flusher, reconnect: joined by close()
        self.closed_event = threading.Event()
        if forked_from is not None:
            self.writer.state = State.CLOSED
        # The finalizer holds the link, timer and queue, not the session: collected without close(), it
        # ends the socket and the threads.
        self._finalizer = weakref.finalize(self, _finalize, self.link, self.timers, self.events)

    # -- connecting --------------------------------------------------------------
    def connect(self) -> None:
        """The first connection: try each server once; auth errors are final at once."""
        errors: list[str] = []
        with self.pool_lock:
            first = list(self.pool)
        for url in first:
            try:
                link = self._open(url)
                break
            except (ServerError, TLSError):
                raise  # credentials or certificates: retrying another server will not help
            except (OSError, ProtocolError, TimeoutError) as exc:
                errors.append(f"{mask_url(url)}: {exc}")
        else:
            failure = NoServersError("could not connect to any server: " + "; ".join(errors))
            if not (self.options.retry_on_failed_connect and self.options.allow_reconnect):
                raise failure
            self._connect_later(failure)
            return
        start_events(self.events)
        self._activate(link, url)
        self._keep(self.writer.start_flusher())
        fork.track(self.conn)
        self._schedule_ping()

    def _connect_later(self, failure: NoServersError) -> None:
        """retry_on_failed_connect: start as if the link had just been lost; the reconnect loop goes on trying."""
        start_events(self.events)
        w = self.writer
        with w.write_lock:
            w.state = State.RECONNECTING
            w.accepting = True
            w.threshold = 0
        self.last_error = failure
        log.debug("jsclient: %s; retrying in the background", failure)
        self._keep(w.start_flusher())
        fork.track(self.conn)
        self._schedule_ping()
        thread = threading.Thread(target=self._reconnect_loop, name="jsclient-reconnect", daemon=True)
        thread.start()
        self._keep(thread)

    def _keep(self, thread: threading.Thread) -> None:
        """Remember a thread for close() to join; ended ones are let go (one reader per reconnect)."""
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def _schedule_ping(self) -> None:
        # Only a weak reference sits in the timer heap, so a dropped connection can go.
        self.timers.call_later(self.options.ping_interval, functools.partial(_ping_main, weakref.ref(self)))

    def _open(self, url: str) -> tuple[Transport, Parser, list[Any]]:
        on_info = functools.partial(self.apply_info, url=url)
        return open_link(url, self.options, self._tls_context, on_info, self._credentials)

    def _activate(self, link: tuple[Transport, Parser, list[Any]], url: str) -> None:
        """Make a handshaken transport current: resubscribe, send the buffer, start its reader."""
        transport, parser, rest = link
        w = self.writer
        with w.send_lock:
            with w.write_lock:
                if w.state is State.CLOSED:
                    transport.close()
                    return
                reconnect = w.state is State.RECONNECTING
                self.link.transport = transport
                self.link.gen += 1
                gen = self.link.gen
                frames = self._resubscribe_frames() if reconnect else b""
                data = frames + w.buf
                w.buf = bytearray()
                w.unsent_requests = 0
                w.pings = 0
                self.pings_out = 0
                w.state = State.CONNECTED
                w.accepting = True
                w.threshold = w.max_pending
                self.connected_url = url
            if data:
                w.sendall(data, 0)
        if rest:
            self.router.route(rest)
        self._keep(self.reader.start(transport, parser, gen))
        self.link.kick.set()

    def _resubscribe_frames(self) -> bytes:
        """SUB (and UNSUB for what is left of max_msgs) for every live subscription."""
        frames = []
        for sub in list(self.router.subs.values()):
            frames.append(encode_sub(sub.subject, sub.sid, sub.queue))
            if sub.max_msgs:
                left = sub.max_msgs - sub.received
                if left > 0:
                    frames.append(encode_unsub(sub.sid, left))
        return b"".join(frames)

    def apply_info(self, info: dict[str, Any], url: str | None = None) -> None:
        """Take a server's INFO; ``url`` is the one it came through (default: the connected one)."""
        self.info = info
        max_payload = info.get("max_payload")
        if isinstance(max_payload, int) and max_payload > 0:
            self.encoder.set_max_payload(max_payload)
        urls = info.get("connect_urls")
        if urls and not self.options.ignore_discovered_servers:
            self._discover(urls, url or self.connected_url)

    def _discover(self, urls: list[str], through: str | None) -> None:
        """Add cluster members announced in INFO to the pool, with the scheme of the URL ``through`` which
        they were learnt (a ws:// client hears of WebSocket ports); shuffled unless no_randomize."""
        scheme = urlsplit(through).scheme if through else "nats"
        with self.pool_lock:
            known = {urlsplit(url).netloc.rpartition("@")[2] for url in self.pool}
            fresh = [f"{scheme}://{u}" for u in urls if isinstance(u, str) and u not in known]
            if not fresh:
                return
            if not self.options.no_randomize:
                random.shuffle(fresh)
            self.pool.extend(fresh)

    def set_servers(self, options: Options) -> None:
        """Replace the pool with ``options.servers`` (checked by the caller); the link stays as it is.

        The next reconnect round dials the new pool; servers a cluster
        announces join it again unless ``ignore_discovered_servers``.
        """
        urls = list(options.servers)
        if not options.no_randomize:
            random.shuffle(urls)
        with self.pool_lock:
            self.pool[:] = urls
        self.options = options

    # -- what the router hands on (RouterSink) -----------------------------------
    def answer_ping(self) -> None:
        with contextlib.suppress(ConnectionClosedError):
            self.writer.append(PONG)

    def pong(self) -> None:
        self.pings_out = 0
        waiter = self.writer.pong_arrived()
        if waiter is not None:
            waiter.fill()

    def info_update(self, data: dict[str, Any]) -> None:
        self.apply_info(data)
        if data.get("ldm") and len(self.pool) > 1 and self.writer.state is State.CONNECTED:
            # The server announced it is leaving: move to another one before it drops us.
            log.info("jsclient: server entered lame duck mode; reconnecting elsewhere")
            self.connection_lost(ConnectionResetError("server entered lame duck mode"), self.link.gen)

    def server_error(self, err: ServerError) -> None:
        self.last_error = err
        self.report_error(err)

    def report_error(self, exc: Exception) -> None:
        """Hand an error to the error callback on the events thread."""
        cb = self.callbacks.error
        if cb is None:
            log.warning("jsclient: %s", exc)
            return
        self.events.put(lambda: cb(exc))

    # -- loss and reconnect ----------------------------------------------------------
    def force_reconnect(self) -> None:
        """Drop the link and reconnect as after a loss (the user asked; nothing is reported as an error)."""
        if not self.options.allow_reconnect:
            raise InvalidArgumentError("force_reconnect needs allow_reconnect=True")
        asked = ConnectionLostError("reconnect asked for by force_reconnect()")
        self.connection_lost(asked, self.link.gen, report=False)

    def connection_lost(self, exc: Exception, gen: int, *, report: bool = True) -> None:
        """The transport of generation ``gen`` failed (reader, writer or ping timer).

        Reconnects when allowed, else closes.  Acts once per generation.
        """
        w = self.writer
        link = self.link
        with w.write_lock:
            if w.state is State.CLOSED or gen != link.gen or link.transport is None:
                return
            if self.last_error is None or not isinstance(self.last_error, ServerError):
                self.last_error = exc
            reconnect = self.options.allow_reconnect and w.state is State.CONNECTED
            transport, link.transport = link.transport, None
            link.reading = None
            self.requests.lost_at = time.monotonic()
            self.requests.losses += 1
            if reconnect:
                w.state = State.RECONNECTING
                w.threshold = 0
                # PINGs that already left will get no PONG; those still buffered will.
                sent = len(w.pongs) - w.pings
                orphans = [w.pongs.popleft() for _ in range(max(0, sent))]
        transport.shutdown()
        transport.close()
        if not reconnect:
            self.close(error=exc, cause=RequestFailure.CONNECTION_LOST)
            return
        lost = ConnectionLostError(f"connection lost before the server answered: {exc}")
        for waiter in orphans:
            if waiter is not None:
                waiter.fill(error=lost)
        if report:
            self.report_error(exc)
        if self.callbacks.disconnected is not None:
            self.events.put(self.callbacks.disconnected)
        thread = threading.Thread(target=self._reconnect_loop, name="jsclient-reconnect", daemon=True)
        thread.start()
        self._keep(thread)

    def _reconnect_loop(self) -> None:
        """Dial the pool with backoff and jitter until a server takes us, or give up and close."""
        opts = self.options
        policy = Backoff.for_reconnect(opts)
        try:
            policy.retrying(until_true=True)(self._reconnect_round)
        except RetryError:
            self.close(
                error=NoServersError(f"could not reconnect after {opts.max_reconnect_attempts} rounds"),
                cause=RequestFailure.CONNECTION_LOST,
            )

    def _reconnect_round(self) -> bool:
        """One pass over the pool (the server just lost goes last, the selector's choice first).

        True when connected or closed.
        """
        if self.now() is not State.RECONNECTING:
            return True
        current = self.connected_url
        with self.pool_lock:
            pool = list(self.pool)
        order = [url for url in pool if url != current] + [url for url in pool if url == current]
        chosen = self._select(order, current)
        if chosen is not None:
            order.remove(chosen)
            order.insert(0, chosen)
        auth_failures = 0
        for url in order:
            if self.now() is not State.RECONNECTING:
                return True
            try:
                link = self._open(url)
            except AuthorizationError as exc:
                auth_failures += 1
                self.last_error = exc
                self.report_error(exc)
                continue
            except (OSError, ProtocolError, TimeoutError, ServerError, TLSError) as exc:
                log.debug("jsclient: reconnect to %s failed: %s", mask_url(url), exc)
                continue
            except Error as exc:
                # Our side of the handshake (a credentials file gone, a callback's bad answer): say so, and go
                # on trying, as it may be put right; the loop must not end with the connection left reconnecting.
                self.last_error = exc
                self.report_error(exc)
                continue
            self._activate(link, url)
            if self.now() is not State.CONNECTED:
                return True
            self.reconnects += 1
            if self.callbacks.reconnected is not None:
                self.events.put(self.callbacks.reconnected)
            for hook in list(self._hooks.values()):
                hook()
            return True
        if auth_failures == len(order):
            # Every server rejects our credentials: retrying would only storm them.
            self.close(
                error=self.last_error or AuthorizationError("authorization violation"),
                cause=RequestFailure.CONNECTION_LOST,
            )
            return True
        return False

    def _select(self, order: list[str], lost: str | None) -> str | None:
        """The pool URL the user's server_selector puts first (None: no selector, or it failed).

        Runs on the reconnect thread with no lock held.  A selector that
        raises, or answers with something not in ``order``, is reported as
        a ServerSelectorError and this round keeps the default order.  Its
        exception's text is left out of ours (a URL in it may carry a
        password); the exception is the error's ``__cause__``.
        """
        selector = self.callbacks.selector
        if selector is None or not order:
            return None
        try:
            answer = selector(list(order), lost)
        except Exception as exc:  # noqa: BLE001 - user code: reported, and the round goes on
            error = ServerSelectorError(
                f"server_selector raised {type(exc).__name__}; trying the servers in the default order"
            )
            error.__cause__ = exc
            self.report_error(error)
            return None
        chosen: object = answer
        if isinstance(answer, str) and answer not in order:
            try:
                chosen = normalise_url(answer)  # "host:port" for "nats://host:port", as the pool holds it
            except InvalidArgumentError:
                chosen = None
        if not isinstance(chosen, str) or chosen not in order:
            shown = _shown_answer(answer)
            self.report_error(
                ServerSelectorError(
                    f"server_selector returned {shown}, which is not in the server pool "
                    f"({', '.join(mask_url(url) for url in order)}); trying the servers in the default order"
                )
            )
            return None
        return chosen

    def now(self) -> State:
        """The state as of now (other threads change it; a call keeps type checkers from assuming)."""
        return self.writer.state

    def add_reconnect_hook(self, hook: Callable[[], None]) -> int:
        key = next(self._hook_ids)
        self._hooks[key] = hook
        return key

    def remove_reconnect_hook(self, key: int) -> None:
        self._hooks.pop(key, None)

    def ping_tick(self) -> None:
        """Timer thread: PING the server; too many unanswered PINGs means the link is stale."""
        state = self.writer.state
        if state is State.CLOSED:
            return
        if state is State.CONNECTED:
            if self.pings_out >= self.options.max_outstanding_pings:
                self.connection_lost(
                    StaleConnectionError(f"stale connection: {self.pings_out} PINGs without a PONG"), self.link.gen
                )
            else:
                self.pings_out += 1
                self.writer.queue_ping(None)
        self._schedule_ping()

    # -- refusing -----------------------------------------------------------------
    def refusal(self) -> Error:
        """Why a message or call is refused now (nothing was sent: NOT_DELIVERED)."""
        if self.forked_from is not None:
            return ForkedConnectionError(
                f"this connection was made in process {self.forked_from}; a forked child ({os.getpid()}) cannot "
                "use it: connect again in the child, or pass reconnect_after_fork=True"
            )
        draining = self.writer.state is State.DRAINING_PUBS
        return ConnectionClosedError(
            self.closed_reason(), failure=RequestFailure.DRAINED if draining else self.closed_by
        )

    def closed_reason(self) -> str:
        if self.writer.state is State.DRAINING_PUBS:
            return "connection is draining and takes no new messages"
        if self.closed_by is RequestFailure.DRAINED:
            return "connection closed by drain()"
        if self.last_error is not None:
            return f"connection closed: {self.last_error}"
        return "connection closed"

    # -- publishing (CoreAPI) ------------------------------------------------------
    def publish_message(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: HeadersInput | None = None,
        send_now: bool = False,
    ) -> None:
        header = encode_headers(headers) if headers is not None else b""
        frame = self.encoder.frame(subject, payload, reply, header)
        self.writer.append(frame, send_now=send_now, payload_size=len(payload))

    def publish_control(self, subject: str, payload: bytes) -> None:
        self.writer.append(encode_pub(subject, payload), payload_size=len(payload))

    def request_async(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersInput | None, kind: ReplyKind
    ) -> Future[Any]:
        return self.requests.request_async(subject, payload, timeout, headers, kind)

    def send_pending(self) -> None:
        self.writer.send_pending()

    @property
    def watchdog(self) -> Scheduler:
        """The heartbeat watchdog's scheduler (its own thread, started on first use)."""
        with self.router.sub_lock:
            if self._watchdog is None:
                self._watchdog = Scheduler("jsclient-watchdog")
            return self._watchdog

    def flush(self, timeout: float) -> None:
        """Return once the server has processed everything sent before this call.

        While reconnecting, the PING waits in the buffer and the wait goes on
        within ``timeout``; if the connection breaks after the PING left,
        ConnectionLostError says the server may not have seen everything.
        """
        waiter = Waiter()
        if not self.writer.queue_ping(waiter):
            raise self.refusal()
        self.writer.send_pending()
        if not self.reader.await_reply(waiter, timeout):
            raise TimeoutError(f"flush: no PONG from the server within {timeout} s")
        if waiter.error is not None:
            raise waiter.error

    # -- subscriptions -------------------------------------------------------------
    def subscribe(
        self,
        subject: str,
        queue: str | None,
        cb: MsgCallback | None,
        max_msgs: int | None,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> Subscription:
        state = self.writer.state
        if state is not State.CONNECTED and state is not State.RECONNECTING:
            if state is State.CLOSED:
                raise self.refusal()
            raise ConnectionClosedError("connection is draining; no new subscriptions", failure=RequestFailure.DRAINED)
        router = self.router
        with router.sub_lock:
            sid = next(self._sids)
            sub = Subscription(self.conn, sid, subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit)
            router.subs[sid] = sub
        self.reader.unpark()
        frame = encode_sub(subject, sid, queue)
        if max_msgs:
            frame += encode_unsub(sid, max_msgs)
        try:
            self.writer.append(frame, subscription=True)
        except Error:
            self._remove_sub(sub, ConnectionClosedError, discard=True)
            raise
        return sub

    def _subscribe_inbox(self, subject: str) -> int:
        sid = self.subscribe(subject, None, None, None, 1, 1).sid
        self.encoder.own_inbox = subject[:-1]
        return sid

    def _remove_sub(self, sub: Subscription, reason: type[Error], *, discard: bool) -> None:
        with self.router.sub_lock:
            self.router.subs.pop(sub.sid, None)
        sub._mark_closed(reason, discard)

    def unsubscribe(self, sub: Subscription, max_msgs: int | None) -> None:
        if max_msgs is not None:
            whole("max_msgs", max_msgs)
            if sub.is_closed:
                raise SubscriptionClosedError(f"subscription on {sub.subject!r} has already ended")
            sub.max_msgs = max_msgs
            if sub.received >= max_msgs:
                self.unsubscribe(sub, None)
                return
            self.writer.append(encode_unsub(sub.sid, max_msgs), subscription=True)
            return
        if sub.is_closed and sub.sid not in self.router.subs:
            return
        self._remove_sub(sub, SubscriptionClosedError, discard=True)
        if self.writer.state is not State.CLOSED:
            with contextlib.suppress(ConnectionClosedError):
                self.writer.append(encode_unsub(sub.sid), subscription=True)

    def drain_subscription(self, sub: Subscription, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if sub.sid in self.router.subs:
            self.writer.append(encode_unsub(sub.sid), subscription=True)
            # After the PONG, every message sent before the UNSUB is in the queue.
            self.flush(max(0.001, deadline - time.monotonic()))
            self._remove_sub(sub, SubscriptionClosedError, discard=False)
        if not sub._wait_drained(deadline):
            raise TimeoutError(
                f"drain: subscription on {sub.subject!r} still had {sub.pending_msgs} message(s) after {timeout} s"
            )

    def user_subscriptions(self) -> list[Subscription]:
        """Live subscriptions, the request inbox left out."""
        resp_sid = self.router.resp_sid
        return [sub for sub in list(self.router.subs.values()) if sub.sid != resp_sid]

    # -- ending ------------------------------------------------------------------
    def drain(self, timeout: float) -> None:
        """Stop every subscription, deliver what they hold, send what is buffered, close."""
        deadline = time.monotonic() + timeout
        w = self.writer
        with w.write_lock:
            if w.state is not State.CONNECTED:
                if w.state is State.CLOSED:
                    raise ConnectionClosedError(self.closed_reason())
                if w.state is State.RECONNECTING:
                    raise ConnectionClosedError("connection is reconnecting; drain once it is connected, or close it")
                raise ConnectionClosedError("connection is already draining")
            w.state = State.DRAINING_SUBS
        failure: Exception | None = None
        try:
            subs = self.user_subscriptions()
            for sub in subs:
                w.append(encode_unsub(sub.sid), subscription=True)
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
            with w.write_lock:
                if w.state is State.DRAINING_SUBS:
                    w.state = State.DRAINING_PUBS
                    w.accepting = False
            self.flush(max(0.001, deadline - time.monotonic()))
        except Error as exc:
            failure = exc
        self.close(cause=RequestFailure.DRAINED)
        if failure is not None:
            self.report_error(failure)
            raise failure

    def close(self, error: Exception | None = None, *, cause: RequestFailure = RequestFailure.CLOSED) -> None:
        """End the connection; ``error`` is why, when it was not asked for, and ``cause`` what requests
        still waiting (and those refused from now on) give as their reason."""
        w = self.writer
        with w.write_lock:
            if w.state is State.CLOSED:
                return
            was_connected = w.state is not State.CONNECTING
            w.state = State.CLOSED
            w.accepting = False
            self.closed_by = cause
            pongs = list(w.pongs)
            w.pongs.clear()
        if error is None and was_connected:
            w.send_last()  # best effort: what publish() accepted should leave
        self.link.shutdown()
        reason = self.closed_reason()
        closed = ConnectionClosedError(reason, outcome=RequestOutcome.UNKNOWN, failure=cause)
        for waiter in pongs:
            if waiter is not None:
                waiter.fill(error=closed)
        self.timers.close()
        if self._watchdog is not None:
            self._watchdog.close()
        self.requests.fail_waiting(cause, reason)
        subs, pending = self.router.take_all()
        fail_pending(pending, closed)  # listed while the ones before were failed
        for sub in subs:
            sub._mark_closed(ConnectionClosedError, discard=False)
        if error is not None:
            self.report_error(error)
        fork.untrack(self.conn)
        if self.callbacks.closed is not None:
            self.events.put(self.callbacks.closed)
        self.events.put(None)  # the events thread ends after the callbacks before it
        self.closed_event.set()
        if error is None:
            # A user's close(): let the threads finish.  (On a lost connection
            # this may run on one of them, possibly holding the send lock.)
            current = threading.current_thread()
            for thread in self._threads:
                if thread is not current and thread.is_alive():
                    thread.join(2.0)

    def disown(self) -> None:
        """In a forked child, the only thread: let go of everything without a lock or a byte sent."""
        self._finalizer.detach()
        self.link.disown()
        for sub in list(self.router.subs.values()):
            sub._after_fork()

    def stats(self) -> dict[str, int]:
        return {
            "in_msgs": self.router.in_msgs,
            "in_bytes": self.router.in_bytes,
            "out_msgs": self.writer.out_msgs,
            "out_bytes": self.writer.out_bytes,
        }


def _shown_answer(answer: object) -> str:
    """A selector's answer for an error text: a URL with its password masked, else only its type."""
    if isinstance(answer, str):
        try:
            return repr(mask_url(answer))
        except ValueError:
            return "a str that is no URL"
    return f"a {type(answer).__name__}"


def _finalize(link: Link, timers: Scheduler, events: EventQueue) -> None:
    """A session was collected without close(): end its socket, its timer and its events thread."""
    link.shutdown()
    timers.close()
    events.put(None)  # after the callbacks already queued


def _ping_main(ref: weakref.ReferenceType[Session]) -> None:
    session = ref()
    if session is not None:
        session.ping_tick()
